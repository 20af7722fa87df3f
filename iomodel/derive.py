"""The cost derivation: walk a partitioned diagram and read off work, traffic and footprint.

Nothing here knows about attention. The rules (DESIGN.md, docs/derivation.md):

* The partitions form a loop nest: block-level groups (parallel), block-level streams (sequential, in
  the order they were applied), register-level groups (warps), register-level streams.
* An array staged in SMEM is loaded once per iteration of the stream loops down to the innermost one
  whose axis it carries: it is hoisted out of every inner loop it does not carry.
* Registers hold accumulators and intermediates only; an operand is read into registers each time
  the operation that consumes it runs, by every register-level unit whose tile it does not split.
* Outputs are written once per block tile (per chunk if they carry a streamed axis).
* A triangular mask prunes the chunks of a stream over its column axis; the pair count is exact.
* Work = each primitive's rule x the points it executes (whole tiles, so padding and masked
  straddling tiles count), plus the per-chunk rescale an online accumulator adds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import sympy as sp

from diagrams.core import (Array, Contraction, DiagramError, NormalizedContraction, OnlineSoftmax, Op, Partition,
                           costs_dict)
from diagrams.diagram import Diagram, Program, as_program

from .symbolic import TriangleTiles

BOUNDARIES = ("global->smem", "smem->reg", "global->reg", "reg->global", "smem->global")


@dataclass
class Transfer:
    array: str
    boundary: str
    tile_elements: sp.Expr   # one tile, as moved by one unit
    count: sp.Expr           # how many times such a tile moves (units x loop trips)
    itemsize: int

    @property
    def elements(self) -> sp.Expr:
        return self.tile_elements * self.count

    @property
    def nbytes(self) -> sp.Expr:
        return self.elements * self.itemsize


@dataclass
class Resident:
    array: str
    level: str
    tile_elements: sp.Expr   # per unit of the level (block for smem, warp/warpgroup for reg)
    copies: sp.Expr          # pipeline stages
    itemsize: int
    staged_input: bool = False  # an input brought in from global memory

    @property
    def nbytes(self) -> sp.Expr:
        return self.tile_elements * self.copies * self.itemsize


@dataclass
class KernelCosts:
    name: str
    blocks: sp.Expr
    units_per_block: sp.Expr      # register-level units (warps or warpgroups) in a block
    unit_threads: int
    threads_per_block: sp.Expr
    steps_total: sp.Expr          # sum over blocks of the innermost block-level stream steps
    flops: dict[str, sp.Expr]     # unit -> operations over the whole kernel
    transfers: list[Transfer]
    residents: list[Resident]
    loop_nest: list[Partition]
    stream_stages: sp.Expr
    fragment_bytes_per_k: sp.Expr = sp.Integer(0)  # operand bytes per unit of contracted extent, per unit
    register_operand_bytes: sp.Expr = sp.Integer(0)  # per unit: on-chip operands produced in registers
    reread_bytes: sp.Expr = sp.Integer(0)           # global bytes read again by later passes of multi-pass ops
    reread_span_per_unit: sp.Expr = sp.Integer(0)   # bytes one unit touches between a read and its re-read

    def bytes_at(self, boundary: str) -> sp.Expr:
        return sp.Add(*[t.nbytes for t in self.transfers if t.boundary == boundary])

    def elements_at(self, boundary: str) -> sp.Expr:
        return sp.Add(*[t.elements for t in self.transfers if t.boundary == boundary])

    @property
    def global_bytes(self) -> sp.Expr:
        """Bytes read from or written to global memory."""
        return sp.Add(*[t.nbytes for t in self.transfers if "global" in t.boundary])

    @property
    def global_elements(self) -> sp.Expr:
        return sp.Add(*[t.elements for t in self.transfers if "global" in t.boundary])

    @property
    def smem_bytes(self) -> sp.Expr:
        """SMEM footprint of one block."""
        return sp.Add(*[r.nbytes for r in self.residents if r.level == "smem"])

    @property
    def smem_elements(self) -> sp.Expr:
        return sp.Add(*[r.tile_elements * r.copies for r in self.residents if r.level == "smem"])

    @property
    def smem_buffers(self) -> sp.Expr:
        """SMEM tile buffers (counting pipeline copies) of staged inputs: each needs a 'full' signal."""
        return sp.Add(*[r.copies for r in self.residents if r.level == "smem" and r.staged_input])

    @property
    def smem_traffic_bytes(self) -> sp.Expr:
        """Bytes written into and read out of SMEM (for the SMEM bandwidth term)."""
        return sp.Add(*[t.nbytes for t in self.transfers if "smem" in t.boundary])

    @property
    def reg_bytes_per_unit(self) -> sp.Expr:
        return sp.Add(*[r.nbytes for r in self.residents if r.level == "reg"])

    @property
    def regs_per_thread(self) -> sp.Expr:
        """32-bit registers per thread for the resident tiles (no addressing or loop overhead)."""
        return self.reg_bytes_per_unit / (4 * self.unit_threads)

    @property
    def steps_per_block(self) -> sp.Expr:
        return self.steps_total / self.blocks


@dataclass
class ProgramCosts:
    name: str
    kernels: list[KernelCosts] = field(default_factory=list)

    def total_flops(self) -> dict[str, sp.Expr]:
        out: dict[str, sp.Expr] = {}
        for k in self.kernels:
            for u, v in k.flops.items():
                out[u] = out.get(u, 0) + v
        return out

    @property
    def global_bytes(self) -> sp.Expr:
        return sp.Add(*[k.global_bytes for k in self.kernels])

    @property
    def global_elements(self) -> sp.Expr:
        return sp.Add(*[k.global_elements for k in self.kernels])


class _Nest:
    """The loop nest of one kernel with helpers for tiles and trip counts."""

    def __init__(self, d: Diagram, exact: bool):
        self.d = d
        self.exact = exact
        self.sizes = d.axes()
        self.block_group = {p.axis_name: p.size for p in d.partitions_at("smem", "group")}
        self.block_streams = d.partitions_at("smem", "stream")
        self.unit_group = {p.axis_name: p for p in d.partitions_at("reg", "group")}
        self.unit_streams = d.partitions_at("reg", "stream")
        for p in d.partitions:
            if p.kind == "group" and p.level == "smem" and p.axis_name in {s.axis_name for s in self.block_streams}:
                raise DiagramError(f"{d.name}: axis {p.axis_name} is both grouped and streamed at the block level")
        threads = {p.unit_threads for p in self.unit_group.values()}
        if len(threads) > 1:
            raise DiagramError(f"{d.name}: register-level groups disagree on threads per unit: {threads}")
        self.unit_threads = threads.pop() if threads else None

    def div(self, size, tile):
        return size / tile if self.exact else sp.ceiling(size / tile)

    def block_tile(self, a: str) -> sp.Expr:
        return self.block_group.get(a, self.sizes[a])

    def blocks(self) -> sp.Expr:
        return sp.Mul(*[self.div(self.sizes[a], t) for a, t in self.block_group.items()])

    def units_per_block(self) -> sp.Expr:
        return sp.Mul(*[self.div(self.block_tile(a), p.size) for a, p in self.unit_group.items()])

    def extent(self, a: str, level: str) -> sp.Expr:
        """How much of axis `a` one unit of `level` holds at a time."""
        streams = {p.axis_name: p.size for p in self.block_streams}
        if level == "reg":
            streams.update({p.axis_name: p.size for p in self.unit_streams})
            if a in streams:
                return streams[a]
            if a in self.unit_group:
                return self.unit_group[a].size
            return self.block_tile(a)
        return streams.get(a, self.block_tile(a))

    def tile(self, arr: Array, level: str) -> sp.Expr:
        return sp.Mul(*[self.extent(a.name, level) for a in arr.axes])

    @staticmethod
    def _enclosing(loops: list[Partition], axes: set[str]) -> list[Partition]:
        """The loops enclosing a point that depends on `axes`: all of them down to the innermost one
        over an axis in `axes` (outer loops enclose it regardless)."""
        last = max([i for i, p in enumerate(loops) if p.axis_name in axes], default=-1)
        return loops[: last + 1]

    def streams_through(self, axes: set[str]) -> list[Partition]:
        """Block-level stream loops enclosing a point that depends on `axes`."""
        return self._enclosing(self.block_streams, axes)

    def unit_streams_through(self, axes: set[str]) -> list[Partition]:
        """Register-level stream loops (inside the warp loop) enclosing a use over `axes`."""
        return self._enclosing(self.unit_streams, axes)

    def unit_steps(self, loops: list[Partition]) -> sp.Expr:
        """Iterations of register-level stream loops, relative to the block tile."""
        return sp.Mul(*[self.div(self.block_tile(p.axis_name), p.size) for p in loops])

    def block_steps(self, loops: list[Partition]) -> sp.Expr:
        """Sum over blocks of the iterations of `loops`, with triangular masks pruning chunks."""
        total = self.blocks()
        for p in loops:
            mask = next((m for m in self.d.masks if m.col_axis == p.axis_name), None)
            if mask is None:
                total = total * self.div(self.sizes[p.axis_name], p.size)
                continue
            row = mask.row_axis
            rows, row_tile = self.sizes[row], self.block_tile(row)
            pairs = TriangleTiles(rows, row_tile, p.size, self.sizes[p.axis_name], mask.offset)
            # the blocks of the other grouped axes each see `pairs` (row tile, chunk) pairs
            total = total / self.div(rows, row_tile) * pairs
        return total


def _space(op: Op) -> set[str]:
    return {a.name for a in op.iteration_axes()}


def derive_kernel(d: Diagram, exact: bool = True) -> KernelCosts:
    """Symbolic costs of one kernel. `exact=True` assumes tiles divide sizes (readable formulas);
    `exact=False` rounds every trip count up, as hardware pads the tail tiles."""
    nest = _Nest(d, exact)
    blocks = nest.blocks()
    units = nest.units_per_block()
    unit_threads = nest.unit_threads or (d.threads or 128)
    threads = units * unit_threads if nest.unit_group else sp.Integer(d.threads or 128)
    transfers: list[Transfer] = []
    residents: list[Resident] = []
    flops: dict[str, sp.Expr] = {}

    def add_flops(costs: Mapping[str, sp.Expr], points: sp.Expr):
        for u, c in costs.items():
            flops[u] = flops.get(u, 0) + c * points

    stream_stage = {p.axis_name: p.stages for p in nest.block_streams}

    # --- inputs: global -> smem (staged) or global -> reg (read at use) ---
    for x in d.inputs():
        carried = set(x.axis_names)
        consumers = d.consumers(x.name)
        use_axes = set().union(*[_space(c) for c in consumers]) if consumers else set()
        use_loops = nest.streams_through(use_axes)
        # operands are read at every use: inner register-level chunks and every pass of a multi-pass op
        reads = nest.unit_steps(nest.unit_streams_through(use_axes)) * max([getattr(c, "passes", 1) for c in consumers] or [1])
        if d.level_of(x) == "smem":
            loops = nest.streams_through(carried)
            transfers.append(Transfer(x.name, "global->smem", nest.tile(x, "smem"), nest.block_steps(loops), x.itemsize))
            stages = sp.Max(*([stream_stage[a] for a in carried if a in stream_stage] or [1]))
            residents.append(Resident(x.name, "smem", nest.tile(x, "smem"), stages, x.itemsize, True))
            transfers.append(Transfer(x.name, "smem->reg", nest.tile(x, "reg"),
                                      nest.block_steps(use_loops) * units * reads, x.itemsize))
        else:
            transfers.append(Transfer(x.name, "global->reg", nest.tile(x, "reg"),
                                      nest.block_steps(use_loops) * units * reads, x.itemsize))

    # --- re-reads of multi-pass operations: served by L2 only if what is touched in between fits ---
    reread, span = [], []
    for x in d.inputs():
        passes = max([getattr(c, "passes", 1) for c in d.consumers(x.name)] or [1])
        if passes > 1 and d.level_of(x) != "smem":
            # what one unit reads in a pass: its rows, the whole streamed extent
            per_unit = sp.Mul(*[nest.unit_group[a.name].size if a.name in nest.unit_group else nest.block_tile(a.name)
                                for a in x.axes]) * x.itemsize
            reread.append((passes - 1) * nest.blocks() * units * per_unit)
            span.append(per_unit)

    # --- outputs: written once per block tile (per chunk when they carry a streamed axis) ---
    for x in d.output_arrays():
        loops = nest.streams_through(set(x.axis_names))
        src = "smem" if d.level_of(x) == "smem" or any(n == x.name and l == "smem" for n, l in d.staged) else "reg"
        transfers.append(Transfer(x.name, f"{src}->global", nest.tile(x, "smem"), nest.block_steps(loops), x.itemsize))

    # --- on-chip residents: accumulators, online state, intermediates ---
    staged_names = dict(d.staged)
    for op in d.ordered_ops():
        out = op.output
        level = staged_names.get(out.name, "reg")
        acc_itemsize = 4 if isinstance(op, (Contraction, NormalizedContraction)) else out.itemsize
        unit_level = "smem" if level == "smem" else "reg"
        residents.append(Resident(out.name, level, nest.tile(out, unit_level), 1, max(acc_itemsize, out.itemsize)))
        if isinstance(op, (NormalizedContraction, OnlineSoftmax)):
            for st in op.state_arrays():
                residents.append(Resident(st.name, "reg", nest.tile(st, "reg"), 1, st.itemsize))
            scores = op.inputs[0]
            if d.producer(scores.name) is None:  # scores arrive from outside: they occupy a register tile too
                residents.append(Resident(scores.name, "reg", nest.tile(scores, "reg"), 1, 4))

    # --- outputs written chunk by chunk from a register-level stream ---
    for t in transfers:
        if t.boundary == "reg->global":
            out = d.arrays()[t.array]
            loops = nest.unit_streams_through(set(out.axis_names))
            if loops:
                t.tile_elements, t.count = nest.tile(out, "reg"), t.count * units * nest.unit_steps(loops)

    # --- work: rule x executed points ---
    for op in d.ordered_ops():
        space = _space(op)
        loops = nest.streams_through(space)
        tile_points = sp.Mul(*[nest.extent(a, "smem") for a in space])
        points = nest.block_steps(loops) * tile_points
        add_flops(op.work_per_point(), points)
        if isinstance(op, NormalizedContraction):
            s_space = set(op.scores.axis_names)
            s_points = nest.block_steps(nest.streams_through(s_space)) * nest.tile(op.scores, "smem")
            add_flops(costs_dict(op.score_costs), s_points)
            stream_loops = nest.streams_through({op.axis_name})
            steps = nest.block_steps(stream_loops)
            rows = op.state_arrays()[0]
            add_flops(costs_dict(op.rescale_costs), steps * nest.tile(rows, "smem"))
            add_flops(costs_dict(op.out_rescale_costs), steps * nest.tile(op.output, "smem"))
            add_flops(costs_dict(op.finalize_costs), nest.blocks() * nest.tile(op.output, "smem"))
        if isinstance(op, OnlineSoftmax):
            # pass 1 rescales the running state once per chunk (block- or register-level)
            loops = nest.streams_through({op.axis_name})
            unit_loops = nest.unit_streams_through({op.axis_name})
            steps = nest.block_steps(loops) * units * nest.unit_steps(unit_loops)
            add_flops(costs_dict(op.rescale_costs), steps * nest.tile(op.state_arrays()[0], "reg"))

    # operand fragments: what one unit holds of its SMEM operands per unit of the contracted extent
    # (the code multiplies by the instruction's k and by how many k-steps it buffers)
    frag = []
    for op in d.ordered_ops():
        if isinstance(op, (Contraction, NormalizedContraction)):
            contracted = [a for a in op.contracted]
            per_k = []
            for x in op.inputs:
                if d.level_of(x) == "smem":
                    k_ext = sp.Mul(*[nest.extent(a, "reg") for a in contracted if x.carries(a)])
                    per_k.append(nest.tile(x, "reg") / k_ext * x.itemsize)
            if per_k:
                frag.append(sp.Add(*per_k))
    fragment = sp.Max(*frag) if len(frag) > 1 else (frag[0] if frag else sp.Integer(0))
    # an operand computed on chip (the probabilities of a normalized contraction) feeds the matrix unit in
    # the other operand's dtype; code whose instruction takes it from registers whole keeps this tile live
    reg_operands = sp.Add(*[nest.tile(op.scores, "reg") * op.inputs[1].itemsize
                            for op in d.ordered_ops() if isinstance(op, NormalizedContraction)])

    steps_total = nest.block_steps(nest.block_streams)
    stages = sp.Max(*([p.stages for p in nest.block_streams] or [1]))
    flops = {u: sp.simplify(v) if exact else v for u, v in flops.items()}
    return KernelCosts(d.name, blocks, units if nest.unit_group else sp.Integer(1), unit_threads, threads,
                       steps_total, flops, transfers, residents, list(d.partitions), stages, fragment, reg_operands,
                       sp.Add(*reread) if reread else sp.Integer(0), sp.Add(*span) if span else sp.Integer(0))


def derive(diagram: Diagram | Program, exact: bool = True) -> ProgramCosts:
    """Costs of every kernel of a diagram or program."""
    prog = as_program(diagram)
    return ProgramCosts(prog.name, [derive_kernel(k, exact) for k in prog.kernels])
