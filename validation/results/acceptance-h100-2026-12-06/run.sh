#!/usr/bin/env bash
# Issue 18's acceptance runs on an H100, one stage per device call (docs/validation.md, "three device calls"), from
# the repository root with $OUT set: bash validation/results/acceptance-h100-2026-12-06/run.sh STAGE SEED
#   sm80    the mma.sync sweep against SDPA's backends            (no FlashAttention-4 needed)
#   window  the (4096, 0) window against its causal attention, N = 32768, d = 128
#   sweep   the wgmma sweep, FlashAttention-4 in the same groups (after the third part is staged)
#   shapes  the named shapes the sweep leaves out: d = 256 / 192 / 96 / 32, d = 64 at N = 32768, windows per head dim
#   leads   the shapes FlashAttention-4 led in the runs of 2026-12-06 (README.md here), to rerun after a change
set -euo pipefail
stage=${1:?stage}
seed=${2:?seed}
FA4=/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages
run() { python3 -m validation run --no-ceilings "$@" 2>&1 | tail -12; }
case $stage in
    sm80) PYTHONPATH=. run --only flash_sm80,peers --budget-s 200 --seed "$seed" --out "$OUT/sm80.json" ;;
    window) PYTHONPATH=. run --only flash_sm90,flash_sm80,peers --rounds 7 --seed "$seed" \
        --shape 32768:128:causal --shape 32768:128:causal:w4096 --out "$OUT/window.json" ;;
    sweep) PYTHONPATH=.:$FA4 run --only flash_sm90,peers --budget-s 200 --seed "$seed" --out "$OUT/sweep.json" ;;
    shapes) PYTHONPATH=.:$FA4 run --only flash_sm90,peers --budget-s 240 --rounds 7 --seed "$seed" \
        --shape 1024:256 --shape 4096:256 --shape 16384:256 --shape 4096:256:causal --shape 16384:256:causal \
        --shape 32768:64 --shape 32768:64:causal --shape 4096:192 --shape 16384:192:causal \
        --shape 4096:96 --shape 4096:96:causal --shape 4096:32 --shape 4096:32:causal \
        --shape 32768:64:causal:w4096 --shape 32768:96:causal:w4096 --shape 32768:192:causal:w4096 \
        --shape 32768:256:causal:w4096 --out "$OUT/shapes.json" ;;
    leads) PYTHONPATH=.:$FA4 run --only flash_sm90,peers --budget-s 240 --rounds 7 --seed "$seed" \
        --shape 4096:32 --shape 16384:32 --shape 16384:128:causal --shape 32768:64 --shape 16384:64:causal \
        --shape 4096:128 --out "$OUT/leads.json" ;;
    *) echo "unknown stage $stage"; exit 2 ;;
esac
