#!/usr/bin/env bash
# Nsight Compute of d = 32 without a mask at N = 4096 (B4 H64, bf16), where FlashAttention-4 leads (README.md): our
# pick as the launcher now runs it (192x144 c3 s4, plain since 9ce6ebf), ours at 192x128 c3 s3, and
# FlashAttention-4; the sections of ../acceptance-h100-2026-12-06/ncu_d32.sh plus SourceCounters, each report kept
# and its SASS page (every instruction's warp stall samples) exported as CSV.
# FlashAttention-4 must import (docs/validation.md).  On a GPU machine, from the repository root:
#   OUT=dir bash validation/results/profile-sm90-softmax-h100-2026-12-06/ncu_source.sh
. validation/ncu_common.sh
"$NCU" --version | tail -1
NCU_FLAGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
           --section SchedulerStats --section LaunchStats --section SourceCounters
           --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:sm__inst_executed_pipe_(xu|fma|alu|fmaheavy|fmalite|uniform)\.avg\.pct_of_peak_sustained_active$,regex:sm__pipe_tensor_op_.*_cycles_active\.avg\.pct_of_peak_sustained_active$")
prof() {  # name, validation.profile args...: the details CSV (ncu_profile), then a kept report and its SASS page
    local name=$1
    shift
    ncu_profile "$name" 150 --d 32 --n 4096 "$@"
    timeout 150 "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" "${NCU_FLAGS[@]}" \
        -f -o "$OUT/$name" python3 -m validation.profile --d 32 --n 4096 "$@" >> "$OUT/ncu.log" 2>&1
    "$NCU" -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/${name}_sass.csv" 2>> "$OUT/ncu.log"
    echo "$name: report rc=$? $(wc -l < "$OUT/${name}_sass.csv") SASS lines"
}
prof ours_d32_pick --kernel flash_sm90
prof ours_d32_192x128 --kernel flash_sm90 --config 192,128,3,3
prof fa4_d32 --kernel fa4
python3 validation/results/acceptance-h100-2026-12-06/ncu_table.py "$OUT"
