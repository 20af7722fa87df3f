"""Probe: the wgmma kernel's shipped d = 128 configs on a (4096, 0) window at N = 32k, beside causal attention.
Run: PYTHONPATH=. python3 validation/results/profile-window-h100-2026-11-24/window_cfgs.py"""
import json, os, torch, kernels
from validation.timing import CudaEventTimer
from iomodel.families import flash_sm90 as fam
from iomodel.api import predict
timer = CudaEventTimer(max_repeats=40, target_s=0.3)
B, H, N, d = 1, 16, 32768, 128
sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(2)]
cfgs = [c for c in fam.SHIPPED if c.head_dim == d]
fns, labels = [], []
for c in cfgs:
    fns.append(lambda q, k, v, c=c: kernels.flash_attention(q, k, v, window_size=(4096, 0), causal=True, config=c)); labels.append(f"window {c.name}")
fns.append(lambda q, k, v: kernels.flash_attention(q, k, v, causal=True, backend="sm90")); labels.append("causal pick")
fns.append(lambda q, k, v: kernels.flash_attention(q, k, v, window_size=(4096, 0), causal=True)); labels.append("window pick")
res = timer.time_interleaved(fns, sets, rounds=3)
shape = {"B": B, "H": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16", "window_left": 4096, "window_right": 0}
rows = []
for lab, r, c in zip(labels, res, cfgs + [None, None]):
    pred = predict("flash_sm90", "h100-sxm", shape, c).time_s * 1e3 if c is not None and c not in fam.FAMILY.unshipped_for({"causal", "window"}) else None
    rows.append({"impl": lab, "ms": None if isinstance(r, Exception) else r.median_s * 1e3, "pred_ms": pred})
    print(f"{lab:34} {rows[-1]['ms']:.3f} pred {pred}")
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "window_cfgs.json"), "w"), indent=1)
