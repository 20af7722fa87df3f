"""Probe: the mma.sync forward's barriers.  Each chunk has two barriers today (K_j landed, then V_j landed
after the softmax); IOM_FWD_ONE_SYNC loads a chunk's K and V together and keeps one barrier a chunk (STAGES
>= 2), so one warp's softmax can run under another's products; IOM_FWD_V_EARLY keeps two but puts the second
before the softmax (FlashAttention-2's order).  Both switches come with tried-one-sync-v-early.patch (README.md).
Each config built each way, beside SDPA flash in one interleaved group a shape (the harness's timer, 5 rounds),
outputs checked first (probe_record.sm80_build_groups).
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-sync-h200-2026-11-28/sync_probe.py"""
from iomodel.families.flash_sm80 import FlashConfig as F
from validation import probe_record

TWO, ONE, VE = {"base": ()}, {"base": (), "one-sync": ("IOM_FWD_ONE_SYNC",)}, {"base": (), "v-early": ("IOM_FWD_V_EARLY",)}
# (d, N, B, H, causal flags, [(config, builds)])
PLAN = [
    (192, 8192, 2, 8, (False, True), [(F(128, 64, 8, 2, 192, 1), ONE), (F(64, 48, 4, 2, 192, 1), ONE),
                                      (F(128, 64, 8, 3, 192, 1), ONE), (F(64, 48, 4, 1, 192, 1), VE),
                                      (F(128, 64, 8, 1, 192, 1), VE)]),
    (256, 8192, 2, 8, (False, True), [(F(128, 64, 8, 2, 256), ONE), (F(128, 48, 8, 2, 256), ONE),
                                      (F(64, 32, 4, 2, 256), ONE), (F(128, 96, 8, 1, 256), VE),
                                      (F(64, 64, 4, 1, 256), VE)]),
    (128, 4096, 4, 16, (False, True), [(F(128, 64, 4, 2, 128), ONE), (F(128, 64, 8, 2, 128), ONE),
                                       (F(64, 64, 4, 2, 128), ONE)]),
    (64, 4096, 4, 32, (False,), [(F(128, 128, 4, 2, 64), ONE), (F(128, 64, 4, 2, 64), ONE),
                                 (F(128, 128, 4, 1, 64), VE)]),
]

rows = probe_record.sm80_build_groups(PLAN, seed=2811)
probe_record.write("sync.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-sync-h200-2026-11-28/sync_probe.py")
for line in probe_record.peer_table([r for r in rows if "error" not in r], ("d", "N", "causal"),
                                    lambda r: r["impl"] == "sdpa_flash"):
    print(line)
