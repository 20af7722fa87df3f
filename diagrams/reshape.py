"""`fuse(axes, into)`: read several adjacent axes as one (a reshape: the elements do not change).

Code that packs independent rows into one tile does this: decode attention packs the g query heads of
a KV head and the N_q query rows of a sequence into g * N_q rows of one tile, so that one read of K and
V serves all of them. Every array that carries one of the axes must carry all of them, next to each other
and in the given order (the fused index is then the row-major one: ``i * N_q + j`` for ``(g, n)``); the
new axis has the product of their sizes. Work, traffic and footprint follow from the new axis like from
any other: a group over it tiles the packed rows, padding counted.
"""
from __future__ import annotations

import dataclasses

import sympy as sp

from .core import Array, DiagramError, axis
from .diagram import Diagram, map_arrays


def _check(d: Diagram, names: tuple[str, ...], into: str) -> None:
    if len(names) < 2 or len(set(names)) != len(names):
        raise DiagramError(f"fuse {names}: give two or more distinct axes")
    for a in names:
        d._check_axis(a, f"fuse {', '.join(names)}")
    if into in d.axes() and into not in names:
        raise DiagramError(f"fuse {', '.join(names)}: diagram {d.name} already has an axis named {into!r}")
    if any(p.axis_name in names for p in d.partitions):
        raise DiagramError(f"fuse {', '.join(names)}: an axis is already grouped or streamed; fuse before partitioning")
    if any(m.row_axis in names or m.col_axis in names for m in d.masks):
        raise DiagramError(f"fuse {', '.join(names)}: a masked axis cannot be fused (its band would not be one)")
    for x in d.arrays().values():
        held = [a for a in x.axis_names if a in names]
        if not held:
            continue
        at = x.axis_names.index(held[0])
        if tuple(x.axis_names[at:at + len(names)]) != names:
            raise DiagramError(f"fuse {', '.join(names)}: array {x.name} has axes {x.axis_names}; it must carry "
                               f"all of them, adjacent and in this order")


def fuse(d: Diagram, names, into: str) -> Diagram:
    """`d` with the adjacent axes `names` of every array replaced by one axis `into` (their product)."""
    names = tuple(names)
    _check(d, names, into)
    sizes = d.axes()
    fused = axis(into, sp.Mul(*[sizes[a] for a in names]))

    def reshape(x: Array) -> Array:
        if not x.carries(names[0]):
            return x
        at = x.axis_names.index(names[0])
        return dataclasses.replace(x, axes=x.axes[:at] + (fused,) + x.axes[at + len(names):])

    return d._replace(ops=map_arrays(d.ops, reshape))
