"""Probe: causal attention above d = 128 at long sequences, where FlashAttention-4 and ours traded places in the
harness runs of 2026-12-06 (d = 256 N = 16384 B1 H8: FlashAttention-4's time over ours 0.958 to 1.013).  The
launcher's schedule for these (the lpt walk on the model's pick) against the other walks its knobs build on the same
tile (a grid of one CTA a tile, the dynamic schedule's claims, the fixed walk without the lpt table) and against the
other shipped tile on the lpt walk; each checked against and timed beside cuDNN (and FlashAttention-4 where it
imports) in one interleaved group a shape (7 rounds, 3 input sets), then each run back to back for a second, three
times, under nvidia-smi (clocks and power: probe_record.add_sustained).
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN -> $OUT/wide-<gpu>-run<RUN>.json"""
import os
import sys
import time

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from kernels import flash_sm90
from kernels.sm90_schedule import WIDE_DYNAMIC
from validation import probe_record
from validation.plan import make_shape

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "profile-sm90-softmax-h100-2026-12-06"))
from probe_common import finish, launch_defines, model_pick  # noqa: E402

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-d256-causal-h100-2026-12-06/probe_wide_causal.py"
SHAPES = [(256, 8, 16384, 1, True), (256, 8, 8192, 2, True), (192, 10, 16384, 1, True)]   # (d, H, N, B, causal)
OTHER = {256: Sm90Config(128, 64, 2, 256, 2), 192: Sm90Config(128, 96, 2, 192, 2)}
# label suffix: (the launcher's _defines, _persistent); None: the launcher's own
WALKS = {"": (None, None), " grid": (None, False), " dynamic": ((WIDE_DYNAMIC,), True), " fixed": ((), True)}


def variants(d, H, N, B, causal):
    """(label, config, defines, persistent): the pick on each walk and OTHER's tile on the launcher's."""
    s, fam = make_shape(N, d, causal, tokens=B * N, hidden=H * d), families.get("flash_sm90")
    pick = model_pick(s)
    out = [("pick " + fam.label(pick) + tag, pick, df, p) for tag, (df, p) in WALKS.items()]
    return out + [(fam.label(OTHER[d]), OTHER[d], None, None)] if OTHER[d] != pick else out


def builds(d, H, N, B, causal):
    """variants' (label, config, defines) for the precompile (the launcher's defines where it picks them)."""
    s = make_shape(N, d, causal, tokens=B * N, hidden=H * d)
    return [(lab, c, launch_defines(s, c) if df is None else df) for lab, c, df, _ in variants(d, H, N, B, causal)]


def call(config, defines, persistent, causal):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=config, _defines=defines,
                                                _persistent=persistent)


def main():
    t0, runners, timer, sampled = probe_record.sm90_peer_setup(SHAPES, builds)
    rows = []
    for shape, vs, sets in probe_record.shape_sets(SHAPES, variants, lambda d, H, N, B, c: 7919 * RUN + N + d):
        d, H, N, B, causal = shape
        fns = [(lab, call(c, df, p, causal)) for lab, c, df, p in vs]
        rows += probe_record.peer_group(timer, runners, fns, sets, 7, sampled, causal=causal, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N} B{B}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    finish(f"wide-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN}")


if __name__ == "__main__":
    main()
