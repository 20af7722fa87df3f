"""The Hopper backward at head dims 32 and 96 (rows padded to 64-column blocks) beside SDPA's cuDNN and
flash (FlashAttention-2) backwards, interleaved (the harness's timer), after a float32 check of ours:
B N = 16384 tokens, N = 2048 and 8192, causal and not.  Run from the repository root:
PYTHONPATH=. python3 <this file>; writes $OUT/head-dims.json."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import kernels
from kernels import flash_bwd_sm90
from iomodel.families.flash_bwd_sm90 import SHIPPED
from validation import probe_record
from validation.timing import CudaEventTimer

CFG = {c.head_dim: c for c in SHIPPED}
bp = probe_record.load(probe_record.BWD_SM90_PROBE, "none")   # its flops


def make(B, H, N, d, causal, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(B, H, N, d, generator=g, device="cuda").bfloat16() for _ in range(4))
    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
    peers = []
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
        leaves = tuple(x.detach().clone().requires_grad_() for x in (q, k, v))
        with sdpa_kernel(backend):
            peers.append((leaves, F.scaled_dot_product_attention(*leaves, is_causal=causal)))
    return q, k, v, out, lse, do, peers


def rel_err(B, H, N, d, causal):
    q, k, v, out, lse, do, _ = make(B, H, N, d, causal, 3)
    got = flash_bwd_sm90.backward(do, q, k, v, out, lse, causal=causal, config=CFG[d])
    ref = [x.float().requires_grad_() for x in (q, k, v)]
    o = F.scaled_dot_product_attention(*ref, is_causal=causal)
    r = torch.autograd.grad(o, ref, do.float())
    return [float((a.float() - b).abs().max() / b.abs().max()) for a, b in zip(got, r)]


rows, timer = [], CudaEventTimer()
for d, H in ((32, 64), (96, 16)):
    for N in (2048, 8192):
        for causal in (False, True):
            B = 16384 // N
            err = rel_err(2, 2, 1000, d, causal)
            sets = [make(B, H, N, d, causal, s) for s in (11, 12)]
            fns = [lambda q, k, v, out, lse, do, peers: flash_bwd_sm90.backward(do, q, k, v, out, lse, causal=causal,
                                                                               config=CFG[d]),
                   lambda q, k, v, out, lse, do, peers: torch.autograd.grad(peers[0][1], peers[0][0], do,
                                                                            retain_graph=True),
                   lambda q, k, v, out, lse, do, peers: torch.autograd.grad(peers[1][1], peers[1][0], do,
                                                                            retain_graph=True)]
            res = timer.time_interleaved(fns, sets, rounds=7)
            f = bp.flops(B, H, N, d, causal)
            t = {n: (f / r.median_s / 1e12 if not isinstance(r, Exception) else None)
                 for n, r in zip(("ours", "cudnn", "fa2"), res)}
            row = {"shape": [B, H, N, d, causal], "rel_err_dq_dk_dv": err, "tflops": t,
                   "vs_cudnn": t["ours"] / t["cudnn"] if t["cudnn"] else None,
                   "vs_fa2": t["ours"] / t["fa2"] if t["fa2"] else None}
            rows.append(row)
            print(row, flush=True)
probe_record.write("head-dims.json", rows, "head_dims_probe.py")
print()
for r in rows:
    print(f"{str(r['shape']):28} ours {r['tflops']['ours']:.0f} cudnn {r['tflops']['cudnn'] or 0:.0f} "
          f"fa2 {r['tflops']['fa2'] or 0:.0f}  vs cudnn {r['vs_cudnn'] or 0:.3f} vs fa2 {r['vs_fa2'] or 0:.2f}  "
          f"err {max(r['rel_err_dq_dk_dv']):.4f}")
