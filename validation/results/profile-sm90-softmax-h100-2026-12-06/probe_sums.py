"""Probe: the row sums by the tensor cores (SM90_SUM_MMA_MAX=64, kernels/csrc/flash_fwd_sm90.cuh FwdTraits::kSumMma:
P times a column of ones beside the P V product, in place of the softmax's FADDs) at d = 32 and 64, with and without
four max chains (SM90_MAX_CHAINS=4); with SET = spec, the exponentials against the kept maxima beside the search
for the chunk's maxima (SM90_SPEC_EXP=1, an A/B upper bound), with and without the row sums by the tensor cores;
with SET = waits, the producer's waits on the empty barriers with a suspend-time hint or a sleep between tries
(SM90_WAIT_HINT, SM90_WAIT_SLEEP; ncu_source.sh's SASS page had the producer re-polling them), at d = 32 to 256;
SET = hints: three hints against none, the same shapes.  Each shape: the model's pick (and at d = 32
FlashAttention-4's 192x128 tile; spec: that tile alone at d = 32; waits and hints: the pick alone) under every
build, first against the float32 reference (O and LSE), then checked against and timed beside cuDNN in one
interleaved group (7 rounds, 3 input sets); FlashAttention-4 joins the group where it imports.
From the repository root on a GPU machine: PYTHONPATH=. python3 <this file> RUN [SET]
 -> $OUT/<SET>-<gpu>-run<RUN>.json (SET: sums, the default, spec, waits or hints)"""
import sys

import torch

from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from kernels import flash_sm90
from validation import probe_record
from validation.plan import make_shape

from probe_common import launch_defines, model_pick, peer_groups

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
SET = sys.argv[2] if len(sys.argv) > 2 else "sums"
HERE = "validation/results/profile-sm90-softmax-h100-2026-12-06/probe_sums.py"
SHAPES = [(32, 64, 4096, 4, False), (32, 64, 16384, 1, False), (32, 64, 4096, 4, True), (64, 32, 32768, 1, False),
          (64, 32, 16384, 1, True), (64, 32, 4096, 4, False)]   # (d, H, N, B, causal)
if SET in ("waits", "hints"):
    SHAPES += [(128, 16, 4096, 4, False), (128, 16, 16384, 1, True), (256, 8, 4096, 4, False)]
SETS = {"sums": {"base": (), "sum": ("SM90_SUM_MMA_MAX=64",), "ch4": ("SM90_MAX_CHAINS=4",),
                 "sum ch4": ("SM90_SUM_MMA_MAX=64", "SM90_MAX_CHAINS=4")},
        "spec": {"base": (), "spec": ("SM90_SPEC_EXP=1",), "spec sum": ("SM90_SPEC_EXP=1", "SM90_SUM_MMA_MAX=64")},
        "waits": {"base": (), "hint 20us": ("SM90_WAIT_HINT=20000",), "hint 10ms": ("SM90_WAIT_HINT=10000000",),
                  "sleep 32ns": ("SM90_WAIT_SLEEP=32",), "sleep 256ns": ("SM90_WAIT_SLEEP=256",)},
        "hints": {"base": (), "hint 5us": ("SM90_WAIT_HINT=5000",), "hint 20us": ("SM90_WAIT_HINT=20000",),
                  "hint 100us": ("SM90_WAIT_HINT=100000",)}}
BUILDS = SETS[SET]
# FlashAttention-4's tile at d <= 64 (spec: in place of the pick, whose 192x144 spilled with SM90_SPEC_EXP)
EXTRA = {32: [Sm90Config(192, 128, 3, 32, 3)]}


def variants(d, H, N, B, causal):
    """(label, config, defines) of every build of the model's pick and of EXTRA's tiles."""
    s, fam = make_shape(N, d, causal, tokens=B * N), families.get("flash_sm90")
    pick, out = model_pick(s), []
    tiles = (EXTRA.get(d, []) if SET == "spec" and EXTRA.get(d) else
             [pick] + [c for c in EXTRA.get(d, []) if c != pick and SET not in ("waits", "hints")])
    for c in tiles:
        out += [(f"{fam.label(c)} {tag}", c, launch_defines(s, c) + df) for tag, df in BUILDS.items()]
    return out


def reference(vs, inputs, causal: bool) -> dict:
    """Each build's O (max |diff| over the reference's max |value|) and LSE (max |diff|) against float32; exits
    where either is off by 1e-2 or more (the GPU tests' bounds)."""
    from validation.reference import attention_reference

    ref_o, ref_lse = attention_reference(*inputs, causal)
    out = {}
    for lab, cfg, df in vs:
        o, lse = flash_sm90.attention(*inputs, causal=causal, config=cfg, return_lse=True, _defines=df)
        out[lab] = {"o": ((o.float() - ref_o).abs().max() / ref_o.abs().max()).item(),
                    "lse": (lse - ref_lse).abs().max().item()}
        if not (out[lab]["o"] < 1e-2 and out[lab]["lse"] < 1e-2):
            raise SystemExit(f"{lab}: off the float32 reference: {out[lab]}")
    return out


def main():
    errors = {}

    def check(shape, vs, sets):   # the float32 reference of one input set (O and LSE), up to N = 4096
        d, H, N, B, causal = shape
        if N <= 4096:
            errors[f"d{d} N{N} B{B}{' causal' if causal else ''}"] = reference(vs, sets[0], causal)
    rows, runners = peer_groups(SHAPES, variants, lambda d, H, N, B, c: 8009 * RUN + d + N + c, check)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    probe_record.report(f"{SET}-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=. python3 {HERE} {RUN} {SET}", runners,
                        keys=("d", "N", "B", "causal"))
    probe_record.write(f"{SET}-{gpu}-run{RUN}-reference.json", [errors], f"PYTHONPATH=. python3 {HERE} {RUN} {SET}")
    for shape, e in errors.items():
        print(shape, e)


if __name__ == "__main__":
    main()
