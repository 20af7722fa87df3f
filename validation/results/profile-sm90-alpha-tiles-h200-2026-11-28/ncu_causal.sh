#!/usr/bin/env bash
# Nsight Compute at d = 128 N = 16384 causal (B1 H16, bf16), the shape where FlashAttention-4 leads by 1 to 3%: our
# model's pick (128x176 s2), our 128x128 s2 (alpha first since this probe) and FlashAttention-4's Hopper forward
# (128x128), one launch each, clocks locked at base so the three compare a clock for a clock; the sections of
# ../ncu-h200-2026-11-28/ncu_fa4.sh plus the memory workload (L2 and DRAM traffic).  FlashAttention-4 must import
# (docs/validation.md).  On a GPU machine, from the repository root:
#   OUT=dir bash validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/ncu_causal.sh   (a CSV a kernel)
set -u
export PYTHONPATH=${PYTHONPATH:-.}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
OUT=${OUT:-profiles}
mkdir -p "$OUT"
prof() {  # name, validation.profile args...
    local name=$1
    shift
    timeout 120 "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
        --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        --csv --page details python3 -m validation.profile "$@" > "$OUT/$name.csv" 2>> "$OUT/ncu.log"
    echo "$name: rc=$? $(wc -l < "$OUT/$name.csv") lines"
}
prof sm90_pick_d128_n16384_causal --kernel flash_sm90 --d 128 --n 16384 --causal
prof sm90_128x128_d128_n16384_causal --kernel flash_sm90 --config 128,128,2,2 --d 128 --n 16384 --causal
prof fa4_d128_n16384_causal --kernel fa4 --d 128 --n 16384 --causal
