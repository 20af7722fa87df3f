#!/usr/bin/env bash
# The GPU tests touched by the one-CTA-a-tile grid above d = 128 (kernels/sm90_schedule.py) within one device call:
# the wide schedule's own file first, then the forward's, the head dims', the plans' and the score modifiers' on the
# Hopper path, each file's log under $OUT, each run only while time is left.
# Usage from the repository root: OUT=dir bash <this file> [seconds]
set -u
OUT=${OUT:-/tmp}
LIMIT=${1:-480}
export PYTHONPATH=${PYTHONPATH:-.}
end=$((SECONDS + LIMIT))
run() {  # name, pytest args...
    local name=$1 left=$((end - SECONDS))
    shift
    [ "$left" -gt 10 ] || { echo "$name: no time left"; return; }
    timeout "$left" python3 -m pytest -q -p no:cacheprovider "$@" > "$OUT/$name.log" 2>&1
    echo "$name: rc=$? $(tail -1 "$OUT/$name.log")"
}
run wide tests/kernels/test_gpu_wide_schedule_sm90.py
run plans tests/kernels/test_gpu_plans.py
run sm90 tests/kernels/test_gpu_sm90.py -k "not fp16"
run mods tests/kernels/test_gpu_score_mods.py -k sm90
run head_dims tests/kernels/test_gpu_head_dims.py
