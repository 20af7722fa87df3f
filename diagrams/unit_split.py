"""`split_units(axis, units)`: the register-level units of a block split every streamed chunk of an axis.

`split` spreads an axis over thread blocks and merges their partials in a second kernel; this is the same
reshape one level down. Axis `m`, streamed by the block in chunks of `C`, becomes two: `units` (size U,
one index per register-level unit: a warp) and `m` (size M / U, streamed in chunks of C / U). A block still
loads C keys a step, and each unit reads and folds its own C / U of them with its own state, so the units
never wait on each other inside a chunk. Each fold over `m` now leaves every unit a partial result (fp32,
with the `units` axis): after the stream the partials are merged by the fold's combine rule (`split`'s:
sum, max, log-sum-exp, or the online-softmax merge by each unit's LSE), in the same kernel. The merged
output is staged in SMEM: the units add their weighted shares into one tile there (shared-memory atomics
or a barrier), and it is written out from SMEM. Produced after the stream, it can reuse the SMEM of the
stream's ring (iomodel.registers: SMEM liveness).

Decode attention (`library.flash_decode`) runs this way: with a handful of query rows a warp cannot own
rows, so the warps own keys.
"""
from __future__ import annotations

import dataclasses

import sympy as sp

from .core import Array, Axis, DiagramError, Map, Op, Partition, size_expr
from .diagram import Diagram, map_arrays
from .numeric import IDENTITY
from .split import _combine_ops, _fold_rule, _partial_op

UNITS = "units"


def _stream_of(d: Diagram, axis_name: str) -> Partition:
    streams = [p for p in d.partitions if p.axis_name == axis_name and p.kind == "stream" and p.level == "smem"]
    if not streams:
        raise DiagramError(f"split_units {axis_name}: the axis is not streamed over thread blocks in {d.name}; "
                           f"stream it first (the units split each chunk)")
    if any(p.axis_name == axis_name and p.level == "reg" for p in d.partitions):
        raise DiagramError(f"split_units {axis_name}: the axis is already partitioned at the register level")
    if UNITS in d.axes():
        raise DiagramError(f"split_units {axis_name}: diagram {d.name} already has an axis named {UNITS!r}")
    if any(axis_name in (m.row_axis, m.col_axis) for m in d.masks):
        raise DiagramError(f"split_units {axis_name}: a masked axis cannot be split over units (not supported)")
    return streams[0]


def _divided(size: sp.Expr, units: sp.Expr, what: str) -> sp.Expr:
    part = size / units
    if part.is_number and not part.is_integer:
        raise DiagramError(f"split_units: {units} units do not divide the {what} ({size})")
    return part


def _merged_in_fp32(merge: tuple[Op, ...], out: Array) -> tuple[tuple[Op, ...], str]:
    """The merge ops and the name of the SMEM tile the units add into: the output itself when it is fp32,
    else an fp32 tile that one conversion per element turns into the output (it is what the units add)."""
    if out.dtype == "fp32":
        return merge, out.name
    tile = dataclasses.replace(out, name=f"{out.name}_merged", dtype="fp32")
    merge = map_arrays(merge, lambda x: tile if x.name == out.name else x)
    return merge + (Map(f"convert:{out.name}", (tile,), out, costs=(("fp32", 1),), formula="convert",
                        **IDENTITY),), tile.name


def split_units(d: Diagram, axis_name: str, units, unit_threads: int = 32) -> Diagram:
    """`d` with each block-level chunk of `axis_name` split over `units` register-level units (of
    `unit_threads` threads), every fold over the axis leaving each unit a partial, merged after the stream
    by the fold's combine rule into a tile staged in SMEM."""
    stream = _stream_of(d, axis_name)
    units = size_expr(units)
    unit_axis = Axis(UNITS, units)
    inner = Axis(axis_name, _divided(d.axes()[axis_name], units, f"axis {axis_name}"))
    chunk = _divided(stream.size, units, f"chunk of {axis_name}")
    rules = {op.name: _fold_rule(op, axis_name) for op in d.ops}
    if not any(rules.values()):
        raise DiagramError(f"split_units {axis_name}: no operation of {d.name} folds {axis_name}; group it instead")

    def reshape(x: Array) -> Array:
        axes = [a for b in x.axes for a in ((unit_axis, inner) if b.name == axis_name else (b,))]
        return dataclasses.replace(x, axes=tuple(axes))

    ops, merges, merged = [], [], []
    for op, orig in zip(map_arrays(d.ops, reshape), d.ops):
        rule = rules[op.name]
        if rule is None:
            ops.append(op)
            continue
        partial = _partial_op(op, rule, unit_axis, atomic=False, suffix="_unit")
        ops.append(partial)
        merge, tile = _merged_in_fp32(_combine_ops(orig, partial, rule, over=UNITS), orig.output)
        merges += merge   # the merge writes what `orig` wrote
        merged.append(tile)
    parts = tuple(dataclasses.replace(p, size=chunk) if p is stream else p for p in d.partitions)
    parts += (Partition(UNITS, sp.Integer(1), "group", "reg", sp.Integer(1), unit_threads),)
    staged = tuple(p for p in d.staged if p[0] not in merged) + tuple((n, "smem") for n in merged)
    return d._replace(ops=tuple(ops) + tuple(merges), partitions=parts, staged=staged)
