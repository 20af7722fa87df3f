"""Clock and power of the wgmma forward against FlashAttention-4's Hopper path on the H200, at the long shapes where
the harness had FlashAttention-4 ahead (sweep run 2 and shapes run 5 of 2026-11-28: 0.943x at d = 128 N = 16384,
0.960x at d = 64 N = 16384, 0.943x at d = 64 N = 32768) while on the H100 of 2026-11-23 (shared ANCHORS.md) ours led
it at d = 128 N = 16384.  power_probe.py's method (profile-power-h100-2026-11-24): after a pause, 5 s of back-to-back
calls of one kernel (twice each, in turn), then 10 s of both alternating call by call, every call timed with CUDA
events, nvidia-smi sampling the SM clock, power and throttle reasons every 50 ms beside it.  The outputs are
checked against each other first.  Needs flash-attn-4 importable (docs/validation.md, "FlashAttention-4").
Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-sm90-fa4-power-h200-2026-11-28/fa4_power_probe.py"""
import os, subprocess, sys, time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "profile-power-h100-2026-11-24"))
from power_probe import Smi, forward_pair_rows, sweep  # noqa: E402
from kernels import flash_sm90  # noqa: E402
from validation import probe_record  # noqa: E402
from validation.peers import FA4, peer_runners  # noqa: E402

fa4, why = peer_runners(torch)[FA4]
if fa4 is None:
    raise SystemExit(f"FlashAttention-4: {why}")


def shape_rows(shape, smi):
    return forward_pair_rows(shape, smi, "flash_sm90", flash_sm90.attention, "fa4", fa4)


def main():
    limits = subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,power.max_limit,clocks.max.sm",
                             "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    print(limits, flush=True)
    smi = Smi()
    time.sleep(1.0)
    rows = sweep(((1, 16, 16384, 128, False), (1, 32, 16384, 64, False), (1, 32, 32768, 64, True)), shape_rows, smi)
    probe_record.write("fa4-power-clocks.json", rows,
                       "PYTHONPATH=. python3 validation/results/profile-sm90-fa4-power-h200-2026-11-28/fa4_power_probe.py",
                       gpu_limits=limits, fa4=fa4.version, smi_samples=smi.samples)


if __name__ == "__main__":
    main()
