#!/usr/bin/env bash
# Nsight Compute of the d = 128 (8192, 0) window at N = 32768 (B1 H16, bf16): ours as the launcher runs it, ours at
# FlashAttention-4's tile (128x128 s2), FlashAttention-4, and the same two tiles on full causal attention; clocks
# locked at base (a cycle for a cycle), one launch each after two.  FlashAttention-4 must import (docs/validation.md).
# Usage on a GPU machine, from the repository root:
#   OUT=dir bash validation/results/profile-sm90-window-slope-h200-2026-11-29/ncu_window.sh   (a CSV a launch)
. validation/ncu_common.sh
NCU_FLAGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
           --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats
           --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:sm__pipe_tensor_op_.*_cycles_active\.avg\.pct_of_peak_sustained_active$")
prof() {  # name, validation.profile args...
    local name=$1
    shift
    ncu_profile "$name" 150 --d 128 --n 32768 --tokens 32768 "$@"
}
prof ours_w8192_pick --kernel flash_sm90 --window 8192
prof ours_w8192_128s2 --kernel flash_sm90 --window 8192 --config 128,128,2,2
prof fa4_w8192 --kernel fa4 --window 8192
prof ours_causal_128s2 --kernel flash_sm90 --causal --config 128,128,2,2
prof fa4_causal --kernel fa4 --causal
