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


class _KernelWriter:
    """Writes one kernel's pseudocode line by line, indenting as each loop opens."""

    def __init__(self, d: Diagram, values: Mapping[str, int] | None):
        self.d, self.values = d, values
        self.nest = LoopNest(d, exact=True)
        self.stream_chunk = {p.axis_name: p.size for p in self.nest.block_streams}
        self.unit_tile = {p.axis_name: p.size for p in d.partitions_at("reg", "group")}
        self.unit_chunk = {p.axis_name: p.size for p in self.nest.unit_streams}
        self.streamed_axes = {p.axis_name for p in self.nest.block_streams}
        self.staged = [x for x in d.inputs() if d.level_of(x) == "smem"]
        self.masks = {m.col_axis: m for m in d.masks}
        self.lines: list[str] = [f"kernel {d.name}:"]
        self.ind = "  "

    def fmt(self, expr) -> str:
        return _fmt(expr, self.values)

    def emit(self, text: str) -> None:
        self.lines.append(f"{self.ind}{text}")

    def open_loop(self, text: str) -> None:
        self.emit(text)
        self.ind += "  "

    def _axis_slice(self, a: str, level: str) -> str:
        block_tile = self.nest.block_group
        if level == "reg" and a in self.unit_chunk:
            return f"{a}1:{a}1+{self.unit_chunk[a]}"
        if level == "reg" and a in self.unit_tile:
            return f"{a}1:{a}1+{self.unit_tile[a]}"
        if a in self.stream_chunk:
            return f"{a}0:{a}0+{self.stream_chunk[a]}"
        if a in block_tile and block_tile[a] != 1:
            return f"{a}0:{a}0+{block_tile[a]}"
        return a if a in block_tile else ":"

    def slice(self, arr, level: str) -> str:
        """The part of `arr` one unit of `level` holds, indexed by the loop variables."""
        return f"{arr.name}[{', '.join(self._axis_slice(a.name, level) for a in arr.axes)}]"

    def tile_note(self, x) -> str:
        """Elements, dtype and bytes of the block tile of `x`."""
        elems = self.nest.tile(x, "smem")
        return f"{self.fmt(elems)} x {x.dtype}, {_bytes(elems * x.itemsize, self.values)}"

    def block_loops(self) -> None:
        for p in self.d.partitions_at("smem", "group"):
            step = "" if p.size == 1 else f" step {self.fmt(p.size)}"
            name = p.axis_name if p.size == 1 else f"{p.axis_name}0"
            self.open_loop(f"parallel for {name} in 0..{self.fmt(self.nest.sizes[p.axis_name])}{step}:   # thread blocks")

    def block_prologue(self) -> None:
        """Loads of the staged inputs no stream moves, then the accumulators' initial values."""
        for x in self.staged:
            if not (set(x.axis_names) & self.streamed_axes):
                self.emit(f"load {self.slice(x, 'smem')} -> smem   # {self.tile_note(x)}, once per block")
        for op in self.d.ordered_ops():
            if isinstance(op, NormalizedContraction):
                rows = op.state_arrays()[0]
                self.emit(f"init {op.output.name}_acc = 0, {rows.name} = -inf, "
                          f"{op.output.name}_sum = 0   # fp32 state in registers")
            elif isinstance(op, Contraction) and self.streamed_axes & set(op.contracted):
                self.emit(f"init {op.output.name}_acc = 0   # fp32 accumulator")

    def stream_loops(self) -> None:
        """The block-level streams, each loading its chunks of the staged inputs."""
        for p in self.nest.block_streams:
            mask = self.masks.get(p.axis_name)
            bound = self.fmt(self.nest.sizes[p.axis_name])
            if mask is not None:
                bound = f"min({bound}, {mask.row_axis}0 + {self.nest.block_tile(mask.row_axis)} + {mask.offset})"
            self.open_loop(f"for {p.axis_name}0 in 0..{bound} step {self.fmt(p.size)}:   "
                           f"# stream, {self.fmt(p.stages)} stage(s) in flight")
            for x in self.staged:
                if p.axis_name in x.axis_names:
                    self.emit(f"load {self.slice(x, 'smem')} -> smem   # {self.tile_note(x)}")

    def _unit_loop(self, keyword: str, p, note: str) -> str:
        return (f"{keyword} {p.axis_name}1 in 0..{self.fmt(self.nest.block_tile(p.axis_name))} "
                f"step {self.fmt(p.size)}:   # {note}")

    def unit_loops(self) -> None:
        """Warp (or warpgroup) loops, with the chunks a per-unit mask skips, then register-level streams."""
        for p in self.d.partitions_at("reg", "group"):
            self.open_loop(self._unit_loop("parallel for", p, "warps" if p.unit_threads == 32 else "warpgroups"))
            for p_s in self.nest.block_streams:
                mask = self.masks.get(p_s.axis_name)
                if mask is not None and mask.per_unit and mask.row_axis == p.axis_name:
                    self.emit(f"if {p_s.axis_name}0 > {mask.row_axis}0 + {p.axis_name}1 + ({p.size}) - 1 + {mask.offset}: "
                              f"skip   # no live score in this unit's rows (it still releases the chunk)")
        for p in self.nest.unit_streams:
            self.open_loop(self._unit_loop("for", p, "register chunks, each pass"))

    def op_lines(self, op) -> list[str]:
        """What `op` does in the innermost loop, with its work."""
        ins = ", ".join(self.slice(x, "reg") for x in op.inputs)
        out = op.output.name
        if isinstance(op, OnlineSoftmax):
            return [f"pass 1: m_new = max(m, rowmax({ins})); l = l*exp(m - m_new) + rowsum(exp(s - m_new))"
                    f"   # running max and sum in registers",
                    f"pass 2: re-read {ins}; {out} = exp(s - m) / l; store   # {op.passes} reads of the input"]
        if isinstance(op, NormalizedContraction):
            return [f"{self.slice(op.scores, 'reg')}: m_new = max(m, rowmax); p = exp(s - m_new)   "
                    f"# {self.fmt(self.nest.tile(op.scores, 'reg'))} scores, exp unit",
                    f"rescale: alpha = exp(m - m_new); sum = alpha*sum + rowsum(p); {out}_acc *= alpha",
                    f"{out}_acc += p . {self.slice(op.inputs[1], 'reg')}   # tensor, contract over "
                    f"{op.axis_name}; {out}_acc is {self.fmt(self.nest.tile(op.output, 'reg'))} fp32 per unit"]
        if isinstance(op, Contraction):
            acc = f"{out}_acc +=" if self.streamed_axes & set(op.contracted) else f"{out} ="
            return [f"{acc} contract({ins}) over {','.join(op.contracted)}   "
                    f"# {self.slice(op.output, 'reg')}: {self.fmt(self.nest.tile(op.output, 'reg'))} fp32 in registers"]
        if isinstance(op, Reduce):
            return [f"{out} = {op.combine}({ins}) over {op.axis_name}"]
        if isinstance(op, Map):
            return [f"{out} = {op.formula or 'map'}({ins})   # " + ", ".join(f"{c} {u}" for u, c in op.costs) + " per element"]
        return []

    def block_epilogue(self) -> None:
        """The final division of each normalized accumulator, then the stores of the outputs."""
        for op in self.d.ordered_ops():
            if isinstance(op, NormalizedContraction):
                self.emit(f"{op.output.name} = {op.output.name}_acc / {op.output.name}_sum   # once per block")
        for x in self.d.output_arrays():
            self.emit(f"store {self.slice(x, 'smem')} -> global   # {self.tile_note(x)}")


def kernel_pseudocode(d: Diagram, values: Mapping[str, int] | None = None) -> list[str]:
    w = _KernelWriter(d, values)
    w.block_loops()
    block_ind = w.ind
    w.block_prologue()
    w.stream_loops()
    w.unit_loops()
    for op in w.d.ordered_ops():
        for line in w.op_lines(op):
            w.emit(line)
    w.ind = block_ind  # back out of the streams and unit loops: what follows runs once per block
    w.block_epilogue()
    return w.lines


def pseudocode(diagram: Diagram | Program, values: Mapping[str, int] | None = None) -> str:
    prog = as_program(diagram)
    out = []
    if values:
        out.append("# sizes: " + ", ".join(f"{k}={v}" for k, v in values.items()))
    for k in prog.kernels:
        out.extend(kernel_pseudocode(k, values))
        out.append("")
    return "\n".join(out).rstrip() + "\n"
