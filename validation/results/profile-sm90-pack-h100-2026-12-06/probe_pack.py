"""Probe: P packed to 16 bits before O's rescale (the kernel of this day) against after it (SM90_PACK_LATE, the order
before), on the model's pick at the shapes FlashAttention-4 led on 2026-12-06 and one a head dim, and on its tile at
d = 32 (192x128 s3).  The causal kernels have no stale max, hence no branch before the packing: ptxas builds them the
same both ways (their SASS identical, local nvcc 13.0), so their pairs measure the groups' noise.  Each build checked
against cuDNN and timed beside it (and FlashAttention-4 where it imports) in one interleaved group a shape (7 rounds,
3 input sets).  SET chains: the old order first (a position bias shows as the causal pairs' gap), then the new one
with the rows' maxima as 1 (the default), 2 and 4 independent fmax chains (SM90_MAX_CHAINS; its code and
SM90_STALE_TEST_LATE's, not kept, are tried-chains-stale.patch beside this file).  SET power: the pick alone at the four
shapes without a mask of d <= 64, each build then also run back to back for a second, three times, under nvidia-smi
(the clocks and power: probe_record.add_sustained).  SET stale (on tried-chains-stale.patch): the stale-max test on
the chunk's maxima with both shifts ready before the vote, the patch's default, against the order that ships
(SM90_STALE_TEST_LATE), without a mask (the causal kernels keep no stale max), the shipped one first in even runs.
SET pack96: the pack set's builds at d = 96 (N = 4096 and 16384) and d = 64 N = 4096, the old order first in even
runs.  SET rowstale (on tried-row-stale.patch): each row's own stale test, without the vote before the exponentials
(SM90_ROW_STALE=1: a warp's vote then only decides O's rescale), against the shipped test, without a mask, the shipped
one first in even runs.
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN [SET]
 -> $OUT/<SET>-<gpu>-run<RUN>.json (SET: pack, the default, chains, power, stale, pack96 or rowstale)"""
import os
import sys
import time

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from validation import probe_record
from validation.plan import make_shape

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "profile-sm90-softmax-h100-2026-12-06"))
from probe_common import finish, launch_defines, model_pick, peer_groups  # noqa: E402

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/profile-sm90-pack-h100-2026-12-06/probe_pack.py"
SHAPES = [(32, 64, 4096, 4, False), (32, 64, 16384, 1, False), (128, 16, 16384, 1, True),   # (d, H, N, B, causal)
          (64, 32, 32768, 1, False), (64, 32, 16384, 1, True), (128, 16, 4096, 4, False), (64, 32, 4096, 4, False),
          (96, 21, 4096, 4, False), (128, 16, 4096, 4, True), (192, 10, 4096, 4, False), (256, 8, 4096, 4, False)]
EXTRA = {(32, False): [Sm90Config(192, 128, 3, 32, 3)]}
SET = sys.argv[2] if len(sys.argv) > 2 else "pack"
BUILDS = {"pack": {"": (), " late": ("SM90_PACK_LATE",)},
          "chains": {" late": ("SM90_PACK_LATE",), "": (), " ch2": ("SM90_MAX_CHAINS=2",),
                     " ch4": ("SM90_MAX_CHAINS=4",)}, "power": {"": ()},
          "stale": {"": (), " late": ("SM90_STALE_TEST_LATE",)},
          "pack96": {"": (), " late": ("SM90_PACK_LATE",)},
          "rowstale": {" row": ("SM90_ROW_STALE=1",), "": ()}}[SET]
if SET in ("stale", "pack96", "rowstale") and RUN % 2 == 0:
    BUILDS = dict(reversed(BUILDS.items()))
if SET == "stale":
    SHAPES = [s for s in SHAPES if not s[4]]
if SET == "rowstale":
    SHAPES = [(32, 64, 4096, 4, False), (32, 64, 16384, 1, False), (64, 32, 4096, 4, False), (96, 21, 16384, 1, False),
              (128, 16, 4096, 4, False)]
if SET == "pack96":
    SHAPES = [(96, 21, 4096, 4, False), (96, 21, 16384, 1, False), (64, 32, 4096, 4, False)]


def variants(d, H, N, B, causal):
    """(label, config, defines): the pick (labelled "pick ...") and EXTRA's tiles, each built both ways."""
    s, fam = make_shape(N, d, causal, tokens=B * N), families.get("flash_sm90")
    pick = model_pick(s)
    tiles = [pick] + [c for c in EXTRA.get((d, causal), []) if c != pick and SET != "power"]
    return [(("pick " if c == pick else "") + fam.label(c) + tag, c, launch_defines(s, c) + df)
            for c in tiles for tag, df in BUILDS.items()]


def sustained_rows() -> list[dict]:
    """SET power: each shape's group as peer_groups times it, each build then run back to back (add_sustained)."""
    shapes, rows = [s for s in SHAPES if s[0] <= 64 and not s[4]], []
    t0, runners, timer, sampled = probe_record.sm90_peer_setup(shapes, variants)
    for shape, vs, sets in probe_record.shape_sets(shapes, variants, lambda *s: 7919 * RUN + s[2] + s[0]):
        d, H, N, B, causal = shape
        fns = [(lab, probe_record.sm90_call(c, df, causal)) for lab, c, df in vs]
        rows += probe_record.peer_group(timer, runners, fns, sets, 7, sampled, causal=causal, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N} B{B}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows


def main():
    if SET == "power":
        rows = sustained_rows()
    else:
        rows, _ = peer_groups(SHAPES, variants, lambda d, H, N, B, causal: 7919 * RUN + N + d)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    finish(f"{SET}-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN} {SET}")


if __name__ == "__main__":
    main()
