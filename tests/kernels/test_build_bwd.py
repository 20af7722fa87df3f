"""CPU tests of the backward kernels (flash_bwd_sm80): shipped configs, names, and what ptxas reports for
sm_80 and sm_90a with the local nvcc: at most 255 registers and at most SPILL_BYTES of spill loads or stores
(the 4-warp configs run at the register cap and spill a few dozen bytes, in L1; configs that spilled
hundreds were not shipped)."""
from __future__ import annotations

import shutil

import pytest

from iomodel.families.flash_bwd_sm80 import SHIPPED, FlashBwdConfig
from kernels import compile, flash_bwd_sm80, reports

SM80_MAX_SMEM = 166912   # opt-in dynamic shared memory per block on sm_80 (163 KB)
SPILL_BYTES = 64
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def test_shipped_configs_build_and_fit_sm80():
    assert len(set(SHIPPED)) == len(SHIPPED)
    for d in (64, 128):
        assert 3 <= sum(c.head_dim == d for c in SHIPPED) <= 8
    for c in SHIPPED:
        assert c.problems() == [], (c, c.problems())
        assert max(c.smem_bytes(), c.dq_smem_bytes()) <= SM80_MAX_SMEM, c


def test_config_problems_are_named():
    assert "block_k" in " ".join(FlashBwdConfig(64, 48, 4, 2, 64).problems())
    assert "block_q" in " ".join(FlashBwdConfig(48, 64, 4, 2, 64).problems())
    assert "stages" in " ".join(FlashBwdConfig(64, 64, 4, 3, 64).problems())
    assert "head_dim" in " ".join(FlashBwdConfig(64, 64, 4, 2, 96).problems())
    assert "dQ tile" in " ".join(FlashBwdConfig(32, 128, 8, 2, 64).problems())


def test_kernel_names_follow_the_mode():
    cfg = FlashBwdConfig(64, 128, 8, 2, 128)
    dot, main, last = flash_bwd_sm80.kernel_names(cfg, "fp16", True, False)
    assert dot == "iom::flash_bwd_dot_kernel<iom::fp16, 128>"
    assert main == "iom::flash_bwd_kernel<iom::fp16, 64, 128, 8, 2, 128, true, true>"
    assert last == "iom::flash_bwd_convert_kernel<iom::fp16, 128, 64, iom::DqLayout<64, 8, 128>>"
    _, main, last = flash_bwd_sm80.kernel_names(cfg, "bf16", False, True)
    assert main.endswith("false, false>")   # no atomic dQ in the deterministic mode
    assert last == "iom::flash_bwd_dq_kernel<iom::bf16, 64, 64, 2, 128, false>"   # 64-key chunks at d=128
    assert cfg.dq_smem_bytes() == (2 * 64 + 2 * 2 * 64) * 128 * 2   # Q, dO and two (K, V) chunks of 64 keys


def _ptxas(configs, arch, tmp_path, **kw) -> dict:
    unit = flash_bwd_sm80.instantiation_unit(configs, **kw)
    _, log = compile.run_nvcc(unit, arch, tmp_path, f"bwd_{arch}", ("-Xptxas", "-v"))
    return reports.parse_ptxas(log)


def _assert_clean(recs: dict, expected: int) -> None:
    assert len(recs) == expected, sorted(recs)
    for name, rec in recs.items():
        assert rec["spill_stores"] <= SPILL_BYTES and rec["spill_loads"] <= SPILL_BYTES, (name, rec)
        assert rec["registers"] <= 255, (name, rec)


@needs_nvcc
def test_one_variant_builds_clean_for_sm90a(tmp_path):
    recs = _ptxas([FlashBwdConfig(64, 128, 8, 2, 128)], "sm_90a", tmp_path, causal=(True,))
    _assert_clean(recs, 5)   # dot, convert, the main kernel with and without dQ, the deterministic dQ kernel


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("arch", ("sm_80", "sm_90a"))
def test_every_shipped_variant_builds_clean(arch, tmp_path):
    recs = _ptxas(SHIPPED, arch, tmp_path)
    names = {n for c in SHIPPED for causal in (False, True) for det in (False, True)
             for n in flash_bwd_sm80.kernel_names(c, "bf16", causal, det)}
    _assert_clean(recs, len(names))


def test_source_inlines_every_header_once():
    src = compile.kernel_source("flash_bwd_sm80.cuh")
    assert '#include "' not in src   # NVRTC gets one text: no include path
    assert src.count("void mma_abt") == 1 and src.count("struct TileLoader") == 1
    assert "flash_bwd_dq_kernel" in src and "flash_bwd_convert_kernel" in src
