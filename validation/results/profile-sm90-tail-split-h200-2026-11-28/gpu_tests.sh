#!/usr/bin/env bash
# The GPU tests of the wgmma kernels with the forward's tail split (and the backward's arrival barrier), within one
# device call: every shipped forward config (bf16, causal and not) compiled concurrently first (the kernel cache on
# disk), then the split's own tests, the forward's, the backward's (its combine_pieces changed) and the varlen,
# window, score-modifier and head-dim tests of the Hopper path, each file's log under $OUT.
# Usage from the repository root: OUT=dir bash <this file> [seconds]
set -u
OUT=${OUT:-/tmp}
LIMIT=${1:-520}
export PYTHONPATH=${PYTHONPATH:-.}
python3 - <<'PY'
import itertools, time
from iomodel import families
from kernels import compile as kcompile, flash_sm90
t0 = time.time()
fam = families.get("flash_sm90")
jobs = [(lambda c, ca: lambda: flash_sm90.module(c, "bf16", ca))(c, ca)
        for c, ca in itertools.product(fam.shipped, (False, True))]
print(f"precompiled {kcompile.precompile(jobs)} variants in {time.time() - t0:.0f} s", flush=True)
PY
end=$((SECONDS + LIMIT))
run() {  # name, pytest args...
    local name=$1 left=$((end - SECONDS))
    shift
    [ "$left" -gt 10 ] || { echo "$name: no time left"; return; }
    timeout "$left" python3 -m pytest -q -p no:cacheprovider "$@" > "$OUT/$name.log" 2>&1
    echo "$name: rc=$? $(tail -1 "$OUT/$name.log")"
}
run tail_split tests/kernels/test_gpu_tail_split_sm90.py
run sm90 tests/kernels/test_gpu_sm90.py -k "not fp16"
run bwd tests/kernels/test_gpu_bwd.py -k "hopper"
run varlen tests/kernels/test_gpu_varlen.py -k "auto"
run window tests/kernels/test_gpu_window.py -k "sm90 or flash_attn_func or persistent"
run mods tests/kernels/test_gpu_score_mods.py -k "sm90 and not sanitizer"
run head_dims tests/kernels/test_gpu_head_dims.py -k "sm90 or pick or flash_attn_func"
