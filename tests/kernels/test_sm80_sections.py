"""The mma.sync forward's causal sections (``kernels.flash_sm80.causal_section_heads``), no GPU: a section is
a divisor of B H (the grid's x times its z is every (batch, head) pair once), whole GQA groups where B H
allows, about SECTION_WAVES waves of resident blocks, and never more sections than grid z holds."""
from __future__ import annotations

import heapq

import pytest

from iomodel.limits import GRID_YZ_MAX
from kernels.flash_sm80 import SECTION_WAVES, causal_section_heads

SLOTS = 264   # an H100: 132 SMs, 2 blocks of the 128-row configs each


@pytest.mark.parametrize("heads,group,m_blocks", [(128, 1, 32), (512, 1, 8), (32, 1, 128), (16, 1, 128),
                                                  (7, 1, 32), (13, 1, 4), (96, 8, 16), (128, 4, 32), (1, 1, 64)])
def test_section_divides_the_heads_and_keeps_groups(heads, group, m_blocks):
    per = causal_section_heads(heads, group, m_blocks, SLOTS)
    assert heads % per == 0 and 1 <= per <= heads
    target = -(-SECTION_WAVES * SLOTS // m_blocks)
    whole = [p for p in range(1, heads + 1) if heads % p == 0 and p % group == 0]
    assert per % group == 0 or not whole
    # the nearest such divisor to the target
    assert all(abs(per - target) <= abs(p - target) for p in whole)


def test_sections_fit_grid_z():
    heads = 2 * GRID_YZ_MAX   # 131070 (batch, head) pairs, one query tile each: sections of one would not fit
    per = causal_section_heads(heads, 1, 1, 1)
    assert heads // per <= GRID_YZ_MAX


def _greedy_end(order, slots):
    """When the last block ends if blocks start in launch order on the first free slot (a block's time is
    its query tile's key chunks plus one for its start and end)."""
    free = [0.0] * slots
    end = 0.0
    for w in order:
        t = heapq.heappop(free) + w + 1
        end = max(end, t)
        heapq.heappush(free, t)
    return end


@pytest.mark.parametrize("heads,m_blocks", [(128, 32), (64, 32), (32, 128), (512, 8)])
def test_sections_balance_the_causal_tail(heads, m_blocks):
    """Launched in the sectioned order, the causal grid's tiles end within 3% of a perfect balance, where one
    head after another (the order before) left 6 to 15% of the SMs' time idle behind the last heads."""
    work = [2 * (m + 1) for m in range(m_blocks)]     # 64-key chunks of a 128-row tile of a square causal head
    ideal = (heads * sum(work) + heads * m_blocks) / SLOTS
    per = causal_section_heads(heads, 1, m_blocks, SLOTS)
    sectioned = [work[m_blocks - 1 - r] for s in range(heads // per) for r in range(m_blocks) for _ in range(per)]
    one_head = [work[m_blocks - 1 - r] for _ in range(heads) for r in range(m_blocks)]
    assert _greedy_end(sectioned, SLOTS) < 1.03 * ideal
    assert _greedy_end(one_head, SLOTS) > 1.05 * ideal


def test_a_causal_grid_past_grid_y_is_one_clear_problem():
    """The sectioned grid's y holds a head's query tiles: past GRID_YZ_MAX of the shipped configs' smallest
    tiles the family names the limit (without a mask the tiles are the grid's x, which has none)."""
    from iomodel.families.flash_sm80 import FAMILY, MIN_BLOCK_M, SHIPPED

    assert MIN_BLOCK_M == min(c.block_m for c in SHIPPED)
    shape = {"B": 1, "H": 1, "H_kv": 1, "N_q": GRID_YZ_MAX * MIN_BLOCK_M + 1, "N_k": 64, "d": 64, "dtype": "bf16"}
    assert "query rows" in FAMILY.launch_problem({**shape, "causal": True})
    assert FAMILY.launch_problem({**shape, "causal": False}) == ""
    assert FAMILY.launch_problem({**shape, "N_q": GRID_YZ_MAX * MIN_BLOCK_M, "causal": True}) == ""
