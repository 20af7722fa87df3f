"""Small calls of the attention kernels for NVIDIA's compute-sanitizer (memcheck, racecheck): every shipped
backward config, causal and not, atomic and deterministic, on shapes with tails, GQA and N_q != N_k.

    compute-sanitizer --tool memcheck python -m validation.sanitize
    compute-sanitizer --tool racecheck python -m validation.sanitize

Prints the number of calls; exits non-zero if a gradient is not finite (the sanitizer reports the rest).
tests/kernels/test_gpu_bwd.py runs both tools on it where compute-sanitizer is installed.
"""
from __future__ import annotations

import sys

#: (B, H, H_kv, N_q, N_k): key and query tails, a GQA pair, N_q > N_k (causal rows that see no key)
SHAPES = ((1, 2, 1, 77, 130), (1, 2, 2, 130, 77))


def main() -> int:
    import torch

    import kernels
    from iomodel.families.flash_bwd_sm80 import SHIPPED

    torch.manual_seed(0)
    calls = 0
    for cfg in SHIPPED:
        for causal in (False, True):
            for det in (False, True):
                for B, H, H_kv, N_q, N_k in SHAPES:
                    q, do = (torch.randn(B, H, N_q, cfg.head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                    k, v = (torch.randn(B, H_kv, N_k, cfg.head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
                    grads = kernels.flash_attention_backward(do, q, k, v, out, lse, causal=causal, config=cfg,
                                                             deterministic=det)
                    torch.cuda.synchronize()
                    if not all(bool(torch.isfinite(g).all()) for g in grads):
                        print(f"non-finite gradient: {cfg} causal={causal} deterministic={det}", file=sys.stderr)
                        return 1
                    calls += 1
    print(f"calls {calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
