"""Probe: the sliding window's walks.  Nsight Compute (ncu_window.sh) found the d = 128 (8192, 0) window's SMs idle
14% of the launch on the static walk (FlashAttention-4's 2.5%): in sections of two heads the short tiles (a head's
first rows, whose band is cut by key 0) land unevenly on the rounds.  Here each window shape's launch as shipped
(the static walk), the lpt walk (the host's table: each tile, longest first within the sections, to the CTA that
frees first), the claims in the same sections, and FlashAttention-4; each build's output bit for bit the shipped
one's, which is checked against float32 first.  One interleaved group a shape, 7 rounds, 3 input sets.
Run from the repository root with FlashAttention-4 staged (docs/validation.md):
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file> [narrow|wide] RUN
 -> $OUT/walk-<narrow|wide>-run<RUN>.json"""
import sys
import time

import torch

from kernels import compile as kcompile, flash_sm90
from kernels.sm90_schedule import DYNAMIC_MAX_HEAD_DIM, WIDE_DYNAMIC, WINDOW_SECTION_KV_HEADS
from kernels.window import Window
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

WHICH = sys.argv[1] if len(sys.argv) > 1 else "narrow"
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
HERE = "validation/results/profile-sm90-window-slope-h200-2026-11-29/probe_walk.py"
SHAPES = {  # (d, H, B, N, left)
    "narrow": [(128, 16, 1, 32768, 4096), (128, 16, 1, 32768, 8192), (128, 16, 1, 16384, 2048),
               (128, 16, 2, 8192, 1024), (128, 16, 2, 16384, 2048), (96, 21, 1, 32768, 4096),
               (64, 32, 1, 32768, 4096), (64, 32, 1, 16384, 8192)],
    "wide": [(192, 10, 1, 32768, 4096), (192, 10, 1, 16384, 2048), (256, 8, 1, 32768, 4096),
             (256, 8, 2, 16384, 2048)],
}[WHICH]


def builds(d):
    """{label: (defines, persistent, sections)} beside the shipped launch (None: the launcher's)."""
    two = WINDOW_SECTION_KV_HEADS
    if d <= DYNAMIC_MAX_HEAD_DIM:
        return {"shipped": (None, None, None), "lpt": (None, "lpt", None), "claims 2 heads": ((), None, two)}
    return {"shipped": (None, None, None), "lpt": (None, "lpt", None), "lpt 2 heads": (None, "lpt", two),
            "claims": ((WIDE_DYNAMIC,), None, None), "claims 2 heads": ((WIDE_DYNAMIC,), None, two)}


def launch(cfg, win, defines, persistent, sections):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg, window=win, _defines=defines,
                                                _persistent=persistent, _sections=sections)


# the slope probe's model shape of (d, H, B, N, left)
model_shape = probe_record.load(HERE.replace("probe_walk.py", "probe_slope.py")).model_shape


def group(d, H, B, N, left, fa4) -> list[dict]:
    win = Window(left, 0)
    cfg, _ = probe_record.sm90_launch(model_shape(d, H, B, N, left), win)
    fns = [(f"{cfg.name} {lab}", launch(cfg, win, *b)) for lab, b in builds(d).items()]
    sets = probe_record.random_sets(B, H, N, d, seed=5003 * RUN + d + N + left)
    err = probe_record.reference_errors(fns[:1], *sets[0], True, f"d{d} N{N} ({left}, 0)", window_size=(left, 0))
    base = fns[0][1](*sets[0])
    same = {lab: torch.equal(f(*sets[0]), base) for lab, f in fns[1:]}
    if not all(same.values()):
        raise SystemExit(f"d{d} N{N} ({left}, 0): not bit for bit the shipped output: {same}")
    if fa4 is not None:
        fns.append(("fa4", lambda q, k, v: fa4(q, k, v, True, window_size=(left, 0))))
        err.update(probe_record.reference_errors(fns[-1:], *sets[0], True, f"fa4 d{d} N{N}", window_size=(left, 0)))
    rows = probe_record.timed_rows(CudaEventTimer(), [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=7,
                                   d=d, H=H, B=B, N=N, left=left)
    for r in rows:
        r["rel_err"] = err.get(r["impl"], err[fns[0][0]])
        print(f"d{d} N{N} B{B} ({left}, 0) {r['impl']:32s} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})",
              flush=True)
    return rows


def main():
    fa4 = peer_runners(torch)["fa4"][0]
    t0 = time.time()
    jobs = set()
    for d, H, B, N, left in SHAPES:
        cfg, shipped = probe_record.sm90_launch(model_shape(d, H, B, N, left), Window(left, 0))
        jobs.add((cfg, shipped))
        jobs |= {(cfg, df) for df, _, _ in builds(d).values() if df is not None}
    kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", True, tuple(df), local=True))(*j)
                         for j in jobs])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    rows = []
    for shape in SHAPES:
        rows += group(*shape, fa4)
    probe_record.write(f"walk-{WHICH}-run{RUN}.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/"
                       f"dsl_packages python3 {HERE} {WHICH} {RUN}", fa4=getattr(fa4, "version", None))
    first = {}
    for r in rows:
        key = (r["d"], r["N"], r["B"], r["left"])
        first.setdefault(key, r)
        print(f"d{key[0]} N{key[1]} B{key[2]} ({key[3]}, 0) {r['impl']:32s} {r['median_ms']:.4f} ms  "
              f"shipped/this {first[key]['median_ms'] / r['median_ms']:.3f}")


if __name__ == "__main__":
    main()
