"""Probe: the (4096, 0) sliding window at B1 H16 N = 32768 d = 128 bf16 on the wgmma kernel under its schedules
(the dynamic schedule on a persistent grid, the default when the first run was made; one CTA a tile; the static
walk, -DSM90_STATIC_SCHEDULE), each forced, over three configs, beside the causal attention's pick, interleaved
(CUDA events, shares queued behind a GPU sleep, 7 rounds, 3 input sets); every variant checked against the first
first. Run from the repository root (the argument: the record's file name, default window-schedules.json):
PYTHONPATH=. python3 validation/results/profile-window-h100-2026-11-25/window_schedule_probe.py [NAME.json]"""
import sys

import torch

from iomodel.families.flash_sm90 import Sm90Config
from kernels import compile, flash_sm90
from kernels.window import Window
from validation import probe_record
from validation.timing import CudaEventTimer

B, H, N, d = 1, 16, 32768, 128
CONFIGS = [Sm90Config(128, 176, 2, 128, 2), Sm90Config(128, 128, 3, 128, 2), Sm90Config(128, 128, 2, 128, 2)]
# the schedules forced (a window of equal tiles takes the static walk by default since this probe's first run)
SCHEDULES = {"dynamic, persistent": dict(_defines=()), "dynamic, a CTA a tile": dict(_defines=(), _persistent=False),
             "static, persistent": dict(_defines=("SM90_STATIC_SCHEDULE",))}
WIN = Window(4096, 0)


def main(record="window-schedules.json"):
    compile.precompile([lambda c=c, s=s: flash_sm90.module(c, "bf16", True, s.get("_defines", ()), local=True)
                        for c in CONFIGS for s in SCHEDULES.values()])
    sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(3)]
    fns, labels = [], []
    for c in CONFIGS:
        for name, kw in SCHEDULES.items():
            fns.append(lambda q, k, v, c=c, kw=kw: flash_sm90.attention(q, k, v, causal=True, config=c, window=WIN, **kw))
            labels.append(f"window {c.name} {name}")
    fns.append(lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=CONFIGS[0]))
    labels.append(f"causal {CONFIGS[0].name}")
    base = fns[0](*sets[0]).float()
    errs = [float((f(*sets[0]).float() - base).abs().max()) if lab.startswith("window") else 0.0
            for f, lab in zip(fns, labels)]
    torch.cuda.synchronize()
    res = CudaEventTimer(max_repeats=100, target_s=0.1).time_interleaved(fns, sets, rounds=7, queue_ahead=True)
    rows = [{"impl": lab, "median_ms": r.median_s * 1e3, "min_ms": r.min_s * 1e3, "max_abs_diff_vs_default": e}
            for lab, r, e in zip(labels, res, errs)]
    probe_record.write(record, rows,
                       "PYTHONPATH=. python3 validation/results/profile-window-h100-2026-11-25/window_schedule_probe.py")
    causal = rows[-1]["median_ms"]
    for r in rows:
        print(f"{r['impl']:52} {r['median_ms']:.4f} ms  causal/this {causal / r['median_ms']:.3f}  diff {r['max_abs_diff_vs_default']:.1e}")


if __name__ == "__main__":
    main(*sys.argv[1:])
