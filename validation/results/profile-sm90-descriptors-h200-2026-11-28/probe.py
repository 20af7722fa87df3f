"""Probe: the wgmma descriptors of a tile walk built from the tile's low word plus each step's offset (shipped,
sm90_tiles.cuh desc_step) against each step's whole descriptor (SM90_DESC_EACH_STEP, as before): 31 fewer
instructions a warp a chunk in the d = 64 forward's steady loop (local nvcc 13.0 SASS of 192x128 c3 s2: 419
against 450; FlashAttention-4 issues 7.7% fewer instructions than the old build at d = 64, ncu-h200-2026-11-28).
Both builds beside cuDNN in one interleaved group a shape (the harness's timer, 3 input sets, outputs checked
against cuDNN first); the model's pick at each shape.
Needs tried-descriptors.patch (beside this file; not kept) applied: `git apply` it first.  Its labels' "(shipped)"
names the build under test, as it was run.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-descriptors-h200-2026-11-28/probe.py"""
import sys
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
FORMS = {"low word + offset (shipped)": (), "each step whole": ("SM90_DESC_EACH_STEP",)}
# (d, H, N, B, causal)
SHAPES = [(64, 32, 16384, 1, False), (64, 32, 32768, 1, True), (64, 32, 1024, 16, True), (128, 16, 16384, 1, False),
          (128, 16, 4096, 4, True), (256, 8, 8192, 2, True)]
rows = probe_record.sm90_build_groups(SHAPES, FORMS, lambda d, N: 13 * d + N, rounds=ROUNDS)
probe_record.write("descriptors.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-descriptors-h200-2026-11-28/probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"), lambda r: r["impl"] == "sdpa_cudnn")))
