"""Probe: where a head's causal rows do not fill its last 192-row tile (N = 1024: 64 rows), that tile's one
warpgroup with rows walked every chunk of keys alone (8 at N = 1024 with 128-key chunks) while the other two
released them and waited for the next tile's Q.  The shipped build now starts a head's tiles at its last row
(tile_row0 in flash_fwd_sm90.cuh): the short tile is the first, whose rows see one chunk.  The old layout builds
with SM90_BOTTOM_SHORT.  Both beside cuDNN in one interleaved group a shape (the harness's timer, 3 input sets),
outputs checked against cuDNN first; the model's pick at each shape, and at d = 128 (no short tile at these N
with 128-row tiles) the shipped pick as a control.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-causal-short-h200-2026-11-28/probe.py"""
import sys
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
FORMS = {"top short (shipped)": (), "bottom short": ("SM90_BOTTOM_SHORT",)}
# (d, H, N, B, causal): N % 192 = 64, 128, 64, 40 at d = 64; d = 96 and 32 take 192-row tiles too; d = 128 control
SHAPES = [(64, 32, 1024, 16, True), (64, 32, 2048, 8, True), (64, 32, 4096, 4, True), (64, 32, 1000, 16, True),
          (96, 16, 1024, 16, True), (32, 32, 1024, 16, True), (128, 16, 1024, 16, True)]
rows = probe_record.sm90_build_groups(SHAPES, FORMS, lambda d, N: 7 * d + N, rounds=ROUNDS)
probe_record.write("causal_short.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-causal-short-h200-2026-11-28/probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))
