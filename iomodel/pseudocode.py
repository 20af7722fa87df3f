"""Loop-nest pseudocode of a partitioned diagram, with a size beside every variable.

Read off the same structures the derivation uses: block-level groups become parallel loops over
thread blocks, block-level streams sequential loops with their loads to SMEM, register-level groups
parallel loops over warps, and each operation a line with its work. Nothing here is specific to
one algorithm.
"""
from __future__ import annotations

from typing import Mapping

import sympy as sp

from diagrams.core import Contraction, Map, NormalizedContraction, OnlineLogSumExp, OnlineSoftmax, Reduce
from diagrams.diagram import Diagram, Program, as_program

from .derive import LoopNest
from .loopbody import body, run_of
from .registers import sharing_units
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
        self.masks = self.nest.masks  # one band per column axis (masks on one pair intersect)
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
        if self.d.raster_order is not None:
            a, group = self.d.raster_order
            self.emit(f"# blocks run in groups of {self.fmt(group)} {a}-tiles, {a} fastest within a group (raster)")
        for p in self.d.partitions_at("smem", "group"):
            step = "" if p.size == 1 else f" step {self.fmt(p.size)}"
            name = p.axis_name if p.size == 1 else f"{p.axis_name}0"
            self.open_loop(f"parallel for {name} in 0..{self.fmt(self.nest.sizes[p.axis_name])}{step}:   # thread blocks")

    def loads_in(self, loop) -> None:
        """Loads of the staged inputs whose innermost enclosing stream is `loop` (None: once per block)."""
        for x in self.staged:
            loops = self.nest.streams_through(set(x.axis_names))
            if (loops[-1] if loops else None) is loop:
                self.emit(f"load {self.slice(x, 'smem')} -> smem   # {self.tile_note(x)}"
                          + ("" if loop else ", once per block"))
                flag = self.d.held_flag(x.name)
                if self.values is not None:   # a config's 0 or 1
                    flag = flag.subs({s: self.values[s.name] for s in flag.free_symbols if s.name in self.values})
                if flag != 0:   # Diagram.hold: the units' tiles go to registers here, not at every use
                    when = "" if flag == 1 else f" (where {flag} = 1)"
                    self.emit(f"hold {x.name}'s unit tiles in registers{when}   # read from smem once here, "
                              f"not at every use")

    def init_lines(self, op) -> None:
        """The initial value of an operation's accumulator, just before the loop it folds."""
        out = op.output.name
        if isinstance(op, NormalizedContraction):
            self.emit(f"init {out}_acc = 0, {op.state_arrays()[0].name} = -inf, {out}_sum = 0   # fp32 state in registers")
        elif isinstance(op, OnlineLogSumExp):
            self.emit(f"init {out}_max = -inf, {out}_sum = 0   # fp32 running max and sum in registers")
        elif isinstance(op, Contraction):
            self.emit(f"init {out}_acc = 0   # fp32 accumulator")
        elif isinstance(op, Reduce):
            self.emit(f"init {out} = {'-inf' if op.combine == 'max' else '0'}   # fp32 running {op.combine}")

    def open_stream(self, p) -> None:
        """One block-level stream loop, loading its chunks of the staged inputs it is innermost for."""
        mask = self.masks.get(p.axis_name)
        start, bound = "0", self.fmt(self.nest.sizes[p.axis_name])
        if mask is not None and mask.offset is not None:
            bound = f"min({bound}, {mask.row_axis}0 + {self.nest.block_tile(mask.row_axis)} + {mask.offset})"
        if mask is not None and mask.lower is not None:  # a band: start at the chunk holding the first row's first key
            start = f"floor(max(0, {mask.row_axis}0 + {mask.lower}) / {p.size})*{p.size}"
        self.open_loop(f"for {p.axis_name}0 in {start}..{bound} step {self.fmt(p.size)}:   "
                       f"# stream, {self.fmt(p.stages)} stage(s) in flight")
        self.loads_in(p)

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
                    rows, c = f"{mask.row_axis}0 + {p.axis_name}1", p_s.axis_name
                    dead = ([f"{c}0 > {rows} + ({p.size}) - 1 + {mask.offset}"] if mask.offset is not None else []) + \
                           ([f"{c}0 + ({p_s.size}) - 1 < {rows} + {mask.lower}"] if mask.lower is not None else [])
                    self.emit(f"if {' or '.join(dead)}: skip   # no live score in this unit's rows (it still releases the chunk)")
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
            scores, tile = self.slice(op.scores, 'reg'), self.fmt(self.nest.tile(op.scores, 'reg'))
            pv = (f"{out}_acc += p . {self.slice(op.inputs[1], 'reg')}   # tensor, contract over "
                  f"{op.axis_name}; {out}_acc is {self.fmt(self.nest.tile(op.output, 'reg'))} fp32 per unit")
            if op.stale_max > 0:
                return [f"{scores}: m_new = max(m, rowmax)   # {tile} scores",
                        f"if any row's m_new - m > 2^{op.stale_max:g} (exp2's exponent, rare): alpha = exp(m - m_new); "
                        f"m = m_new; sum *= alpha; {out}_acc *= alpha   # else m stays (stale)",
                        f"p = exp(s - m); sum += rowsum(p)   # exp unit; p < 2^{op.stale_max:g}", pv]
            return [f"{scores}: m_new = max(m, rowmax); p = exp(s - m_new)   # {tile} scores, exp unit",
                    f"rescale: alpha = exp(m - m_new); sum = alpha*sum + rowsum(p); {out}_acc *= alpha", pv]
        if isinstance(op, OnlineLogSumExp):
            return [f"{out}: m_new = max({out}_max, rowmax({ins})); {out}_sum = {out}_sum*exp({out}_max - m_new) "
                    f"+ rowsum(exp(x - m_new))   # {self.fmt(self.nest.tile(op.inputs[0], 'reg'))} elements, "
                    f"no probabilities formed"]
        if isinstance(op, Contraction):
            acc = f"{out}_acc +=" if self.streamed_axes & set(op.contracted) else f"{out} ="
            return [f"{acc} contract({ins}) over {','.join(op.contracted)}   "
                    f"# {self.slice(op.output, 'reg')}: {self.held(op)}"]
        if isinstance(op, Reduce):
            return [f"{out} = {op.combine}({ins}) over {op.axis_name}"]
        if isinstance(op, Map):
            to_smem = "; written to smem" if self.d.level_of(op.output) == "smem" else ""
            return [f"{out} = {op.formula or 'map'}({ins})   # " + ", ".join(f"{c} {u}" for u, c in op.costs)
                    + " per element" + to_smem]
        return []

    def held(self, op) -> str:
        """What a unit holds of a contraction's output: its fp32 tile, or its part of a tile the units
        share (an operand they read from SMEM: iomodel.registers.sharing_units)."""
        if self.d.level_of(op.output) == "smem":   # the units add their shares into one tile in SMEM
            return f"{self.fmt(self.nest.tile(op.output, 'smem'))} fp32 in smem, every unit adding into it"
        share = sharing_units(self.d, self.nest, op)
        words = self.fmt(self.nest.tile(op.output, "reg") / share)
        shared = f", this unit's part of the tile {self.fmt(share)} units share" if share != 1 else ""
        return f"{words} fp32 in registers{shared}"

    def finalize(self, op) -> None:
        """What an online accumulator does once its loop has closed: the final division, log(sum) + max."""
        if isinstance(op, OnlineLogSumExp):
            self.emit(f"{op.output.name} = {op.output.name}_max + log({op.output.name}_sum)   # fp32, one per row")
        if isinstance(op, NormalizedContraction):
            self.emit(f"{op.output.name} = {op.output.name}_acc / {op.output.name}_sum   # after the stream")
            if op.lse:
                self.emit(f"{op.lse} = {op.output.name}_max + log({op.output.name}_sum)   # fp32, one per row")

    def store(self, x) -> None:
        """The store of one output tile (an atomic add for one accumulated across blocks)."""
        if x.name in self.d.accumulated:  # read-modify-write across blocks
            self.emit(f"atomic add {self.slice(x, 'smem')} -> global   # {self.tile_note(x)}, read + write")
        else:
            self.emit(f"store {self.slice(x, 'smem')} -> global   # {self.tile_note(x)}")


