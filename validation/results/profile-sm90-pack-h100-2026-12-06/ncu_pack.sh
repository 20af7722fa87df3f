#!/usr/bin/env bash
# Nsight Compute of d = 32 without a mask at N = 4096 (B4 H64, bf16) with P packed before O's rescale: ours at
# 192x128 c3 s3 and the pick (192x144 c3 s4), and FlashAttention-4 where it imports; one pass each (clocks at base,
# the sections of ../profile-sm90-softmax-h100-2026-12-06/ncu_source.sh), its details page as CSV and its SASS page
# (sass/).
# On a GPU machine, from the repository root (FlashAttention-4 on PYTHONPATH to profile it too):
#   OUT=dir bash validation/results/profile-sm90-pack-h100-2026-12-06/ncu_pack.sh
. validation/ncu_common.sh
prof() { ncu_profile_sass "$1" 200 --d 32 --n 4096 "${@:2}"; }   # name, validation.profile args...
prof ours_d32_192x128 --kernel flash_sm90 --config 192,128,3,3
prof ours_d32_pick --kernel flash_sm90
python3 -c "import flash_attn.cute" 2>/dev/null && prof fa4_d32 --kernel fa4
python3 validation/results/acceptance-h100-2026-12-06/ncu_table.py "$OUT"
