"""Probe: the online softmax's A/B switches (kernels/csrc/flash_fwd_sm90.cuh) where the MUFU queue bounds the wgmma
forward, d = 32 and 64 (FlashAttention-4 led d = 32 by about 4%: ../acceptance-h100-2026-12-06/README.md).
SM90_EX2_EMU = P hands every P-th group of four scores of an unmasked chunk to ex2_fma (a cubic on the FMA pipe);
SM90_MAX_CHAINS = 4 splits each row's max into four chains.  Each shape: the model's pick (and at d = 32
FlashAttention-4's 192x128 tile) under every build, FlashAttention-4 and cuDNN in one interleaved group (7 rounds,
3 input sets), each checked against cuDNN first.
Run from the repository root with FlashAttention-4 staged (docs/validation.md):
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file> RUN
 -> $OUT/softmax-<h100|h200>-run<RUN>.json"""
import sys

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from validation import probe_record
from validation.plan import make_shape

from probe_common import launch_defines, model_pick, peer_groups

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-softmax-h100-2026-12-06/probe_softmax.py"
SHAPES = [(32, 64, 4096, 4, False), (32, 64, 16384, 1, False), (64, 32, 32768, 1, False),
          (64, 32, 16384, 1, True), (64, 32, 4096, 4, False)]   # (d, H, N, B, causal)
BUILDS = {"base": (), "emu9": ("SM90_EX2_EMU=9",), "emu6": ("SM90_EX2_EMU=6",), "emu4": ("SM90_EX2_EMU=4",),
          "ch4": ("SM90_MAX_CHAINS=4",), "emu6 ch4": ("SM90_EX2_EMU=6", "SM90_MAX_CHAINS=4")}
EXTRA = {32: [Sm90Config(192, 128, 3, 32, 3)]}   # FlashAttention-4's tile at d <= 64


def variants(d, H, N, B, causal):
    """(label, config, defines) of every build of the model's pick (and EXTRA's tiles, base and emu6)."""
    s, fam = make_shape(N, d, causal, tokens=B * N), families.get("flash_sm90")
    pick = model_pick(s)
    out = [(f"{fam.label(pick)} {tag}", pick, launch_defines(s, pick) + df) for tag, df in BUILDS.items()]
    return out + [(f"{fam.label(c)} {tag}", c, launch_defines(s, c) + BUILDS[tag]) for c in EXTRA.get(d, [])
                  if c != pick for tag in ("base", "emu6")]


def main():
    rows, runners = peer_groups(SHAPES, variants, lambda d, H, N, B, c: 5003 * RUN + d + N + c)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    probe_record.report(f"softmax-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/"
                        f"dsl_packages python3 {HERE} {RUN}", runners, keys=("d", "N", "B", "causal"))


if __name__ == "__main__":
    main()