class _Body:
    """Emits the loop body: each operation inside the stream loops over its own axes (its depth), loops
    opened once per run of the operations inside them, accumulators initialized just before the loop
    they fold and finished just after it, each output stored where its last loop closes."""

    def __init__(self, w: _KernelWriter):
        self.w = w
        self.steps = body(w.d, w.nest)
        self.open: list[tuple[int, str]] = []   # open stream loops: (index, indent outside the loop)
        self.unit_ind: str | None = None        # indent outside the warp loop while it is open
        self.done: set[str] = set()              # outputs computed
        self.stored: set[str] = set()

    def close_units(self) -> None:
        if self.unit_ind is not None:
            self.w.ind, self.unit_ind = self.unit_ind, None
            self.flush_stores()

    def flush_stores(self) -> None:
        """Stores of the finished outputs whose innermost stream loop is the one open now."""
        for x in self.w.d.output_arrays():
            depth = len(self.w.nest.streams_through(set(x.axis_names)))
            if x.name in self.done and x.name not in self.stored and depth == len(self.open):
                self.w.store(x)
                self.stored.add(x.name)

    def close_loop(self, first: int, last: int) -> None:
        """Close the innermost stream loop; the steps `first..last` ran inside it."""
        loop, ind = self.open.pop()
        self.w.ind = ind
        for s in self.steps[first:last + 1]:
            if s.folds and loop == min(s.folds):   # folded over several loops: done after the outermost
                self.w.finalize(s.op)
        self.flush_stores()

    def open_loop(self, i: int) -> None:
        """Open the next stream loop for step `i`, initializing what the steps inside it fold."""
        loop = len(self.open)
        start, end = run_of(self.steps, i, loop)
        for s in self.steps[i:end + 1]:
            if s.folds and loop == min(s.folds):   # one init before the outermost loop it folds
                self.w.init_lines(s.op)
        self.open.append((loop, self.w.ind))
        self.w.open_stream(self.w.nest.block_streams[loop])

    def emit(self) -> None:
        w, runs = self.w, []   # runs: first step index inside each open loop
        w.loads_in(None)
        for i, step in enumerate(self.steps):
            if step.depth != len(self.open):
                self.close_units()
            while len(self.open) > step.depth:
                self.close_loop(runs.pop(), i - 1)
            while len(self.open) < step.depth:
                runs.append(i)
                self.open_loop(i)
            if self.unit_ind is None:
                self.unit_ind = w.ind
                w.unit_loops()
            for line in w.op_lines(step.op):
                w.emit(line)
            self.done.update(x.name for x in step.op.results())  # the output and any side output (an LSE)
        self.close_units()
        while self.open:
            self.close_loop(runs.pop(), len(self.steps) - 1)


def kernel_pseudocode(d: Diagram, values: Mapping[str, int] | None = None) -> list[str]:
    w = _KernelWriter(d, values)
    w.block_loops()
    _Body(w).emit()
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
