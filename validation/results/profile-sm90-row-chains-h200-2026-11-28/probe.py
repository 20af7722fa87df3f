"""Probe: the online softmax's row max and row sum as independent chains (SM90_ROW_CHAINS, flash_fwd_sm90.cuh).
In the shipped build each is one chain a row: nvcc keeps the FADDs in source order (no reassociation without
fast-math), so a 128-key chunk's row sum is 32 dependent FADDs on each warpgroup's softmax, which at d = 64 runs
beside a short S product.  1, 2 and 4 chains a row beside cuDNN in one interleaved group a shape (the harness's
timer, 3 input sets, outputs checked against cuDNN first); the model's pick at each shape.
Builds SM90_ROW_CHAINS, which tried-row-chains.patch (beside this file) adds to kernels/csrc/flash_fwd_sm90.cuh:
`git apply` it first.  Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-sm90-row-chains-h200-2026-11-28/probe.py"""
import sys
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
FORMS = {f"chains {c}": (f"SM90_ROW_CHAINS={c}",) for c in (1, 2, 4)}
# (d, H, N, B, causal)
SHAPES = [(64, 32, 16384, 1, False), (64, 32, 32768, 1, True), (64, 32, 1024, 16, True), (128, 16, 16384, 1, False),
          (256, 8, 8192, 2, True)]
rows = probe_record.sm90_build_groups(SHAPES, FORMS, lambda d, N: 11 * d + N, rounds=ROUNDS)
probe_record.write("row_chains.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-row-chains-h200-2026-11-28/probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"), lambda r: r["impl"] == "sdpa_cudnn")))
