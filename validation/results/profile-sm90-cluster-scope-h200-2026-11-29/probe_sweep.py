"""Probe: clusters of two CTAs (SM90_CLUSTER, the barriers at the default scope) against the plain kernel at every
no-mask shape the launcher might give them: the sweep's (B N = 16384 tokens, H d = 2048; d = 64 / 128, N = 1024,
4096, 16384), d = 64 at N = 32768 (171 tiles of 192 rows: only a config of 128-row tiles pairs them), d = 96, 192
and 256, with cuDNN and FlashAttention-4 (where it imports) in the same groups.  Beside the launcher's config, one
with another ring depth where the pair might want it (its wait on the slower CTA).
1. each checked against cuDNN on the first of 3 fresh input sets, then all timed in one interleaved group;
2. at N >= 16384 each run back to back for 1 s, three times in turn, under nvidia-smi (clock, power).
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/sweep-run<run>.json"""
import sys
import time

import torch

from iomodel import chooser, families
from iomodel.families.flash_sm90 import Sm90Config
from kernels import flash_sm90
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SHAPES = [(d, 2048 // d, N, 16384 // N) for d in (64, 128) for N in (1024, 4096, 16384)]   # (d, H, N, B)
SHAPES += [(64, 32, 32768, 1), (96, 20, 16384, 1), (192, 10, 4096, 4), (192, 10, 16384, 1), (256, 8, 4096, 4),
           (256, 8, 16384, 1)]
EXTRA = {(64, 32, 4096, 4): [Sm90Config(192, 128, 3, 64, 3)], (64, 32, 16384, 1): [Sm90Config(192, 128, 3, 64, 3)],
         (128, 16, 16384, 1): [Sm90Config(128, 128, 3, 128, 2)], (64, 32, 32768, 1): [Sm90Config(128, 128, 3, 64, 2)],
         (192, 10, 16384, 1): [Sm90Config(128, 112, 2, 192, 2)]}
PLAIN, CLUSTER = "", " cluster"


def configs(d: int, H: int, N: int, B: int) -> list:
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
    picked = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config
    return list(dict.fromkeys([picked] + EXTRA.get((d, H, N, B), [])))


def variants(d: int, H: int, N: int, B: int) -> list:
    """(label, config, defines): each config plain, and as clusters where its heads' tiles pair."""
    label = families.get("flash_sm90").label
    out = []
    for c in configs(d, H, N, B):
        out.append((label(c) + PLAIN, c, ()))
        if -(-N // c.block_m) % 2 == 0:
            out.append((label(c) + CLUSTER, c, (flash_sm90.CLUSTER,)))
    return out


def main():
    t0, runners, timer, sampled = probe_record.sm90_peer_setup(SHAPES, variants)
    rows = []
    for (d, H, N, B), vs, sets in probe_record.shape_sets(SHAPES, variants, lambda d, H, N, B: 61 * N + d + 1000 * RUN):
        fns = [(lab, probe_record.sm90_call(c, df)) for lab, c, df in vs]
        rows += probe_record.peer_group(timer, runners, fns, sets, ROUNDS, sampled if N >= 16384 else None,
                                        d=d, N=N, B=B, H=H)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.report(f"sweep-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-cluster-"
                        f"scope-h200-2026-11-29/probe_sweep.py {ROUNDS} {RUN}", runners)


if __name__ == "__main__":
    main()
