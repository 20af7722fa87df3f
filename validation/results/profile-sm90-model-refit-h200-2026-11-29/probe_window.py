"""Probe: the (4096, 0) window at N = 32768 (d = 64, 96, 128), where FlashAttention-4 ran ahead of ours in
../h200-sxm-2026-11-29-shapes-run5.json: the launcher's pick built as shipped and with the stale max in the window
kernel too (SM90_STALE_LOCAL=1), beside FlashAttention-4 (where it imports).  Each checked against the float32
reference on the first of 3 fresh input sets, then all timed in one interleaved group a shape.  Run 2 on: the
stale max shipped there, the window kernels with alpha first (SM90_ALPHA_LOCAL=1, d = 128) and with V one chunk
behind K (SM90_VLAG_LOCAL=1).
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/window-run<run>.json"""
import sys
import time

import torch

from iomodel import chooser, families
from kernels import compile as kcompile, flash_sm90
from kernels.sm90_schedule import schedule
from kernels.window import Window
from validation import probe_record
from validation.peers import peer_runners
from validation.reference import attention_reference
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SHAPES = [(128, 16), (96, 21), (64, 32)]   # (d, H) at N = 32768, B = 1
N, LEFT = 32768, 4096
BUILDS = {"shipped": (), "stale local": ("SM90_STALE_LOCAL=1",)}
if RUN >= 2:   # the stale max shipped: the window kernels with alpha first (d = 128) and V one chunk behind K
    BUILDS = {"shipped": (), "alpha": ("SM90_ALPHA_LOCAL=1",), "vlag": ("SM90_VLAG_LOCAL=1",),
              "alpha vlag": ("SM90_ALPHA_LOCAL=1", "SM90_VLAG_LOCAL=1")}


def variants(d, H):
    s = {"B": 1, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16", "window_left": LEFT,
         "window_right": 0}
    cfg = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), s).config
    props = torch.cuda.get_device_properties(0)
    base = schedule({**s, "causal": True}, cfg.block_m, props.multi_processor_count, props.L2_cache_size, 2,
                    window=Window(LEFT, 0), config=cfg).defines
    return cfg, [(name, tuple(base) + extra) for name, extra in BUILDS.items()]


def main():
    t0 = time.time()
    plans = {d: variants(d, H) for d, H in SHAPES}
    kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", True, df, local=True))(cfg, df)
                         for cfg, builds in plans.values() for _, df in builds])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    fa4, timer, rows, label = peer_runners(torch)["fa4"][0], CudaEventTimer(), [], families.get("flash_sm90").label
    for d, H in SHAPES:
        cfg, builds = plans[d]
        fns = [(f"{label(cfg)} {name}", (lambda df: lambda q, k, v: flash_sm90.attention(
            q, k, v, causal=True, config=cfg, window=Window(LEFT, 0), _defines=df))(df)) for name, df in builds]
        if fa4 is not None:
            fns.append(("fa4", lambda q, k, v: fa4(q, k, v, True, window_size=(LEFT, 0))))
        sets = probe_record.random_sets(1, H, N, d, seed=15485863 + 1000 * RUN + d)
        ref = attention_reference(*sets[0], True, window_size=(LEFT, 0))[0]
        err = {lab: ((f(*sets[0]).float() - ref).abs().max() / ref.abs().max()).item() for lab, f in fns}
        del ref
        if not all(e < 1e-2 for e in err.values()):
            raise SystemExit(f"d{d}: off the float32 reference: {err}")
        got = probe_record.timed_rows(timer, [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=ROUNDS, d=d,
                                      N=N, H=H, window=LEFT)
        rows += [{**r, "rel_err": err[r["impl"]]} for r in got]
        print(f"d{d}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write(f"window-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-model-"
                       f"refit-h200-2026-11-29/probe_window.py {ROUNDS} {RUN}", fa4=getattr(fa4, "version", None))
    for r in rows:
        print(f"d{r['d']:<3} {r['impl']:28} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})  "
              f"rel err {r['rel_err']:.1e}")


if __name__ == "__main__":
    main()
