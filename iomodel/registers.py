"""Register liveness: what one register-level unit holds while the loop body runs.

An intermediate occupies registers from the operation that produces it to its last consumer in the loop
body (`iomodel.loopbody`); an accumulator (an operation reducing a streamed axis) from the first operation
of the loop over that axis until its last consumer after the loop (or its store), together with its online
state. The registers of a kernel are the peak over the body of what is live, not the sum of every
intermediate. Operand fragments read from SMEM are counted apart (`fragment_bytes_per_k`).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from diagrams.core import Contraction, Map, NormalizedContraction
from diagrams.diagram import Diagram

from .costs import Resident
from .loopbody import Step, body, run_of

CONTRACTIONS = (Contraction, NormalizedContraction)
PEAK = "live intermediates at their peak"


@dataclass(frozen=True)
class Live:
    name: str
    words: sp.Expr  # 32-bit registers of one unit (all its threads together)
    start: int
    end: int


def _interval(steps: list[Step], i: int) -> tuple[int, int]:
    """Where the output of step `i` is live: producer (or the start of the loop it accumulates over) to
    its last consumer (or the end of that loop)."""
    step = steps[i]
    start, end = i, i
    for loop in step.folds:
        lo, hi = run_of(steps, i, loop)
        start, end = min(start, lo), max(end, hi)
    users = [j for j, s in enumerate(steps) if any(x.name == step.op.output.name for x in s.op.inputs)]
    last = max(users, default=end)
    if last > end and _in_place(steps[last].op, step.op.output):
        last -= 1   # its last user writes over its registers: it is dead where that result is born
    return start, max(end, last)


def _in_place(op, x) -> bool:
    """Whether `op` writes its result over the registers of its input `x`, which dies there (a map declared
    ``in_place`` on its first input: a softcap or a bias applied to the scores where they are)."""
    return isinstance(op, Map) and op.in_place and op.inputs[0].name == x.name


def sharing_units(d: Diagram, nest, op) -> sp.Expr:
    """How many units share one output tile of `op` (1: each holds its own). A contraction over an axis the
    units split, reading an intermediate the block staged in SMEM, is run by every unit over the whole axis
    from there, each on its part of the output, instead of each holding a partial sum of all of it
    (FlashAttention-2's dQ = dS K: the warps that own the keys write dS to SMEM, then split dQ's tile)."""
    staged = dict(d.staged)
    if not isinstance(op, CONTRACTIONS) or not any(
            staged.get(x.name) == "smem" and d.producer(x.name) is not None for x in op.inputs):
        return sp.Integer(1)
    return sp.Mul(*[nest.div(nest.extent(a, "smem"), nest.unit_group[a].size)
                    for a in op.contracted if a in nest.unit_group])


def _live_ranges(d: Diagram, nest, steps: list[Step]) -> list[Live]:
    staged = dict(d.staged)
    out: list[Live] = []
    for i, step in enumerate(steps):
        op = step.op
        start, end = _interval(steps, i)
        if staged.get(op.output.name, "reg") == "reg":
            # a contraction accumulates in fp32 whatever it stores
            size = max(4, op.output.itemsize) if isinstance(op, CONTRACTIONS) else op.output.itemsize
            words = nest.tile(op.output, "reg") * size / 4 / sharing_units(d, nest, op)
            out.append(Live(op.output.name, words, start, end))
        state = op.state_arrays()
        out += [Live(st.name, nest.tile(st, "reg") * st.itemsize / 4, start, end) for st in state]
        streamed = op.inputs[0]
        if state and d.producer(streamed.name) is None:  # a streamed input from outside: one fp32 tile at the op
            out.append(Live(streamed.name, nest.tile(streamed, "reg"), i, i))
    return out


def held_tile(d: Diagram, nest, x) -> sp.Expr:
    """Elements an array's SMEM tile takes: its tile, rows padded to the alignment it is staged with."""
    tile = nest.tile(x, "smem")
    align = dict(d.row_aligned).get(x.name)
    if align is None:
        return tile
    row = nest.extent(x.axis_names[-1], "smem")
    return tile / row * sp.ceiling(row / align) * align


def op_residents(d: Diagram, nest) -> list[Resident]:
    """Residents of the operations: outputs staged in SMEM, and the registers of one unit at the peak of
    liveness. Values live over the whole body are listed one by one; the rest, when they are never all
    live together, as one resident of 32-bit words (`PEAK`) holding the largest sum live at one step."""
    steps = body(d, nest)
    staged = dict(d.staged)
    copies = dict(d.buffered)
    # an intermediate made after the last step of the block-level streams lives only once they have ended
    last_streamed = max([i for i, s in enumerate(steps) if s.depth > 0], default=len(steps))
    residents = [Resident(s.op.output.name, "smem", held_tile(d, nest, s.op.output), copies.get(s.op.output.name, 1),
                          s.op.output.itemsize, phase="after" if i > last_streamed else "all")
                 for i, s in enumerate(steps) if staged.get(s.op.output.name) == "smem"]
    live = _live_ranges(d, nest, steps)
    last = len(steps) - 1
    always = [v for v in live if v.start == 0 and v.end == last]
    transient = [v for v in live if v not in always]
    residents += [Resident(v.name, "reg", v.words, 1, 4) for v in always]
    if not transient:
        return residents
    if any(all(v.start <= i <= v.end for v in transient) for i in range(len(steps))):
        return residents + [Resident(v.name, "reg", v.words, 1, 4) for v in transient]
    sums = {sp.Add(*[v.words for v in transient if v.start <= i <= v.end]) for i in range(len(steps))}
    return residents + [Resident(PEAK, "reg", sp.Max(*sums), 1, 4)]


def live_words(d: Diagram, nest) -> list[tuple[str, sp.Expr]]:
    """For each step of the body, the operation and the 32-bit words one unit holds live there."""
    steps = body(d, nest)
    live = _live_ranges(d, nest, steps)
    return [(s.op.name, sp.Add(*[v.words for v in live if v.start <= i <= v.end])) for i, s in enumerate(steps)]
