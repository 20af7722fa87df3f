"""Band masks and their composition: several masks on one (row, col) pair keep the intersection.

A mask keeps the points with row + lower <= col <= row + upper (`core.Triangular`: `offset` is the
upper bound, `lower` the lower one, None for unbounded). Intersecting bands is a band: the largest
lower bound and the smallest upper bound. Masks that pair one column axis with two different row
axes are not bands of one row axis and are refused.
"""
from __future__ import annotations

import dataclasses

import sympy as sp

from .core import DiagramError, Triangular


def _tightest(bounds, pick) -> sp.Expr | None:
    known = [sp.sympify(b) for b in bounds if b is not None]
    if not known:
        return None
    return known[0] if len(known) == 1 else pick(*known)


def check_band(mask: Triangular) -> None:
    """A band whose bounds are numbers must keep something: lower <= upper."""
    if mask.lower is None or mask.offset is None:
        return
    gap = sp.sympify(mask.offset) - sp.sympify(mask.lower)
    if gap.is_number and gap < 0:
        raise DiagramError(f"mask {mask.col_axis} against {mask.row_axis}: lower bound {mask.lower} exceeds "
                           f"upper bound {mask.offset}; the band keeps no point")


def combined_masks(masks: tuple[Triangular, ...]) -> dict[str, Triangular]:
    """One band per column axis: the intersection of every mask over that axis."""
    by_col: dict[str, list[Triangular]] = {}
    for m in masks:
        by_col.setdefault(m.col_axis, []).append(m)
    out = {}
    for col, group in by_col.items():
        rows = sorted({m.row_axis for m in group})
        if len(rows) > 1:
            raise DiagramError(f"masks over column axis {col} use different row axes {rows}; only bands of one "
                               f"row axis compose")
        upper = _tightest([m.offset for m in group], sp.Min)
        lower = _tightest([m.lower for m in group], sp.Max)
        band = dataclasses.replace(group[0], offset=upper, lower=lower, per_unit=any(m.per_unit for m in group))
        check_band(band)
        out[col] = band
    return out
