"""Probe: the plain wgmma forward (no mask) as clusters of two CTAs with K and V multicast (SM90_CLUSTER, the A/B
knob kernels/sm90_schedule.py CLUSTER) against the build without, at the sweep's no-mask shapes (B N = 16384,
H d = 2048), with cuDNN and FlashAttention-4 (where it imports) in the same groups.  The aim: half the L2's reads of
K and V (a chunk read once a pair of tiles), so less power at the cap and a higher clock.
1. each checked against cuDNN on the first of 3 fresh input sets, then all timed in one interleaved group;
2. at N = 16384 each run back to back for 1 s, three times in turn, while nvidia-smi samples the SM clock and power
   (../profile-sm90-power-h200-2026-11-28/probe_power.py's `sampled`).
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/cluster-run<run>.json"""
import sys
import time

import torch

from iomodel import chooser, families
from iomodel.families.flash_sm90 import Sm90Config
from kernels import flash_sm90
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SHAPES = [(128, 16, 16384, 1), (64, 32, 16384, 1), (128, 16, 4096, 4), (64, 32, 4096, 4)]   # (d, H, N, B)
EXTRA = {(128, 16, 16384, 1): [Sm90Config(128, 128, 2, 128, 2)]}   # full-run1/2's fastest there besides the pick
BUILDS = {"": (), " cluster": (flash_sm90.CLUSTER,)}


def configs(d: int, H: int, N: int, B: int) -> list:
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
    return [chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config] + EXTRA.get((d, H, N, B), [])


def variants(d: int, H: int, N: int, B: int) -> list:
    label = families.get("flash_sm90").label
    return [(label(c) + tag, probe_record.sm90_call(c, df))
            for c in configs(d, H, N, B) for tag, df in BUILDS.items()]


def main():
    t0 = time.time()
    probe_record.sm90_precompile([(c, False, df) for s in SHAPES for c in configs(*s) for df in BUILDS.values()])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    runners, timer, rows = peer_runners(torch), CudaEventTimer(), []
    sampled = probe_record.load(probe_record.POWER_PROBE).sampled
    for d, H, N, B in SHAPES:
        sets = probe_record.random_sets(B, H, N, d, seed=53 * N + d + 1000 * RUN)
        rows += probe_record.peer_group(timer, runners, variants(d, H, N, B), sets, ROUNDS,
                                        sampled if N >= 16384 else None, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.report(f"cluster-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lpt-"
                        f"small-h200-2026-11-29/probe_cluster.py {ROUNDS} {RUN}", runners)


if __name__ == "__main__":
    main()
