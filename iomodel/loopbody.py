"""The order of a kernel's operations in its loop nest, and the depth each one runs at.

An operation runs inside every block-level stream loop down to the innermost one over an axis of its own
iteration space (`LoopNest.streams_through`): its depth is how many stream loops enclose it. The body
order is a topological order of the operations that, among those ready, takes the deepest first, so the
operations of one loop run together and a loop opens once (the register liveness and the pseudocode read
it).
"""
from __future__ import annotations

from dataclasses import dataclass

from diagrams.core import Op
from diagrams.diagram import Diagram


@dataclass(frozen=True)
class Step:
    op: Op
    depth: int                  # block-level stream loops enclosing the op
    folds: tuple[int, ...]      # indices of the block-level stream loops whose axis the op reduces


def space(op: Op) -> set[str]:
    return {a.name for a in op.iteration_axes()}


def _step(nest, op: Op) -> Step:
    axes = space(op)
    folds = tuple(i for i, p in enumerate(nest.block_streams)
                  if p.axis_name in axes and not op.output.carries(p.axis_name))
    return Step(op, len(nest.streams_through(axes)), folds)


def body(d: Diagram, nest) -> list[Step]:
    """The operations in loop-body order (deepest ready operation first, then the diagram's own order)."""
    ops = d.ops  # keyed by output below: a diagram produces each array once, op names may repeat
    steps = {op.output.name: _step(nest, op) for op in ops}
    waiting = {op.output.name: {x.name for x in op.inputs if x.name in steps} for op in ops}
    rank = {op.output.name: i for i, op in enumerate(ops)}  # ties keep the order the diagram lists its operations
    out: list[Step] = []
    while waiting:
        ready = [n for n, deps in waiting.items() if not deps]
        pick = max(ready, key=lambda n: (steps[n].depth, -rank[n]))
        out.append(steps[pick])
        del waiting[pick]
        for deps in waiting.values():
            deps.discard(pick)
    return out


def run_of(steps: list[Step], i: int, loop: int) -> tuple[int, int]:
    """First and last index of the contiguous steps around `i` that run inside stream loop `loop`."""
    start, end = i, i
    while start > 0 and steps[start - 1].depth > loop:
        start -= 1
    while end + 1 < len(steps) and steps[end + 1].depth > loop:
        end += 1
    return start, end
