"""Probe: the wgmma forward's d = 32 tiles in 64-byte swizzled rows of 32 values (TMA SWIZZLE_64B boxes, wgmma
descriptors in mode 2, FlashAttention-4's layout there; the kernel of this day) against 128-byte rows half zeros (the
layout before, SM90_ROW128 with the host's boxes and SMEM patched to 128-byte rows while its calls run: `row128`).
At d = 32 with and without the causal mask, on the model's pick and on 192x128 s3, each build checked against and
timed beside cuDNN (and FlashAttention-4 where it imports) in one interleaved group a shape (7 rounds, 3 input sets);
the old layout first in even runs.  SET power: the pick only, without a mask, each build then also run back to back
for a second, three times, under nvidia-smi (the clocks and power: probe_record.add_sustained).  SET turns: the
64-byte rows with the consumer warpgroups' wgmma turns (the kernel's default at d = 32) against without them
(SM90_TURN_MAX=16), the builds without turns first in even runs.
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN [SET]
 -> $OUT/<SET>-<gpu>-run<RUN>.json (SET: sw64, the default, power or turns)"""
import contextlib
import os
import sys
import time

import torch

import iomodel.families.flash_sm90 as model_sm90
import kernels.flash_sm90 as kernel_sm90
from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from validation import probe_record
from validation.plan import make_shape

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "profile-sm90-softmax-h100-2026-12-06"))
from probe_common import finish, launch_defines, model_pick  # noqa: E402

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-sw64-h100-2026-12-06/probe_sw64.py"
SHAPES = [(32, 64, 4096, 4, False), (32, 64, 16384, 1, False), (32, 64, 1024, 16, False),
          (32, 64, 4096, 4, True), (32, 64, 16384, 1, True)]   # (d, H, N, B, causal)
EXTRA = [Sm90Config(192, 128, 3, 32, 3)]
SET = sys.argv[2] if len(sys.argv) > 2 else "sw64"
if SET == "power":
    SHAPES, EXTRA = [s for s in SHAPES if not s[4]], []
BUILDS = {"": (), " noturn": ("SM90_TURN_MAX=16",)} if SET == "turns" else {"": (), " row128": ("SM90_ROW128",)}
if RUN % 2 == 0:
    BUILDS = dict(reversed(BUILDS.items()))


@contextlib.contextmanager
def rows_of_128(on: bool):
    """While on: the host's TMA boxes and SMEM size as for 128-byte rows (the layout SM90_ROW128 builds)."""
    saved = model_sm90.tile_row
    if on:
        model_sm90.tile_row = kernel_sm90.tile_row = lambda d: -(-d // 64) * 64
    try:
        yield
    finally:
        model_sm90.tile_row = kernel_sm90.tile_row = saved


def call(config, defines, causal):
    """The build as a callable of (q, k, v), the host patched for the old layout while it runs (SM90_ROW128)."""
    old = "SM90_ROW128" in defines

    def run(q, k, v):
        with rows_of_128(old):
            return kernel_sm90.attention(q, k, v, causal=causal, config=config, _defines=tuple(defines))
    return run


def variants(d, H, N, B, causal):
    """(label, config, defines): the pick (labelled "pick ...") and EXTRA's tiles, each built both ways."""
    s, fam = make_shape(N, d, causal, tokens=B * N), families.get("flash_sm90")
    pick = model_pick(s)
    tiles = [pick] + [c for c in EXTRA if c != pick]
    return [(("pick " if c == pick else "") + fam.label(c) + tag, c, launch_defines(s, c) + df)
            for c in tiles for tag, df in BUILDS.items()]


def main():
    t0, runners, timer, sampled = probe_record.sm90_peer_setup(SHAPES, variants)
    rows = []
    for shape, vs, sets in probe_record.shape_sets(SHAPES, variants, lambda d, H, N, B, c: 7919 * RUN + N + d + c):
        d, H, N, B, causal = shape
        fns = [(lab, call(cfg, df, causal)) for lab, cfg, df in vs]
        rows += probe_record.peer_group(timer, runners, fns, sets, 7, sampled if SET == "power" else None,
                                        causal=causal, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N} B{B}{' causal' if causal else ''}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    finish(f"{SET}-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN} {SET}")


if __name__ == "__main__":
    main()
