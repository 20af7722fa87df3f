#!/usr/bin/env bash
# The tail split's A/B a clock for a clock: ncu's kernel duration (clocks locked at base) of launches 3 to 5 of
# each (shape, pieces) without a mask, the model's tile: by default d = 128 N = 16384 B1 H16 and d = 64 N = 32768
# B1 H32; or the runs given, each "d N H pieces B".  On a GPU machine, from the repository root:
#   OUT=dir bash <this file> ["d N H pieces B" ...]   -> $OUT/ncu-split.csv
set -u
export PYTHONPATH=${PYTHONPATH:-.}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
HERE=$(dirname "$0")
OUT=${OUT:-profiles}
mkdir -p "$OUT"
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=("128 16384 16 1 1" "128 16384 16 3 1" "128 16384 16 5 1" "64 32768 32 1 1" "64 32768 32 2 1"
                             "64 32768 32 3 1")
for run in "${RUNS[@]}"; do
    set -- $run
    timeout 150 "$NCU" --clock-control base --launch-skip 2 --launch-count 3 -k "regex:flash_fwd_sm90" \
        --metrics gpu__time_duration.sum,sm__cycles_elapsed.max --csv python3 "$HERE/ncu_launch.py" "$@" 2>> "$OUT/ncu.log" \
        | grep gpu__time_duration | sed "s/^/\"d$1 N$2 B$5 p$4\",/" >> "$OUT/ncu-split.csv"
    echo "d$1 N$2 B$5 p$4: $(grep -c "d$1 N$2 B$5 p$4\"" "$OUT/ncu-split.csv") rows"
done
