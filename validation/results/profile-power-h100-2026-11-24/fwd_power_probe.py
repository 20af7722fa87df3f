"""Clock and power of the mma.sync forward against SDPA's FlashAttention-2 kernel at N = 16384, where the
harness's medians of ours sit 6 to 10% above its minima and FlashAttention-2's 2 to 4% (power_probe.py's
method: phases of back-to-back calls of one kernel after a pause, then both alternating call by call,
nvidia-smi beside them). Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-power-h100-2026-11-24/fwd_power_probe.py"""
import os, sys, time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
from power_probe import Smi, forward_pair_rows, sweep  # noqa: E402
from kernels import flash_sm80  # noqa: E402
from validation import probe_record  # noqa: E402


def fa2(q, k, v, causal):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def shape_rows(shape, smi):
    return forward_pair_rows(shape, smi, "flash_sm80", flash_sm80.attention, "fa2", fa2)


def main():
    smi = Smi()
    time.sleep(1.0)
    rows = sweep(((1, 16, 16384, 128, False), (1, 16, 16384, 128, True), (1, 32, 16384, 64, False)), shape_rows, smi)
    probe_record.write("fwd-power-clocks.json", rows,
                       "PYTHONPATH=. python3 validation/results/profile-power-h100-2026-11-24/fwd_power_probe.py",
                       smi_samples=smi.samples)


if __name__ == "__main__":
    main()
