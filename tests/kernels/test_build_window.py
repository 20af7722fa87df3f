"""The sliding-window variants of the forward kernels built by nvcc without a GPU: the mma.sync one's
(IS_LOCAL, sm_80) and the wgmma one's (kLocal, sm_90a), every shipped config causal and not; none
spills but those the families do not offer for windows (``window_unshipped``).  Skips without nvcc."""
from __future__ import annotations

import shutil

import pytest

from iomodel.families import flash_sm80 as family
from iomodel.families import flash_sm90 as family90
from kernels import codegen, compile, reports

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")]


def test_window_variants_spill_only_where_not_offered(tmp_path):
    names = {}
    lines = ['#include "flash_fwd_sm80.cuh"']
    for cfg in family.SHIPPED:
        for causal in (False, True):
            name = codegen.flash_sm80_kernel(cfg, "bf16", causal, False, True)
            names[name] = cfg
            lines.append(f"template __global__ void {name}({codegen._FLASH_PARAMS.format(T='iom::bf16')});")
    _cubin, log = compile.run_nvcc("\n".join(lines) + "\n", "sm_80", tmp_path, "window", ("-Xptxas", "-v"))
    ptxas = reports.parse_ptxas(log)
    assert len(ptxas) == len(names)
    spilling = {n for n, r in ptxas.items() if r["spill_stores"] or r["stack"]}
    # mangled names: match each spilling kernel to its config through its template numbers
    def mangled(cfg):
        return f"ELi{cfg.block_m}ELi{cfg.block_n}ELi{cfg.warps}ELi{cfg.stages}ELi{cfg.head_dim}E"
    spilled_cfgs = {cfg for cfg in family.SHIPPED if any(mangled(cfg) in n for n in spilling)}
    assert spilled_cfgs == set(family.FAMILY.window_unshipped)


def test_wgmma_window_variants_spill_only_where_not_offered(tmp_path):
    variants = [(cfg, "bf16", causal, False, True) for cfg in family90.SHIPPED for causal in (False, True)]
    _cubin, log = compile.run_nvcc(codegen.sm90_unit(variants), "sm_90a", tmp_path, "window90", ("-Xptxas", "-v"))
    ptxas = reports.parse_ptxas(log)
    assert len(ptxas) == len(variants)
    spilled = {cfg for cfg, *_ in variants
               if any(r["spill_stores"] or r["stack"] for n, r in ptxas.items() if f"_{cfg.name}_" in n)}
    assert spilled == set(family90.FAMILY.window_unshipped)
