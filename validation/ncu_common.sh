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
# The SASS probes' sections: source counters (each instruction's warp stall samples), the stall ratios, the pipes'.
SASS_FLAGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
            --section SchedulerStats --section LaunchStats --section SourceCounters
            --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:sm__inst_executed_pipe_(xu|fma|alu|fmaheavy|fmalite|uniform)\.avg\.pct_of_peak_sustained_active$")
# ncu_profile_sass NAME SECONDS ARGS...: as ncu_profile with SASS_FLAGS, the report kept in /tmp: its details page ->
# $OUT/NAME.csv and its SASS page -> $OUT/sass/NAME_sass.csv
ncu_profile_sass() {
    local name=$1 secs=$2
    shift 2
    mkdir -p "$OUT/sass"
    timeout "$secs" "$NCU" --clock-control base --launch-skip 2 --launch-count 1 -k "regex:Sm90|sm90" \
        "${SASS_FLAGS[@]}" -f -o "/tmp/$name" python3 -m validation.profile "$@" >> "$OUT/ncu.log" 2>&1
    "$NCU" -i "/tmp/$name.ncu-rep" --page details --csv > "$OUT/$name.csv" 2>> "$OUT/ncu.log"
    "$NCU" -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/sass/${name}_sass.csv" \
        2>> "$OUT/ncu.log"
    echo "$name: $(wc -l < "$OUT/$name.csv") detail lines, $(wc -l < "$OUT/sass/${name}_sass.csv") SASS lines"
}
