"""Small calls of the forward kernels' feature variants for NVIDIA's compute-sanitizer (memcheck,
racecheck): sliding windows and the score modifiers (softcap, ALiBi per head and per batch entry, both),
causal and not, on shapes with tails, GQA and N_q != N_k both ways, head dims 32, 64, 96 and 128, on the
mma.sync kernel and, on sm_90 devices, the wgmma one (the model's config for each call).

    compute-sanitizer --tool memcheck python -m validation.sanitize_forward
    compute-sanitizer --tool racecheck python -m validation.sanitize_forward

Prints the number of calls; exits non-zero if an output is not finite (the sanitizer reports the rest).
tests/kernels/test_gpu_score_mods.py runs both tools on it where compute-sanitizer is installed.
"""
from __future__ import annotations

import sys

#: (B, H, H_kv, N_q, N_k, d): key and query tails, GQA, N_q > N_k (causal rows that see no key); head dims
#: 32 and 96 in SMEM rows padded to 64 and 128
SHAPES = ((2, 4, 2, 77, 130, 64), (1, 2, 2, 130, 77, 128), (1, 4, 1, 70, 93, 96), (2, 2, 2, 93, 70, 32))
#: (causal, window_size, softcap, alibi: None | "head" | "batch")
CASES = ((False, (-1, -1), 10.0, None), (True, (-1, -1), 0.0, "head"), (True, (33, 0), 10.0, "batch"),
         (False, (20, 7), 0.0, "head"), (False, (-1, -1), 5.0, "batch"))
WGMMA_CAPABILITY = (9, 0)


def backends(capability) -> tuple[str, ...]:
    return ("sm80", "sm90") if tuple(capability) == WGMMA_CAPABILITY else ("sm80",)


def calls(capability) -> int:
    return len(backends(capability)) * len(SHAPES) * len(CASES)


def _call(torch, backend, shape, case) -> bool:
    import kernels

    B, H, H_kv, n_q, n_k, d = shape
    causal, window, cap, alibi = case
    dt = torch.bfloat16 if d in (96, 128) else torch.float16
    q = torch.randn(B, H, n_q, d, device="cuda").to(dt)
    k = torch.randn(B, H_kv, n_k, d, device="cuda").to(dt)
    slopes = None if alibi is None else torch.rand((B, H) if alibi == "batch" else (H,), device="cuda")
    out = kernels.flash_attention(q, k, torch.randn_like(k), causal=causal, window_size=window, softcap=cap,
                                  alibi_slopes=slopes, backend=backend)
    return bool(torch.isfinite(out).all())


def main() -> int:
    import torch

    torch.manual_seed(0)
    n = 0
    for backend in backends(torch.cuda.get_device_capability()):
        for shape in SHAPES:
            for case in CASES:
                if not _call(torch, backend, shape, case):
                    print(f"non-finite output ({backend}, {shape}, {case})", file=sys.stderr)
                    return 1
                n += 1
    torch.cuda.synchronize()
    print(f"calls {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
