"""The kernel-family registry: one module per family, listed here once.

To add a family: write a module beside these with its config type (a TileConfig), shipped configs,
search space, execution plan and diagram, ending in ``FAMILY = Family(...)``, and add it to
``_MODULES``; a module whose kernel has twins (flash_bwd_sm80 and its deterministic mode) lists them all
in a ``FAMILIES`` tuple instead. The model, the tile search, the kernels' chooser, the harness and the
CLI read them here.
"""
from __future__ import annotations

from ..errors import ModelError
from ..names import suggest
from . import flash_bwd_sm80, flash_bwd_sm90, flash_decode_sm80, flash_sm80, flash_sm90, matmul_sm80, softmax, unfused
from .base import Family, TileConfig

__all__ = ["Family", "TileConfig", "FAMILIES", "get", "register", "for_problem", "suggest"]

_MODULES = (flash_sm80, flash_sm90, unfused, matmul_sm80, softmax, flash_bwd_sm80, flash_bwd_sm90, flash_decode_sm80)
FAMILIES: dict[str, Family] = {f.name: f for m in _MODULES for f in getattr(m, "FAMILIES", (m.FAMILY,))}


# families made at run time from a diagram and a kernel style (iomodel.diagram_family), by name
_MADE: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Make a family built at run time findable by name (a later one of the same name replaces it; the same
    one again is a no-op)."""
    if family.name in FAMILIES:
        raise ModelError(f"{family.name!r} is a shipped kernel family's name")
    if _MADE.get(family.name) is family:
        return family
    if family.name in _MADE:  # the model cached for the old one is stale
        from ..api import family_model
        family_model.cache_clear()
    _MADE[family.name] = family
    return family


def get(name: str) -> Family:
    """The family called `name`; ModelError with the known names (and the closest) otherwise."""
    fam = FAMILIES.get(name) or _MADE.get(name)
    if fam is None:
        raise ModelError(f"unknown kernel family {name!r}{suggest(name, FAMILIES)}; known: {', '.join(FAMILIES)}")
    return fam


def for_problem(problem: str) -> list[Family]:
    return [f for f in FAMILIES.values() if f.problem == problem]
