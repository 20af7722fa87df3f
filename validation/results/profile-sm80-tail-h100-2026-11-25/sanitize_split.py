"""The tail split under compute-sanitizer: small grids of the mma.sync forward with the split forced (3 pieces a
tile, every tile of the grid in pieces: fewer tiles than slots), key and query tails, GQA, each config of
tests/kernels/test_gpu_tail_split.py, checked against float32.  Run from the repository root:
PYTHONPATH=. compute-sanitizer --tool memcheck python3 validation/results/profile-sm80-tail-h100-2026-11-25/sanitize_split.py
(and --tool racecheck)."""
import math
import torch
import kernels.flash_sm80 as kfs
from iomodel.families.flash_sm80 import FlashConfig
from validation.reference import attention_reference

kfs.tail_split = lambda blocks, slots, steps: 3
bad = 0
for cfg in (FlashConfig(128, 128, 4, 1, 64), FlashConfig(128, 64, 4, 2, 128), FlashConfig(128, 128, 4, 1, 32),
            FlashConfig(128, 64, 4, 1, 96), FlashConfig(64, 64, 4, 1, 256)):
    for (B, H, H_kv, N_q, N_k) in ((1, 2, 1, 77, 3 * cfg.block_n + 5), (2, 2, 2, 130, 4 * cfg.block_n)):
        q = torch.randn(B, H, N_q, cfg.head_dim, device="cuda").to(torch.bfloat16)
        k = torch.randn(B, H_kv, N_k, cfg.head_dim, device="cuda").to(torch.bfloat16)
        v = torch.randn(B, H_kv, N_k, cfg.head_dim, device="cuda").to(torch.bfloat16)
        plan = kfs.plan(q, k, v, False, cfg)
        assert plan.split is not None and plan.split.pieces == 3
        o, lse = plan(q, k, v, True)
        ref, _ = attention_reference(q, k, v, False, 1 / math.sqrt(cfg.head_dim))
        err = ((o.float() - ref).norm() / ref.norm()).item()
        bad += err > 1e-2
        print(cfg, (B, H, H_kv, N_q, N_k), f"rel err {err:.2e}")
torch.cuda.synchronize()
print("bad:", bad)
raise SystemExit(1 if bad else 0)
