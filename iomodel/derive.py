"""The cost derivation: walk a partitioned diagram and read off work, traffic and footprint.

Nothing here knows about attention. The rules (DESIGN.md, docs/derivation.md):

* The partitions form a loop nest: block-level groups (parallel), block-level streams (sequential, in
  the order they were applied), register-level groups (warps), register-level streams.
* An array staged in SMEM is loaded once per iteration of the stream loops down to the innermost one
  whose axis it carries: it is hoisted out of every inner loop it does not carry.
* Registers hold accumulators and intermediates only; an operand is read into registers each time
  the operation that consumes it runs, by every register-level unit whose tile it does not split.
  An input the diagram holds (`Diagram.hold`) is read from SMEM once per step of the streams it carries
  and takes its unit's tile in registers through the body instead.
* Outputs are written once per block tile (per chunk if they carry a streamed axis); an output accumulated
  across blocks with atomics (`Diagram.accumulate_global`) is read and written at each of those writes.
* A band mask (masks on one pair intersect) prunes the chunks of a stream over its column axis; the
  pair count is exact.
  A per-unit mask prunes each register-level unit's chunks by its own rows (work and operand
  reads; the block still loads every chunk one of its rows needs).
* Work = each primitive's rule x the points it executes (whole tiles, so padding and masked
  straddling tiles count), plus the work the primitive declares per chunk or per block (the
  rescale of an online accumulator, its final division: `diagrams.core.Work`).
"""
from __future__ import annotations

from typing import Iterable, Mapping

import sympy as sp

from diagrams.core import Array, Contraction, DiagramError, NormalizedContraction, Op, Partition, costs_dict
from diagrams.diagram import Diagram, Program, as_program
from diagrams.masks import combined_masks

from .costs import KernelCosts, ProgramCosts, Resident, Transfer  # noqa: F401 - Transfer, Resident re-exported
from .registers import held_tile, op_residents
from .symbolic import mask_pairs

CONTRACTIONS = (Contraction, NormalizedContraction)  # sum products over contracted axes, on the matrix unit


class LoopNest:
    """The loop nest of one kernel with helpers for tiles and trip counts (the pseudocode reads it too)."""

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
        self.masks = combined_masks(d.masks)  # one band per column axis: the intersection of its masks

    def div(self, size, tile):
        return size / tile if self.exact else sp.ceiling(size / tile)

    def block_tile(self, a: str) -> sp.Expr:
        return self.block_group.get(a, self.sizes[a])

    def blocks(self) -> sp.Expr:
        return sp.Mul(*[self.div(self.sizes[a], t) for a, t in self.block_group.items()])

    def units_per_block(self) -> sp.Expr:
        # a unit splits what the block holds at a time: its tile, or its chunk of a streamed axis
        return sp.Mul(*[self.div(self.extent(a, "smem"), p.size) for a, p in self.unit_group.items()])

    def extent(self, a: str, level: str) -> sp.Expr:
        """How much of axis `a` one unit of `level` holds at a time."""
        streams = {p.axis_name: p.size for p in self.block_streams}
        if level == "reg":  # a register-level chunk, else the unit's part of the block's tile or chunk
            unit_chunks = {p.axis_name: p.size for p in self.unit_streams}
            if a in unit_chunks:
                return unit_chunks[a]
            if a in self.unit_group:
                return self.unit_group[a].size
        return streams.get(a, self.block_tile(a))

    def owned(self, a: str) -> sp.Expr:
        """How much of axis `a` one register-level unit covers over the whole stream."""
        return self.unit_group[a].size if a in self.unit_group else self.block_tile(a)

    def tile_over(self, axes: Iterable[str], level: str) -> sp.Expr:
        return sp.Mul(*[self.extent(a, level) for a in axes])

    def tile(self, arr: Array, level: str) -> sp.Expr:
        return self.tile_over(arr.axis_names, level)

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
        """Iterations of register-level stream loops, over what one unit holds of the axis."""
        return sp.Mul(*[self.div(self.unit_group[p.axis_name].size if p.axis_name in self.unit_group
                                 else self.extent(p.axis_name, "smem"), p.size) for p in loops])

    def _mask_of(self, p: Partition):
        return self.masks.get(p.axis_name)

    def block_steps(self, loops: list[Partition]) -> sp.Expr:
        """Sum over blocks of the iterations of `loops`, with triangular masks pruning chunks."""
        return self._steps(loops, per_unit=False)

    def prunes_per_unit(self, loops: list[Partition]) -> bool:
        """Whether a mask over one of `loops` lets each register-level unit skip chunks on its own."""
        return any(m is not None and m.per_unit and m.row_axis in self.unit_group
                   for m in map(self._mask_of, loops))

    def unit_block_steps(self, loops: list[Partition]) -> sp.Expr:
        """Sum over blocks and their register-level units of the iterations of block-level `loops`,
        each unit pruning a per-unit mask's chunks by its own rows (rows past the end: no chunk);
        without a per-unit mask, `block_steps` x units per block."""
        return self._steps(loops, per_unit=True)

    def _steps(self, loops: list[Partition], per_unit: bool) -> sp.Expr:
        total = self.blocks() * (self.units_per_block() if per_unit else 1)
        for p in loops:
            mask = self._mask_of(p)
            if mask is None:
                total = total * self.div(self.sizes[p.axis_name], p.size)
                continue
            row = mask.row_axis
            rows, row_tile = self.sizes[row], self.block_tile(row)
            tile = row_tile
            if per_unit and mask.per_unit and row in self.unit_group:
                tile = self.unit_group[row].size
                total = total / self.div(row_tile, tile)  # the units along the rows count their own pairs
            pairs = mask_pairs(rows, tile, p.size, self.sizes[p.axis_name], mask.lower, mask.offset)
            # the blocks (and units) along the other axes each see `pairs` (row tile, chunk) pairs
            total = total / self.div(rows, row_tile) * pairs
        return total


