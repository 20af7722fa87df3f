"""The sliding-window and score-modifier variants of the forward kernels built by nvcc without a GPU: the
mma.sync one's (IS_LOCAL and MODS, sm_80) and the wgmma one's (kLocal and kMods, sm_90a), every shipped
config causal and not, with and without a window, with no modifier, a softcap, ALiBi and both: exactly the
variants the families list as spilling (``spilling_variants``, not offered) spill (the plain and causal ones:
test_build_sm80.py).  Skips without nvcc."""
from __future__ import annotations

import itertools
import shutil

import pytest

from iomodel.families import flash_sm80 as family
from iomodel.families import flash_sm90 as family90
from kernels import codegen, compile, reports

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")]

MODS = {0: (), 1: ("softcap",), 2: ("alibi",), 3: ("softcap", "alibi")}


def _features(causal, local, mods) -> frozenset:
    return frozenset((("causal",) if causal else ()) + (("window",) if local else ()) + MODS[mods])


def _ptxas(units: list[str], arch: str, tmp_path, stem: str) -> dict:
    """ptxas's report of every kernel of the translation units, compiled two at a time (CI has two cores)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i_unit):
        i, unit = i_unit
        return reports.parse_ptxas(compile.run_nvcc(unit, arch, tmp_path, f"{stem}{i}", ("-Xptxas", "-v"))[1])

    out: dict = {}
    with ThreadPoolExecutor(max_workers=2) as ex:
        for rep in ex.map(one, enumerate(units)):
            out.update(rep)
    return out


def _halves(items: list) -> list[list]:
    return [items[: len(items) // 2], items[len(items) // 2:]]


def _variants(configs):
    """(cfg, causal, local, mods) of every variant with a window or a modifier (the plain ones: the build
    tests of each kernel)."""
    return [(cfg, c, w, m) for cfg in configs for c, w, m in itertools.product((False, True), (False, True), MODS)
            if w or m]


def test_mma_sync_variants_spill_exactly_where_not_offered(tmp_path):
    names = {}
    lines = []
    for cfg, causal, local, mods in _variants(family.SHIPPED):
        name = codegen.flash_sm80_kernel(cfg, "bf16", causal, False, local, mods)
        names[(cfg, causal, local, mods)] = name
        lines.append(f"template __global__ void {name}({codegen._FLASH_PARAMS.format(T='iom::bf16')});")
    units = ['#include "flash_fwd_sm80.cuh"\n' + "\n".join(half) + "\n" for half in _halves(lines)]
    ptxas = _ptxas(units, "sm_80", tmp_path, "variants")
    assert len(ptxas) == len(names)

    def mangled(cfg, causal, local, mods):   # the template numbers of a variant in its mangled name
        b = lambda x: "ELb1" if x else "ELb0"   # noqa: E731
        return (f"ELi{cfg.block_m}ELi{cfg.block_n}ELi{cfg.warps}ELi{cfg.stages}ELi{cfg.head_dim}"
                f"{b(causal)}ELb0{b(local)}ELi{mods}ELb0{b(cfg.q_regs)}E")   # (SPLIT false, then Q_REGS)
    spilled = {(v[0], _features(*v[1:])) for v in names
               if any(mangled(*v) in n and (r["spill_stores"] or r["stack"]) for n, r in ptxas.items())}
    # (the plain and causal variants' spills: tests/kernels/test_build_sm80.py)
    assert spilled == {(c, f) for c, f in family.FAMILY.spilling_variants if f - {"causal"}}


def test_wgmma_variants_spill_exactly_where_not_offered(tmp_path):
    variants = _variants(family90.SHIPPED)
    units = [codegen.sm90_unit([(cfg, "bf16", c, False, w, m) for cfg, c, w, m in half]) for half in _halves(variants)]
    ptxas = _ptxas(units, "sm_90a", tmp_path, "variants90")
    assert len(ptxas) == len(variants)
    spilled = set()
    for cfg, c, w, m in variants:
        r = ptxas[codegen.sm90_kernel(cfg, "bf16", c, False, w, m)]
        if r["spill_stores"] or r["stack"]:
            spilled.add((cfg, _features(c, w, m)))
    assert spilled == set(family90.FAMILY.spilling_variants)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_mma_sync_tail_split_variants_spill_only_where_kept_plain(tmp_path, arch):
    """The tail split's variant (SPLIT, kernels/flash_sm80.py) of every shipped config, and its merge kernel:
    only the configs whose launches keep the plain grid (SPLIT_SPILLING) may spill, and those do on sm_80."""
    from kernels.flash_sm80 import SPLIT_SPILLING

    names, lines = {}, []
    for cfg in family.SHIPPED:
        names[cfg] = codegen.flash_sm80_kernel(cfg, "bf16", False, split=True)
        lines.append(f"template __global__ void {names[cfg]}({codegen._FLASH_PARAMS.format(T='iom::bf16')});")
    merges = sorted({codegen.flash_sm80_merge_kernel(c, "bf16") for c in family.SHIPPED})
    lines += [f"template __global__ void {m}(const float*, const float*, iom::bf16*, float*, long long, long long, "
              "long long, int, int, int, int, int);" for m in merges]
    units = ['#include "flash_fwd_sm80.cuh"\n' + "\n".join(half) + "\n" for half in _halves(lines)]
    ptxas = _ptxas(units, arch, tmp_path, "split")
    assert len(ptxas) == len(names) + len(merges)
    spills = {cfg for cfg in names
              if next(r for k, r in ptxas.items() if "flash_fwd_kernel" in k and _mangled(cfg) in k)["spill_stores"]}
    assert spills <= set(SPLIT_SPILLING), spills
    if arch == "sm_80":
        assert spills == set(SPLIT_SPILLING)
    assert not any(r["spill_stores"] for k, r in ptxas.items() if "merge" in k)


def _mangled(cfg) -> str:
    """The split variant's template arguments as the Itanium mangling spells them."""
    return (f"ELi{cfg.block_m}ELi{cfg.block_n}ELi{cfg.warps}ELi{cfg.stages}ELi{cfg.head_dim}"
            f"ELb0ELb0ELb0ELi0ELb1ELb{cfg.q_regs}E")
