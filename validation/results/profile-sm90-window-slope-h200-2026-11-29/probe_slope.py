"""Probe: is FlashAttention-4's lead on the d = 128 sliding window a tile's cost or a chunk's?  A window's launch at
a fixed N has the same tiles at every width; only their chunks change.  So time against the window's width, fitted
as a line, splits a launch into what its tiles cost whatever the width (the intercept: first chunk, epilogue, gap,
the band's masked edges) and what a key more of band costs (the slope).
`slope`: at N = 32768, B1 (d = 128 H16, d = 64 H32), windows (1024, 0) to (8192, 0) and full causal: the launcher's
pick and schedule, the d = 128 window built as 128x128 s2 (FlashAttention-4's tile) and FlashAttention-4, each shape
one interleaved group, each callable checked against float32 first.
`wide`: windows above d = 128 (d = 192 and 256): the launcher's walk (two-head sections at d <= 128 only: here the
L2 rule's), the claims (WIDE_DYNAMIC) and FlashAttention-4.
Run from the repository root with FlashAttention-4 staged (docs/validation.md):
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file> MODE RUN
 -> $OUT/<mode>-run<RUN>.json"""
import sys
import time

import torch

from iomodel.families.flash_sm90 import Sm90Config
from kernels import compile as kcompile, flash_sm90
from kernels.sm90_schedule import WIDE_DYNAMIC
from kernels.window import Window
from validation import probe_record
from validation.peers import peer_runners
from validation.plan import make_shape
from validation.timing import CudaEventTimer

MODE = sys.argv[1] if len(sys.argv) > 1 else "slope"
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
HERE = "validation/results/profile-sm90-window-slope-h200-2026-11-29/probe_slope.py"
LEFTS = (1024, 2048, 4096, 8192, None)   # None: full causal
FA4_TILE = Sm90Config(128, 128, 2, 128, 2)


def model_shape(d, H, B, N, left) -> dict:
    """The model's causal shape of B*N tokens and H*d width, with a (left, 0) window's fields (None: none)."""
    s = make_shape(N, d, True, tokens=B * N, hidden=H * d)
    return s if left is None else {**s, **Window(left, 0).shape_fields()}


def ours(cfg, win, defines=None):
    kw = {} if defines is None else {"_defines": tuple(defines)}
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg, window=win, **kw)


def variants(d, H, B, N, left, fa4, wide=False) -> list:
    """(label, callable, config, defines) of one shape: the launcher's launch, then the A/B builds, then FA4."""
    win = None if left is None else Window(left, 0)
    cfg, defines = probe_record.sm90_launch(model_shape(d, H, B, N, left), win)
    out = [(f"ours {cfg.name}", ours(cfg, win), cfg, defines)]
    if wide and win is not None:
        out.append((f"ours {cfg.name} claims", ours(cfg, win, (WIDE_DYNAMIC,)), cfg, (WIDE_DYNAMIC,)))
    elif d == 128 and win is not None and cfg != FA4_TILE:
        out.append((f"ours {FA4_TILE.name}", ours(FA4_TILE, win, defines), FA4_TILE, defines))
    if fa4 is not None:
        ws = (-1, -1) if left is None else (left, 0)
        out.append(("fa4", lambda q, k, v: fa4(q, k, v, True, window_size=ws), None, None))
    return out


def precompile(groups) -> None:
    jobs = {(c, df, lo) for shape, vs in groups for _, _, c, df in vs if c is not None for lo in [shape[4] is not None]}
    kcompile.precompile([(lambda c, df, lo: lambda: flash_sm90.module(c, "bf16", True, tuple(df), local=lo))(*j)
                         for j in jobs])


def group(d, H, B, N, left, vs) -> list[dict]:
    fns = [(lab, f) for lab, f, _, _ in vs]
    sets = probe_record.random_sets(B, H, N, d, seed=7001 * RUN + d + N + (left or 0))
    ws = (-1, -1) if left is None else (left, 0)
    err = probe_record.reference_errors(fns, *sets[0], True, f"d{d} N{N} {ws}", window_size=ws)
    rows = probe_record.timed_rows(CudaEventTimer(), [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=7,
                                   d=d, H=H, B=B, N=N, left=left)
    for r in rows:
        r["rel_err"] = err[r["impl"]]
        print(f"d{d} N{N} B{B} left {left}: {r['impl']:28s} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})",
              flush=True)
    return rows


def main():
    fa4 = peer_runners(torch)["fa4"][0]
    wide = MODE == "wide"
    shapes = ([(d, 2048 // d, 1, 32768, left) for d in (128, 64) for left in LEFTS] if not wide else
              [(192, 10, 1, 32768, 4096), (192, 10, 2, 16384, 2048), (256, 8, 1, 32768, 4096),
               (256, 8, 2, 16384, 2048)])
    t0 = time.time()
    groups = [(s, variants(*s, fa4, wide)) for s in shapes]
    precompile(groups)
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    rows = []
    for s, vs in groups:
        rows += group(*s, vs)
    probe_record.write(f"{MODE}-run{RUN}.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/"
                       f"dsl_packages python3 {HERE} {MODE} {RUN}", fa4=getattr(fa4, "version", None))
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "left"), lambda r: r["impl"] == "fa4")
                    if fa4 is not None else []))
    if not wide:
        print("\n".join(probe_record.load(f"{HERE.rsplit('/', 1)[0]}/fit_slope.py").fit_lines(rows)))


if __name__ == "__main__":
    main()
