"""Probe: what FlashAttention's score modifiers (softcap, ALiBi, both) cost on both forward kernels, beside
the same call without them and the model's prediction of each (the model's pick per call).  Run:
PYTHONPATH=. python3 validation/results/profile-score-mods-h100-2026-11-24/mods_probe.py"""
import json, os, torch, kernels
from kernels import dispatch, driver
from iomodel.api import predict
from validation.timing import CudaEventTimer

torch.manual_seed(0)
timer = CudaEventTimer(max_repeats=40, target_s=0.3)
gpu = torch.cuda.get_device_name()
MODS = {"plain": {}, "softcap 30": {"softcap": 30.0}, "alibi": {"alibi": True}, "both": {"softcap": 30.0, "alibi": True}}
rows = []
for B, H, N, d, causal in [(4, 16, 8192, 128, True), (4, 16, 8192, 64, True), (2, 16, 16384, 128, False)]:
    sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(2)]
    slopes = torch.rand(H, device="cuda") * 0.5 + 0.01
    fns, meta = [], []
    for backend in ("sm80", "sm90"):
        for label, m in MODS.items():
            kw = {"softcap": m.get("softcap", 0.0), "alibi_slopes": slopes if m.get("alibi") else None}
            shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16", **m}
            fam = dispatch.FLASH_BACKENDS[backend]
            pick = dispatch.choose([fam], shape, 0)
            pred = predict(fam, gpu, shape, pick.config)
            fns.append(lambda q, k, v, kw=kw, c=pick.config, b=backend: kernels.flash_attention(
                q, k, v, causal=causal, config=c, backend=b, **kw))
            meta.append({"shape": [B, H, N, d], "causal": causal, "backend": backend, "mods": label,
                         "config": str(pick.config), "pred_ms": pred.time_s * 1e3, "pred_bottleneck": pred.bottleneck})
    fns.append(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
    meta.append({"shape": [B, H, N, d], "causal": causal, "backend": "sdpa (cuDNN or flash)", "mods": "plain"})
    res = timer.time_interleaved(fns, sets, rounds=3)
    for m, r in zip(meta, res):
        m["ms"] = None if isinstance(r, Exception) else r.median_s * 1e3
        m["error"] = str(r)[:200] if isinstance(r, Exception) else None
        rows.append(m)
    del sets; torch.cuda.empty_cache()
out = {"device": gpu, "torch": torch.__version__, "date": "2026-11-24", "rows": rows}
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "mods_probe.json"), "w"), indent=1)
for r in rows:
    print(r["shape"], "causal" if r["causal"] else "full", f"{r['backend']:6} {r['mods']:10}",
          r["ms"] and round(r["ms"], 3), "pred", r.get("pred_ms") and round(r["pred_ms"], 3), r["error"] or "")
