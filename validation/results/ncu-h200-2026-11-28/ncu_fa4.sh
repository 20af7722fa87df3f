#!/usr/bin/env bash
# Nsight Compute of our wgmma forward (the model's pick) and FlashAttention-4's Hopper forward at d = 64 and 128,
# N = 16384 (B*N = 16384, H*d = 2048, bf16), one launch each, clocks locked at base so that the two compare a clock
# for a clock.  FlashAttention-4 must import (docs/validation.md).  Usage on a GPU machine, from the repository root:
#   OUT=dir bash validation/results/ncu-h200-2026-11-28/ncu_fa4.sh     (one CSV a kernel under $OUT, stderr in ncu.log)
set -u
export PYTHONPATH=${PYTHONPATH:-.}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
OUT=${OUT:-profiles}
mkdir -p "$OUT"
prof() {  # name, validation.profile args...
    local name=$1
    shift
    timeout 90 "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
        --section SchedulerStats --section Occupancy --section LaunchStats \
        --csv --page details python3 -m validation.profile "$@" > "$OUT/$name.csv" 2>> "$OUT/ncu.log"
    echo "$name: rc=$? $(wc -l < "$OUT/$name.csv") lines"
}
prof sm90_d64_n16384 --kernel flash_sm90 --d 64 --n 16384
prof fa4_d64_n16384 --kernel fa4 --d 64 --n 16384
prof sm90_d128_n16384 --kernel flash_sm90 --d 128 --n 16384
prof fa4_d128_n16384 --kernel fa4 --d 128 --n 16384