def _space(op: Op) -> set[str]:
    return {a.name for a in op.iteration_axes()}


def _unit_visits(nest: LoopNest, axes: set[str]) -> sp.Expr:
    """Times the register-level units, summed over blocks, run a body over `axes`: every enclosing
    stream step, block- and register-level."""
    return nest.unit_block_steps(nest.streams_through(axes)) * nest.unit_steps(nest.unit_streams_through(axes))


def _input_costs(d: Diagram, nest: LoopNest, blocks: sp.Expr, units: sp.Expr):
    """Inputs, global -> smem (staged) or -> reg (read at use): transfers, SMEM residents, re-read bytes and spans."""
    transfers, residents, reread, span = [], [], [], []
    stream_stage = {p.axis_name: p.stages for p in nest.block_streams}
    for x in d.inputs():
        carried = set(x.axis_names)
        consumers = d.consumers(x.name)
        use_axes = set().union(*[_space(c) for c in consumers]) if consumers else set()
        passes = max([c.passes for c in consumers], default=1)
        # operands are read at every use: inner register-level chunks and every pass of a multi-pass op
        reads = _unit_visits(nest, use_axes) * passes
        if d.level_of(x) == "smem":
            loops = nest.streams_through(carried)
            transfers.append(Transfer(x.name, "global->smem", nest.tile(x, "smem"), nest.block_steps(loops), x.itemsize))
            streamed = [stream_stage[a] for a in carried if a in stream_stage]
            residents.append(Resident(x.name, "smem", held_tile(d, nest, x), sp.Max(*(streamed or [1])), x.itemsize,
                                      True, "stream" if streamed else "all"))
            # from SMEM, every op that takes the operand loads its own fragments (the backward's Q feeds
            # S = Q K^T and dK = dS^T Q); an input read from global memory is read once for all its ops
            smem_reads = sp.Add(*[_unit_visits(nest, _space(c)) * c.passes for c in consumers]) if consumers else reads
            # held in registers (Diagram.hold): one read per unit and step of the loops over the axes it carries
            held = d.held_flag(x.name)
            smem_reads = held * _unit_visits(nest, carried) + (1 - held) * smem_reads
            transfers.append(Transfer(x.name, "smem->reg", nest.tile(x, "reg"), smem_reads, x.itemsize))
            if held != 0:
                residents.append(Resident(f"{x.name} (held)", "reg", held * nest.tile(x, "reg") * x.itemsize / 4, 1, 4))
            continue
        transfers.append(Transfer(x.name, "global->reg", nest.tile(x, "reg"), reads, x.itemsize))
        if passes > 1:
            # a re-read is served by L2 only if what is touched in between fits: what one unit reads in a
            # pass is its rows, the whole streamed extent
            per_unit = sp.Mul(*[nest.owned(a.name) for a in x.axes]) * x.itemsize
            reread.append((passes - 1) * blocks * units * per_unit)
            span.append(per_unit)
    return transfers, residents, reread, span


