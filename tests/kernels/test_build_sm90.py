"""CPU checks of the sm90 FlashAttention kernel: configs, SMEM formula, kernel text, the generated
wgmma header, and an nvcc build of every shipped config for sm_90a (no spills, setmaxnreg honoured,
no wgmma serialisation, no static SMEM).  The build tests skip when nvcc is not on PATH."""

import shutil
import subprocess

import pytest

from iomodel import families
from iomodel.errors import ModelError
from iomodel.families.flash_sm90 import ALIGN_SLACK_BYTES, MBARRIER_BYTES, SHIPPED, Sm90Config, tile_row
from kernels import codegen, compile, reports

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
H100_MAX_SMEM = 232448  # opt-in limit per block (227 KiB)


def test_padded_rows_and_the_dynamic_schedules_head_dims():
    import re

    from kernels import flash_sm90, sm90_schedule

    # d = 32 takes rows of 32 values (64-byte swizzle rows), 96 rows of 128 (whole 128-byte TMA boxes); 192 has no
    # padding
    assert [tile_row(d) for d in (32, 64, 96, 128, 192, 256)] == [32, 64, 128, 128, 192, 256]

    def tiles(d):   # Q and two stages of K and V
        return Sm90Config(128, 64, 2, d, 2).smem_bytes(2) - ALIGN_SLACK_BYTES - MBARRIER_BYTES * (2 + 4 * 2)
    assert tiles(32) == (128 + 2 * 2 * 64) * 32 * 2 and 2 * tiles(32) == tiles(64) and tiles(96) == tiles(128)
    text = (codegen.CSRC / "flash_fwd_sm90.cuh").read_text()
    assert int(re.search(r"#define SM90_DYN_MAX (\d+)", text).group(1)) == flash_sm90.DYNAMIC_MAX_HEAD_DIM
    assert int(re.search(r"#define SM90_OWN_MAX (\d+)", text).group(1)) == sm90_schedule.OWN_CHUNKS_MAX_HEAD_DIM


def test_smem_formula_terms():
    c = Sm90Config(128, 128, 2, 128, 2)
    # 1024 slack + Q 128*128*2 + 2 stages * (K + V) 2*128*128*2 + 8 * (2 + 4*2) mbarriers
    assert c.smem_bytes(2) == 1024 + 32768 + 2 * 65536 + 80
    assert c.smem_bytes(2) == (ALIGN_SLACK_BYTES + c.block_m * 128 * 2 + c.stages * 2 * c.block_n * 128 * 2
                               + MBARRIER_BYTES * (2 + 4 * c.stages))
    for cfg in SHIPPED:
        assert cfg.smem_bytes(2) <= H100_MAX_SMEM, cfg


@pytest.mark.parametrize("kwargs", [dict(block_m=128, block_n=128, stages=2, head_dim=80),
                                    dict(block_m=100, block_n=128, stages=2, head_dim=64),
                                    dict(block_m=128, block_n=120, stages=2, head_dim=64),
                                    dict(block_m=128, block_n=128, stages=0, head_dim=64),
                                    dict(block_m=256, block_n=128, stages=2, head_dim=64, consumers=4)])
def test_config_rejects(kwargs):
    cfg = Sm90Config(**kwargs)
    assert cfg.problems()
    with pytest.raises(ModelError):
        families.get("flash_sm90").config(cfg, {"d": cfg.head_dim})


def test_shipped_cover_head_dims():
    fam = families.get("flash_sm90")
    for d in (64, 128, 256):
        assert fam.shipped_for({"d": d}), d


def test_kernel_text():
    cfg = Sm90Config(128, 128, 2, 128, 2)
    name = codegen.sm90_kernel(cfg, "bf16", True)
    assert name == "flash_fwd_sm90_m128n128s2d128c2_bf16_causal"
    unit = codegen.sm90_unit([(cfg, "bf16", True), (cfg, "fp16", False)])
    assert unit.startswith('#include "flash_fwd_sm90.cuh"\n')
    assert "sm90::FwdTraits<128, 128, 2, 128, 2, true, true, false>" in unit
    assert "sm90::FwdTraits<128, 128, 2, 128, 2, false, false, false>" in unit
    assert unit.count('extern "C" __global__') == 2
    # the packed variable-length form: its own name and traits
    assert codegen.sm90_kernel(cfg, "bf16", True, varlen=True) == "flash_fwd_sm90_m128n128s2d128c2_bf16_causal_varlen"
    assert "sm90::FwdTraits<128, 128, 2, 128, 2, true, true, true>" in codegen.sm90_unit([(cfg, "bf16", True, True)])
    with pytest.raises(ValueError, match="dtype"):
        codegen.sm90_kernel(cfg, "fp8", False)


def test_wgmma_header_in_sync():
    assert (codegen.CSRC / codegen.WGMMA_HEADER).read_text() == codegen.wgmma_header_text()


