"""CPU tests of the kernel package: configs, sources, ptxas resources (needs nvcc), input checks."""
from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import kernels
from kernels import build
from kernels.configs import SHIPPED_FLASH, SHIPPED_MATMUL, FlashConfig, MatmulConfig

SM80_MAX_SMEM = 166912  # opt-in dynamic shared memory per block on sm_80 (163 KB)

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


# --------------------------------------------------------------------------- configs

def test_import_needs_no_torch_or_cupy():
    code = ("import sys, kernels, kernels.build, kernels.configs, kernels.checks, kernels.flash_sm80, "
            "kernels.unfused; bad=[m for m in sys.modules if m.split('.')[0] in ('torch','cupy')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_smem_formulas():
    c = FlashConfig(128, 64, 4, 2, 128)
    assert c.smem_bytes(2) == (128 + 2 * 2 * 64) * 128 * 2 == 98304
    assert FlashConfig(128, 64, 4, 1, 128).smem_bytes(2) == 65536
    m = MatmulConfig(128, 128, 32, 4, 3)
    assert m.smem_bytes(2) == 3 * (128 + 128) * 32 * 2 == 49152
    assert c.as_dict() == {"block_m": 128, "block_n": 64, "warps": 4, "stages": 2, "head_dim": 128}
    assert FlashConfig.from_dict(c.as_dict()) == c
    assert MatmulConfig.from_dict(m.as_dict()) == m


def test_shipped_configs_valid_and_fit_sm80():
    for d in kernels.SUPPORTED_HEAD_DIMS:
        n = [c for c in SHIPPED_FLASH if c.head_dim == d]
        assert 8 <= len(n) <= 12, (d, len(n))
    assert len(set(SHIPPED_FLASH)) == len(SHIPPED_FLASH)
    assert FlashConfig(128, 64, 4, 2, 128) in SHIPPED_FLASH  # FA2-like tile (128 x 64, 4 warps)
    for c in SHIPPED_FLASH + SHIPPED_MATMUL:
        assert c.problems() == [], (c, c.problems())
        assert c.smem_bytes(2) <= SM80_MAX_SMEM, c


def test_invalid_configs_reported():
    assert FlashConfig(96, 64, 4, 2, 128).problems()      # 96 % 64
    assert FlashConfig(128, 24, 4, 2, 128).problems()     # 24 % 16
    assert FlashConfig(128, 64, 4, 0, 128).problems()     # stages
    assert FlashConfig(128, 64, 4, 2, 96).problems()      # head dim
    assert MatmulConfig(128, 128, 24, 4, 3).problems()


# --------------------------------------------------------------------------- sources

def test_kernel_source_inlines_includes():
    src = build.kernel_source("flash_fwd_sm80.cuh")
    assert '#include "' not in src
    assert "flash_fwd_kernel" in src and "struct TileLoader" in src
    assert src.count("struct TileLoader") == 1
    src = build.kernel_source("unfused.cuh")
    assert "matmul_kernel" in src and "softmax_rows_kernel" in src
    assert "__shared__" in src and src.count("__shared__") == 1  # the one dynamic array, no static smem


def test_instantiation_unit_lists_every_variant():
    unit = build.instantiation_unit()
    n_flash = unit.count("iom::flash_fwd_kernel<")
    assert n_flash == len(SHIPPED_FLASH) * 2 * 2
    assert unit.count("iom::matmul_kernel<") == len(SHIPPED_MATMUL) * 2 * 2
    assert unit.count("iom::softmax_rows_kernel<") == 2


def test_parse_ptxas_and_demangle():
    name = "_ZN3iom16flash_fwd_kernelINS_4bf16ELi128ELi64ELi4ELi2ELi128ELb1EEEvPKT_S4_S4_PS2_Pfxxxxxxxxxxxxiiiiff"
    text = (f"ptxas info    : Compiling entry function '{name}' for 'sm_80'\n"
            f"ptxas info    : Function properties for {name}\n"
            "    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
            "ptxas info    : Used 255 registers, used 1 barriers, 16 bytes smem, 512 bytes cmem[0]\n")
    rec = build.parse_ptxas(text)[name]
    assert rec["registers"] == 255 and rec["spill_stores"] == 8 and rec["spill_loads"] == 12
    assert rec["static_smem"] == 16
    kind, desc = build.demangle(name)
    assert kind == "flash_fwd" and desc["config"] == FlashConfig(128, 64, 4, 2, 128)
    assert desc["dtype"] == "bf16" and desc["causal"] is True
    mm = "_ZN3iom13matmul_kernelINS_4fp16ELi128ELi128ELi32ELi4ELi3ELb0ELb0EEEvPKT_S4_Pviiiixxxxxxxxxiif"
    kind, desc = build.demangle(mm)
    assert kind == "matmul" and desc["config"] == MatmulConfig(128, 128, 32, 4, 3)
    assert desc["dtype"] == "fp16" and desc["b_kmajor"] is False and desc["out_f32"] is False


# --------------------------------------------------------------------------- nvcc / ptxas

@pytest.fixture(scope="module")
def reports():
    # one nvcc call per architecture, both at once (the two CI cores)
    with ThreadPoolExecutor(max_workers=len(build.ARCHS)) as ex:
        futs = {arch: ex.submit(build.resource_report, arch) for arch in build.ARCHS}
        return {arch: f.result() for arch, f in futs.items()}


@needs_nvcc
@pytest.mark.parametrize("arch", build.ARCHS)
def test_every_shipped_config_compiles_without_spills(reports, arch):
    rows = reports[arch]
    flash = {(r["config"], r["dtype"], r["causal"]): r for r in rows if r["kind"] == "flash_fwd"}
    for cfg in SHIPPED_FLASH:
        for dtype in ("bf16", "fp16"):
            for causal in (False, True):
                assert (cfg, dtype, causal) in flash, (arch, cfg, dtype, causal)
    mm = {(r["config"], r["dtype"], r["b_kmajor"]): r for r in rows if r["kind"] == "matmul"}
    for cfg in SHIPPED_MATMUL:
        for dtype in ("bf16", "fp16"):
            for kmajor in (False, True):
                assert (cfg, dtype, kmajor) in mm, (arch, cfg, dtype, kmajor)
    assert sum(r["kind"] == "softmax" for r in rows) == 2
    for r in rows:
        tag = (arch, r["kind"], r["config"], r["dtype"])
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, ("spills", tag, r)
        assert r["static_smem"] == 0, ("static smem", tag, r)     # dynamic shared memory only
        assert r["registers"] is not None and r["registers"] <= 255, tag
        if r["config"] is not None:
            assert r["dynamic_smem"] == r["config"].smem_bytes(2)
            assert r["dynamic_smem"] <= SM80_MAX_SMEM


# --------------------------------------------------------------------------- input checks (torch CPU)

def test_input_checks_with_cpu_tensors():
    torch = pytest.importorskip("torch")
    from kernels.checks import check_flash_config, check_qkv, check_scale

    bf = torch.bfloat16
    q = torch.zeros(1, 4, 16, 64, dtype=bf)
    k = torch.zeros(1, 2, 16, 64, dtype=bf)
    with pytest.raises(ValueError, match="CUDA"):
        kernels.flash_attention(q, k, k)
    with pytest.raises(ValueError, match="CUDA"):
        kernels.attention_unfused(q, k, k)
    shape = check_qkv(q, k, k, require_cuda=False)
    assert shape == {"B": 1, "H": 4, "H_kv": 2, "N_q": 16, "N_k": 16, "d": 64, "dtype": "bf16"}
    with pytest.raises(TypeError, match="torch.Tensor"):
        check_qkv([1], k, k, require_cuda=False)
    with pytest.raises(TypeError, match="bfloat16 or torch.float16"):
        check_qkv(q.float(), k.float(), k.float(), require_cuda=False)
    with pytest.raises(TypeError, match="one dtype"):
        check_qkv(q, k.half(), k, require_cuda=False)
    with pytest.raises(ValueError, match="4-D"):
        check_qkv(q[0], k, k, require_cuda=False)
    with pytest.raises(ValueError, match="head dims differ"):
        check_qkv(q, torch.zeros(1, 2, 16, 128, dtype=bf), k, require_cuda=False)
    with pytest.raises(ValueError, match="supported head dims"):
        check_qkv(torch.zeros(1, 4, 16, 32, dtype=bf), torch.zeros(1, 2, 16, 32, dtype=bf),
                  torch.zeros(1, 2, 16, 32, dtype=bf), require_cuda=False)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        check_qkv(torch.zeros(1, 3, 16, 64, dtype=bf), k, k, require_cuda=False)
    with pytest.raises(ValueError, match="batch sizes differ"):
        check_qkv(torch.zeros(2, 4, 16, 64, dtype=bf), k, k, require_cuda=False)
    with pytest.raises(ValueError, match="stride 1"):
        qt = torch.zeros(1, 4, 64, 16, dtype=bf).transpose(2, 3)
        check_qkv(qt, k, k, require_cuda=False)
    with pytest.raises(ValueError, match="non-zero"):
        check_qkv(torch.zeros(1, 4, 0, 64, dtype=bf), k, k, require_cuda=False)
    with pytest.raises(ValueError, match="same"):
        check_qkv(q, k, torch.zeros(1, 2, 8, 64, dtype=bf), require_cuda=False)
    with pytest.raises(ValueError, match="head_dim"):
        check_flash_config(FlashConfig(128, 64, 4, 2, 128), 64)
    with pytest.raises(ValueError, match="multiple of 16\\*warps"):
        check_flash_config({"block_m": 96, "block_n": 64, "warps": 4, "stages": 2, "head_dim": 64}, 64)
    with pytest.raises(TypeError):
        check_flash_config("128x64", 64)
    assert check_scale(None, 64) == 0.125
    with pytest.raises(ValueError, match="positive"):
        check_scale(-1.0, 64)


def test_config_none_needs_model_clear_error(monkeypatch):
    """config=None consults iomodel.api.rank_configs; without it the error says so."""
    pytest.importorskip("torch")
    try:
        importlib.import_module("iomodel.api")
        pytest.skip("iomodel.api is importable here")
    except ImportError:
        pass
    from kernels import flash_sm80

    with pytest.raises(RuntimeError, match="rank_configs"):
        flash_sm80.choose_flash_config({"B": 1, "H": 1, "H_kv": 1, "N_q": 1, "N_k": 1, "d": 64,
                                        "dtype": "bf16"}, False, None)
