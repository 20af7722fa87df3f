"""Probe: Nsight Compute (ncu_d32.sh) found our d = 32 launch without a mask stalled on barriers 1.7 cycles an
instruction (FlashAttention-4 0.28) and taking 8% more cycles; that launch runs as clusters of two CTAs
(kernels/sm90_schedule.py, pairs_tiles: never measured at d = 32).  Here the model's pick of each shape built as
clusters and plain, beside cuDNN, one interleaved group a shape (7 rounds, 3 input sets), each checked against cuDNN.
Run from the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN
 -> $OUT/cluster-<h100|h200>-run<RUN>.json"""
import sys

import torch

from kernels.sm90_schedule import CLUSTER, DEFAULT_DEFINES
from validation import probe_record

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/acceptance-h100-2026-12-06/probe_cluster.py"
SHAPES = [(32, 64, 4096, 4, False), (32, 64, 16384, 1, False), (64, 32, 4096, 4, False),
          (128, 16, 4096, 4, False)]   # (d, H, N, B, causal)
BUILDS = {"cluster": (*DEFAULT_DEFINES, CLUSTER), "plain": tuple(DEFAULT_DEFINES)}


def main():
    rows = probe_record.sm90_build_groups(SHAPES, BUILDS, lambda d, N: 9001 * RUN + d + N, rounds=7)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    probe_record.write(f"cluster-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN}")
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B"), lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
