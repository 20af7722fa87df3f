"""The decode rows' read floor (validation/read_floor.py) built by nvcc for sm_80 and sm_90a without a GPU:
it compiles, keeps its four 16-byte loads (LDG.E.128, the non-coherent path) and spills nothing.  Skipped
when nvcc is not on PATH (the SASS check when cuobjdump is not)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from validation.read_floor import SOURCE

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_read_floor_builds_without_spills(tmp_path, arch):
    src, cubin = tmp_path / "read_floor.cu", tmp_path / "read_floor.cubin"
    src.write_text(SOURCE)
    r = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-o", str(cubin), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", r.stderr), r.stderr
    assert "bytes stack frame" not in r.stderr or "0 bytes stack frame" in r.stderr
    if shutil.which("cuobjdump") is None:   # a CPU machine with nvcc but not cuobjdump: the build is checked
        pytest.skip("cuobjdump not on PATH: the loads' SASS is not checked")
    sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, timeout=120).stdout
    assert len(re.findall(r"LDG\.E\.128\.CONSTANT", sass)) == 4, sass[:3000]   # the four loads of a step
