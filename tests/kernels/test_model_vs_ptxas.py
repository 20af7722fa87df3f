"""The model's SMEM and register estimates against what ptxas reports for every shipped kernel."""
import shutil

import pytest

from iomodel import families
from iomodel.api import predict

pytestmark = [pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH"), pytest.mark.slow]
ARCHS = ("sm_80", "sm_90a")
TOLERANCE = 0.15


def _report(arch):
    from kernels.reports import sm80_resources
    return sm80_resources(arch)


def _model_for(row):
    c = row["config"]
    if row["kind"] == "flash_fwd":
        p = predict("flash_sm80", "h100-sxm", dict(B=1, H=1, N_q=4096, d=c.head_dim, dtype=row["dtype"]), c)
        return p.regs_per_thread, p.smem_bytes
    mc = c or families.get("unfused").shipped[0]
    p = predict("unfused", "h100-sxm", dict(B=1, H=1, N_q=4096, d=128, dtype=row["dtype"]), mc)
    k = p.kernels[1] if row["kind"] == "softmax" else p.kernels[0]
    return k["regs"], k["smem_bytes"]


@pytest.mark.parametrize("arch", ARCHS)
def test_smem_exact_and_registers_within_tolerance(arch):
    rows = _report(arch)
    assert {r["kind"] for r in rows} == {"flash_fwd", "matmul", "softmax"}
    table, bad = [], []
    for r in rows:
        regs, smem = _model_for(r)
        # the registers a kernel can use are capped at 255: compare what the model says it would get
        regs = min(regs, 255)
        err = (regs - r["registers"]) / r["registers"]
        table.append(f"{r['kind']:<9} {str(r['config']):<75} {r['dtype']} ptxas {r['registers']:>3} model {regs:>5.0f} "
                     f"({100 * err:+.1f}%) smem ptxas-static {r['static_smem']} + dynamic {r['dynamic_smem']} model {smem:.0f}")
        if r["static_smem"] != 0 or smem != r["dynamic_smem"] or abs(err) > TOLERANCE:
            bad.append(table[-1])
    print("\n".join(table))
    assert not bad, "model disagrees with ptxas:\n" + "\n".join(bad)
