"""Clock and power of the mma.sync forward against SDPA's FlashAttention-2 kernel at N = 16384, where the
harness's medians of ours sit 6 to 10% above its minima and FlashAttention-2's 2 to 4% (power_probe.py's
method: phases of back-to-back calls of one kernel after a pause, then both alternating call by call,
nvidia-smi beside them). Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-power-h100-2026-11-24/fwd_power_probe.py"""
import os, sys, time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
from power_probe import Smi, phases, sweep  # noqa: E402
from kernels import dispatch, flash_sm80  # noqa: E402
from validation import probe_record  # noqa: E402


def shape_rows(shape, smi):
    B, H, N, d, causal = shape
    q, k, v = (torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cfg = dispatch.choose(["flash_sm80"], {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal,
                                           "dtype": "bf16"}, 0).config
    ours = lambda: flash_sm80.attention(q, k, v, causal=causal, config=cfg)

    def fa2():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    err = float((ours().float() - fa2().float()).abs().max())
    torch.cuda.synchronize()
    rows = phases(smi, (("ours", ours), ("fa2", fa2)))
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in rows:
        r.update(shape=list(shape), config=str(cfg), max_abs_diff_vs_fa2=err,
                 tflops_second_half=flops / r["second_half_ms_median"] / 1e9)
    return rows


def main():
    smi = Smi()
    time.sleep(1.0)
    rows = sweep(((1, 16, 16384, 128, False), (1, 16, 16384, 128, True), (1, 32, 16384, 64, False)), shape_rows, smi)
    probe_record.write("fwd-power-clocks.json", rows,
                       "PYTHONPATH=. python3 validation/results/profile-power-h100-2026-11-24/fwd_power_probe.py",
                       smi_samples=smi.samples)


if __name__ == "__main__":
    main()