@pytest.fixture(scope="module", params=(False, True), ids=("dense", "varlen"))
def report(request):
    return reports.sm90_resources(varlen=request.param)


@needs_nvcc
@pytest.mark.slow
def test_every_shipped_config_builds_clean(report):
    """Both forms: the dense kernel and the packed variable-length one."""
    names = [k for k in report if not k.startswith("_")]
    assert len(names) == len(SHIPPED) * 2 * 2
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
    for i, c in enumerate(SHIPPED):
        lines.append(f"static_assert(sm90::FwdTraits<{c.block_m}, {c.block_n}, {c.stages}, {c.head_dim}, "
                     f"{c.consumers}, true, false>::kSmemBytes == {c.smem_bytes(2)}, \"cfg {i}\");")
    cu = tmp_path / "smem.cu"
    cu.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["nvcc", "-cubin", compile.gencode("sm_90a"), compile.STD, f"-I{compile.CSRC}", str(cu),
                          "-o", str(tmp_path / "smem.cubin")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@needs_nvcc
@pytest.mark.slow
def test_the_tile_timelines_switch_builds(tmp_path):
    """IOM_FWD90_TILE_TIMES (the per-tile profile of docs/kernels_sm90.md) still compiles, causal (the
    dynamic schedule) and not (the static one), without spills."""
    cfg = next(c for c in SHIPPED if c.head_dim == 128)
    _, log = compile.run_nvcc(codegen.sm90_unit([(cfg, "bf16", False), (cfg, "bf16", True)]), "sm_90a", tmp_path,
                              "tiles", ("-Xptxas", "-v", "-DIOM_FWD90_TILE_TIMES"))
    ptxas = reports.parse_ptxas(log)
    assert len(ptxas) >= 2 and all(r["spill_stores"] == 0 for r in ptxas.values()), ptxas


@needs_nvcc
@pytest.mark.slow
def test_the_wide_dynamic_builds_spill_exactly_where_said(tmp_path):
    """The plain causal kernels above DYNAMIC_MAX_HEAD_DIM built with the dynamic schedule (WIDE_DYNAMIC, an A/B
    knob since the lpt walk): every shipped config's build is clean but those in WIDE_DYNAMIC_SPILLING."""
    from kernels import flash_sm90

    wide = [c for c in SHIPPED if c.head_dim > flash_sm90.DYNAMIC_MAX_HEAD_DIM]
    _, log = compile.run_nvcc(codegen.sm90_unit([(c, "bf16", True) for c in wide]), "sm_90a", tmp_path, "wide",
                              ("-Xptxas", "-v", f"-D{flash_sm90.WIDE_DYNAMIC}"))
    ptxas = reports.parse_ptxas(log)
    spilling = {c.name for c in wide if ptxas[codegen.sm90_kernel(c, "bf16", True)]["spill_stores"] > 0}
    assert spilling == set(flash_sm90.WIDE_DYNAMIC_SPILLING)


@needs_nvcc
@pytest.mark.slow
def test_the_cluster_builds_spill_exactly_where_said(tmp_path):
    """The plain kernels built as clusters of two CTAs (CLUSTER, the launcher's default for long tiles,
    kernels.sm90_schedule.pairs_tiles): every shipped config's build is clean but those in CLUSTER_SPILLING, which
    the launcher does not pair."""
    from kernels import flash_sm90
    from kernels.sm90_schedule import CLUSTER_SPILLING

    _, log = compile.run_nvcc(codegen.sm90_unit([(c, "bf16", False) for c in SHIPPED]), "sm_90a", tmp_path,
                              "cluster", ("-Xptxas", "-v", f"-D{flash_sm90.CLUSTER}"))
    ptxas = reports.parse_ptxas(log)
    spilling = {c.name for c in SHIPPED if ptxas[codegen.sm90_kernel(c, "bf16", False)]["spill_stores"] > 0}
    assert spilling == set(CLUSTER_SPILLING)


@needs_nvcc
@pytest.mark.slow
def test_the_q_held_switch_builds_clean_where_probed(tmp_path):
    """SM90_Q_REGS_MAX (A/B: Q's fragments in registers, S by wgmma_rsk) on the tiles its probe timed
    (validation/results/profile-sm90-qregs-h100-2026-12-06/): without spills, with and without a mask."""
    tiles = [Sm90Config(192, 128, 3, 32, 3), Sm90Config(192, 144, 4, 32, 3), Sm90Config(128, 128, 3, 128, 2)]
    _, log = compile.run_nvcc(codegen.sm90_unit([(c, "bf16", m) for c in tiles for m in (False, True)]), "sm_90a",
                              tmp_path, "qheld", ("-Xptxas", "-v", "-DSM90_Q_REGS_MAX=256"))
    ptxas = reports.parse_ptxas(log)
    built = [codegen.sm90_kernel(c, "bf16", m) for c in tiles for m in (False, True)]
    assert all(ptxas[k]["spill_stores"] == 0 for k in built), ptxas
