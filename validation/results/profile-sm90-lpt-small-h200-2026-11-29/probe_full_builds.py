"""Probe: the no-mask wgmma forward at N = 16384 (d = 64 and 128) under its A/B builds and a 3-stage 192x128 tile,
against cuDNN and FlashAttention-4 (where it imports), one interleaved group a shape (checked against cuDNN first).
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds]  -> $OUT/full-builds.json"""
import sys
import time

import torch

from iomodel.families.flash_sm90 import Sm90Config
from kernels import compile as kcompile, flash_sm90, sm90_schedule
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
BUILDS = {"default": (), "claims": (sm90_schedule.DYNAMIC_FULL,), "no split": (sm90_schedule.NO_SPLIT,),
          "unrotated": ("SM90_UNROTATED",)}
SHAPES = {(64, 32, 16384, 1): [Sm90Config(192, 128, 2, 64, 3), Sm90Config(192, 128, 3, 64, 3)],
          (128, 16, 16384, 1): [Sm90Config(128, 176, 2, 128, 2), Sm90Config(128, 128, 2, 128, 2)]}


def main():
    runs = [(cfg, df) for cfgs in SHAPES.values() for cfg in cfgs for df in BUILDS.values()]
    t0 = time.time()
    built = kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", False, df))(c, df)
                                 for c, df in runs])
    print(f"{built} builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    runners, timer, rows = peer_runners(torch), CudaEventTimer(), []
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners["fa4"][0]
    for (d, H, N, B), cfgs in SHAPES.items():
        fns, labels = [], []
        for cfg in cfgs:
            for tag, df in BUILDS.items():
                fns.append(lambda q, k, v, c=cfg, df=df: flash_sm90.attention(q, k, v, config=c, _defines=df))
                labels.append(f"{cfg.block_m}x{cfg.block_n} s{cfg.stages} {tag}")
        if fa4 is not None:
            fns.append(lambda q, k, v: fa4(q, k, v, False))
            labels.append("fa4")
        sets = probe_record.random_sets(B, H, N, d, seed=47 * N + d)
        peer = ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, False))
        rows += probe_record.checked_rows(timer, fns, labels, sets, peer, keep_going=True, rounds=ROUNDS, d=d, N=N,
                                          B=B, H=H, causal=False)
        print(f"d{d}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("full-builds.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lpt-small-"
                       f"h200-2026-11-29/probe_full_builds.py {ROUNDS}", fa4=getattr(fa4, "version", None))
    print("\n".join(probe_record.peer_table(rows, ("d", "N"), lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
