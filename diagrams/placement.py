"""Placements: where a diagram's arrays live while its kernel runs (`Diagram.stage`) and which inputs its
register-level units hold in registers through the streams (`Diagram.hold`)."""
from __future__ import annotations

import dataclasses

import sympy as sp

from .core import DiagramError, size_expr

LEVELS = ("global", "smem", "reg")


def stage(d, array_name: str, level: str, buffers=1, row_align=None):
    """`Diagram.stage`."""
    if array_name not in d.arrays():
        raise DiagramError(f"stage: no array {array_name!r} in {d.name}")
    if level not in LEVELS:
        raise DiagramError(f"stage: unknown level {level!r}; levels: {LEVELS}")
    symbolic = isinstance(buffers, (str, sp.Expr))
    if symbolic:
        buffers = size_expr(buffers)
        if not buffers.free_symbols:
            raise DiagramError(f"stage {array_name}: buffers given as an expression must name a symbol, "
                               f"got {buffers!r}")
    elif isinstance(buffers, bool) or not isinstance(buffers, (int, float)) or int(buffers) != buffers \
            or buffers < 1:
        raise DiagramError(f"stage {array_name}: buffers must be a positive integer or a size symbol, got "
                           f"{buffers!r}")
    if (symbolic or buffers > 1) and (level != "smem" or d.producer(array_name) is None):
        raise DiagramError(f"stage {array_name}: only an intermediate kept in SMEM takes buffers")
    buffered = tuple(p for p in d.buffered if p[0] != array_name)
    if symbolic or buffers > 1:
        buffered += ((array_name, buffers if symbolic else int(buffers)),)
    aligned = tuple(p for p in d.row_aligned if p[0] != array_name)
    if row_align is not None:
        if level != "smem":
            raise DiagramError(f"stage {array_name}: only an array staged in SMEM takes row_align")
        aligned += ((array_name, size_expr(row_align)),)
    staged = tuple(p for p in d.staged if p[0] != array_name) + ((array_name, level),)
    return dataclasses.replace(d, staged=staged, buffered=buffered, row_aligned=aligned)


def hold(d, array_name: str, held=1):
    """`Diagram.hold`."""
    if array_name not in {x.name for x in d.inputs()}:
        raise DiagramError(f"hold {array_name}: not an input of {d.name}; inputs: "
                           f"{sorted(x.name for x in d.inputs())}")
    if dict(d.staged).get(array_name) != "smem":
        raise DiagramError(f"hold {array_name}: stage it in SMEM first (its units read their tiles from there)")
    if isinstance(held, (str, sp.Expr)):
        flag = size_expr(held)
        if not flag.free_symbols:
            raise DiagramError(f"hold {array_name}: a flag given as an expression must name a symbol, got {held!r}")
    elif held in (0, 1) and not isinstance(held, float):
        flag = sp.Integer(int(held))
    else:
        raise DiagramError(f"hold {array_name}: held must be 0, 1 or a symbol, got {held!r}")
    kept = tuple(p for p in d.held if p[0] != array_name)
    return dataclasses.replace(d, held=kept + (((array_name, flag),) if flag != 0 else ()))
