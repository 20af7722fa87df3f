#!/usr/bin/env bash
# The GPU tests the last session's call left unrun, on the forward as shipped since 6547b4f: every head dim's
# configs (test_gpu_head_dims: mma.sync and wgmma, fp16 and bf16) and the fp16 half of test_gpu_sm90.  The
# variants they build are compiled concurrently first (NVRTC, the kernel cache on disk), then each file runs with
# what is left of the time, its log under $OUT.  Usage from the repository root: OUT=dir bash <this file> [seconds]
set -u
OUT=${OUT:-/tmp}
LIMIT=${1:-480}
export PYTHONPATH=${PYTHONPATH:-.}
python3 - <<'PY'
import itertools, time
from iomodel.families import flash_sm80, flash_sm90 as fam90
from kernels import compile as kcompile, driver, flash_sm80 as k80, flash_sm90 as k90
t0 = time.time()
arch = kcompile.nvrtc_arch(driver.capability(0))
dims = (32, 96, 192, 256)
jobs = [(lambda c, ca: lambda: k90.module(c, "fp16", ca))(c, ca)
        for c, ca in itertools.product(fam90.SHIPPED, (False, True))]
jobs += [(lambda c, ca: lambda: k90.module(c, "bf16", ca))(c, ca)
         for c, ca in itertools.product(fam90.SHIPPED, (False, True)) if c.head_dim in dims]
jobs += [(lambda c, ca: lambda: k80.module(c, "bf16", ca, arch))(c, ca)
         for c, ca in itertools.product(flash_sm80.SHIPPED, (False, True)) if c.head_dim in dims]
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
run head_dims tests/kernels/test_gpu_head_dims.py
run sm90_fp16 tests/kernels/test_gpu_sm90.py -k "fp16"
