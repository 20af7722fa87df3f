"""Loop-nest pseudocode of a partitioned diagram, with a size beside every variable.

Read off the same structures the derivation uses: block-level groups become parallel loops over
thread blocks, block-level streams sequential loops with their loads to SMEM, register-level groups
parallel loops over warps, and each operation a line with its work. Nothing here is specific to
one algorithm.
"""
from __future__ import annotations

from typing import Mapping

import sympy as sp

from diagrams.core import Contraction, Map, NormalizedContraction, OnlineSoftmax, Reduce
from diagrams.diagram import Diagram, Program, as_program

from .derive import LoopNest
from .symbolic import sym


def _number(expr: sp.Expr, values: Mapping[str, int] | None) -> sp.Expr | None:
    """`expr` at `values`, or None while a symbol stays free."""
    if not values:
        return None
    num = expr.subs({sym(k): v for k, v in values.items()})
    return num if num.is_number else None


def _fmt(expr, values: Mapping[str, int] | None) -> str:
    e = sp.sympify(expr)
    num = _number(e, values)
    if num is None:
        return str(e)
    return f"{e} = {int(num) if num == int(num) else float(num):g}" if num != e else f"{int(num)}"


def _bytes(expr, values) -> str:
    e = sp.sympify(expr)
    num = _number(e, values)
    if num is None:
        return f"{e} B"
    b = float(num)
    return f"{b / 1024:.1f} KiB" if b >= 1024 else f"{b:.0f} B"


