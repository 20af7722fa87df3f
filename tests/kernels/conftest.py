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


@pytest.fixture
def random_qkv():
    """make(B, H, H_kv, n_q, n_k, d, dtype=bf16, seed=0, gain=1.0) -> q (B, H, n_q, d), k and v (B, H_kv, n_k,
    d): fresh standard normal values (times `gain`) on the GPU."""
    import torch

    def make(B, H, H_kv, n_q, n_k, d, dtype=torch.bfloat16, seed=0, gain=1.0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        draw = lambda h, n: (gain * torch.randn((B, h, n, d), generator=g, device="cuda")).to(dtype)   # noqa: E731
        return draw(H, n_q), draw(H_kv, n_k), draw(H_kv, n_k)

    return make


@pytest.fixture
def check_attention():
    """check(out, lse, q, k, v, causal, tol, **features): O and the LSE against the float32 reference
    (``validation.reference``, with a window, softcap or ALiBi slopes): the relative error of O under
    `tol`, the LSE within 2e-2 where a row sees keys, and O = 0, LSE = -inf where it sees none."""
    import torch

    from validation.reference import attention_reference

    def check(out, lse, q, k, v, causal, tol, **features):
        ref, ref_lse = attention_reference(q, k, v, causal, **features)
        seen = torch.isfinite(ref_lse)
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        assert err < tol, err
        assert torch.equal(torch.isfinite(lse), seen)
        assert (lse[seen] - ref_lse[seen]).abs().max().item() < 2e-2
        assert (out[~seen] == 0).all()

    return check
