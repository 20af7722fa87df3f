#!/usr/bin/env bash
# Ours (the model's pick, with the tail split) against FlashAttention-4 a clock for a clock at the shapes where it
# still leads in the harness: ncu's duration, cycles, instructions and DRAM / L2 bytes of launches 3 to 5 of each,
# clocks locked at base (validation.profile's shapes: B*N = 16384, H*d = 2048, bf16).  FlashAttention-4 must import
# (docs/validation.md).  On a GPU machine, from the repository root:  OUT=dir bash <this file>  -> $OUT/ncu-fa4.csv
set -u
export PYTHONPATH=${PYTHONPATH:-.}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
OUT=${OUT:-profiles}
mkdir -p "$OUT"
for run in "256 8192 --causal" "192 8192 --causal" "64 16384" "64 32768" "128 16384"; do
    set -- $run
    for kernel in flash_sm90 fa4; do
        timeout 150 "$NCU" --clock-control base --launch-skip 2 --launch-count 3 -k "regex:Sm90|sm90" \
            --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,dram__bytes.sum,lts__t_bytes.sum \
            --csv python3 -m validation.profile --kernel $kernel --launches 5 --d "$1" --n "$2" ${3:-} 2>> "$OUT/ncu.log" \
            | grep -v "^==" | sed "1!{/\"ID\"/d}" | sed "s/^/\"$kernel d$1 N$2${3:+ causal}\",/" >> "$OUT/ncu-fa4.csv"
        echo "$kernel d$1 N$2 ${3:-}: $(grep -c "$kernel d$1 N$2" "$OUT/ncu-fa4.csv") rows"
    done
done
