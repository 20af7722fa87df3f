"""Clock and power at d = 128 N = 16384 causal (B1 H16), where FlashAttention-4 leads our wgmma forward by 1 to 3%
on the H200: ../profile-sm90-fa4-power-h200-2026-11-28/'s method (after a pause, 5 s of back-to-back calls of one
kernel, twice each in turn, then 10 s of both alternating call by call; nvidia-smi every 50 ms beside them), for
the model's pick (128x176 s2) and for 128x128 s2 (alpha first since this probe), each against FlashAttention-4.
Needs FlashAttention-4 importable (docs/validation.md).  Run from the repository root:
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file>"""
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "profile-power-h100-2026-11-24"))
from power_probe import Smi, forward_pair_rows, sweep  # noqa: E402
from iomodel import families  # noqa: E402
from kernels import flash_sm90  # noqa: E402
from validation import probe_record  # noqa: E402
from validation.peers import FA4, peer_runners  # noqa: E402

fa4, why = peer_runners(torch)[FA4]
if fa4 is None:
    raise SystemExit(f"FlashAttention-4: {why}")
TILE_128 = families.get("flash_sm90").config_type(block_m=128, block_n=128, stages=2, head_dim=128, consumers=2)


def pick_rows(shape, smi):
    return forward_pair_rows(shape, smi, "flash_sm90", flash_sm90.attention, "fa4", fa4)


def tile_128_rows(shape, smi):
    # forward_pair_rows passes the model's config; this runs 128x128 s2 in its place
    fixed = lambda q, k, v, causal, config: flash_sm90.attention(q, k, v, causal=causal, config=TILE_128)  # noqa: E731
    rows = forward_pair_rows(shape, smi, "flash_sm90", fixed, "fa4", fa4)
    return [{**r, "config": str(TILE_128)} for r in rows]


def main():
    limits = subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,power.max_limit,clocks.max.sm",
                             "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    print(limits, flush=True)
    smi = Smi()
    time.sleep(1.0)
    shape = (1, 16, 16384, 128, True)
    rows = sweep((shape,), pick_rows, smi) + sweep((shape,), tile_128_rows, smi)
    probe_record.write("power-causal.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages "
                       "python3 validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/power_causal.py",
                       gpu_limits=limits, fa4=fa4.version, smi_samples=smi.samples)


if __name__ == "__main__":
    main()
