"""Probe: d = 32 without a mask, where FlashAttention-4 ran 6 to 7% ahead of our best tile (softmax-h100-run1.json):
the wgmma forward's existing A/B switches (kernels/csrc/flash_fwd_sm90.cuh) on the model's pick and on
FlashAttention-4's tile (192x128 c3 s3), and a grid of one CTA a tile (FlashAttention-4's), each checked against and
timed beside cuDNN in one interleaved group (7 rounds, 3 input sets).
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN -> $OUT/switches-<gpu>-run<RUN>.json"""
import sys
import time

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from kernels import flash_sm90
from validation import probe_record
from validation.plan import make_shape

from probe_common import cudnn_groups, finish, launch_defines

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-softmax-h100-2026-12-06/probe_switches.py"
SHAPES = [(32, 64, 4096, 4), (32, 64, 16384, 1)]   # (d, H, N, B), no mask
CONFIGS = [Sm90Config(192, 144, 4, 32, 3), Sm90Config(192, 128, 3, 32, 3)]
BUILDS = {"base": (), "ch4": ("SM90_MAX_CHAINS=4",), "stale0": ("SM90_STALE_LOG2=0",),
          "noturn": ("SM90_TURN_MAX=16",), "kvtog": ("SM90_KV_TOGETHER",), "desc": ("SM90_DESC_EACH_STEP",),
          "ch4 stale0": ("SM90_MAX_CHAINS=4", "SM90_STALE_LOG2=0")}


def variants(d, H, N, B):
    """(label, config, defines, persistent) of every build of CONFIGS, and each base build on a grid of tiles."""
    s, fam, out = make_shape(N, d, False, tokens=B * N), families.get("flash_sm90"), []
    for c in CONFIGS:
        sch = launch_defines(s, c)
        out += [(f"{fam.label(c)} {tag}", c, sch + df, None) for tag, df in BUILDS.items()]
        out.append((f"{fam.label(c)} grid", c, sch, False))
    return out


def calls(d, H, N, B):
    return [(lab, (lambda c, df, p: lambda q, k, v: flash_sm90.attention(q, k, v, config=c, _defines=df,
                                                                           _persistent=p))(c, df, p))
            for lab, c, df, p in variants(d, H, N, B)]


def main():
    t0 = time.time()
    probe_record.sm90_precompile([(c, False, df) for s in SHAPES for _, c, df, _ in variants(*s)])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    rows = cudnn_groups(SHAPES, calls, lambda N: 6007 * RUN + N)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    finish(f"switches-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN}")


if __name__ == "__main__":
    main()