def kernel_pseudocode(d: Diagram, values: Mapping[str, int] | None = None) -> list[str]:
    nest = LoopNest(d, exact=True)
    sizes = nest.sizes
    block_groups = d.partitions_at("smem", "group")
    streams = nest.block_streams
    unit_groups = d.partitions_at("reg", "group")
    unit_streams = nest.unit_streams
    block_tile = nest.block_group
    stream_chunk = {p.axis_name: p.size for p in streams}
    unit_tile = {p.axis_name: p.size for p in unit_groups}
    unit_chunk = {p.axis_name: p.size for p in unit_streams}
    tile_elems = nest.tile
    lines: list[str] = [f"kernel {d.name}:"]
    ind = "  "

    def sl(arr, level):
        parts = []
        for a in arr.axes:
            if level == "reg" and a.name in unit_chunk:
                parts.append(f"{a.name}1:{a.name}1+{unit_chunk[a.name]}")
            elif level == "reg" and a.name in unit_tile:
                parts.append(f"{a.name}1:{a.name}1+{unit_tile[a.name]}")
            elif a.name in stream_chunk:
                parts.append(f"{a.name}0:{a.name}0+{stream_chunk[a.name]}")
            elif a.name in block_tile and block_tile[a.name] != 1:
                parts.append(f"{a.name}0:{a.name}0+{block_tile[a.name]}")
            elif a.name in block_tile:
                parts.append(a.name)
            else:
                parts.append(":")
        return f"{arr.name}[{', '.join(parts)}]"

    for p in block_groups:
        step = "" if p.size == 1 else f" step {_fmt(p.size, values)}"
        name = p.axis_name if p.size == 1 else f"{p.axis_name}0"
        lines.append(f"{ind}parallel for {name} in 0..{_fmt(sizes[p.axis_name], values)}{step}:   # thread blocks")
        ind += "  "
    block_ind = ind
    staged = [x for x in d.inputs() if d.level_of(x) == "smem"]
    streamed_axes = {p.axis_name for p in streams}
    for x in staged:
        if not (set(x.axis_names) & streamed_axes):
            lines.append(f"{ind}load {sl(x, 'smem')} -> smem   # {_fmt(tile_elems(x, 'smem'), values)} x {x.dtype}, "
                         f"{_bytes(tile_elems(x, 'smem') * x.itemsize, values)}, once per block")
    for op in d.ordered_ops():
        if isinstance(op, NormalizedContraction):
            rows = op.state_arrays()[0]
            lines.append(f"{ind}init {op.output.name}_acc = 0, {rows.name} = -inf, "
                         f"{op.output.name}_sum = 0   # fp32 state in registers")
        elif isinstance(op, Contraction) and streamed_axes & set(op.contracted):
            lines.append(f"{ind}init {op.output.name}_acc = 0   # fp32 accumulator")
    masks = {m.col_axis: m for m in d.masks}
    for p in streams:
        mask = masks.get(p.axis_name)
        bound = _fmt(sizes[p.axis_name], values)
        if mask is not None:
            row_tile = nest.block_tile(mask.row_axis)
            bound = f"min({bound}, {mask.row_axis}0 + {row_tile} + {mask.offset})"
        lines.append(f"{ind}for {p.axis_name}0 in 0..{bound} step {_fmt(p.size, values)}:   "
                     f"# stream, {_fmt(p.stages, values)} stage(s) in flight")
        ind += "  "
        for x in staged:
            if p.axis_name in x.axis_names:
                lines.append(f"{ind}load {sl(x, 'smem')} -> smem   # {_fmt(tile_elems(x, 'smem'), values)} x {x.dtype}, "
                             f"{_bytes(tile_elems(x, 'smem') * x.itemsize, values)}")
    def unit_loop(keyword: str, p, note: str) -> str:
        return (f"{ind}{keyword} {p.axis_name}1 in 0..{_fmt(nest.block_tile(p.axis_name), values)} "
                f"step {_fmt(p.size, values)}:   # {note}")

    for p in unit_groups:
        lines.append(unit_loop("parallel for", p, "warps" if p.unit_threads == 32 else "warpgroups"))
        ind += "  "
        for p_s in streams:
            mask = masks.get(p_s.axis_name)
            if mask is not None and mask.per_unit and mask.row_axis == p.axis_name:
                lines.append(f"{ind}if {p_s.axis_name}0 > {mask.row_axis}0 + {p.axis_name}1 + ({p.size}) - 1 + {mask.offset}: "
                             f"skip   # no live score in this unit's rows (it still releases the chunk)")
    for p in unit_streams:
        lines.append(unit_loop("for", p, "register chunks, each pass"))
        ind += "  "
    for op in d.ordered_ops():
        ins = ", ".join(sl(x, "reg") for x in op.inputs)
        if isinstance(op, OnlineSoftmax):
            lines.append(f"{ind}pass 1: m_new = max(m, rowmax({ins})); l = l*exp(m - m_new) + rowsum(exp(s - m_new))"
                         f"   # running max and sum in registers")
            lines.append(f"{ind}pass 2: re-read {ins}; {op.output.name} = exp(s - m) / l; store   "
                         f"# {op.passes} reads of the input")
        elif isinstance(op, NormalizedContraction):
            lines.append(f"{ind}{sl(op.scores, 'reg')}: m_new = max(m, rowmax); p = exp(s - m_new)   "
                         f"# {_fmt(tile_elems(op.scores, 'reg'), values)} scores, exp unit")
            lines.append(f"{ind}rescale: alpha = exp(m - m_new); sum = alpha*sum + rowsum(p); "
                         f"{op.output.name}_acc *= alpha")
            lines.append(f"{ind}{op.output.name}_acc += p . {sl(op.inputs[1], 'reg')}   # tensor, contract over "
                         f"{op.axis_name}; {op.output.name}_acc is {_fmt(tile_elems(op.output, 'reg'), values)} fp32 per unit")
        elif isinstance(op, Contraction):
            acc = f"{op.output.name}_acc +=" if streamed_axes & set(op.contracted) else f"{op.output.name} ="
            lines.append(f"{ind}{acc} contract({ins}) over {','.join(op.contracted)}   "
                         f"# {sl(op.output, 'reg')}: {_fmt(tile_elems(op.output, 'reg'), values)} fp32 in registers")
        elif isinstance(op, Reduce):
            lines.append(f"{ind}{op.output.name} = {op.combine}({ins}) over {op.axis_name}")
        elif isinstance(op, Map):
            lines.append(f"{ind}{op.output.name} = {op.formula or 'map'}({ins})   # " +
                         ", ".join(f"{c} {u}" for u, c in op.costs) + " per element")
    ind = block_ind
    for op in d.ordered_ops():
        if isinstance(op, NormalizedContraction):
            lines.append(f"{ind}{op.output.name} = {op.output.name}_acc / {op.output.name}_sum   # once per block")
    for x in d.output_arrays():
        lines.append(f"{ind}store {sl(x, 'smem')} -> global   # {_fmt(tile_elems(x, 'smem'), values)} x {x.dtype}, "
                     f"{_bytes(tile_elems(x, 'smem') * x.itemsize, values)}")
    return lines


def pseudocode(diagram: Diagram | Program, values: Mapping[str, int] | None = None) -> str:
    prog = as_program(diagram)
    out = []
    if values:
        out.append("# sizes: " + ", ".join(f"{k}={v}" for k, v in values.items()))
    for k in prog.kernels:
        out.extend(kernel_pseudocode(k, values))
        out.append("")
    return "\n".join(out).rstrip() + "\n"
