"""GPU correctness of the wgmma forward's causal schedule above d = 128 (kernels/sm90_schedule.py): where the static
walk would cut the tiles into sections (the L2 rule) the launch takes the dynamic schedule (WIDE_DYNAMIC,
heads_per_section's sections), else (long sequences, or a config whose dynamic build spills) a grid of one CTA a
tile with grid_section_heads' sections; each against float32, odd lengths, N_q != N_k, GQA, and against the
persistent static walk on one input (bit for bit)."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):  # pragma: no cover
    pytest.skip("needs an sm_90 GPU", allow_module_level=True)

from kernels import flash_sm90  # noqa: E402
from iomodel.families.flash_sm90 import Sm90Config  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

CASES = [  # (cfg, B, H, group, N_q, N_k, dtype): 1.5 to 2 MiB of K and V a head, sections of 10 to 13 heads
    (Sm90Config(128, 112, 2, 192, 2), 8, 10, 1, 2048, 2048, torch.bfloat16),
    (Sm90Config(128, 80, 2, 256, 2), 8, 8, 2, 1999, 2100, torch.float16),     # odd lengths, N_k > N_q, GQA
    (Sm90Config(128, 96, 2, 192, 2), 8, 10, 2, 2100, 1900, torch.bfloat16),   # N_k < N_q: rows that see no key
]
GRID_CASES = [  # (cfg, B, H, group, N_q, N_k, dtype): under 8 heads' K and V fit the L2 rule, or a spilling config
    (Sm90Config(128, 80, 2, 256, 2), 1, 8, 2, 8191, 8300, torch.float16),     # odd lengths, N_k > N_q, GQA
    (Sm90Config(128, 112, 2, 192, 2), 2, 10, 1, 8192, 8192, torch.bfloat16),
    (Sm90Config(128, 64, 2, 256, 2), 4, 8, 1, 1030, 1000, torch.bfloat16),    # WIDE_DYNAMIC_SPILLING; N_k < N_q
]
IDS = dict(ids=lambda x: x.name if isinstance(x, Sm90Config) else str(x))


def _inputs(cfg, B, H, group, N_q, N_k, dtype):
    g = torch.Generator(device="cuda")
    g.seed()
    q = torch.randn(B, H, N_q, cfg.head_dim, generator=g, device="cuda").to(dtype)
    k, v = (torch.randn(B, H // group, N_k, cfg.head_dim, generator=g, device="cuda").to(dtype) for _ in range(2))
    return q, k, v


def _check(run, q, k, v, cfg, dtype):
    """The launch against float32 (rows that see no key: O = 0, LSE = -inf), then bit for bit against the persistent
    static walk (_defines=(): the rules off), the same tiles' arithmetic in another order of tiles."""
    o, lse = run(q, k, v, True)
    ref, ref_lse = attention_reference(q, k, v, True, 1 / math.sqrt(cfg.head_dim))
    seen = torch.isfinite(ref_lse)
    assert ((o.float() - ref).norm() / ref.norm()).item() < (1e-2 if dtype == torch.bfloat16 else 5e-3)
    torch.testing.assert_close(lse[seen], ref_lse[seen], rtol=1e-3, atol=1e-2)
    assert torch.all(lse[~seen] == -math.inf) and torch.all(o[~seen] == 0)
    walk, lse_w = flash_sm90.attention(q, k, v, causal=True, config=cfg, return_lse=True, _defines=())
    torch.testing.assert_close(o, walk, rtol=0, atol=0)
    torch.testing.assert_close(lse, lse_w, rtol=0, atol=0)


@pytest.mark.parametrize("cfg,B,H,group,N_q,N_k,dtype", CASES, **IDS)
def test_sectioned_wide_causal_runs_dynamic_and_matches_float32(cfg, B, H, group, N_q, N_k, dtype):
    q, k, v = _inputs(cfg, B, H, group, N_q, N_k, dtype)
    run = flash_sm90.plan(q, k, v, True, cfg)
    assert run.counters is not None, "sections of the L2 rule: the dynamic schedule"
    _check(run, q, k, v, cfg, dtype)


@pytest.mark.parametrize("cfg,B,H,group,N_q,N_k,dtype", GRID_CASES, **IDS)
def test_long_wide_causal_runs_one_cta_a_tile_and_matches_float32(cfg, B, H, group, N_q, N_k, dtype):
    from kernels import driver
    from kernels.sm90_schedule import grid_section_heads

    q, k, v = _inputs(cfg, B, H, group, N_q, N_k, dtype)
    run = flash_sm90.plan(q, k, v, True, cfg)
    l2 = driver.device_props(q.device.index or 0).L2_cache_size
    want = grid_section_heads(B, H, H // group, N_k, cfg.head_dim, 2, l2)
    assert not run.schedule.persistent and run.counters is None and run.schedule.sections == want
    assert run.prepared.grid[0] == B * H * -(-N_q // cfg.block_m)
    _check(run, q, k, v, cfg, dtype)


@pytest.mark.parametrize("cfg,B,H,group,N_q,N_k,dtype", GRID_CASES + CASES[1:2], **IDS)
def test_the_persistent_lpt_walk_matches_the_static_walk(cfg, B, H, group, N_q, N_k, dtype):
    """The A/B knob _persistent="lpt" (kernels/sm90_schedule.py lpt_order): a persistent grid walking a host-made
    table of every tile, the same outputs bit for bit (and against float32)."""
    q, k, v = _inputs(cfg, B, H, group, N_q, N_k, dtype)
    run = flash_sm90.plan(q, k, v, True, cfg, _persistent="lpt")
    tiles = B * H * -(-N_q // cfg.block_m)
    assert run.schedule.lpt and run.schedule.persistent and run.counters is None
    assert run.prepared.grid[0] == min(tiles, torch.cuda.get_device_properties(q.device).multi_processor_count)
    assert sorted(t for t in run.order.tolist() if t >= 0) == list(range(tiles))
    _check(run, q, k, v, cfg, dtype)
