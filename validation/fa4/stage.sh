#!/usr/bin/env bash
# On the GPU machine, once a call (validation/fa4/fetch.sh says how): copy the carried part into /tmp/fa4w; with the
# third, join libs-cu13's pieces and install every wheel into /tmp/fa4 (`--target` skips the package's .pth, so the
# caller puts /tmp/fa4 and /tmp/fa4/nvidia_cutlass_dsl/dsl_packages on PYTHONPATH).  Exits non-zero on a missing part.
set -euo pipefail
mkdir -p /tmp/fa4w
for n in 1 2 3; do
    if [ -d ".fa4-part$n" ]; then cp .fa4-part$n/* /tmp/fa4w/; echo "fa4: part $n staged"; fi
done
[ -f /tmp/fa4w/cu13.name ] || exit 0          # parts 1 and 2: nothing to install yet
for piece in aa ab ac; do
    [ -f "/tmp/fa4w/cu13.part.$piece" ] || { echo "fa4: libs-cu13 piece $piece missing (carry the parts in order)"; exit 1; }
done
cat /tmp/fa4w/cu13.part.aa /tmp/fa4w/cu13.part.ab /tmp/fa4w/cu13.part.ac > "/tmp/fa4w/$(cat /tmp/fa4w/cu13.name)"
rm /tmp/fa4w/cu13.part.* /tmp/fa4w/cu13.name
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fa4 /tmp/fa4w/*.whl
# (a warm machine keeps /tmp/fa4w between calls: an install from a partial set there must not pass for one)
PYTHONPATH=/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 -c "import flash_attn.cute" 2>/dev/null ||
    { echo "fa4: installed, but flash_attn.cute does not import (a part missing? carry all three again)"; exit 1; }
echo "fa4: installed in /tmp/fa4"
