"""Hopper forward probe: the causal scheduling sections of flash_sm90 on a (4096, 0) sliding window and on
small causal batches, against its causal attention and SDPA cuDNN, interleaved.
Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-tiles-h100-2026-11-24/fwd_probe.py"""
import json, os, time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels import flash_sm90
from kernels.window import Window
from validation.timing import CudaEventTimer

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
timer = CudaEventTimer()


def sets(B, H, N, d, n=2):
    out = []
    for s in range(n):
        g = torch.Generator(device="cuda").manual_seed(100 + s)
        out.append(tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3)))
    return out


def group(name, B, H, N, d, variants, rows):
    ins = sets(B, H, N, d)
    names = [v[0] for v in variants]
    res = timer.time_interleaved([v[1] for v in variants], ins, rounds=5)
    base = {}
    for nm, o in zip(names, res):
        r = {"group": name, "shape": [B, H, N, d], "impl": nm}
        if isinstance(o, Exception):
            r["error"] = repr(o)[:300]
        else:
            r["ms"] = o.median_s * 1e3
        rows.append(r)
    line = "  ".join(f"{r['impl']} {r.get('ms', float('nan')):.3f}" for r in rows[-len(names):])
    print(f"{name} B{B} H{H} N{N} d{d}: {line}", flush=True)


rows = []
win = Window(4096, 0)
variants = [("causal", lambda q, k, v: flash_sm90.attention(q, k, v, causal=True))]
for sec in (None, 1, 2, 4, 8):
    variants.append((f"window sec={sec}", lambda q, k, v, sec=sec: flash_sm90.attention(
        q, k, v, causal=True, window=win, _sections=sec)))
group("window", 1, 16, 32768, 128, variants, rows)


def cudnn(q, k, v):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


for (B, H, N, d) in ((16, 16, 1024, 128), (16, 32, 1024, 64)):
    variants = [("cudnn", cudnn)]
    for sec in (None, 8, 16, 64, B * H):
        variants.append((f"causal sec={sec}", lambda q, k, v, sec=sec: flash_sm90.attention(
            q, k, v, causal=True, _sections=sec)))
    group("small causal", B, H, N, d, variants, rows)
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "rows": rows}, open(f"{OUT}/fwd-sections.json", "w"), indent=1)
