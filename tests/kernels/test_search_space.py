"""The search space is buildable: nvcc compiles a random sample (fixed seed) of each family's search
space beyond the shipped configs, among those the config's own ``problems()`` accepts (the check the
tile search applies).  For flash_sm90 the sample is drawn from the model's feasible top picks instead:
registers bound the rest of its grid, which ptxas would then spill or refuse.  Building is what is
checked here (spills are allowed); the shipped configs' resources are checked in test_build_*."""
from __future__ import annotations

import random
import shutil

import pytest

from iomodel import families, tiles
from kernels import codegen, reports
from kernels.compile import run_nvcc

pytestmark = [pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH"), pytest.mark.slow]
SEED = 2026
SAMPLES = 3
SM90_SHAPES = [dict(B=4, H=16, N_q=4096, d=d) for d in (64, 128)]


def _sample(configs) -> list:
    ordered = sorted(set(configs), key=lambda c: tuple(c.as_dict().values()))
    return random.Random(SEED).sample(ordered, min(SAMPLES, len(ordered)))


def _buildable_space(name: str) -> list:
    fam = families.get(name)
    space = [c for d in (fam.head_dims or (128,)) for c in fam.candidates({"d": d}) if not c.problems()]
    return _sample(c for c in space if c not in fam.shipped)


def _compiled(log: str) -> set:
    """The configs of the mma.sync kernels ptxas compiled."""
    return {reports.demangle(n)[1]["config"] for n in reports.parse_ptxas(log) if reports.demangle(n)}


@pytest.mark.parametrize("name", ["flash_sm80", "unfused"])
def test_sm80_search_space_sample_builds(name):
    sample = _buildable_space(name)
    assert len(sample) == SAMPLES
    flash, matmul = (sample, ()) if name == "flash_sm80" else ((), sample)
    log = reports.compile_report("sm_80", flash, matmul)
    assert set(sample) <= _compiled(log), (sample, log[-2000:])


def test_sm90_feasible_sample_builds(tmp_path):
    fam = families.get("flash_sm90")
    ranked = [p.config for s in SM90_SHAPES for p in tiles.search("flash_sm90", "h100-sxm", s, top=8).ranked]
    sample = _sample(c for c in ranked if c not in fam.shipped)
    assert len(sample) == SAMPLES and all(not c.problems() for c in sample)
    variants = [(c, "bf16", causal) for c in sample for causal in (False, True)]
    _, log = run_nvcc(codegen.sm90_unit(variants), "sm_90a", tmp_path, "sample", ("-Xptxas", "-v"))
    built = set(reports.parse_ptxas(log))
    assert {codegen.sm90_kernel(*v) for v in variants} <= built, log[-2000:]
