"""GPU correctness of the wgmma forward's causal schedules (kernels/sm90_schedule.py): the lpt walk the launcher
takes above d = 128 (a persistent grid walking a host-made tile table in grid_section_heads' sections), short and
long sequences, the knobs' grid of one CTA a tile and dynamic schedule, and the lpt knob at d <= 128; each against
float32, odd lengths, N_q != N_k, GQA, and against another schedule on one input (bit for bit)."""
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

CASES = [  # (cfg, B, H, group, N_q, N_k, dtype): short sequences (sections of 8 to 16 heads), then long ones
    (Sm90Config(128, 112, 2, 192, 2), 8, 10, 1, 2048, 2048, torch.bfloat16),
    (Sm90Config(128, 80, 2, 256, 2), 8, 8, 2, 1999, 2100, torch.float16),     # odd lengths, N_k > N_q, GQA
    (Sm90Config(128, 96, 2, 192, 2), 8, 10, 2, 2100, 1900, torch.bfloat16),   # N_k < N_q: rows that see no key
    (Sm90Config(128, 80, 2, 256, 2), 1, 8, 2, 8191, 8300, torch.float16),     # odd lengths, N_k > N_q, GQA
    (Sm90Config(128, 112, 2, 192, 2), 2, 10, 1, 8192, 8192, torch.bfloat16),
    (Sm90Config(128, 64, 2, 256, 2), 4, 8, 1, 1030, 1000, torch.bfloat16),    # N_k < N_q
]
IDS = dict(ids=lambda x: x.name if isinstance(x, Sm90Config) else str(x))


def _inputs(cfg, B, H, group, N_q, N_k, dtype):
    g = torch.Generator(device="cuda")
    g.seed()
    q = torch.randn(B, H, N_q, cfg.head_dim, generator=g, device="cuda").to(dtype)
    k, v = (torch.randn(B, H // group, N_k, cfg.head_dim, generator=g, device="cuda").to(dtype) for _ in range(2))
    return q, k, v


def _check(run, q, k, v, cfg, dtype):
    """The launch against float32 (rows that see no key: O = 0, LSE = -inf), then bit for bit against the launch with
    _defines=() (the rules off: above d = 128 the persistent static walk, at d <= 128 the claims), the same tiles'
    arithmetic in another order of tiles."""
    o, lse = run(q, k, v, True)
    ref, ref_lse = attention_reference(q, k, v, True, 1 / math.sqrt(cfg.head_dim))
    seen = torch.isfinite(ref_lse)
    assert ((o.float() - ref).norm() / ref.norm()).item() < (1e-2 if dtype == torch.bfloat16 else 5e-3)
    torch.testing.assert_close(lse[seen], ref_lse[seen], rtol=1e-3, atol=1e-2)
    assert torch.all(lse[~seen] == -math.inf) and torch.all(o[~seen] == 0)
    walk, lse_w = flash_sm90.attention(q, k, v, causal=True, config=cfg, return_lse=True, _defines=())
    torch.testing.assert_close(o, walk, rtol=0, atol=0)
    torch.testing.assert_close(lse, lse_w, rtol=0, atol=0)


def _l2(q) -> int:
    from kernels import driver

    return driver.device_props(q.device.index or 0).L2_cache_size


@pytest.mark.parametrize("cfg,B,H,group,N_q,N_k,dtype", CASES, **IDS)
def test_wide_causal_takes_the_lpt_walk_and_matches_float32(cfg, B, H, group, N_q, N_k, dtype):
    """The launcher's choice: persistent, no counter, the table holding every tile once, grid_section_heads'
    sections; the table shared by a plan of another layout of the same sizes."""
    from kernels.sm90_schedule import grid_section_heads

    q, k, v = _inputs(cfg, B, H, group, N_q, N_k, dtype)
    run = flash_sm90.plan(q, k, v, True, cfg)
    tiles = B * H * -(-N_q // cfg.block_m)
    sch = run.schedule
    assert sch.lpt and sch.persistent and sch.static and run.counters is None
    assert sch.sections == grid_section_heads(B, H, H // group, N_k, cfg.head_dim, 2, _l2(q))
    assert run.prepared.grid[0] == min(tiles, torch.cuda.get_device_properties(q.device).multi_processor_count)
    assert sorted(t for t in run.order.tolist() if t >= 0) == list(range(tiles))
    _check(run, q, k, v, cfg, dtype)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)   # a (B, N, H, d) layout: another signature, one table
    assert flash_sm90.plan(qt, k, v, True, cfg).order is run.order


@pytest.mark.parametrize("cfg,B,H,group,N_q,N_k,dtype", CASES[1:2] + CASES[3:4], **IDS)
def test_the_knobs_grid_and_dynamic_schedule_match_float32(cfg, B, H, group, N_q, N_k, dtype):
    """The A/B knobs: a grid of one CTA a tile (_persistent=False) in the same sections, and the dynamic schedule
    (WIDE_DYNAMIC), against float32 and the static walk."""
    q, k, v = _inputs(cfg, B, H, group, N_q, N_k, dtype)
    grid = flash_sm90.plan(q, k, v, True, cfg, _persistent=False)
    assert not grid.schedule.persistent and grid.order is None and grid.counters is None
    assert grid.prepared.grid[0] == B * H * -(-N_q // cfg.block_m)
    _check(grid, q, k, v, cfg, dtype)
    dyn = flash_sm90.plan(q, k, v, True, cfg, _defines=(flash_sm90.WIDE_DYNAMIC,))
    assert dyn.counters is not None and dyn.order is None
    _check(dyn, q, k, v, cfg, dtype)


@pytest.mark.parametrize("cfg,B,H,group,N_q,N_k,dtype", [
    (Sm90Config(128, 128, 3, 128, 2), 16, 16, 1, 1024, 1024, torch.bfloat16),
    (Sm90Config(192, 128, 2, 64, 3), 4, 8, 2, 1000, 1100, torch.float16),     # odd lengths, N_k > N_q, GQA
], **IDS)
def test_the_lpt_knob_at_d_128_and_below_matches_float32(cfg, B, H, group, N_q, N_k, dtype):
    """The A/B knob _persistent="lpt" where the launcher claims tiles (d <= 128): the fixed walk's build with the
    table, against float32 and bit for bit against the claims."""
    q, k, v = _inputs(cfg, B, H, group, N_q, N_k, dtype)
    run = flash_sm90.plan(q, k, v, True, cfg, _persistent="lpt")
    tiles = B * H * -(-N_q // cfg.block_m)
    assert run.schedule.lpt and run.schedule.static and run.counters is None
    assert flash_sm90.STATIC_SCHEDULE in run.schedule.defines
    assert sorted(t for t in run.order.tolist() if t >= 0) == list(range(tiles))
    _check(run, q, k, v, cfg, dtype)
