"""The kernel-family registry: one module per family, listed here once.

To add a family: write a module beside these with its config type (a TileConfig), shipped configs,
search space, execution plan and diagram, ending in ``FAMILY = Family(...)``, and add it to
``_MODULES``. The model, the tile search, the kernels' chooser, the harness and the CLI read it here.
"""
from __future__ import annotations

import difflib

from ..errors import ModelError
from . import flash_sm80, flash_sm90, matmul_sm80, softmax, unfused
from .base import Family, TileConfig

__all__ = ["Family", "TileConfig", "FAMILIES", "get", "for_problem", "suggest"]

_MODULES = (flash_sm80, flash_sm90, unfused, matmul_sm80, softmax)
FAMILIES: dict[str, Family] = {m.FAMILY.name: m.FAMILY for m in _MODULES}


def suggest(name: str, known) -> str:
    """' (did you mean X?)' when `name` is close to one of `known`, else ''.  Case does not count
    (``AUTO`` finds ``auto``): a shift key held too long is the commonest typo of all."""
    by_lower = {str(k).lower(): str(k) for k in known}
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]}?)" if close else ""


def get(name: str) -> Family:
    """The family called `name`; ModelError with the known names (and the closest) otherwise."""
    fam = FAMILIES.get(name)
    if fam is None:
        raise ModelError(f"unknown kernel family {name!r}{suggest(name, FAMILIES)}; known: {', '.join(FAMILIES)}")
    return fam


def for_problem(problem: str) -> list[Family]:
    return [f for f in FAMILIES.values() if f.problem == problem]
