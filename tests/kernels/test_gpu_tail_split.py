"""GPU correctness of the mma.sync forward's tail split (kernels/flash_sm80.py: the kernel's SPLIT grid, each piece
of the last partial wave's tiles writing its fp32 O and LSE, flash_fwd_merge_kernel merging them): grids made so
that their last wave holds a few tiles, against float32 and against the same call with the split turned off."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels.flash_sm80 as kfs  # noqa: E402
from kernels import driver  # noqa: E402
from iomodel.families.flash_sm80 import FlashConfig  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 5e-3}


def heads_for_a_short_last_wave(cfg, N_q, group, dtype):
    """Query heads (B = 1, a multiple of `group`) whose tiles fill the resident slots once and a few more."""
    dev = torch.cuda.current_device()
    smem = cfg.smem_bytes()
    kern = kfs.kernel(dev, cfg, "bf16" if dtype == torch.bfloat16 else "fp16", False, smem)
    slots = driver.device_props(dev).multi_processor_count * driver.blocks_per_sm(kern, cfg.threads, smem)
    m = math.ceil(N_q / cfg.block_m)
    return (slots // m // group + 1) * group


CASES = [  # (cfg, N_q, N_k, group, dtype): 32 key chunks or more, so that a piece's overhead pays (tail_split)
    (FlashConfig(128, 128, 4, 1, 64), 2048, 4096, 1, torch.bfloat16),
    (FlashConfig(128, 128, 4, 1, 64), 1500, 4000, 4, torch.float16),    # rows past N_q, a key tail, GQA
    (FlashConfig(128, 64, 4, 2, 128), 1000, 2048, 1, torch.bfloat16),
    (FlashConfig(128, 128, 4, 1, 32), 2048, 4096, 1, torch.bfloat16),   # the merge's odd lanes: d = 32, 96
    (FlashConfig(128, 64, 4, 1, 96), 1024, 2100, 2, torch.float16),
    (FlashConfig(64, 64, 4, 1, 256), 1024, 2048, 1, torch.bfloat16),
    (FlashConfig(128, 64, 8, 2, 192, q_regs=1), 1000, 2100, 2, torch.bfloat16),   # Q held in registers
]


@pytest.mark.parametrize("cfg,N_q,N_k,group,dtype", CASES, ids=lambda x: str(x) if not isinstance(x, FlashConfig)
                         else f"{x.block_m}x{x.block_n}w{x.warps}s{x.stages}d{x.head_dim}{'q' * x.q_regs}")
def test_tail_split_matches_float32_and_the_plain_grid(cfg, N_q, N_k, group, dtype, monkeypatch):
    H = heads_for_a_short_last_wave(cfg, N_q, group, dtype)
    g = torch.Generator(device="cuda")
    g.seed()
    q = torch.randn(1, H, N_q, cfg.head_dim, generator=g, device="cuda").to(dtype)
    k = torch.randn(1, H // group, N_k, cfg.head_dim, generator=g, device="cuda").to(dtype)
    v = torch.randn(1, H // group, N_k, cfg.head_dim, generator=g, device="cuda").to(dtype)
    plan = kfs.plan(q, k, v, False, cfg)
    assert plan.split is not None and plan.split.pieces > 1, "the shape was made for a split"
    assert plan.prepared.grid[0] == plan.split.whole + plan.split.tail * plan.split.pieces
    o, lse = plan(q, k, v, True)
    ref, ref_lse = attention_reference(q, k, v, False, 1 / math.sqrt(cfg.head_dim))
    assert not torch.isnan(o).any() and not torch.isnan(lse).any(), "O or the LSE not fully written"
    err = ((o.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dtype], f"rel err {err:.3e}"
    torch.testing.assert_close(lse, ref_lse, rtol=1e-3, atol=1e-2)
    monkeypatch.setattr(kfs, "tail_split", lambda blocks, slots, steps: 1)
    plain = kfs.plan(q, k, v, False, cfg)
    assert plain.split is None
    o1, lse1 = plain(q, k, v, True)
    torch.testing.assert_close(o.float(), o1.float(), rtol=0, atol=2e-2)   # one rounding of the merged rows apart
    torch.testing.assert_close(lse, lse1, rtol=1e-4, atol=1e-4)


def test_no_split_with_a_mask_or_a_full_last_wave():
    cfg = FlashConfig(128, 128, 4, 1, 64)
    H = heads_for_a_short_last_wave(cfg, 2048, 1, torch.bfloat16)
    q, k, v = (torch.randn(1, H, 2048, 64, device="cuda").to(torch.bfloat16) for _ in range(3))
    assert kfs.plan(q, k, v, True, cfg).split is None                     # causal: tiles of unequal length
    q, k, v = (torch.randn(2, 4, 256, 64, device="cuda").to(torch.bfloat16) for _ in range(3))
    assert kfs.plan(q, k, v, False, cfg).split is None                    # 16 tiles: one partial wave only
