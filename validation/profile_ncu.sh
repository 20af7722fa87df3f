#!/usr/bin/env bash
# Nsight Compute profiles of our kernels and FlashAttention-2 at the sweep's shapes (one launch each).
# Usage on a GPU machine: OUT=dir bash validation/profile_ncu.sh ; writes one CSV per kernel under $OUT.
set -u
export PYTHONPATH=${PYTHONPATH:-.}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
OUT=${OUT:-profiles}
mkdir -p "$OUT"
prof() {  # name, kernel regex, module args...
    local name=$1 regex=$2; shift 2
    timeout 240 "$NCU" --clock-control none --launch-skip 2 --launch-count 1 -k "regex:$regex" \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section Occupancy --section InstructionStats \
        --csv --page details python3 -m validation.profile "$@" > "$OUT/$name.csv" 2> "$OUT/$name.err"
    echo "$name: rc=$? $(wc -l < "$OUT/$name.csv") lines"
}
prof sm80_d128 flash_fwd_kernel --kernel flash_sm80 --config 128,64,4,2 --d 128
prof fa2_d128 flash_fwd_kernel --kernel sdpa_flash --d 128
prof sm90_d128_176 flash_fwd_sm90 --kernel flash_sm90 --config 128,176,2,2 --d 128
prof sm90_d128_128s3 flash_fwd_sm90 --kernel flash_sm90 --config 128,128,3,2 --d 128
prof sm90_d64_192 flash_fwd_sm90 --kernel flash_sm90 --config 192,128,2,3 --d 64
prof sm90_d64_128s3 flash_fwd_sm90 --kernel flash_sm90 --config 128,128,3,2 --d 64
