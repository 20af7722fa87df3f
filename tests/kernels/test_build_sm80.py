"""CPU tests of the mma.sync kernels (flash_sm80, unfused): shipped configs, sources, instantiation,
ptxas resources (needs nvcc), input checks (torch CPU tensors)."""
from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

import kernels
from iomodel import families
from iomodel.errors import ModelError
from iomodel.families.flash_sm80 import FlashConfig
from iomodel.families.matmul_sm80 import MatmulConfig
from kernels import codegen, compile, reports

SM80_MAX_SMEM = 166912  # opt-in dynamic shared memory per block on sm_80 (163 KB)
SHIPPED_FLASH = families.get("flash_sm80").shipped
SHIPPED_MATMUL = families.get("unfused").shipped

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


# --------------------------------------------------------------------------- configs

def test_shipped_configs_valid_and_fit_sm80():
    for d in (64, 128):
        n = [c for c in SHIPPED_FLASH if c.head_dim == d]
        assert 8 <= len(n) <= 12, (d, len(n))
    assert len(set(SHIPPED_FLASH)) == len(SHIPPED_FLASH)
    assert FlashConfig(128, 64, 4, 2, 128) in SHIPPED_FLASH  # FA2-like tile (128 x 64, 4 warps)
    for c in SHIPPED_FLASH + SHIPPED_MATMUL:
        assert c.problems() == [], (c, c.problems())
        assert c.smem_bytes(2) <= SM80_MAX_SMEM, c


# --------------------------------------------------------------------------- sources

def test_kernel_source_inlines_includes():
    src = compile.kernel_source("flash_fwd_sm80.cuh")
    assert '#include "' not in src
    assert "flash_fwd_kernel" in src and "struct TileLoader" in src
    assert src.count("struct TileLoader") == 1
    src = compile.kernel_source("unfused.cuh")
    assert "matmul_kernel" in src and "softmax_rows_kernel" in src
    assert "__shared__" in src and src.count("__shared__") == 1  # the one dynamic array, no static smem


def test_template_ids():
    assert (codegen.flash_sm80_kernel(FlashConfig(128, 64, 4, 2, 128), "bf16", False)
            == "iom::flash_fwd_kernel<iom::bf16, 128, 64, 4, 2, 128, false, false>")
    held = FlashConfig(128, 64, 8, 2, 192, q_regs=1)   # Q_REGS, the twelfth, after the defaults before it
    assert (codegen.flash_sm80_kernel(held, "bf16", True)
            == "iom::flash_fwd_kernel<iom::bf16, 128, 64, 8, 2, 192, true, false, false, 0, false, true>")
    assert codegen.flash_sm80_kernel(held, "fp16", False, True, True, 3).endswith("true, true, 3, false, true>")
    assert codegen.unfused_kernels(MatmulConfig(128, 128, 32, 4, 3), "fp16") == (
        "iom::matmul_kernel<iom::fp16, 128, 128, 32, 4, 3, true, true>",
        "iom::softmax_rows_kernel<iom::fp16>",
        "iom::matmul_kernel<iom::fp16, 128, 128, 32, 4, 3, false, false>")
    with pytest.raises(ValueError, match="dtype"):
        codegen.softmax_kernel("fp32")


def test_instantiation_unit_lists_every_variant():
    unit = codegen.sm80_unit()
    assert unit.count("iom::flash_fwd_kernel<") == len(SHIPPED_FLASH) * 2 * 2
    assert unit.count("iom::matmul_kernel<") == len(SHIPPED_MATMUL) * 2 * 2
    assert unit.count("iom::softmax_rows_kernel<") == 2
    assert codegen.sm80_unit([FlashConfig(64, 64, 4, 1, 256)], ()).count("iom::flash_fwd_kernel<") == 4


def test_parse_ptxas_and_demangle():
    name = "_ZN3iom16flash_fwd_kernelINS_4bf16ELi128ELi64ELi4ELi2ELi128ELb1EEEvPKT_S4_S4_PS2_Pfxxxxxxxxxxxxiiiiff"
    text = (f"ptxas info    : Compiling entry function '{name}' for 'sm_80'\n"
            f"ptxas info    : Function properties for {name}\n"
            "    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
            "ptxas info    : Used 255 registers, used 1 barriers, 16 bytes smem, 512 bytes cmem[0]\n")
    rec = reports.parse_ptxas(text)[name]
    assert rec["registers"] == 255 and rec["spill_stores"] == 8 and rec["spill_loads"] == 12
    assert rec["static_smem"] == 16
    kind, desc = reports.demangle(name)
    assert kind == "flash_fwd" and desc["config"] == FlashConfig(128, 64, 4, 2, 128)
    assert desc["dtype"] == "bf16" and desc["causal"] is True
    held = "_ZN3iom16flash_fwd_kernelINS_4bf16ELi128ELi64ELi8ELi2ELi192ELb1ELb0ELb0ELi0ELb0ELb1EEEvPKT_S4_S4_PS2_Pf"
    assert reports.demangle(held)[1]["config"] == FlashConfig(128, 64, 8, 2, 192, q_regs=1)
    mm = "_ZN3iom13matmul_kernelINS_4fp16ELi128ELi128ELi32ELi4ELi3ELb0ELb0EEEvPKT_S4_Pviiiixxxxxxxxxiif"
    kind, desc = reports.demangle(mm)
    assert kind == "matmul" and desc["config"] == MatmulConfig(128, 128, 32, 4, 3)
    assert desc["dtype"] == "fp16" and desc["b_kmajor"] is False and desc["out_f32"] is False


