"""CPU checks of the Hopper backward (``flash_bwd_sm90``): kernel names and text, the SMEM formula against
the kernel's own constant, and an nvcc build of every shipped variant for sm_90a (no spills, no ptxas
warning of serialised wgmma or injected fences, HGMMA in the SASS, no local memory).  The build tests
skip when nvcc is not on PATH."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from iomodel.families.flash_bwd_sm90 import SHIPPED, FlashBwdSm90Config
from kernels import compile, flash_bwd_sm90, reports

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
H100_MAX_SMEM = 232448  # opt-in limit per block (227 KiB)
VARIANTS = [(c, dt, ca, det) for c in SHIPPED for dt in ("bf16", "fp16") for ca in (False, True) for det in (False, True)]


def test_kernel_names_and_text():
    cfg = FlashBwdSm90Config(64, 128, 2, 128, 2)
    dot, main, convert = flash_bwd_sm90.kernel_names(cfg, "bf16", True, True)
    assert dot == "iom::flash_bwd_dot_kernel<iom::bf16, 128>"
    assert main == "flash_bwd_sm90_m64n128s2d128c2_bf16_causal_det"
    assert convert == "iom::flash_bwd_convert_kernel<iom::bf16, 128, 64, sm90::DqSlices<64, 2, 128>>"
    unit = flash_bwd_sm90.unit([(cfg, "bf16", True, True), (cfg, "fp16", False, False)])
    assert "sm90::BwdTraits<64, 128, 2, 128, 2, true, true, true>" in unit
    assert "sm90::BwdTraits<64, 128, 2, 128, 2, false, false, false>" in unit
    assert unit.count('extern "C" __global__') == 2


def test_shipped_fit_and_split():
    for cfg in SHIPPED:
        assert not cfg.problems(), cfg
        assert cfg.smem_bytes(2) <= H100_MAX_SMEM, cfg
        assert cfg.dq_slice % 64 == 0 and cfg.block_n == 64 * cfg.consumers


@needs_nvcc
@pytest.mark.slow
def test_smem_formula_matches_kernel(tmp_path):
    lines = ['#include "flash_bwd_sm90.cuh"']
    for i, c in enumerate(SHIPPED):
        for det in ("false", "true"):
            lines.append(f"static_assert(sm90::BwdTraits<{c.block_m}, {c.block_n}, {c.stages}, {c.head_dim}, "
                         f"{c.consumers}, true, false, {det}>::kSmemBytes == {c.smem_bytes(2)}, \"cfg {i}\");")
    cu = tmp_path / "smem.cu"
    cu.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["nvcc", "-cubin", compile.gencode("sm_90a"), compile.STD, f"-I{compile.CSRC}", str(cu),
                          "-o", str(tmp_path / "smem.cubin")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("bwd_sm90")
    cubin, log = compile.run_nvcc(flash_bwd_sm90.offline_unit(VARIANTS), "sm_90a", out, "bwd_sm90",
                                  ("-Xptxas", "-v"))
    return str(cubin), log


@needs_nvcc
@pytest.mark.slow
def test_every_shipped_variant_builds_clean(build):
    cubin, log = build
    ptxas = reports.parse_ptxas(log)
    mains = {flash_bwd_sm90.kernel_names(*v)[1] for v in VARIANTS}
    assert mains <= set(ptxas), sorted(mains - set(ptxas))
    for name in mains:
        r = ptxas[name]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack"] == 0, (name, r)
        assert r["static_smem"] == 0, (name, r)
    # C7508: setmaxnreg ignored; C7509-C7520: wgmma serialised, fences or arrives injected
    warned = [m.group(0) for m in reports._PTXAS_WARN.finditer(log)]
    assert not warned, warned
    sass = reports.sass_counts(cubin)
    if sass is not None:
        for name in mains:
            assert sass[name]["HGMMA"] > 0, name
            assert sass[name]["LDL"] == 0 and sass[name]["STL"] == 0, (name, sass[name])
