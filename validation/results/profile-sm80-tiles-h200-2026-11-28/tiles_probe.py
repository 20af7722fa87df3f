"""Probe: the mma.sync forward's 64-row tiles of four warps at d = 192 and 256 (two blocks an SM, whose barriers
fall out of phase), Q in registers or not, against the larger tiles of eight warps the model picked there and SDPA
flash, in one interleaved group a shape (the harness's timer, 5 rounds), outputs checked first
(probe_record.sm80_build_groups).
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-tiles-h200-2026-11-28/tiles_probe.py"""
from iomodel.families.flash_sm80 import FlashConfig as F
from validation import probe_record

TWO = {"base": ()}
# (d, N, B, H, causal flags, [(config, builds)])
PLAN = [
    (192, 8192, 2, 8, (False, True), [(F(64, 64, 4, 1, 192, 1), TWO), (F(64, 64, 4, 1, 192), TWO),
                                      (F(64, 96, 4, 1, 192, 1), TWO), (F(64, 80, 4, 1, 192, 1), TWO),
                                      (F(64, 32, 4, 1, 192, 1), TWO), (F(64, 48, 4, 1, 192, 1), TWO),
                                      (F(128, 64, 8, 2, 192, 1), TWO)]),
    (256, 8192, 2, 8, (False, True), [(F(64, 64, 4, 1, 256), TWO), (F(64, 48, 4, 1, 256), TWO),
                                      (F(64, 32, 4, 1, 256), TWO), (F(64, 80, 4, 1, 256), TWO),
                                      (F(128, 96, 8, 1, 256), TWO)]),
]

rows = probe_record.sm80_build_groups(PLAN, seed=2811)
probe_record.write("tiles.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-tiles-h200-2026-11-28/tiles_probe.py")
for line in probe_record.peer_table([r for r in rows if "error" not in r], ("d", "N", "causal"),
                                    lambda r: r["impl"] == "sdpa_flash"):
    print(line)
