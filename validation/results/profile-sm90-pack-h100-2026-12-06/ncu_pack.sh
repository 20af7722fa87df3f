#!/usr/bin/env bash
# Nsight Compute of d = 32 without a mask at N = 4096 (B4 H64, bf16) with P packed before O's rescale: ours at
# 192x128 c3 s3 and the pick (192x144 c3 s4), and FlashAttention-4 where it imports; one pass each (clocks at base,
# the sections of ../profile-sm90-softmax-h100-2026-12-06/ncu_source.sh), its details page as CSV and its SASS page
# (sass/).
# On a GPU machine, from the repository root (FlashAttention-4 on PYTHONPATH to profile it too):
#   OUT=dir bash validation/results/profile-sm90-pack-h100-2026-12-06/ncu_pack.sh
. validation/ncu_common.sh
NCU_FLAGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
           --section SchedulerStats --section LaunchStats --section SourceCounters
           --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:sm__inst_executed_pipe_(xu|fma|alu|fmaheavy|fmalite|uniform)\.avg\.pct_of_peak_sustained_active$")
prof() {  # name, validation.profile args...
    local name=$1
    shift
    timeout 200 "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" "${NCU_FLAGS[@]}" \
        -f -o "/tmp/$name" python3 -m validation.profile --d 32 --n 4096 "$@" >> "$OUT/ncu.log" 2>&1
    "$NCU" -i "/tmp/$name.ncu-rep" --page details --csv > "$OUT/$name.csv" 2>> "$OUT/ncu.log"
    "$NCU" -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/sass/${name}_sass.csv" \
        2>> "$OUT/ncu.log"
    echo "$name: $(wc -l < "$OUT/$name.csv") detail lines, $(wc -l < "$OUT/sass/${name}_sass.csv") SASS lines"
}
mkdir -p "$OUT/sass"
prof ours_d32_192x128 --kernel flash_sm90 --config 192,128,3,3
prof ours_d32_pick --kernel flash_sm90
python3 -c "import flash_attn.cute" 2>/dev/null && prof fa4_d32 --kernel fa4
python3 validation/results/acceptance-h100-2026-12-06/ncu_table.py "$OUT"
