"""Probe: what the wgmma forward's O stores cost a tile, as a bound on an epilogue whose stores would drain while
the next tile runs (FlashAttention-4's O through shared memory and a TMA store).  Each shape's launcher pick and
schedule built as shipped and, in the same process, from the header with `tried-no-o-store.patch` applied (every
computation of the epilogue kept, its 16-byte O stores skipped: timing only, its output is not O), timed in one
interleaved group a shape; the header is restored before the timing.
Run from the repository root: PYTHONPATH=. python3 <this file> [run] -> $OUT/bound-run<run>.json"""
import os
import subprocess
import sys

import torch

from iomodel import families
from kernels import compile as kcompile, flash_sm90
from kernels.window import Window
from validation import probe_record
from validation.timing import CudaEventTimer

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [  # (d, H, B, N, causal, window left or None)
    (128, 16, 1, 32768, True, 4096), (128, 16, 16, 1024, True, None), (64, 32, 16, 1024, False, None),
    (64, 32, 16, 1024, True, None), (128, 16, 4, 4096, False, None)]
MARK = "IOM_BOUND_NO_O_STORE"   # a define no source reads: the patched builds' own cache keys


def launches(d, H, B, N, causal, left):
    s = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
    win = Window(left, 0) if left is not None else None
    if win is not None:
        s.update(window_left=left, window_right=0)
    cfg, base = probe_record.sm90_launch(s, win)
    call = lambda df: lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=cfg, window=win,  # noqa
                                                           _defines=df)
    build = lambda df: lambda: flash_sm90.module(cfg, "bf16", causal, df, local=win is not None)  # noqa: E731
    return cfg, call(tuple(base)), call((*base, MARK)), build(tuple(base)), build((*base, MARK))


def main():
    made = [launches(*shape) for shape in SHAPES]
    kcompile.precompile([m[3] for m in made])
    groups = []
    for shape, (cfg, shipped, bound, _, _) in zip(SHAPES, made):
        d, H, B, N = shape[:4]
        sets = probe_record.random_sets(B, H, N, d, seed=2953 * RUN + d + N)
        shipped(*sets[0])
        groups.append((shape, cfg, shipped, bound, sets))
    torch.cuda.synchronize()
    patch = os.path.join(HERE, "tried-no-o-store.patch")
    subprocess.run(["patch", "-p1", "-s", "-i", patch], check=True)
    try:
        kcompile.precompile([m[4] for m in made])
        for _, _, _, bound, sets in groups:
            bound(*sets[0])
        torch.cuda.synchronize()
    finally:
        subprocess.run(["patch", "-p1", "-s", "-R", "-i", patch], check=True)
    rows, label = [], families.get("flash_sm90").label
    for (d, H, B, N, causal, left), cfg, shipped, bound, sets in groups:
        got = probe_record.timed_rows(CudaEventTimer(), [shipped, bound], [f"{label(cfg)} shipped", "no O store"],
                                      sets, rounds=9, d=d, H=H, B=B, N=N, causal=causal, left=left)
        tiles = B * H * -(-N // cfg.block_m)
        for r in got:
            r["tiles"] = tiles
        saved = (got[0]["median_ms"] - got[1]["median_ms"]) * 1e3
        per_tile = saved * torch.cuda.get_device_properties(0).multi_processor_count / tiles
        print(f"d{d} N{N} B{B} {'causal' if causal else 'plain'} window {left}: {got[0]['median_ms']:.4f} -> "
              f"{got[1]['median_ms']:.4f} ms ({saved / got[0]['median_ms'] / 10:.1f}%, {per_tile:.2f} us a tile an SM)",
              flush=True)
        rows += got
    probe_record.write(f"bound-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-epilogue-"
                       f"bound-h200-2026-11-29/probe_bound.py {RUN}")


if __name__ == "__main__":
    main()
