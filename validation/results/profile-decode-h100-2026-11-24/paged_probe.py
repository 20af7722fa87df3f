"""Probe: the decode kernel on contiguous and paged caches (pages of 16, 256) over parts and ring depth,
one interleaved group a shape. Run: PYTHONPATH=. python3 validation/results/profile-decode-h100-2026-11-24/paged_probe.py"""
import json, os, torch
from validation.timing import CudaEventTimer
from validation.decode_torch import TorchDecode
from kernels import flash_attention_with_kvcache
from iomodel.families.flash_decode_sm80 import DecodeConfig
td = TorchDecode(torch); timer = CudaEventTimer(max_repeats=100, target_s=0.05)
def shp(B, Nk): return {"B": B, "H": 32, "H_kv": 8, "N_q": 1, "N_k": Nk, "d": 128, "causal": True, "dtype": "bf16"}
rows = []
for name, s in {"B8 32k": shp(8, 32768), "B1 128k": shp(1, 131072)}.items():
    sets = td.make_inputs(s, (16, 256), False, 2, 7)
    fns, labels = [], []
    for bn, w, st, p in [(64,4,3,1),(64,4,3,2),(64,4,3,4),(64,4,3,8),(64,4,4,1),(64,4,4,4),(64,4,4,16),(128,4,2,4),(64,4,3,16),(64,4,3,32)]:
        c = DecodeConfig(bn, w, st, p, 128)
        for page in (None, 16, 256):
            def f(x, c=c, page=page):
                if page:
                    k, v, t = x.paged[page]
                    return flash_attention_with_kvcache(x.q, k, v, x.seqlens, block_table=t, validate=False, config=c)
                return flash_attention_with_kvcache(x.q, x.k_cache, x.v_cache, x.seqlens, validate=False, config=c)
            f(sets[0][0]); fns.append(f); labels.append(f"{bn} w{w} s{st} p{p} page{page}")
    torch.cuda.synchronize()
    res = timer.time_interleaved(fns, sets, rounds=3, queue_ahead=True)
    for lab, r in zip(labels, res):
        rows.append({"shape": name, "impl": lab, "us": None if isinstance(r, Exception) else r.median_s * 1e6})
    del sets; torch.cuda.empty_cache()
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "paged_probe.json"), "w"), indent=1)
for r in rows: print(f"{r['shape']:8} {r['impl']:28} {r['us']:8.1f}")
