"""Probe: the wgmma forward with Q held in registers through a tile (SM90_Q_REGS_MAX=256: loaded once by ldmatrix, S =
Q K^T reading only K from SMEM) against Q read from SMEM by every S product (the kernel of this day), on the tiles
ptxas builds both ways without a spill (local nvcc 13.0): d = 128's 128x128 s3, d = 32's 192x144 s4 and 192x128 s3,
d = 64's two-warpgroup 128x176 s2 beside its pick (192x128 c3 s2, which spills with Q held and runs here as read).
Each build checked against and timed beside cuDNN in one interleaved group a shape (7 rounds, 3 input sets), the
held builds first in even runs.  The 2026-12-06 d = 32 record (../profile-sm90-sw64-h100-2026-12-06/) found SMEM
traffic sets the clocks a kernel holds; Q's reads are a fifth or so of a chunk's.
SET d32: d = 32 alone, without a mask and causal, N = 1024 B16 too (run 3 ran these shapes by replacing SHAPES from
`python3 -c`, so its JSON's command names no SET).
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN [d32]
 -> $OUT/qregs-<gpu>-run<RUN>.json"""
import os
import sys

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from validation.plan import make_shape

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "profile-sm90-softmax-h100-2026-12-06"))
from probe_common import finish, launch_defines, peer_groups  # noqa: E402

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-qregs-h100-2026-12-06/probe_qregs.py"
SHAPES = [(128, 16, 4096, 4, False), (128, 16, 4096, 4, True), (32, 64, 4096, 4, False), (32, 64, 16384, 1, False),
          (64, 32, 4096, 4, False), (64, 32, 16384, 1, False)]   # (d, H, N, B, causal)
TILES = {128: [Sm90Config(128, 128, 3, 128, 2)], 32: [Sm90Config(192, 144, 4, 32, 3), Sm90Config(192, 128, 3, 32, 3)],
         64: [Sm90Config(128, 176, 2, 64, 2)]}
if len(sys.argv) > 2 and sys.argv[2] == "d32":
    SHAPES = [(32, 64, 4096, 4, False), (32, 64, 16384, 1, False), (32, 64, 4096, 4, True), (32, 64, 16384, 1, True),
              (32, 64, 1024, 16, False)]
READ_ONLY = {64: Sm90Config(192, 128, 2, 64, 3)}   # the pick at d = 64: spills with Q held
HELD = ("SM90_Q_REGS_MAX=256",)
BUILDS = {"": (), " qregs": HELD}
if RUN % 2 == 0:
    BUILDS = dict(reversed(BUILDS.items()))


def variants(d, H, N, B, causal):
    """(label, config, defines): TILES' both ways, READ_ONLY's as read."""
    s, fam = make_shape(N, d, causal, tokens=B * N, hidden=H * d), families.get("flash_sm90")
    out = [(fam.label(c) + tag, c, launch_defines(s, c) + df) for c in TILES[d] for tag, df in BUILDS.items()]
    return out + [(fam.label(c), c, launch_defines(s, c)) for c in ([READ_ONLY[d]] if d in READ_ONLY else [])]


def main():
    rows, _ = peer_groups(SHAPES, variants, lambda d, H, N, B, causal: 7919 * RUN + N + d + causal)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    finish(f"qregs-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {' '.join(sys.argv[1:])}")


if __name__ == "__main__":
    main()
