"""The shipped Hopper kernels really issue wgmma: their SASS shows HGMMA and no local-memory traffic.

Needs nvcc and cuobjdump (the GPU machine has both; a CPU machine without cuobjdump skips)."""
import shutil

import pytest

from iomodel.families import flash_sm90
from kernels import reports

pytestmark = pytest.mark.skipif(shutil.which("cuobjdump") is None or shutil.which("nvcc") is None,
                                reason="needs nvcc and cuobjdump")


@pytest.mark.slow
def test_every_shipped_sm90_kernel_issues_hgmma():
    counts = reports.sass_report()
    assert counts, "cuobjdump listed no kernel"
    assert len(counts) == len(flash_sm90.SHIPPED) * 2  # bf16, causal and not
    for name, c in counts.items():
        assert c["HGMMA"] > 0, f"{name}: no HGMMA in SASS"
        assert c["LDL"] == 0 and c["STL"] == 0, f"{name}: local memory traffic {c}"
