#!/usr/bin/env bash
# Nsight Compute of d = 32 without a mask at N = 4096 (B4 H64) and N = 16384 (B1 H64), bf16, the tiles in 64-byte
# swizzled rows: ours at 192x128 c3 s3 and the pick (192x144 c3 s4), or FlashAttention-4 (it must import); one pass
# each, clocks at base (validation/ncu_common.sh's ncu_profile_sass: the details page as CSV, the SASS page in
# sass/).  On a GPU machine, from the repository root:
#   OUT=dir bash validation/results/profile-sm90-sw64-h100-2026-12-06/ncu_sw64.sh ours|fa4
. validation/ncu_common.sh
for n in 4096 16384; do
    case ${1:?ours or fa4} in
        ours) ncu_profile_sass "ours_d32_n${n}_192x128" 200 --d 32 --n $n --kernel flash_sm90 --config 192,128,3,3
              ncu_profile_sass "ours_d32_n${n}_pick" 200 --d 32 --n $n --kernel flash_sm90 ;;
        fa4) ncu_profile_sass "fa4_d32_n${n}" 200 --d 32 --n $n --kernel fa4 ;;
    esac
done
python3 validation/results/acceptance-h100-2026-12-06/ncu_table.py "$OUT"
