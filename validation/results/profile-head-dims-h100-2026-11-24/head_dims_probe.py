"""Probe: the forward at the head dims 32, 96 and 192 (and 64, 128, 256 beside them) through the model's pick
on each kernel and overall, against SDPA's backends in the same run, with the model's prediction.  Run:
PYTHONPATH=. python3 validation/results/profile-head-dims-h100-2026-11-24/head_dims_probe.py"""
import json, os, torch, kernels
from torch.nn.attention import SDPBackend, sdpa_kernel
from kernels import dispatch
from iomodel.api import predict
from validation.timing import CudaEventTimer

torch.manual_seed(0)
timer = CudaEventTimer(max_repeats=40, target_s=0.25)
gpu = torch.cuda.get_device_name()
SDPA = {"sdpa cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa flash": SDPBackend.FLASH_ATTENTION}


def sdpa(backend, causal):
    def run(q, k, v):
        with sdpa_kernel([backend]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


rows = []
for d in (32, 64, 96, 128, 192, 256):
    for B, N, causal in ((4, 4096, True), (4, 4096, False)):
        H = 16
        sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(2)]
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        fns, meta = [], []
        for backend, fam in dispatch.FLASH_BACKENDS.items():
            pick = dispatch.choose([fam], shape, 0)
            fns.append(lambda q, k, v, c=pick.config, b=backend: kernels.flash_attention(q, k, v, causal=causal, config=c, backend=b))
            meta.append({"impl": backend, "config": str(pick.config), "pred_ms": pick.time_s * 1e3})
        for name, be in SDPA.items():
            fns.append(sdpa(be, causal))
            meta.append({"impl": name})
        q, k, v = sets[0]
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        for f, m in zip(fns, meta):   # correctness first
            try:
                m["max_rel_err"] = ((f(q, k, v).float() - ref).abs().max() / ref.abs().max()).item()
            except Exception as e:  # a backend that does not take the head dim
                m["error"] = str(e)[:160]
        del ref
        ok = [(f, m) for f, m in zip(fns, meta) if "error" not in m]
        res = timer.time_interleaved([f for f, _ in ok], sets, rounds=3)
        flops = 4 * B * H * N * N * d / (2 if causal else 1)
        for (f, m), r in zip(ok, res):
            m["ms"] = None if isinstance(r, Exception) else r.median_s * 1e3
            m["tflops"] = None if m["ms"] is None else flops / m["ms"] / 1e9
        for m in meta:
            rows.append({"d": d, "shape": [B, H, N], "causal": causal, **m})
        del sets; torch.cuda.empty_cache()
out = {"device": gpu, "torch": torch.__version__, "date": "2026-11-24", "rows": rows}
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "head_dims_probe.json"), "w"), indent=1)
for r in rows:
    print(f"d={r['d']:3} {'causal' if r['causal'] else 'full  '} {r['impl']:11} {r.get('ms') and round(r['ms'], 3)!s:>7} ms "
          f"{r.get('tflops') and round(r['tflops'])!s:>5} TF pred {r.get('pred_ms') and round(r['pred_ms'], 3)} "
          f"err {r.get('max_rel_err') and round(r['max_rel_err'], 4)} {r.get('error', '')[:60]}")
