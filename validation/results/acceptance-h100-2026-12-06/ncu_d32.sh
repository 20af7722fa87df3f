#!/usr/bin/env bash
# Nsight Compute of d = 32 without a mask at N = 4096 (B4 H64, bf16), where FlashAttention-4 led our best tile by 5 to
# 7% in probe_configs.py: ours as the launcher runs it (192x144 c3 s4), ours at FlashAttention-4's tile (192x128 c3),
# FlashAttention-4; clocks asked at base (ncu still reported 1.45 to 1.60 GHz: read cycles, not times), one launch
# each after two, with the pipes' shares.
# FlashAttention-4 must import (docs/validation.md).  On a GPU machine, from the repository root:
#   OUT=dir bash validation/results/acceptance-h100-2026-12-06/ncu_d32.sh   (a CSV a launch, then the table)
. validation/ncu_common.sh
NCU_FLAGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
           --section SchedulerStats --section LaunchStats
           --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:sm__inst_executed_pipe_(xu|fma|alu|fmaheavy|fmalite|uniform)\.avg\.pct_of_peak_sustained_active$,regex:sm__pipe_tensor_op_.*_cycles_active\.avg\.pct_of_peak_sustained_active$")
prof() {  # name, validation.profile args...
    local name=$1
    shift
    ncu_profile "$name" 120 --d 32 --n 4096 "$@"
}
prof ours_d32_pick --kernel flash_sm90
prof ours_d32_192x128 --kernel flash_sm90 --config 192,128,3,3
prof fa4_d32 --kernel fa4
python3 validation/results/acceptance-h100-2026-12-06/ncu_table.py "$OUT"
