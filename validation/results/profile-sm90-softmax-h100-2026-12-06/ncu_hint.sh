#!/usr/bin/env bash
# Nsight Compute of the model's pick built without and with the producer's suspend-time hint (SM90_WAIT_HINT=20000):
# d = 32 N = 4096 B4 and d = 64 N = 4096 B4 without a mask, d = 128 N = 16384 B1 causal (the sections of
# ncu_source.sh, without SourceCounters).  On a GPU machine, from the repository root:
#   OUT=dir bash validation/results/profile-sm90-softmax-h100-2026-12-06/ncu_hint.sh
. validation/ncu_common.sh
NCU_FLAGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
           --section SchedulerStats --section LaunchStats
           --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:sm__inst_executed_pipe_(xu|fma|alu|fmaheavy|fmalite|uniform)\.avg\.pct_of_peak_sustained_active$,regex:sm__pipe_tensor_op_.*_cycles_active\.avg\.pct_of_peak_sustained_active$")
RUN='import sys, torch
from kernels import flash_sm90
from validation.plan import make_shape
d, n, causal, hint = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "causal", sys.argv[4] == "hint"
s = make_shape(n, d, causal)
q, k, v = (torch.randn(s["B"], s["H"], n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
df = ("SM90_WAIT_HINT=20000",) if hint else ()
sched = flash_sm90.plan(q, k, v, causal).schedule.defines
for _ in range(3):
    flash_sm90.attention(q, k, v, causal=causal, _defines=tuple(sched) + df)
torch.cuda.synchronize()'
prof() {  # name d n causal|plain hint|base
    timeout 150 "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" "${NCU_FLAGS[@]}" \
        --csv --page details python3 -c "$RUN" "$2" "$3" "$4" "$5" > "$OUT/$1.csv" 2>> "$OUT/ncu.log"
    echo "$1: rc=$? $(wc -l < "$OUT/$1.csv") lines"
}
for shape in "d32 32 4096 plain" "d64 64 4096 plain" "d128c 128 16384 causal"; do
    set -- $shape
    prof "${1}_base" "$2" "$3" "$4" base
    prof "${1}_hint" "$2" "$3" "$4" hint
done
python3 validation/results/acceptance-h100-2026-12-06/ncu_table.py "$OUT"