def _output_transfers(d: Diagram, nest: LoopNest, units: sp.Expr) -> list[Transfer]:
    """Outputs: written once per block tile (per chunk when they carry a streamed axis)."""
    transfers = []
    for x in d.output_arrays():
        axes = set(x.axis_names)
        tile, count = nest.tile(x, "smem"), nest.block_steps(nest.streams_through(axes))
        src = "smem" if d.level_of(x) == "smem" else "reg"
        unit_loops = nest.unit_streams_through(axes)
        if src == "reg" and unit_loops:  # written chunk by chunk from a register-level stream
            tile, count = nest.tile(x, "reg"), count * units * nest.unit_steps(unit_loops)
        if x.name in d.accumulated:  # an atomic add reads the value it adds to: read-modify-write
            transfers.append(Transfer(x.name, f"global->{src}", tile, count, x.itemsize))
        transfers.append(Transfer(x.name, f"{src}->global", tile, count, x.itemsize))
    return transfers


def _executed(nest: LoopNest, axes: set[str]) -> sp.Expr:
    """Points executed over `axes`: whole tiles, every enclosing block-level stream step."""
    loops = nest.streams_through(axes)
    if nest.prunes_per_unit(loops):  # each unit runs its own rows of the block's tile
        own = sp.Mul(*[nest.unit_group[a].size if a in nest.unit_group else nest.extent(a, "smem") for a in axes])
        return nest.unit_block_steps(loops) * own
    return nest.block_steps(loops) * nest.tile_over(axes, "smem")


def _padded_output(d: Diagram, nest: LoopNest, op: Op) -> sp.Expr:
    """How much more than its points an operation computes when its output is an intermediate kept in SMEM
    with padded rows (``stage(..., row_align=)``): it is produced padding and all (a tensor instruction's N
    covers whole blocks: the padded columns' products are computed, on zeros); 1 otherwise."""
    align = dict(d.row_aligned).get(op.output.name)
    if align is None:
        return sp.Integer(1)
    row = nest.extent(op.output.axis_names[-1], "smem")
    return sp.ceiling(row / align) * align / row


def _work(d: Diagram, nest: LoopNest, blocks: sp.Expr) -> dict[str, sp.Expr]:
    """Operations per unit (tensor, fp32, exp): rule x executed points, plus the primitive's per-chunk/block work."""
    flops: dict[str, sp.Expr] = {}

    def add_flops(costs: Mapping[str, sp.Expr], points: sp.Expr):
        for u, c in costs.items():
            flops[u] = flops.get(u, 0) + c * points

    for op in d.ordered_ops():
        add_flops(op.work_per_point(), _executed(nest, _space(op)) * _padded_output(d, nest, op))
        for w in op.extra_work():
            if w.per == "point":
                add_flops(costs_dict(w.costs), _executed(nest, set(w.axes)))
            elif w.per == "chunk":  # by every unit holding the elements, per block- or register-level chunk
                add_flops(costs_dict(w.costs), _unit_visits(nest, {w.chunks_of}) * nest.tile_over(w.axes, "reg"))
            else:
                add_flops(costs_dict(w.costs), blocks * nest.tile_over(w.axes, "smem"))
    return flops


