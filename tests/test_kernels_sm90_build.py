"""CPU checks of the sm90 FlashAttention kernel: configs, SMEM formula, and an nvcc build of every
shipped config for sm_90a (no spills, setmaxnreg honoured, no wgmma serialisation, no static SMEM).
The build tests skip when nvcc is not on PATH."""

import shutil
import subprocess
import sys

import pytest

from kernels import sm90
from kernels.sm90 import SHIPPED_SM90, Sm90Config

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def test_import_needs_no_torch():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['cupy'] = None\n"
            "import kernels.sm90 as m; print(m.SHIPPED_SM90[0].smem_bytes(2))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_smem_formula_terms():
    c = Sm90Config(128, 128, 2, 128, 2)
    # 1024 slack + Q 128*128*2 + 2 stages * (K + V) 2*128*128*2 + 8 * (2 + 4*2) mbarriers
    assert c.smem_bytes(2) == 1024 + 32768 + 2 * 65536 + 80
    assert c.smem_bytes(2) == (1024 + c.q_tile_bytes(2) + c.stages * 2 * c.kv_chunk_bytes(2)
                               + c.mbarrier_bytes())
    for cfg in SHIPPED_SM90:
        assert cfg.smem_bytes(2) <= 232448, cfg  # H100 opt-in limit per block (227 KiB)


@pytest.mark.parametrize("kwargs", [dict(block_m=128, block_n=128, stages=2, head_dim=96),
                                    dict(block_m=100, block_n=128, stages=2, head_dim=64),
                                    dict(block_m=128, block_n=120, stages=2, head_dim=64),
                                    dict(block_m=128, block_n=128, stages=0, head_dim=64),
                                    dict(block_m=256, block_n=128, stages=2, head_dim=64, consumers=4)])
def test_config_rejects(kwargs):
    with pytest.raises(ValueError):
        Sm90Config(**kwargs)


def test_shipped_cover_head_dims():
    for d in (64, 128, 256):
        assert sm90.shipped_for(d), d
        assert sm90.default_config(d, False) in SHIPPED_SM90
        assert sm90.default_config(d, True) in SHIPPED_SM90


def test_wgmma_header_in_sync():
    assert (sm90.CSRC / "sm90_wgmma.cuh").read_text() == sm90._wgmma_header_text()


@pytest.fixture(scope="module")
def report():
    return sm90.resource_report()


@needs_nvcc
@pytest.mark.slow
def test_every_shipped_config_builds_clean(report):
    names = [k for k in report if not k.startswith("_")]
    assert len(names) == len(SHIPPED_SM90) * 2 * 2
    for name in names:
        r = report[name]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, (name, r)
        assert r["stack_frame"] == 0, (name, r)
        assert r["static_smem"] == 0, (name, r)
        # C7508: setmaxnreg ignored; C7509-C7515: wgmma serialised / fences injected
        assert not r["ptxas_codes"], (name, r["ptxas_codes"])
    assert "C7508" not in report["_log"]


@needs_nvcc
@pytest.mark.slow
def test_smem_formula_matches_kernel(tmp_path):
    lines = ['#include "flash_fwd_sm90.cuh"']
    for i, c in enumerate(SHIPPED_SM90):
        lines.append(f"static_assert(sm90::FwdTraits<{c.block_m}, {c.block_n}, {c.stages}, {c.head_dim}, "
                     f"{c.consumers}, true, false>::kSmemBytes == {c.smem_bytes(2)}, \"cfg {i}\");")
    cu = tmp_path / "smem.cu"
    cu.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["nvcc", "-cubin", *sm90.NVCC_ARCH_FLAGS, "-std=c++17", f"-I{sm90.CSRC}", str(cu),
                          "-o", str(tmp_path / "smem.cubin")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
