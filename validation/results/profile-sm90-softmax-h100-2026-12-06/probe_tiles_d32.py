"""Probe: d = 32 without a mask, every three-warpgroup tile of 64 to 144 keys and 2 to 4 stages (the launcher ships
192x128 s3 and 192x144 s4), built as the launcher builds the pick (plain) and timed beside cuDNN in one interleaved
group a shape (7 rounds, 3 input sets), each checked against cuDNN first.  FlashAttention-4 (192x128) ran 1.387x /
1.450x cuDNN at N = 4096 / 16384 in the leads run of 2026-12-06 (../h100-sxm-2026-12-06-leads-run1.json).
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN -> $OUT/tiles-d32-<gpu>-run<RUN>.json"""
import sys
import time

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from validation import probe_record
from validation.plan import make_shape

from probe_common import cudnn_groups, finish, launch_defines

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-softmax-h100-2026-12-06/probe_tiles_d32.py"
SHAPES = [(32, 64, 4096, 4), (32, 64, 16384, 1)]   # (d, H, N, B), no mask
TILES = [Sm90Config(192, bn, st, 32, 3) for bn in (64, 80, 96, 112, 128, 144) for st in (2, 3, 4)]


def variants(d, H, N, B):
    s, fam = make_shape(N, d, False, tokens=B * N), families.get("flash_sm90")
    return [(fam.label(c), c, launch_defines(s, c)) for c in TILES]


def main():
    t0 = time.time()
    probe_record.sm90_precompile([(c, False, df) for s in SHAPES for _, c, df in variants(*s)])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    rows = cudnn_groups(SHAPES, lambda *s: [(lab, probe_record.sm90_call(c, df)) for lab, c, df in variants(*s)],
                        lambda N: 4001 * RUN + N)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    finish(f"tiles-d32-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN}")


if __name__ == "__main__":
    main()
