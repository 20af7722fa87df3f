"""The wgmma forward's causal sections (``kernels.sm90_schedule``), no GPU: under the dynamic
schedule a section holds two waves of tiles within 16 to 32 query heads, the sections are of one size where
B H allows (the grid does not end on a short section's longest tiles) and hold whole GQA groups, and their K and V
fit two thirds of the L2 (long sequences); a window's static walk in sections of two K/V heads where the L2 rule
gives one of all; above d = 128 the lpt walk (a persistent grid walking a host-made tile table in
grid_section_heads' sections) and the knobs that turn it off."""
from __future__ import annotations

import pytest

from kernels.sm90_schedule import (DYNAMIC_MAX_HEAD_DIM, L2_DYNAMIC_SHARE, SECTION_HEADS, heads_per_section,
                                   l2_section_heads)

L2 = 50 << 20
SMS = 132


def _sections(B, H, H_kv, N, d, block_m):
    return heads_per_section(B, H, H_kv, N, d, 2, L2, -(-N // block_m), SMS)


@pytest.mark.parametrize("B, H, H_kv, N, d, block_m, want", [
    (16, 16, 16, 1024, 128, 128, 32),   # 8 tiles a head: 33 heads make two waves, 32 divide 256
    (16, 32, 32, 1024, 64, 192, 32),
    (8, 16, 16, 2048, 128, 128, 16),    # 16 tiles a head: 17 heads, 16 divide 128
    (4, 16, 16, 4096, 128, 128, 16),    # two waves in fewer than 16 heads: 16
    (2, 32, 32, 8192, 64, 192, 16),
    (4, 32, 8, 4096, 128, 128, 16),     # GQA 4:1: four KV heads a section
    (1, 8, 8, 1024, 128, 128, 8),       # fewer heads than a section: one section
])
def test_sections_hold_two_waves_of_tiles_in_sections_of_one_size(B, H, H_kv, N, d, block_m, want):
    assert _sections(B, H, H_kv, N, d, block_m) == want


@pytest.mark.parametrize("B, H, H_kv", [(3, 10, 10), (1, 37, 37), (5, 24, 8), (7, 12, 4), (2, 48, 16), (16, 40, 8)])
@pytest.mark.parametrize("N, block_m", [(1024, 128), (4096, 192), (300, 128)])
def test_sections_are_whole_groups_and_nearly_even(B, H, H_kv, N, block_m):
    heads, group = B * H, H // H_kv
    sec = _sections(B, H, H_kv, N, 64, block_m)
    assert 1 <= sec <= heads and (sec % group == 0 or sec == heads)
    n = -(-heads // sec)
    last = heads - (n - 1) * sec
    if heads >= SECTION_HEADS[0]:
        assert sec <= SECTION_HEADS[1] + group or n == 1
        assert last >= sec - n * group, (sec, last)   # the remainder is short by under a group a section


@pytest.mark.parametrize("B, H, H_kv, N, d, block_m, want", [
    (1, 16, 16, 16384, 128, 128, 4),    # 8 MiB of K and V a head: 4 of them fit 2/3 of 50 MiB; 16 would be 128 MiB
    (2, 16, 16, 8192, 128, 128, 8),
    (1, 32, 32, 16384, 64, 192, 8),
    (1, 32, 32, 32768, 64, 192, 4),
    (1, 32, 32, 32768, 128, 128, 2),
    (1, 32, 8, 32768, 128, 128, 8),     # GQA 4:1: two KV heads fit, eight query heads
    (1, 10, 10, 16384, 128, 128, 2),    # 4 fit; 2 divides 10 (sections of one size)
    (1, 12, 12, 16384, 128, 128, 4),
    (1, 37, 37, 32768, 128, 128, 1),    # one head a section at most
])
def test_long_sequences_cap_a_sections_k_and_v_at_a_share_of_the_l2(B, H, H_kv, N, d, block_m, want):
    sec = _sections(B, H, H_kv, N, d, block_m)
    assert sec == want
    kv_head = 2 * N * d * 2
    assert sec // (H // H_kv) * kv_head <= L2_DYNAMIC_SHARE * L2 or sec == H // H_kv


@pytest.mark.parametrize("B, H, H_kv, N, d", [(1, 24, 24, 16384, 128), (1, 40, 40, 32768, 64), (3, 7, 7, 32768, 128),
                                              (2, 48, 16, 16384, 128), (1, 64, 64, 65536, 64)])
def test_capped_sections_are_whole_groups_under_the_cap(B, H, H_kv, N, d):
    heads, group = B * H, H // H_kv
    sec = _sections(B, H, H_kv, N, d, 128)
    cap = max(1, int(L2_DYNAMIC_SHARE * L2 // (2 * N * d * 2))) * group
    assert sec % group == 0 and group <= sec <= max(cap, group)
    assert sec >= cap // 2 or heads % sec != 0   # not needlessly small: a divisor at least half the cap, else split


def test_above_the_dynamic_schedule_the_l2_rule_decides():
    d = 2 * DYNAMIC_MAX_HEAD_DIM
    assert _sections(4, 8, 8, 2048, d, 128) == int(0.4 * L2 // (2 * 2048 * d * 2)) == 10   # 2 MiB a head
    assert _sections(4, 8, 8, 4096, d, 128) == 32   # fewer than 8 heads fit: one section of all


def test_windows_of_equal_tiles_take_the_static_walk():
    """schedule_defines: a causal window whose band key 0 cuts for at most WINDOW_STATIC_CUT_SHARE of the rows
    is built for the static walk; wider windows, windows without a left bound or a right bound, varlen
    batches and head dims past the dynamic schedule's keep the defaults."""
    from kernels.sm90_schedule import DEFAULT_DEFINES, STATIC_SCHEDULE, WINDOW_STATIC_CUT_SHARE, schedule_defines
    from kernels.window import Window

    def s(n_q, n_k, d=128, causal=True):
        return {"N_q": n_q, "N_k": n_k, "d": d, "causal": causal}

    static = (*DEFAULT_DEFINES, STATIC_SCHEDULE)
    assert schedule_defines(s(32768, 32768), Window(4096, 0)) == static
    edge = int(WINDOW_STATIC_CUT_SHARE * 8192)
    assert schedule_defines(s(8192, 8192), Window(edge, 0)) == static
    assert schedule_defines(s(8192, 8192), Window(edge + 1, 0)) == DEFAULT_DEFINES
    # N_k > N_q: the band starts N_k - N_q keys later, so fewer rows are cut
    assert schedule_defines(s(8192, 8192 + 4096), Window(edge + 4096, 0)) == static
    assert schedule_defines(s(8192, 8192), Window(-1, 16)) == DEFAULT_DEFINES          # no left bound
    assert schedule_defines(s(8192, 8192, causal=False), Window(1024, -1)) == DEFAULT_DEFINES   # static already
    assert schedule_defines(s(8192, 8192), None) == DEFAULT_DEFINES                    # plain causal
    assert schedule_defines(s(8192, 8192), Window(1024, 0), varlen=True) == DEFAULT_DEFINES
    assert schedule_defines(s(8192, 8192, d=192), Window(1024, 0)) == DEFAULT_DEFINES


@pytest.mark.parametrize("B, H, H_kv, N, left, want", [
    (1, 16, 16, 32768, 4096, 2),      # the L2 rule: one section of all 16 (a head's K and V: 16 MiB)
    (4, 16, 16, 8192, 1024, 2),       # ... of all 64
    (2, 32, 8, 32768, 4096, 8),       # GQA: two K/V heads' groups of 4 (the L2 rule: all 64)
    (1, 4, 4, 32768, 4096, 2),
])
def test_windows_take_the_lpt_walk_in_sections_of_two_kv_heads(B, H, H_kv, N, left, want):
    """A window's tiles read a band of K and V, not the sequence: where it would walk the fixed rounds (d <= 128
    within the static walk's cut, and every window above d = 128) it takes the lpt walk's table, and where the L2
    rule would give one section of every head its sections hold WINDOW_SECTION_KV_HEADS K/V heads' query heads;
    plain causal attention and a window past the static walk's cut (the claims) keep their rules."""
    from kernels.sm90_schedule import DEFAULT_DEFINES, STATIC_SCHEDULE, WINDOW_SECTION_KV_HEADS, lpt_walk, schedule
    from kernels.window import Window

    s = {"B": B, "H": H, "H_kv": H_kv, "N_q": N, "N_k": N, "d": 128, "causal": True}
    assert l2_section_heads(B, H, H_kv, N, 128, 2, L2) == B * H
    sch = schedule(s, 128, 132, L2, 2, window=Window(left, 0))
    assert lpt_walk(s, Window(left, 0)) and WINDOW_SECTION_KV_HEADS == 2
    assert (sch.lpt, sch.persistent, sch.static, sch.defines) == (True, True, True, (*DEFAULT_DEFINES, STATIC_SCHEDULE))
    assert sch.sections == want
    assert schedule(s, 128, 132, L2, 2, window=Window(left, 0), persistent="lpt") == sch
    # the knob's static walk keeps the rounds (same sections)
    rounds = schedule(s, 128, 132, L2, 2, window=Window(left, 0), defines=(STATIC_SCHEDULE,))
    assert (rounds.lpt, rounds.static, rounds.sections) == (False, True, want)
    # the same launch without the window (plain causal, the claims) or past the static walk's cut keeps its rule
    assert schedule(s, 128, 132, L2, 2).sections == heads_per_section(B, H, H_kv, N, 128, 2, L2, N // 128, 132)
    claims = schedule(s, 128, 132, L2, 2, window=Window(N - 1, 0))
    assert not claims.static and not claims.lpt
    assert claims.sections == heads_per_section(B, H, H_kv, N, 128, 2, L2, N // 128, 132)
    for w in (Window(left, 0), Window(N - 1, 0)):
        wide = schedule({**s, "d": 256}, 128, 132, L2, 2, window=w)
        assert (wide.lpt, wide.static, wide.defines, wide.sections) == (True, True, DEFAULT_DEFINES, want)


def test_windows_keep_sections_the_l2_rule_sizes():
    """Where the L2 rule sizes sections (short sequences: at least MIN_SECTION_HEADS heads' K and V fit its share),
    a window on the static walk keeps them (two K/V heads were measured only where the rule gave all heads)."""
    from kernels.sm90_schedule import schedule
    from kernels.window import Window

    s = {"B": 8, "H": 16, "H_kv": 16, "N_q": 4096, "N_k": 4096, "d": 128, "causal": True}
    rule = l2_section_heads(8, 16, 16, 4096, 128, 2, L2)
    assert 2 < rule < 8 * 16
    sch = schedule(s, 128, 132, L2, 2, window=Window(1024, 0))
    assert sch.lpt and sch.static and sch.sections == rule


def test_schedule_defines_leave_plain_causal_above_the_dynamic_bound_on_the_fixed_walk():
    """schedule_defines: a plain causal kernel above DYNAMIC_MAX_HEAD_DIM is built for the fixed walk (the lpt walk
    takes it; WIDE_DYNAMIC only as a knob), with a window or a varlen batch too."""
    from kernels.sm90_schedule import DEFAULT_DEFINES, WIDE_DYNAMIC, schedule_defines
    from kernels.window import Window

    def s(B, H, N, d, causal=True):
        return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal}

    for shape in (s(8, 10, 2048, 192), s(8, 8, 2048, 256), s(2, 8, 8192, 256), s(8, 8, 2048, 256, causal=False)):
        assert schedule_defines(shape) == DEFAULT_DEFINES
    assert schedule_defines(s(8, 8, 2048, 256), varlen=True) == DEFAULT_DEFINES
    assert WIDE_DYNAMIC not in schedule_defines(s(8, 8, 2048, 256), Window(512, 0))
    dyn = heads_per_section(8, 8, 8, 2048, 256, 2, L2, 16, SMS, dynamic=True)
    assert dyn == 16 and _sections(8, 8, 8, 2048, 256, 128) == 10   # the wave rule within the L2's cap, not the L2 rule


def _s(B, H, N, d, H_kv=None, causal=True):
    return {"B": B, "H": H, "H_kv": H_kv or H, "N_q": N, "N_k": N, "d": d, "causal": causal}


def test_grid_sections_are_a_power_of_2_of_groups_fitting_half_the_l2():
    from kernels.sm90_schedule import GRID_L2_SHARE, grid_section_heads

    one = 2 * 8192 * 256 * 2                          # 8 MiB of K and V a head at d = 256 N = 8192
    assert int(GRID_L2_SHARE * L2 // one) == 3
    assert grid_section_heads(2, 8, 8, 8192, 256, 2, L2) == 2          # 25 MiB: 3 heads fit, 2 the power of 2
    assert grid_section_heads(1, 8, 8, 16384, 256, 2, L2) == 1         # 16 MiB a head: 1
    assert grid_section_heads(2, 8, 8, 65536, 256, 2, L2) == 1         # more than the share: one head still
    assert grid_section_heads(2, 8, 2, 8192, 256, 2, L2) == 8          # GQA: 2 K/V heads, whole groups of 4
    assert grid_section_heads(16, 8, 8, 1024, 256, 2, L2) == 16        # 1 MiB: 25 fit, 16
    assert grid_section_heads(1, 2, 2, 1024, 256, 2, L2) == 2          # never above B H


@pytest.mark.parametrize("shape, sections", [(_s(2, 8, 8192, 256), 2), (_s(8, 8, 2048, 256), 8),
                                             (_s(16, 8, 1024, 192), 32), (_s(4, 8, 8192, 192, H_kv=2), 16)])
def test_plain_causal_above_d_128_takes_the_lpt_walk(shape, sections):
    """schedule: a plain causal launch above DYNAMIC_MAX_HEAD_DIM, short or long, takes the lpt walk (persistent,
    the fixed walk's build, no counter, grid_section_heads' sections); `sections` given keeps it."""
    from kernels.sm90_schedule import DEFAULT_DEFINES, grid_section_heads, lpt_walk, schedule

    assert lpt_walk(shape)
    got = schedule(shape, 128, SMS, L2, 2)
    assert (got.lpt, got.persistent, got.static, got.defines) == (True, True, True, DEFAULT_DEFINES)
    assert got.sections == sections == grid_section_heads(shape["B"], shape["H"], shape["H_kv"], shape["N_k"],
                                                          shape["d"], 2, L2)
    assert schedule(shape, 128, SMS, L2, 2, sections=1).sections == 1
    assert schedule(shape, 128, SMS, L2, 2, persistent="lpt") == got


def test_the_schedule_knobs_turn_the_lpt_walk_off():
    """schedule's A/B knobs above d = 128: `persistent=False` the one-CTA-a-tile grid in the same sections,
    `defines=()` with `persistent=True` the static walk in the L2 rule's sections, WIDE_DYNAMIC the dynamic
    schedule; no lpt walk by default at d <= 128 or without a mask, none with a varlen batch, a window without the
    causal flag or the dynamic build."""
    from kernels.sm90_schedule import WIDE_DYNAMIC, l2_section_heads, lpt_walk, schedule
    from kernels.window import Window

    long = _s(2, 8, 8192, 256)
    grid = schedule(long, 128, SMS, L2, 2, persistent=False)
    assert (grid.lpt, grid.persistent, grid.static, grid.sections) == (False, False, True, 2)
    walk = schedule(long, 128, SMS, L2, 2, defines=(), persistent=True)
    assert (walk.lpt, walk.persistent, walk.static) == (False, True, True)
    assert walk.sections == min(16, l2_section_heads(2, 8, 8, 8192, 256, 2, L2)) == 16
    dyn = schedule(_s(8, 8, 2048, 256), 128, SMS, L2, 2, defines=(WIDE_DYNAMIC,))
    assert (dyn.lpt, dyn.persistent, dyn.static) == (False, True, False)
    for other in (dict(window=Window(1024, 0), varlen=True), dict(varlen=True)):
        assert not lpt_walk(long, **other) and not schedule(long, 128, SMS, L2, 2, **other).lpt
    assert not lpt_walk(_s(2, 8, 8192, 256, causal=False), Window(1024, 1024))
    assert not schedule(_s(2, 8, 8192, 128), 128, SMS, L2, 2).lpt
    assert not schedule(_s(2, 8, 8192, 256, causal=False), 128, SMS, L2, 2).lpt
    with pytest.raises(ValueError, match="lpt walk"):
        schedule(long, 128, SMS, L2, 2, persistent="lpt", varlen=True)
    for plain in (_s(2, 8, 8192, 256, causal=False), _s(2, 8, 8192, 128, causal=False)):
        with pytest.raises(ValueError, match="lpt walk"):
            schedule(plain, 128, SMS, L2, 2, persistent="lpt", window=Window(1024, 1024))
    with pytest.raises(ValueError, match="fixed walk's build"):
        schedule(long, 128, SMS, L2, 2, defines=(WIDE_DYNAMIC,), persistent="lpt")


def test_the_lpt_walk_knob_at_d_128_and_below_builds_the_fixed_walk():
    """`persistent="lpt"` at d <= DYNAMIC_MAX_HEAD_DIM (an A/B knob, the default there the claims): the fixed
    walk's build (STATIC_SCHEDULE), persistent, grid_section_heads' sections; not with the dynamic build."""
    from kernels.sm90_schedule import DEFAULT_DEFINES, STATIC_SCHEDULE, grid_section_heads, schedule

    for shape in (_s(16, 16, 1024, 128), _s(4, 32, 4096, 64, H_kv=8)):
        got = schedule(shape, 128, SMS, L2, 2, persistent="lpt")
        assert (got.lpt, got.persistent, got.static) == (True, True, True)
        assert got.defines == (*DEFAULT_DEFINES, STATIC_SCHEDULE)
        assert got.sections == grid_section_heads(shape["B"], shape["H"], shape["H_kv"], shape["N_k"], shape["d"], 2,
                                                  L2)
        assert not schedule(shape, 128, SMS, L2, 2).lpt and not schedule(shape, 128, SMS, L2, 2).static
    with pytest.raises(ValueError, match="fixed walk's build"):
        schedule(_s(16, 16, 1024, 128), 128, SMS, L2, 2, persistent="lpt", defines=())


def test_causal_chunks_follow_the_bottom_right_diagonal():
    from kernels.sm90_schedule import causal_chunks

    assert causal_chunks(1024, 1024, 128, 64, 256) == [2 * (m + 1) for m in range(8)]
    assert causal_chunks(1000, 1030, 128, 80, 256) == [2, 4, 6, 7, 9, 10, 12, 13]   # N_k > N_q: shifted, capped
    assert causal_chunks(1030, 1000, 128, 64, 256)[:1] == [2]                       # row 30 sees key 0
    assert causal_chunks(300, 40, 128, 64, 256) == [0, 0, 1]                        # the first rows see no key
    # up to d = 192 the short tile goes first: 1030 rows, 6 in m_block 0 with its rows shifted up by 64
    assert causal_chunks(1030, 1030, 128, 64, 192)[:2] == [1, 3] and causal_chunks(1030, 1030, 128, 64, 256)[:2] == [2, 4]


@pytest.mark.parametrize("N_q, N_k, block_m, block_n, left, right", [
    (1024, 1024, 128, 128, 256, 0), (1000, 1000, 128, 96, 300, 0), (700, 1100, 192, 128, 129, 0),
    (1100, 700, 128, 64, 200, 0), (900, 900, 128, 80, 100, 50), (500, 500, 128, 64, 0, 0), (300, 40, 128, 64, 10, 0),
    (2048, 2048, 128, 176, 5000, 0)])
def test_window_tile_chunks_are_the_chunks_the_band_touches(N_q, N_k, block_m, block_n, left, right):
    """tile_chunks with a window: for each query tile (its rows unshifted, as the window kernel's TileInfo takes
    them, the tail tile's past N_q too) the number of key chunks any of its rows' band (bottom-right: row i sees
    keys i + N_k - N_q - left .. i + N_k - N_q + right) touches, counted from the mask itself."""
    import numpy as np

    from kernels.sm90_schedule import tile_chunks
    from kernels.window import Window

    s = {"B": 1, "H": 1, "H_kv": 1, "N_q": N_q, "N_k": N_k, "d": 128, "causal": True}
    got = tile_chunks(s, block_m, block_n, Window(left, right))
    keys = np.arange(N_k)[None, :]
    want = []
    for m in range(-(-N_q // block_m)):
        rows = np.arange(m * block_m, (m + 1) * block_m)[:, None] + N_k - N_q
        band = (keys >= rows - left) & (keys <= rows + right)
        want.append(sum(bool(band[:, j:j + block_n].any()) for j in range(0, N_k, block_n)))
    assert got == want


@pytest.mark.parametrize("B, H, N_q, N_k, block_m, block_n, ctas, sections, left", [
    (2, 8, 8192, 8192, 128, 80, 132, 2, None), (16, 8, 1024, 1024, 128, 64, 132, 16, None),
    (1, 10, 3001, 3100, 128, 112, 132, 4, None), (1, 2, 300, 40, 128, 64, 5, 1, None),
    (3, 5, 2048, 2048, 128, 80, 132, 15, None), (4, 4, 1030, 1030, 128, 64, 132, 3, None),
    (1, 16, 32768, 32768, 128, 128, 132, 2, 8192), (2, 8, 4000, 4100, 192, 128, 132, 2, 1000),
    (1, 4, 1000, 1000, 128, 64, 7, 1, 0)])
def test_the_lpt_table_hands_every_tile_once_in_order_and_balanced(B, H, N_q, N_k, block_m, block_n, ctas, sections,
                                                                   left):
    """lpt_order (plain causal, and with a causal window of `left` keys): every tile in exactly one CTA's column,
    each column in the list's order and ended by -2 (-1 past its end), the first round the list's first tiles, and
    the columns' loads (chunks and the overhead) within the longest tile of each other (the greedy pass's bound)."""
    from kernels.sm90_schedule import LPT_TILE_OVERHEAD_CHUNKS, lpt_order, tile_chunks
    from kernels.window import Window

    s = {"B": B, "H": H, "H_kv": H, "N_q": N_q, "N_k": N_k, "d": 256, "causal": True}
    window = None if left is None else Window(left, 0)
    table = lpt_order(s, block_m, block_n, ctas, sections, window)
    rounds = len(table) // ctas
    assert len(table) == rounds * ctas
    chunks = tile_chunks(s, block_m, block_n, window)
    num_m, heads = len(chunks), B * H
    cost = []
    for t in range(num_m * heads):   # the kernel's TileInfo: t -> m_block within sections of `sections` heads
        base = (t // (sections * num_m)) * sections
        cost.append(chunks[num_m - 1 - (t - base * num_m) // min(sections, heads - base)] + LPT_TILE_OVERHEAD_CHUNKS)
    seen, loads = [], []
    for c in range(ctas):
        col = [table[k * ctas + c] for k in range(rounds)]
        end = col.index(-2)
        assert all(x >= 0 for x in col[:end]) and all(x == -1 for x in col[end + 1:])
        assert col[:end] == sorted(col[:end])
        seen += col[:end]
        loads.append(sum(cost[t] for t in col[:end]))
    assert sorted(seen) == list(range(num_m * heads))
    assert [table[c] for c in range(min(ctas, len(cost)))] == list(range(min(ctas, len(cost))))
    assert max(loads) - min(loads) <= max(cost)
