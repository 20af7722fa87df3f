"""Probe: the shapes whose pick the refit moved (picks.py), every shipped config of the head dim on each: the
(4096, 0) window at N = 32768 (d = 128 and 96, beside d = 128's causal attention for the window's ratio), d = 96
causal at N = 32768 and d = 32 with a softcap of 30 at N = 4096; run 2 and later the windows at d = 128, 96, 64.
Each config checked against the float32 reference
on the first of 3 fresh input sets, then all timed in one interleaved group a shape, each row with the model's
prediction for this GPU.  Run from the repository root:
PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/picks-run<run>.json"""
import sys
import time

import torch

from iomodel import api, chooser, families
from iomodel.families.flash_sm90 import SHIPPED
from kernels import compile as kcompile, flash_sm90
from kernels.score_mods import ScoreMods
from kernels.sm90_schedule import schedule
from kernels.window import Window
from validation import probe_record
from validation.reference import attention_reference
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
FAM = families.get("flash_sm90")
#: (label, d, H, N, B, causal, window left or None, softcap)
SHAPES = [("window", 128, 16, 32768, 1, True, 4096, 0.0), ("window", 96, 21, 32768, 1, True, 4096, 0.0),
          ("causal", 96, 21, 32768, 1, True, None, 0.0), ("softcap", 32, 64, 4096, 4, False, None, 30.0)]
#: run 2 (the window kernels' stale max shipped, the three window builds that no longer spill offered): d = 64 too
if RUN >= 2:
    SHAPES = SHAPES[:2] + [("window", 64, 32, 32768, 1, True, 4096, 0.0)]


def call(cfg, causal, left, cap):
    win = Window(left, 0) if left is not None else None
    mods = ScoreMods(softcap=cap) if cap else None
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=cfg, window=win, mods=mods)


def model_shape(d, H, N, B, causal, left, cap):
    s = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
    s.update({"window_left": left, "window_right": 0} if left is not None else {})
    return {**s, "softcap": cap} if cap else s


def builds():
    """(config, dtype, causal, defines, local, mods bits) of every launch, its defines from the launcher's schedule."""
    props = torch.cuda.get_device_properties(0)
    out = []
    for _, d, H, N, B, causal, left, cap in SHAPES:
        win = Window(left, 0) if left is not None else None
        for c in (c for c in SHIPPED if c.head_dim == d):
            sch = schedule(model_shape(d, H, N, B, causal, None, 0.0), c.block_m, props.multi_processor_count,
                           props.L2_cache_size, 2, window=win, config=c, modified=bool(cap))
            out.append((c, "bf16", causal, sch.defines, win is not None, ScoreMods(softcap=cap).bits))
    return out


def main():
    t0 = time.time()
    kcompile.precompile([(lambda *a: lambda: flash_sm90.module(*a[:4], local=a[4], mods=a[5]))(*b) for b in builds()])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    timer, rows = CudaEventTimer(), []
    for i, (label, d, H, N, B, causal, left, cap) in enumerate(SHAPES):
        shape = model_shape(d, H, N, B, causal, left, cap)
        configs = [c for c in SHIPPED if c.head_dim == d]
        fns, labels = [call(c, causal, left, cap) for c in configs], [FAM.label(c) for c in configs]
        if label == "window" and d == 128:   # the causal attention's pick, for the window's ratio
            fns.append(call(None, True, None, 0.0))
            labels.append("causal (pick)")
        sets = probe_record.random_sets(B, H, N, d, seed=104729 * (i + 1) + 1000 * RUN)
        ref = attention_reference(*sets[0], causal, window_size=(left if left is not None else -1, 0 if causal
                                                                  else -1), softcap=cap)[0]
        err = {lab: ((f(*sets[0]).float() - ref).abs().max() / ref.abs().max()).item()
               for f, lab in zip(fns, labels) if lab != "causal (pick)"}
        del ref
        bad = {k: e for k, e in err.items() if not e < 1e-2}
        if bad:
            raise SystemExit(f"{label} d{d}: off the float32 reference: {bad}")
        got = probe_record.timed_rows(timer, fns, labels, sets, rounds=ROUNDS, shape=label, d=d, N=N, B=B, H=H)
        preds = {FAM.label(c): api.predict("flash_sm90", torch.cuda.get_device_name(), shape, c).time_s * 1e3
                 for c in configs}
        pick = FAM.label(chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config)   # run 1: ranked
        rows += [{**r, "rel_err": err.get(r["impl"]), "predicted_ms": preds.get(r["impl"]), "pick": r["impl"] == pick}
                 for r in got]
        print(f"{label} d{d}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        probe_record.write(f"picks-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-model-"
                           f"refit-h200-2026-11-29/probe_picks.py {ROUNDS} {RUN}")
    for r in rows:
        pred = f"{r['predicted_ms']:8.3f}" if r["predicted_ms"] else "       -"
        print(f"{r['shape']:8} d{r['d']:<3} {r['impl']:16} {r['median_ms']:8.3f} ms  predicted {pred}"
              f"{'  <- pick' if r['pick'] else ''}")


if __name__ == "__main__":
    main()
