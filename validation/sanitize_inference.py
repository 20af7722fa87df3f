"""Small calls of the inference kernels for NVIDIA's compute-sanitizer (memcheck, racecheck): decoding
against a KV cache (contiguous and paged with a shuffled block table, the append of new keys, GQA up to
32:1, N_q up to 4, split counts 1 to 3) and packed variable-length batches with empty sequences (the
model's kernel for this GPU), both head dims.

    compute-sanitizer --tool memcheck python -m validation.sanitize_inference
    compute-sanitizer --tool racecheck python -m validation.sanitize_inference

Prints the number of calls; exits non-zero if an output is not finite (the sanitizer reports the rest).
tests/kernels/test_gpu_decode.py runs both tools on it where compute-sanitizer is installed.
"""
from __future__ import annotations

import sys

#: (B, H, H_kv, N_q, cache rows, page (0: contiguous), new keys, causal, parts)
DECODE = ((2, 8, 2, 1, 100, 0, 0, True, 3), (2, 16, 1, 4, 300, 16, 4, True, 2), (1, 32, 1, 2, 130, 64, 0, False, 1))
#: packed sequence lengths (an empty one, a tail, a single token)
VARLEN = (5, 0, 130, 1)
CALLS = 2 * (len(DECODE) + 2)   # two head dims; the varlen batch causal and not


def _cache(torch, B, H_kv, d, rows, page, dt):
    if not page:
        k = torch.randn(B, rows, H_kv, d, device="cuda").to(dt)
        return k, torch.randn_like(k), None
    per = -(-rows // page)
    blocks = B * per + 1
    k = torch.randn(blocks, page, H_kv, d, device="cuda").to(dt)
    table = torch.randperm(blocks, device="cuda")[:B * per].reshape(B, per).int().contiguous()
    return k, torch.randn_like(k), table


def _decode(torch, d, dt, case) -> bool:
    import kernels
    from iomodel.families.flash_decode_sm80 import DecodeConfig

    B, H, H_kv, N_q, rows, page, new, causal, parts = case
    q = torch.randn(B, N_q, H, d, device="cuda").to(dt)
    kc, vc, table = _cache(torch, B, H_kv, d, rows, page, dt)
    lens = torch.randint(1, rows - new, (B,), device="cuda").int()
    k = v = None
    if new:
        k = torch.randn(B, new, H_kv, d, device="cuda").to(dt)
        v = torch.randn_like(k)
    out = kernels.flash_attention_with_kvcache(q, kc, vc, lens, block_table=table, k=k, v=v, causal=causal,
                                               config=DecodeConfig(64, 4, 3, parts, d))
    return bool(torch.isfinite(out).all())


def _varlen(torch, d, dt, causal) -> bool:
    import kernels

    cu = torch.tensor([0, *torch.tensor(VARLEN).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    total = sum(VARLEN)
    q = torch.randn(total, 4, d, device="cuda").to(dt)
    k = torch.randn(total, 2, d, device="cuda").to(dt)
    out = kernels.flash_attention_varlen(q, k, torch.randn_like(k), cu, cu, max(VARLEN), max(VARLEN), causal=causal)
    return bool(torch.isfinite(out).all())


def main() -> int:
    import torch

    torch.manual_seed(0)
    calls = 0
    for d, dt in ((64, torch.float16), (128, torch.bfloat16)):
        checks = [lambda c=c: _decode(torch, d, dt, c) for c in DECODE]
        checks += [lambda c=c: _varlen(torch, d, dt, c) for c in (False, True)]
        for check in checks:
            if not check():
                print(f"non-finite output (d = {d}, call {calls})", file=sys.stderr)
                return 1
            calls += 1
    torch.cuda.synchronize()
    print(f"calls {calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
