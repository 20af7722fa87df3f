"""The shipped Hopper kernels really issue wgmma: their SASS shows HGMMA and no local-memory traffic.

Needs nvcc and cuobjdump (the GPU machine has both; CI's CPU machine has no cuobjdump and skips)."""
import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("cuobjdump") is None or shutil.which("nvcc") is None,
                                reason="needs nvcc and cuobjdump")


def test_every_shipped_sm90_kernel_issues_hgmma():
    from kernels import sm90
    counts = sm90.sass_report()
    assert counts, "cuobjdump listed no kernel"
    assert len(counts) == len(sm90.SHIPPED_SM90) * 2  # bf16, causal and not
    for name, c in counts.items():
        assert c["HGMMA"] > 0, f"{name}: no HGMMA in SASS"
        assert c["LDL"] == 0 and c["STL"] == 0, f"{name}: local memory traffic {c}"
