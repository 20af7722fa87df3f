"""Probe: the rule that sends a sliding window to the static walk (kernels.flash_sm90.schedule_defines: the band
cut by the sequence's start for at most WINDOW_STATIC_CUT_SHARE of the rows) over windows cut for 6% to 50% of
their rows, d 64 and 128, the model's pick per shape: the dynamic schedule and the static walk forced, beside
the rule's choice, interleaved (CUDA events, shares queued behind a GPU sleep, 7 rounds, 3 input sets); every
variant checked against the float32 reference first. Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-window-h100-2026-11-25/window_rule_probe.py"""

import torch

from kernels import dispatch, flash_sm90
from kernels.window import Window
from validation import probe_record
from validation.reference import attention_reference
from validation.timing import CudaEventTimer

# (B, H, N, d, left): the share of rows whose band key 0 cuts is left / N
SHAPES = [(1, 16, 32768, 128, 2048), (2, 16, 8192, 128, 1024), (2, 16, 8192, 128, 2048), (2, 16, 8192, 128, 4096),
          (2, 32, 8192, 64, 1024), (2, 32, 8192, 64, 4096), (4, 16, 4096, 128, 512)]


def main():
    rows = []
    timer = CudaEventTimer(max_repeats=100, target_s=0.1)
    for B, H, N, d, left in SHAPES:
        win = Window(left, 0)
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16",
                 "window_left": left, "window_right": 0}
        cfg = dispatch.choose(["flash_sm90"], shape, 0).config
        rule = flash_sm90.schedule_defines(shape, win)
        sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(3)]
        variants = {"rule": None, "dynamic": (), "static": (flash_sm90.STATIC_SCHEDULE,)}
        fns = [lambda q, k, v, df=df: flash_sm90.attention(q, k, v, causal=True, config=cfg, window=win, _defines=df)
               for df in variants.values()]
        q, k, v = sets[0]
        ref = attention_reference(q, k, v, True, d ** -0.5, window_size=(left, 0))[0]
        errs = [float((f(*sets[0]).float() - ref).abs().max()) for f in fns]
        torch.cuda.synchronize()
        res = timer.time_interleaved(fns, sets, rounds=7, queue_ahead=True)
        for name, r, e in zip(variants, res, errs):
            rows.append({"shape": f"B{B} H{H} N{N} d{d} window ({left}, 0)", "cut_share": left / N, "config": cfg.name,
                         "impl": name + (f" ({'static' if rule else 'dynamic'})" if name == "rule" else ""),
                         "median_ms": r.median_s * 1e3, "min_ms": r.min_s * 1e3, "max_abs_err": e})
    probe_record.write("window-rule.json", rows,
                       "PYTHONPATH=. python3 validation/results/profile-window-h100-2026-11-25/window_rule_probe.py")
    for r in rows:
        print(f"{r['shape']:36} cut {r['cut_share']:.3f} {r['config']:18} {r['impl']:18} {r['median_ms']:.4f} ms  "
              f"err {r['max_abs_err']:.1e}")


if __name__ == "__main__":
    main()
