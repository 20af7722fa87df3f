"""Small calls of the attention kernels for NVIDIA's compute-sanitizer (memcheck, racecheck): every shipped
backward config, causal and not, atomic and deterministic, on shapes with tails, GQA and N_q != N_k:
flash_bwd_sm80's everywhere, flash_bwd_sm90's on sm_90 devices (its wgmma and TMA code is sm_90a's), there
also with its tail split forced onto every unit.

    compute-sanitizer --tool memcheck python -m validation.sanitize
    compute-sanitizer --tool racecheck python -m validation.sanitize

Prints the number of calls; exits non-zero if a gradient is not finite (the sanitizer reports the rest).
tests/kernels/test_gpu_bwd.py runs both tools on it where compute-sanitizer is installed.
"""
from __future__ import annotations

import sys

#: (B, H, H_kv, N_q, N_k): key and query tails, a GQA pair, N_q > N_k (causal rows that see no key)
SHAPES = ((1, 2, 1, 77, 130), (1, 2, 2, 130, 77))


#: the compute capability the wgmma backward is built for (sm_90a code runs on 9.0 only)
WGMMA_CAPABILITY = (9, 0)
CALLS_PER_CONFIG = 2 * 2 * len(SHAPES)   # causal and not, atomic and deterministic, each shape
#: flash_bwd_sm90's tail split (its last wave's units in pieces whose partial dK, dV the last piece adds)
#: forced onto these grids of fewer units than SMs: 3 pieces a unit, without a mask, both modes
TAIL_PIECES = 3
TAIL_CALLS_PER_CONFIG = 2 * len(SHAPES)


def shipped_for(capability) -> list[tuple[str, object]]:
    """(family, config) of every shipped backward config a device of this compute capability runs."""
    from iomodel.families import flash_bwd_sm80, flash_bwd_sm90

    out = [(flash_bwd_sm80.FAMILY.name, cfg) for cfg in flash_bwd_sm80.SHIPPED]
    if tuple(capability) == WGMMA_CAPABILITY:
        out += [(flash_bwd_sm90.FAMILY.name, cfg) for cfg in flash_bwd_sm90.SHIPPED]
    return out


def expected_calls(capability) -> int:
    """The calls `main` makes on a device of this compute capability."""
    from iomodel.families import flash_bwd_sm90

    configs = shipped_for(capability)
    return len(configs) * CALLS_PER_CONFIG + TAIL_CALLS_PER_CONFIG * sum(f == flash_bwd_sm90.FAMILY.name
                                                                       for f, _ in configs)


def _entry(family: str):
    """The backward entry point of a family: both take kernels.flash_bwd_sm80.backward's arguments."""
    if family == "flash_bwd_sm90":
        from kernels import flash_bwd_sm90

        return flash_bwd_sm90.backward
    import kernels

    return kernels.flash_attention_backward


def _finite_call(torch, backward, cfg, causal: bool, det: bool, sizes, **extra) -> bool:
    """One backward call on random inputs (out and LSE from our forward); whether its gradients are finite.
    `extra`: keyword arguments of the family's backward (flash_bwd_sm90's `_pieces`)."""
    import kernels

    B, H, H_kv, N_q, N_k = sizes
    q, do = (torch.randn(B, H, N_q, cfg.head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(B, H_kv, N_k, cfg.head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
    grads = backward(do, q, k, v, out, lse, causal=causal, config=cfg, deterministic=det, **extra)
    torch.cuda.synchronize()
    return all(bool(torch.isfinite(g).all()) for g in grads)


def main() -> int:
    import torch

    torch.manual_seed(0)
    calls = 0
    for family, cfg in shipped_for(torch.cuda.get_device_capability()):
        backward = _entry(family)
        for causal in (False, True):
            for det in (False, True):
                for sizes in SHAPES:
                    if not _finite_call(torch, backward, cfg, causal, det, sizes):
                        print(f"non-finite gradient: {cfg} causal={causal} deterministic={det}", file=sys.stderr)
                        return 1
                    calls += 1
        if family == "flash_bwd_sm90":
            for det in (False, True):
                for sizes in SHAPES:
                    if not _finite_call(torch, backward, cfg, False, det, sizes, _pieces=TAIL_PIECES):
                        print(f"non-finite gradient: {cfg} tail pieces deterministic={det}", file=sys.stderr)
                        return 1
                    calls += 1
    print(f"calls {calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
