"""Probe: the model's tiles against the others it ships or could, built as the launcher builds them and timed beside
cuDNN in one interleaved group a shape (7 rounds, 3 input sets), each checked against cuDNN first.  SET d32 (the
default): d = 32 without a mask, every three-warpgroup tile of 64 to 144 keys and 2 to 4 stages (the launcher ships
192x128 s3 and 192x144 s4); FlashAttention-4 (192x128) ran 1.387x / 1.450x cuDNN at N = 4096 / 16384 in the leads run
of 2026-12-06 (../h100-sxm-2026-12-06-leads-run1.json).  SET d128: d = 128 causal at N = 8192 to 32768 and without a
mask at N = 16384, the model's four best tiles there (it ranks 128x176 s2 first; the H100 ran 128x128 s3 and 128x160
2% faster at N = 16384 causal, ../acceptance-h100-2026-12-06/configs-h100-run*.json).
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN [SET]
 -> $OUT/tiles-<SET>-<gpu>-run<RUN>.json (run 1 of d32 ran as probe_tiles_d32.py, this file before SET)"""
import sys
import time

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from validation import probe_record
from validation.plan import make_shape

from probe_common import cudnn_groups, finish, launch_defines

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-softmax-h100-2026-12-06/probe_tiles.py"
SET = sys.argv[2] if len(sys.argv) > 2 else "d32"
SHAPES = {"d32": [(32, 64, 4096, 4), (32, 64, 16384, 1)],   # (d, H, N, B[, causal])
          "d128": [(128, 16, 8192, 2, True), (128, 16, 16384, 1, True), (128, 16, 32768, 1, True),
                   (128, 16, 16384, 1)]}[SET]
TILES = {"d32": [Sm90Config(192, bn, st, 32, 3) for bn in (64, 80, 96, 112, 128, 144) for st in (2, 3, 4)],
         "d128": [Sm90Config(128, 176, 2, 128, 2), Sm90Config(128, 160, 2, 128, 2), Sm90Config(128, 128, 3, 128, 2),
                  Sm90Config(128, 128, 2, 128, 2)]}[SET]


def variants(d, H, N, B, causal=False):
    s, fam = make_shape(N, d, causal, tokens=B * N), families.get("flash_sm90")
    return [(fam.label(c), c, launch_defines(s, c)) for c in TILES]


def main():
    t0 = time.time()
    probe_record.sm90_precompile([(c, len(s) > 4, df) for s in SHAPES for _, c, df in variants(*s)])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    rows = cudnn_groups(SHAPES, lambda *s: [(lab, probe_record.sm90_call(c, df, len(s) > 4 and s[4]))
                                            for lab, c, df in variants(*s)], lambda N: 4001 * RUN + N)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    finish(f"tiles-{SET}-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN} {SET}")


if __name__ == "__main__":
    main()
