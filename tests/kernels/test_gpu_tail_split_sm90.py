"""GPU correctness of the wgmma forward's tail split (kernels/flash_sm90.py tail_split; split_item and merge_pieces
in csrc/flash_fwd_sm90.cuh: the last round's tiles as pieces of their key chunks, the tile's last piece merging
them): grids made so that their last round holds a few tiles, against float32 and against the same call unsplit;
the merge's bits the same whichever piece arrives last; the arrival counters left at zero."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):  # pragma: no cover
    pytest.skip("needs an sm_90 GPU", allow_module_level=True)

from kernels import driver, flash_sm90  # noqa: E402
from kernels.window import Window  # noqa: E402
from iomodel.families.flash_sm90 import Sm90Config  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 5e-3}


def sms() -> int:
    return driver.device_props(torch.cuda.current_device()).multi_processor_count


def heads_for_a_short_last_round(cfg, N_q, group):
    """Query heads (B = 1, a multiple of `group`) whose tiles fill the SMs once and a few more."""
    return (sms() // math.ceil(N_q / cfg.block_m) // group + 1) * group


CASES = [  # (cfg, N_q, N_k, group, dtype, pieces: None = the model's)
    (Sm90Config(128, 176, 2, 128, 2), 4096, 4096, 1, torch.bfloat16, None),
    (Sm90Config(128, 176, 2, 128, 2), 4096, 4096, 1, torch.bfloat16, 8),
    (Sm90Config(192, 128, 2, 64, 3), 1000, 3000, 4, torch.float16, None),    # a short tile, a key tail, GQA
    (Sm90Config(128, 128, 2, 32, 2), 2048, 2100, 1, torch.bfloat16, 3),
    (Sm90Config(192, 112, 3, 96, 3), 1500, 2048, 2, torch.bfloat16, None),   # d = 96: a padded column block
    (Sm90Config(128, 112, 2, 192, 2), 2048, 4096, 1, torch.bfloat16, 4),
    (Sm90Config(128, 80, 2, 256, 2), 1024, 2000, 1, torch.float16, None),    # the merge in two passes
]


def _inputs(cfg, H, N_q, N_k, group, dtype):
    g = torch.Generator(device="cuda")
    g.seed()
    q = torch.randn(1, H, N_q, cfg.head_dim, generator=g, device="cuda").to(dtype)
    k, v = (torch.randn(1, H // group, N_k, cfg.head_dim, generator=g, device="cuda").to(dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("cfg,N_q,N_k,group,dtype,pieces", CASES,
                         ids=lambda x: f"{x.block_m}x{x.block_n}d{x.head_dim}" if isinstance(x, Sm90Config) else str(x))
def test_tail_split_matches_float32_and_the_unsplit_grid(cfg, N_q, N_k, group, dtype, pieces):
    H = heads_for_a_short_last_round(cfg, N_q, group)
    q, k, v = _inputs(cfg, H, N_q, N_k, group, dtype)
    run = flash_sm90.plan(q, k, v, False, cfg, _pieces=pieces)
    tiles = H * math.ceil(N_q / cfg.block_m)
    assert run.pieces > 1, "the shape was made for a split"
    assert run.prepared.grid[0] == sms()
    o, lse = run(q, k, v, True)
    ref, ref_lse = attention_reference(q, k, v, False, 1 / math.sqrt(cfg.head_dim))
    assert not torch.isnan(o).any() and not torch.isnan(lse).any(), "O or the LSE not fully written"
    err = ((o.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dtype], f"rel err {err:.3e}"
    torch.testing.assert_close(lse, ref_lse, rtol=1e-3, atol=1e-2)
    for _ in range(3):   # pieces arrive in another order each launch: the merged rows keep their bits
        o2, lse2 = run(q, k, v, True)
        assert torch.equal(o, o2) and torch.equal(lse, lse2)
    counts = flash_sm90._tile_counters(q.device.index)._streams[driver.current_stream_handle(q.device.index)]
    assert counts.numel() >= (tiles % sms()) * 4 * cfg.consumers and not counts.any(), "arrival counters left set"
    o1, lse1 = flash_sm90.attention(q, k, v, config=cfg, return_lse=True, _pieces=1)
    torch.testing.assert_close(o.float(), o1.float(), rtol=0, atol=2e-2)   # one rounding of the merged rows apart
    torch.testing.assert_close(lse, lse1, rtol=1e-4, atol=1e-4)


def test_every_tile_split_and_more_pieces_than_chunks():
    """A grid smaller than the SMs: every tile is the last round's; 8 pieces asked of 3 chunks make 3."""
    cfg = Sm90Config(192, 128, 2, 64, 3)
    q, k, v = _inputs(cfg, 3, 1000, 300, 1, torch.bfloat16)
    run = flash_sm90.plan(q, k, v, False, cfg, _pieces=8)
    assert run.pieces == 3 and run.prepared.grid[0] == 3 * 6 * 3
    o, lse = run(q, k, v, True)
    ref, ref_lse = attention_reference(q, k, v, False, 1 / math.sqrt(64))
    assert ((o.float() - ref).norm() / ref.norm()).item() < TOL[torch.bfloat16]
    torch.testing.assert_close(lse, ref_lse, rtol=1e-3, atol=1e-2)


def test_no_split_with_a_mask_a_window_or_whole_rounds():
    cfg = Sm90Config(128, 128, 2, 64, 2)
    H = heads_for_a_short_last_round(cfg, 2048, 1)
    q, k, v = _inputs(cfg, H, 2048, 2048, 1, torch.bfloat16)
    assert flash_sm90.plan(q, k, v, False, cfg).pieces > 1
    assert flash_sm90.plan(q, k, v, True, cfg).pieces == 1                          # causal: unequal tiles
    assert flash_sm90.plan(q, k, v, False, cfg, window=Window(512, 512)).pieces == 1   # a band: unequal too
    q, k, v = _inputs(cfg, sms() // 16, 2048, 2048, 1, torch.bfloat16)             # whole rounds: no tail
    assert (sms() // 16) * 16 != sms() or flash_sm90.plan(q, k, v, False, cfg).pieces == 1
