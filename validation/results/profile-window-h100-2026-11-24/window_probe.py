"""Probe: a sliding window against causal attention on both forward kernels at N = 16k and 32k. Run:
PYTHONPATH=. python3 validation/results/profile-window-h100-2026-11-24/window_probe.py"""
import json, os, statistics, torch, kernels
from validation.timing import CudaEventTimer
torch.manual_seed(0)
timer = CudaEventTimer(max_repeats=50, target_s=0.3)
rows = []
for B, H, N, d in [(1, 16, 32768, 128), (1, 32, 16384, 128), (2, 16, 32768, 64)]:
    sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(2)]
    fns = {"sm80 causal": lambda q, k, v: kernels.flash_attention(q, k, v, causal=True, backend="sm80"),
           "sm80 window (4096, 0)": lambda q, k, v: kernels.flash_attention(q, k, v, window_size=(4096, 0), causal=True, backend="sm80"),
           "sm80 window (1024, 0)": lambda q, k, v: kernels.flash_attention(q, k, v, window_size=(1024, 0), causal=True, backend="sm80"),
           "sm90 causal": lambda q, k, v: kernels.flash_attention(q, k, v, causal=True, backend="sm90"),
           "sm90 window (4096, 0)": lambda q, k, v: kernels.flash_attention(q, k, v, window_size=(4096, 0), causal=True, backend="sm90"),
           "sm90 window (1024, 0)": lambda q, k, v: kernels.flash_attention(q, k, v, window_size=(1024, 0), causal=True, backend="sm90"),
           "auto window (4096, 0)": lambda q, k, v: kernels.flash_attention(q, k, v, window_size=(4096, 0), causal=True),
           "sdpa flash causal": lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)}
    res = timer.time_interleaved(list(fns.values()), sets, rounds=3)
    for name, r in zip(fns, res):
        rows.append({"shape": [B, H, N, d], "impl": name, "ms": None if isinstance(r, Exception) else r.median_s * 1e3,
                     "error": str(r)[:200] if isinstance(r, Exception) else None})
    del sets; torch.cuda.empty_cache()
out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": "2026-11-24", "rows": rows}
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "window_probe.json"), "w"), indent=1)
for r in rows: print(r["shape"], f"{r['impl']:24}", r["ms"] and round(r["ms"], 3), r["error"] or "")