# --------------------------------------------------------------------------- nvcc / ptxas

@pytest.fixture(scope="module")
def resources():
    # one nvcc call per architecture, both at once (the two CI cores)
    with ThreadPoolExecutor(max_workers=len(reports.ARCHS)) as ex:
        futs = {arch: ex.submit(reports.sm80_resources, arch) for arch in reports.ARCHS}
        return {arch: f.result() for arch, f in futs.items()}


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("arch", reports.ARCHS)
def test_every_shipped_config_compiles_without_spills(resources, arch):
    rows = resources[arch]
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
    # the plain and causal variants the family lists as spilling (not offered) may spill, and on sm_80 (where
    # the list is read) their bf16 builds do; nothing else spills
    listed = {(c, f) for c, f in families.get("flash_sm80").spilling_variants if f <= {"causal"}}
    spilled = set()
    for r in rows:
        tag = (arch, r["kind"], r["config"], r["dtype"])
        variant = (r["config"], frozenset({"causal"} if r.get("causal") else ()))
        if r["kind"] == "flash_fwd" and variant in listed:
            if r["dtype"] == "bf16" and r["spill_stores"]:
                spilled.add(variant)
        else:
            assert r["spill_stores"] == 0 and r["spill_loads"] == 0, ("spills", tag, r)
        assert r["static_smem"] == 0, ("static smem", tag, r)     # dynamic shared memory only
        assert r["registers"] is not None and r["registers"] <= 255, tag
        if r["config"] is not None:
            assert r["dynamic_smem"] == r["config"].smem_bytes(2)
            assert r["dynamic_smem"] <= SM80_MAX_SMEM
    if arch == "sm_80":
        assert spilled == listed


# --------------------------------------------------------------------------- input checks (torch CPU)

def test_input_checks_with_cpu_tensors():
    torch = pytest.importorskip("torch")
    from kernels.checks import check_config, check_qkv, check_scale

    bf = torch.bfloat16
    q = torch.zeros(1, 4, 16, 64, dtype=bf)
    k = torch.zeros(1, 2, 16, 64, dtype=bf)
    for call in (kernels.flash_attention, kernels.attention_unfused, lambda *a: kernels.run("flash_sm90", *a)):
        with pytest.raises(ValueError, match="CUDA"):
            call(q, k, k)
    shape = check_qkv(q, k, k, require_cuda=False)
    assert shape == {"B": 1, "H": 4, "H_kv": 2, "N_q": 16, "N_k": 16, "d": 64, "dtype": "bf16"}
    bad = [(TypeError, "torch.Tensor", ([1], k, k)),
           (TypeError, "bfloat16 or torch.float16", (q.float(), k.float(), k.float())),
           (TypeError, "one dtype", (q, k.half(), k)), (ValueError, "4-D", (q[0], k, k)),
           (ValueError, "head dims differ", (q, torch.zeros(1, 2, 16, 128, dtype=bf), k)),
           (ValueError, "multiple of key/value heads", (torch.zeros(1, 3, 16, 64, dtype=bf), k, k)),
           (ValueError, "batch sizes differ", (torch.zeros(2, 4, 16, 64, dtype=bf), k, k)),
           (ValueError, "stride 1", (torch.zeros(1, 4, 64, 16, dtype=bf).transpose(2, 3), k, k)),
           (ValueError, "non-zero", (torch.zeros(1, 4, 0, 64, dtype=bf), k, k)),
           (ValueError, "same", (q, k, torch.zeros(1, 2, 8, 64, dtype=bf)))]
    for exc, match, args in bad:
        with pytest.raises(exc, match=match):
            check_qkv(*args, require_cuda=False)
    x = torch.zeros(1, 2, 16, 32, dtype=bf)
    with pytest.raises(ValueError, match="supported head dims"):
        check_qkv(x, x, x, require_cuda=False, head_dims=(64, 128))
    assert check_scale(None, 64) == 0.125
    with pytest.raises(ValueError, match="positive"):
        check_scale(-1.0, 64)
    with pytest.raises(ValueError, match="head_dim 128 does not match"):
        check_config("flash_sm80", FlashConfig(128, 64, 4, 2, 128), shape)


def test_config_checks():
    """Configs go through their family: a dict may leave head_dim out, every error is a ModelError
    (a ValueError), the checked config is the family's type."""
    from kernels.checks import check_config, check_smem

    shape = {"d": 64}
    assert check_config("flash_sm80", {"block_m": 128, "block_n": 64, "warps": 4, "stages": 2}, shape) == \
        FlashConfig(128, 64, 4, 2, 64)
    with pytest.raises(ModelError, match="multiple of 16\\*warps"):
        check_config("flash_sm80", {"block_m": 96, "block_n": 64, "warps": 4, "stages": 2}, shape)
    with pytest.raises(ValueError, match="FlashConfig"):
        check_config("flash_sm80", "128x64", shape)
    with pytest.raises(ValueError, match="block_k"):
        check_config("unfused", MatmulConfig(128, 128, 24, 4, 3), shape)
    with pytest.raises(ValueError, match="needs 98304 bytes .* allows 65536"):
        check_smem("flash_sm80", FlashConfig(128, 64, 4, 2, 128), 98304, 65536)
