#!/usr/bin/env bash
# Nsight Compute over call_probe.py: per-instruction stall samples and SASS of the mma.sync forward at d = 192
# (the model's pick 128x64 w8 s2) and of FlashAttention-2's; pipe utilisation of the wgmma forward (the model's
# pick) and cuDNN at d = 64 N = 1024 B16 H32.  Run from the repository root on a GPU machine: OUT=dir bash run.sh
set -u
export PYTHONPATH=.
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
P=validation/results/profile-pipes-h100-2026-11-25/call_probe.py
OUT=${OUT:-.}
"$NCU" --version | tail -1
src() {  # name, kernel regex, probe args
    local name=$1 regex=$2; shift 2
    timeout 200 "$NCU" --launch-skip 3 --launch-count 1 -k "regex:$regex" --import-source no \
        --section SourceCounters --section WarpStateStats --section InstructionStats -o "$OUT/$name" -f \
        python3 $P "$@" > "$OUT/$name.log" 2>&1
    "$NCU" --import "$OUT/$name.ncu-rep" --page source --print-source sass --csv > "$OUT/$name-sass.csv" 2>>"$OUT/$name.log"
    "$NCU" --import "$OUT/$name.ncu-rep" --page details --csv > "$OUT/$name-details.csv" 2>>"$OUT/$name.log"
    echo "$name: $(wc -l < "$OUT/$name-sass.csv") sass lines, $(wc -l < "$OUT/$name-details.csv") detail lines"
}
raw() {  # name, kernel regex, probe args
    local name=$1 regex=$2; shift 2
    timeout 200 "$NCU" --launch-skip 3 --launch-count 1 -k "regex:$regex" --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
        --metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.sum,sm__inst_executed.sum,sm__cycles_elapsed.max \
        --page raw --csv python3 $P "$@" > "$OUT/$name.csv" 2> "$OUT/$name.err"
    echo "$name: rc=$? $(wc -l < "$OUT/$name.csv") lines"
}
src src192_ours flash_fwd_kernel sm80 2 8 8192 192 128x64,8,2
src src192_fa2 flash_fwd_kernel fa2 2 8 8192 192
raw raw64_sm90 flash_fwd_sm90 sm90 16 32 1024 64
raw raw64_cudnn "sdpa|fprop|fmha|flash|attn" cudnn 16 32 1024 64
src src256_ours flash_fwd_kernel sm80 2 8 8192 256 128x96,8,1
