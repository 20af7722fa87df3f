"""Fixtures of the kernel tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def kernels_debug():
    """The kernels' debug mode for a whole module of GPU tests: NaN-poisoned outputs, a synchronize and
    error check after every launch."""
    from kernels.runtime import debugging

    with debugging():
        yield


#: what each compute-sanitizer tool prints for a clean run
SANITIZER_CLEAN = {"memcheck": "ERROR SUMMARY: 0 errors",
                   "racecheck": "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"}


@pytest.fixture
def sanitized():
    """run(tool, module) -> the stdout of `compute-sanitizer --tool TOOL python -m MODULE`, asserted clean
    and successful; skips where compute-sanitizer is not installed."""
    import glob
    import shutil
    import subprocess
    import sys

    exe = shutil.which("compute-sanitizer") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"))), None)
    if exe is None:
        pytest.skip("compute-sanitizer not installed")

    def run(tool: str, module: str) -> str:
        proc = subprocess.run([exe, "--tool", tool, sys.executable, "-m", module], capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0 and SANITIZER_CLEAN[tool] in proc.stdout, proc.stdout[-3000:]
        return proc.stdout

    return run
