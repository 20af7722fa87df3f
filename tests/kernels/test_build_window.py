"""The sliding-window variant of the mma.sync forward (IS_LOCAL) built by nvcc for sm_80 without a GPU:
every shipped config's window variant, causal and not, spills nothing but the ones the family does not
offer for windows (``window_unshipped``).  Skips without nvcc."""
from __future__ import annotations

import shutil

import pytest

from iomodel.families import flash_sm80 as family
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
