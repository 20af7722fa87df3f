"""Probe of the decode kernel: parts and ring depth beside cuDNN and the read floor, each cache size one
interleaved group timed twice. Run: PYTHONPATH=. python3 validation/results/profile-decode-h100-2026-11-24/decode_probe.py"""
import json, os, sys, statistics
import torch
from validation.timing import CudaEventTimer
from validation.decode_torch import TorchDecode
from kernels import flash_attention_with_kvcache
from iomodel.families.flash_decode_sm80 import DecodeConfig

torch.manual_seed(0)
td = TorchDecode(torch)
timer = CudaEventTimer(max_repeats=300, target_s=0.1)
out = {}
def shp(B, Nk): return {"B": B, "H": 32, "H_kv": 8, "N_q": 1, "N_k": Nk, "d": 128, "causal": True, "dtype": "bf16"}
shapes = {"32MiB": (shp(1, 8192), 6), "128MiB": (shp(1, 32768), 3), "256MiB": (shp(8, 8192), 3), "512MiB": (shp(1, 131072), 3)}
PARTS = {"32MiB": [8, 16, 32], "128MiB": [8, 16, 32], "256MiB": [1, 2, 4], "512MiB": [16, 32, 64]}
from validation.read_floor import ReadFloor
floor = ReadFloor(torch)
rows = []
for name, (s, nsets) in shapes.items():
    sets = td.make_inputs(s, (), True, nsets, 1234)
    nbytes = 2 * s["B"] * s["N_k"] * s["H_kv"] * s["d"] * 2
    fns, labels, ins = [], [], []
    cfgs = []
    for bn, w, st in [(64, 4, 3), (64, 4, 4), (128, 4, 3), (128, 8, 3)]:
        for p in PARTS[name]:
            cfgs.append(DecodeConfig(bn, w, st, p, 128))
    for c in cfgs:
        def f(st, c=c):
            return flash_attention_with_kvcache(st.q, st.k_cache, st.v_cache, st.seqlens, causal=True, validate=False, config=c)
        try:
            f(sets[0][0]); torch.cuda.synchronize()
        except Exception as e:
            print("skip", c, e); continue
        fns.append(f); labels.append(f"ours {c.block_n} w{c.warps} s{c.stages} p{c.parts}")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    def cud(st):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(st.q_peer, st.k_peer, st.v_peer, enable_gqa=True)
    fns.append(cud); labels.append("cudnn")
    fns.append(floor); labels.append("read floor")
    res = timer.time_interleaved(fns, sets, rounds=5, queue_ahead=True)
    res2 = timer.time_interleaved(fns, sets, rounds=5, queue_ahead=True)
    for lab, r, r2 in zip(labels, res, res2):
        if not isinstance(r2, Exception):
            rows.append({"cache": name, "impl": lab + " (again)", "us": r2.median_s * 1e6, "GBps": nbytes / r2.median_s / 1e9})
        if isinstance(r, Exception):
            print(name, lab, "ERR", r); continue
        t = r.median_s
        rows.append({"cache": name, "impl": lab, "us": t * 1e6, "GBps": nbytes / t / 1e9})
    del sets
    torch.cuda.empty_cache()
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "decode_probe.json"), "w"), indent=1)
for name in shapes:
    rs = sorted([r for r in rows if r["cache"] == name], key=lambda r: r["us"])
    print(f"== {name}")
    for r in rs:
        print(f"  {r['impl']:28} {r['us']:8.1f} us {r['GBps']:7.0f} GB/s")
