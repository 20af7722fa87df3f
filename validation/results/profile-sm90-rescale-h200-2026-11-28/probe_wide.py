"""Probe: the early O rescale (kRescaleEarly, with alpha first) at d = 192 and 256 on its own, beside cuDNN (no
FlashAttention-4: one call), more rounds than round 4 of README.md, where round 4 had d = 192 without a mask 4%
slower than the parent and rounds 1 and 2 had d = 192 / 256 1 to 5% faster.  Builds of the model's pick:
  parent      SM90_ALPHA_FIRST_MAX=0 SM90_EARLY_ABOVE=256 SM90_DESC_EACH_STEP SM90_KV_TOGETHER
  late O      SM90_EARLY_ABOVE=256: O rescaled after the P V product (and the row sums from zero) at every head
              dim; at d = 192 the kernel as shipped since this run
  shipped     SM90_EARLY_ABOVE=128: the kernel of the run (its default then), O rescaled under the S product above
              d = 128; at d = 256 the kernel as shipped
Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-sm90-rescale-h200-2026-11-28/probe_wide.py 15"""
import sys

from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
BUILDS = {"parent": ("SM90_ALPHA_FIRST_MAX=0", "SM90_EARLY_ABOVE=256", "SM90_DESC_EACH_STEP", "SM90_KV_TOGETHER"),
          "late O": ("SM90_EARLY_ABOVE=256",), "shipped": ("SM90_EARLY_ABOVE=128",)}
SHAPES = [(192, 10, 8192, 2, False), (192, 10, 8192, 2, True), (256, 8, 8192, 2, False), (256, 8, 8192, 2, True)]
rows = probe_record.sm90_build_groups(SHAPES, BUILDS, lambda d, N: 17 * d + N, rounds=ROUNDS)
probe_record.write("wide.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-rescale-h200-2026-11-28/"
                   f"probe_wide.py {ROUNDS}")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"), lambda r: r["impl"] == "sdpa_cudnn")))
