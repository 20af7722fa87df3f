"""The kernel-family registry: one module per family, listed here once.

To add a family: write a module beside these with its config type (a TileConfig), shipped configs,
search space, execution plan and diagram, ending in ``FAMILY = Family(...)``, and add it to
``_MODULES``. The model, the tile search, the kernels' chooser, the harness and the CLI read it here.
"""
from __future__ import annotations

from ..errors import ModelError
from ..names import suggest
from . import flash_sm80, flash_sm90, matmul_sm80, softmax, unfused
from .base import Family, TileConfig

__all__ = ["Family", "TileConfig", "FAMILIES", "get", "for_problem", "suggest"]

_MODULES = (flash_sm80, flash_sm90, unfused, matmul_sm80, softmax)
FAMILIES: dict[str, Family] = {m.FAMILY.name: m.FAMILY for m in _MODULES}


def get(name: str) -> Family:
    """The family called `name`; ModelError with the known names (and the closest) otherwise."""
    fam = FAMILIES.get(name)
    if fam is None:
        raise ModelError(f"unknown kernel family {name!r}{suggest(name, FAMILIES)}; known: {', '.join(FAMILIES)}")
    return fam


def for_problem(problem: str) -> list[Family]:
    return [f for f in FAMILIES.values() if f.problem == problem]
