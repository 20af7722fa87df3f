#!/usr/bin/env bash
# The schedules of variants.py a clock for a clock: ncu's duration, cycles, DRAM and L2 bytes of launches 3 to 5 of
# each, clocks locked at base.  Runs "d H N B label" (default: d = 256 / 192 N = 8192's).  On a GPU machine, from the
# repository root (FlashAttention-4 on PYTHONPATH for "fa4"):  OUT=dir bash <this file> [run ...] -> $OUT/ncu-variants.csv
set -u
export PYTHONPATH=${PYTHONPATH:-.}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
HERE=$(dirname "$0")
OUT=${OUT:-profiles}
mkdir -p "$OUT"
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=("256 8 8192 2 shipped" "256 8 8192 2 np s4" "256 8 8192 2 dyn s4" "256 8 8192 2 np all"
                             "256 8 8192 2 fa4" "192 10 8192 2 shipped" "192 10 8192 2 np s8" "192 10 8192 2 dyn"
                             "192 10 8192 2 fa4")
for run in "${RUNS[@]}"; do
    set -- $run
    label="${*:5}"
    timeout 150 "$NCU" --clock-control base --launch-skip 2 --launch-count 3 -k "regex:Sm90|sm90" \
        --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,dram__bytes.sum,lts__t_bytes.sum,smsp__inst_executed.sum \
        --csv python3 "$HERE/ncu_variant.py" "$1" "$2" "$3" "$4" "$label" 2>> "$OUT/ncu.log" \
        | grep -v "^==" | sed "1!{/\"ID\"/d}" | sed "s/^/\"d$1 N$3 B$4 $label\",/" >> "$OUT/ncu-variants.csv"
    echo "d$1 N$3 B$4 $label: $(grep -c "d$1 N$3 B$4 $label\"" "$OUT/ncu-variants.csv") rows"
done
