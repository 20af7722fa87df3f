"""Per-call times of the Hopper backward (the shipped kernel, and with its tail split off) and SDPA cuDNN's at
d = 128 without a mask, N = 4096 and 8192: CUDA events around every call, blocks of 10 calls of each in turn
(8 rounds, three input sets), after 0.2 s of lead-in calls; the distribution of each (percentiles) to see
where the harness's spread at N = 4096 comes from.  Run from the repository root with PYTHONPATH=.;
writes $OUT/spread.json."""
import json, os, time

import numpy as np
import torch

from kernels import flash_bwd_sm90
from iomodel.families.flash_bwd_sm90 import SHIPPED
from validation import probe_record

OUT = os.environ.get("OUT", "/tmp/out")
CFG = {c.head_dim: c for c in SHIPPED}


_bwd_probe = probe_record.load(probe_record.BWD_SM90_PROBE, "none")   # its inputs of a shape, without a mask


def make(B, H, N, d, seed):
    return _bwd_probe.make(B, H, N, d, False, seed)


rows = []
for (B, H, N, d) in ((4, 16, 4096, 128), (2, 16, 8192, 128)):
    sets = [make(B, H, N, d, s) for s in (1, 2, 3)]
    impls = {
        "ours": lambda q, k, v, o, l, do, *_: flash_bwd_sm90.backward(do, q, k, v, o, l, config=CFG[d]),
        "ours, no tail split": lambda q, k, v, o, l, do, *_: flash_bwd_sm90.backward(do, q, k, v, o, l, config=CFG[d],
                                                                                      _pieces=1),
        "cudnn": lambda q, k, v, o, l, do, qg, kg, vg, oc: torch.autograd.grad(oc, (qg, kg, vg), do, retain_graph=True),
    }
    times = {n: [] for n in impls}
    for rnd in range(8):
        for name, fn in impls.items():
            t0 = time.time()
            while time.time() - t0 < 0.2:
                fn(*sets[0])
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(10)]
            for i, (a, b) in enumerate(ev):
                a.record()
                fn(*sets[i % 3])
                b.record()
            torch.cuda.synchronize()
            times[name] += [a.elapsed_time(b) for a, b in ev]
    for name, t in times.items():
        t = np.array(t)
        row = {"shape": [B, H, N, d], "impl": name, "ms": t.tolist(),
               "percentiles": {p: float(np.percentile(t, p)) for p in (0, 10, 25, 50, 75, 90, 100)}}
        rows.append(row)
        print(N, f"{name:22}", " ".join(f"{row['percentiles'][p]:.3f}" for p in (0, 10, 25, 50, 75, 90, 100)), flush=True)
os.makedirs(OUT, exist_ok=True)
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "script": "spread_probe.py", "rows": rows}, open(f"{OUT}/spread.json", "w"), indent=1)