def _fragment_bytes_per_k(d: Diagram, nest: LoopNest) -> sp.Expr:
    """What one unit holds of its SMEM operands per unit of the contracted extent, largest over the
    contractions (the code multiplies by the instruction's k and by how many k-steps it buffers); an operand
    held in registers (`Diagram.hold`) is counted whole among the residents instead."""
    frag = []
    for op in d.ordered_ops():
        if isinstance(op, CONTRACTIONS):
            per_k = []
            for x in op.inputs:
                if d.level_of(x) == "smem":
                    k_ext = sp.Mul(*[nest.extent(a, "reg") for a in op.contracted if x.carries(a)])
                    per_k.append((1 - d.held_flag(x.name)) * nest.tile(x, "reg") / k_ext * x.itemsize)
            if per_k:
                frag.append(sp.Add(*per_k))
    return sp.Max(*frag) if frag else sp.Integer(0)


def _accumulated(d: Diagram) -> list[Array]:
    return [x for x in d.output_arrays() if x.name in d.accumulated]


def block_order(d: Diagram, nest: LoopNest) -> list[tuple[str, sp.Expr]]:
    """The grid in launch order, outermost first (the last varies fastest, as blockIdx.x): the block-level
    groups in the order applied; a `raster` on an axis splits it into groups (in place) and its tiles
    within a group (fastest)."""
    grid = [(a, nest.div(nest.sizes[a], t)) for a, t in nest.block_group.items()]
    if d.raster_order is None:
        return grid
    axis_name, group = d.raster_order
    tiles = dict(grid)[axis_name]
    grid = [(a, nest.div(n, group) if a == axis_name else n) for a, n in grid]
    return grid + [(axis_name, sp.Min(group, tiles))]


def derive_kernel(d: Diagram, exact: bool = True) -> KernelCosts:
    """Symbolic costs of one kernel. `exact=True` assumes tiles divide sizes (readable formulas);
    `exact=False` rounds every trip count up, as hardware pads the tail tiles."""
    nest = LoopNest(d, exact)
    blocks, units = nest.blocks(), nest.units_per_block()
    unit_threads = nest.unit_threads or (d.threads or 128)  # no register-level group: the block is one unit
    transfers, residents, reread, span = _input_costs(d, nest, blocks, units)
    transfers += _output_transfers(d, nest, units)
    residents += op_residents(d, nest)  # registers: the peak of liveness over the loop body
    flops = _work(d, nest, blocks)
    # an operand the op computes on chip (the probabilities of a normalized contraction) feeds the matrix
    # unit in its own dtype; code whose instruction takes it from registers whole keeps this tile live
    reg_operands = sp.Add(*[nest.tile(x, "reg") * x.itemsize for op in d.ordered_ops() for x in op.computed_operands()])
    flops = {u: sp.simplify(v) if exact else v for u, v in flops.items()}
    return KernelCosts(
        name=d.name, blocks=blocks, units_per_block=units,
        unit_threads=unit_threads, threads_per_block=units * unit_threads, steps_total=nest.block_steps(nest.block_streams),
        flops=flops, transfers=transfers, residents=residents,
        stream_stages=sp.Max(*([p.stages for p in nest.block_streams] or [1])),
        compulsory_bytes=sp.Add(*[x.nbytes() for x in d.inputs()]) + sp.Add(*[x.nbytes() for x in d.output_arrays()]),
        fragment_bytes_per_k=_fragment_bytes_per_k(d, nest), register_operand_bytes=reg_operands,
        reread_bytes=sp.Add(*reread), reread_span_per_unit=sp.Add(*span),
        grid=block_order(d, nest),
        # atomically accumulated outputs are read (and written) like inputs: the L2 reuse model serves them
        input_axes={x.name: x.axis_names for x in (*d.inputs(), *_accumulated(d))},
        input_nbytes={x.name: x.nbytes() for x in (*d.inputs(), *_accumulated(d))},
        accumulated=tuple(d.accumulated),
        input_passes={x.name: max([c.passes for c in d.consumers(x.name)], default=1) for x in d.inputs()},
        runs=sp.Integer(1) if d.runs is None else sp.sympify(d.runs))


def derive(diagram: Diagram | Program, exact: bool = True) -> ProgramCosts:
    """Costs of every kernel of a diagram or program."""
    prog = as_program(diagram)
    return ProgramCosts(prog.name, [derive_kernel(k, exact) for k in prog.kernels])
