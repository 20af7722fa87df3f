#!/usr/bin/env bash
# GPU test files in turn within one device call's time (a call holds at most 600 s): each "name|pytest args" runs
# only while time is left (the rest of it its timeout), its log in $OUT/name.log, a line each with pytest's summary.
# Exits non-zero when a file failed or ran out of time.  From the repository root on the GPU machine:
#   OUT=dir bash validation/gpu_tests.sh SECONDS "wide|tests/kernels/test_gpu_wide_schedule_sm90.py" \
#       "sm90|tests/kernels/test_gpu_sm90.py -k 'not fp16'"
# A file that builds many modules one at a time runs faster with its tests in processes side by side: the GPU
# machine's image has pytest-xdist, so add -n 8 to its args (the modules' disk cache is shared).  On 2026-11-29
# test_gpu_sm90.py took 34 s with -n 8 (183 passed), test_gpu_score_mods.py 64 s (84); test_gpu_head_dims.py, cut
# off twice without it, still ran out of a call's 380 s with it (30 passed, none failed), and with -n 16 in a call of
# its own ran 102 of its 104 tests in 530 s (none failed): split it over two calls, e.g. -k "sm80 or Sm80Config" in
# one and -k "not sm80 and not Sm80Config" in the other.
set -u
OUT=${OUT:-/tmp}
LIMIT=${1:?usage: gpu_tests.sh SECONDS "name|pytest args" ...}
shift
export PYTHONPATH=${PYTHONPATH:-.}
mkdir -p "$OUT"
end=$((SECONDS + LIMIT))
status=0
for spec in "$@"; do
    name=${spec%%|*}
    args=${spec#*|}
    left=$((end - SECONDS))
    if [ "$left" -le 10 ]; then
        echo "$name: not run (no time left)"
        status=1
        continue
    fi
    eval "set -- $args"
    timeout "$left" python3 -m pytest -q -p no:cacheprovider "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || status=1
    echo "$name: rc=$rc $(tail -1 "$OUT/$name.log")"
done
exit $status
