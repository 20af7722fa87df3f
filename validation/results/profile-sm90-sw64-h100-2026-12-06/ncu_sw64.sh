#!/usr/bin/env bash
# Nsight Compute of d = 32 without a mask at N = 4096 (B4 H64) and N = 16384 (B1 H64), bf16, the tiles in 64-byte
# swizzled rows: ours at 192x128 c3 s3 and the pick (192x144 c3 s4), or FlashAttention-4 (it must import); one pass
# each, clocks at base, the sections of ../profile-sm90-pack-h100-2026-12-06/ncu_pack.sh; the details page as CSV and
# the SASS page (sass/).  On a GPU machine, from the repository root:
#   OUT=dir bash validation/results/profile-sm90-sw64-h100-2026-12-06/ncu_sw64.sh ours|fa4
. validation/ncu_common.sh
NCU_FLAGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
           --section SchedulerStats --section LaunchStats --section SourceCounters
           --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:sm__inst_executed_pipe_(xu|fma|alu|fmaheavy|fmalite|uniform)\.avg\.pct_of_peak_sustained_active$")
prof() {  # name, validation.profile args...
    local name=$1
    shift
    timeout 200 "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" "${NCU_FLAGS[@]}" \
        -f -o "/tmp/$name" python3 -m validation.profile --d 32 "$@" >> "$OUT/ncu.log" 2>&1
    "$NCU" -i "/tmp/$name.ncu-rep" --page details --csv > "$OUT/$name.csv" 2>> "$OUT/ncu.log"
    "$NCU" -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/sass/${name}_sass.csv" \
        2>> "$OUT/ncu.log"
    echo "$name: $(wc -l < "$OUT/$name.csv") detail lines, $(wc -l < "$OUT/sass/${name}_sass.csv") SASS lines"
}
mkdir -p "$OUT/sass"
for n in 4096 16384; do
    case ${1:?ours or fa4} in
        ours) prof "ours_d32_n${n}_192x128" --n $n --kernel flash_sm90 --config 192,128,3,3
              prof "ours_d32_n${n}_pick" --n $n --kernel flash_sm90 ;;
        fa4) prof "fa4_d32_n${n}" --n $n --kernel fa4 ;;
    esac
done
python3 validation/results/acceptance-h100-2026-12-06/ncu_table.py "$OUT"
