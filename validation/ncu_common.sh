#!/usr/bin/env bash
# Sourced by the Nsight Compute scripts of validation/results/ (from the repository root, on a GPU machine): NCU (the
# ncu binary), OUT (made) and ncu_profile.  The caller sets NCU_FLAGS, an array of ncu's sections and metrics.
set -u
export PYTHONPATH=${PYTHONPATH:-.}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
OUT=${OUT:-profiles}
mkdir -p "$OUT"
# ncu_profile NAME SECONDS ARGS...: one launch (after two) of an Sm90 kernel of `python -m validation.profile ARGS`,
# clocks locked at base (a cycle for a cycle), NCU_FLAGS' sections -> $OUT/NAME.csv, ncu's stderr -> $OUT/ncu.log
ncu_profile() {
    local name=$1 secs=$2
    shift 2
    timeout "$secs" "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" \
        "${NCU_FLAGS[@]}" --csv --page details python3 -m validation.profile "$@" > "$OUT/$name.csv" 2>> "$OUT/ncu.log"
    echo "$name: rc=$? $(wc -l < "$OUT/$name.csv") lines"
}
