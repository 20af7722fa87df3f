"""`split(axis, parts)`: spread an axis over `parts` thread blocks, stream it within each part, then combine.

The axis `m` (size M) becomes two: `parts` (size P, one part per thread block) and `m` (size M/P, the
part, streamed chunk by chunk). Every array carrying `m` carries both; the elements do not change. An
operation that folds `m` (a contraction, a reduction, a normalized contraction, an online log-sum-exp)
now folds only the part: its output gains the `parts` axis and becomes an fp32 partial, written by the
partial kernel. The combine kernel is derived from each fold's combine rule, as ops over `parts`:

* sum (contraction, sum reduction): a sum reduction of the partials;
* max (max reduction): a max reduction;
* log-sum-exp (online log-sum-exp): max, exp(x - max), sum, max + log(sum);
* online softmax (normalized contraction): each part also writes its rows' log-sum-exp; the weights
  are the softmax over parts of the LSEs, the output their contraction with the partials
  (O = sum_p exp(lse_p - lse) O_p, lse = logsumexp_p lse_p), and the LSE itself if one was asked for.

`combine="atomic"` (sum folds only) instead adds every part into one fp32 output with atomics
(`Diagram.accumulate_global`); the output must be zero before the kernel (a memset the program does not
count: 4 bytes an element written once).
"""
from __future__ import annotations

import dataclasses

import sympy as sp

from .core import Array, Contraction, DiagramError, Map, NormalizedContraction, Op, Reduce, axis, size_expr
from .diagram import Diagram, Program, map_arrays
from .numeric import MAX_LOG

PARTS = "parts"


def _fold_rule(op: Op, axis_name: str) -> str | None:
    """How partial results of `op` over parts of `axis_name` merge; None when `op` does not fold the axis."""
    if axis_name not in {a.name for a in op.iteration_axes()} or op.output.carries(axis_name):
        return None
    if isinstance(op, NormalizedContraction):
        return "softmax"
    if isinstance(op, Reduce):
        return op.combine
    if isinstance(op, Contraction):
        return "sum"
    if op.kind == "online-logsumexp":
        return "logsumexp"
    if op.kind == "online-softmax":
        raise DiagramError(f"split {axis_name}: '{op.name}' writes probabilities normalized over all of "
                           f"{axis_name}; a part cannot finish them")
    raise DiagramError(f"split {axis_name}: operation '{op.name}' ({op.describe()}) folds {axis_name} "
                       f"with no known combine rule")


def _part_size(size: sp.Expr, parts: sp.Expr) -> sp.Expr:
    if size.is_number and parts.is_number:
        return sp.ceiling(size / parts)  # the last parts hold the remainder (or nothing)
    return size / parts


def _check(d: Diagram, axis_name: str, combine: str) -> None:
    d._check_axis(axis_name, f"split {axis_name}")
    if PARTS in d.axes():
        raise DiagramError(f"split {axis_name}: diagram {d.name} already has an axis named {PARTS!r}")
    if any(p.axis_name == axis_name for p in d.partitions):
        raise DiagramError(f"split {axis_name}: the axis is already grouped or streamed; split it instead of both")
    if any(axis_name in (m.row_axis, m.col_axis) for m in d.masks):
        raise DiagramError(f"split {axis_name}: a masked axis cannot be split (not supported)")
    if combine not in ("kernel", "atomic"):
        raise DiagramError(f"split {axis_name}: combine must be 'kernel' or 'atomic', got {combine!r}")


def _partial_op(op: Op, rule: str | None, parts_axis, atomic: bool, suffix: str = "_part") -> Op:
    """`op` as the partial kernel runs it: a fold's output gains the parts axis, in fp32."""
    if rule is None or atomic:
        return op
    out = Array(f"{op.output.name}{suffix}", (parts_axis, *op.output.axes), "fp32")
    if rule == "softmax":  # each part writes its rows' LSE for the merge
        return dataclasses.replace(op, output=out, lse=f"{op.lse or op.output.name + '_lse'}{suffix}")
    return dataclasses.replace(op, output=out)


def _combine_ops(orig: Op, partial: Op, rule: str, over: str = PARTS) -> tuple[Op, ...]:
    """The combine kernel's ops for one fold, read off its rule: from `partial`'s outputs (with the parts
    axis `over`, fp32) to `orig`'s (the unsplit op's output, its dtype, and its LSE if it had one)."""
    from .library import softmax_ops  # the softmax composite (the library builds on diagrams)
    part, final, name = partial.output, orig.output, orig.output.name

    def weights(scores: Array) -> tuple[Op, ...]:  # a softmax over parts, its ops named after this fold
        return tuple(dataclasses.replace(o, name=f"{o.name}:{name}")
                     for o in softmax_ops(scores, over, f"{name}_w", "fp32", scale=False))
    if rule in ("sum", "max"):
        return (Reduce(f"{rule}_{over}:{name}", (part,), final, axis_name=over, combine=rule),)
    lse_cost = (("exp", 1), ("fp32", 1))
    if rule == "logsumexp":
        w = weights(part)[:3]   # max, exp(x - max), sum
        return w + (Map(f"lse_{over}:{name}", (w[0].output, w[2].output), final, costs=lse_cost,
                        formula="max + log(sum)", **MAX_LOG),)
    lse_part = partial.results()[1]
    w = weights(lse_part)  # exp(lse_p - max) / sum = exp(lse_p - lse)
    ops = w + (Contraction(f"merge_{over}:{name}", (w[3].output, part), final),)
    if orig.lse:
        ops += (Map(f"lse_{over}:{name}", (w[0].output, w[2].output), orig.results()[1], costs=lse_cost,
                    formula="max + log(sum)", **MAX_LOG),)
    return ops


COMBINE_THREADS = 128


def _combine_kernel(d: Diagram, ops: tuple[Op, ...], outputs: tuple[str, ...]) -> Diagram:
    """One block per row of the first output (every axis but its last grouped by one), all parts at once;
    a one-axis output (a loss per token) in blocks of COMBINE_THREADS elements, one a thread."""
    k = Diagram(f"{d.name}-combine", ops, outputs, threads=COMBINE_THREADS)
    first = k.output_arrays()[0]
    if len(first.axes) == 1:
        return k.group(first.axis_names[0], COMBINE_THREADS)
    for a in first.axis_names[:-1]:
        k = k.group(a, 1)
    return k


def split(d: Diagram, axis_name: str, parts, chunk=None, stages=1, level: str = "smem",
          combine: str = "kernel", direct_when_one: bool = False) -> Program:
    """The partial kernel (each of `parts` blocks folds its part of `axis_name`, streamed in chunks of
    `chunk`, whole part when None) and the combine kernel derived from the folds' rules; with
    `combine="atomic"`, the partial kernel alone, adding into the (zeroed) output with atomics.
    `direct_when_one`: code that, given one part, writes the results from the partial kernel itself and
    launches no combine kernel; the combine kernel then runs min(1, parts - 1) times (0 or 1)."""
    _check(d, axis_name, combine)
    parts = size_expr(parts)
    parts_axis, inner = axis(PARTS, parts), axis(axis_name, _part_size(d.axes()[axis_name], parts))
    rules = {op.name: _fold_rule(op, axis_name) for op in d.ops}
    folds = [op for op in d.ordered_ops() if rules[op.name]]
    if not folds:
        raise DiagramError(f"split {axis_name}: no operation of {d.name} folds {axis_name}; group it instead")
    atomic = combine == "atomic"
    after = _after_folds(d, folds, axis_name)
    _check_folds(d, folds, after, rules, atomic, axis_name)

    def reshape(x: Array) -> Array:
        axes = [a for b in x.axes for a in ((parts_axis, inner) if b.name == axis_name else (b,))]
        return dataclasses.replace(x, axes=tuple(axes))

    moved = {op.name for op in after}
    ops = {op.name: op for op in map_arrays(d.ops, reshape) if op.name not in moved}
    partial_ops = {n: _partial_op(op, rules[n], parts_axis, atomic) for n, op in ops.items()}
    renamed = {x.name: y.name for op in folds for x, y in zip(op.results(), partial_ops[op.name].results())}
    later = {op.output.name for op in after}
    outputs = tuple(dict.fromkeys([renamed.get(o, o) for o in d.outputs if o not in later] +
                                  [x.name for op in folds for x in partial_ops[op.name].results()]))
    kernel = dataclasses.replace(d, name=f"{d.name}-partial", ops=tuple(partial_ops.values()), outputs=outputs)
    kernel = kernel.group(PARTS, 1).stream(axis_name, inner.size if chunk is None else chunk, level, stages)
    if atomic:
        for op in folds:
            kernel = kernel.accumulate_global(op.output.name)
        return Program(f"{d.name}-split-{axis_name}", (kernel,))  # the output is zeroed beforehand (not counted)
    merge = tuple(o for op in folds for o in _combine_ops(op, partial_ops[op.name], rules[op.name]))
    used = {x.name for op in after for x in op.inputs}
    finals = tuple(x.name for op in folds for x in op.results()
                   if x.name in d.outputs or (x is op.output and x.name not in used))
    finals += tuple(o for o in d.outputs if o in later)
    comb = _combine_kernel(d, merge + tuple(after), finals)
    if direct_when_one:  # the partial kernel of a single part wrote the results (their partial dtype aside)
        comb = dataclasses.replace(comb, runs=sp.Min(1, parts - 1))
    return Program(f"{d.name}-split-{axis_name}", (kernel, comb))


def _after_folds(d: Diagram, folds: list[Op], axis_name: str) -> list[Op]:
    """The operations that use a fold's result and no longer carry the split axis (a loss's `lse - target`):
    they move to the combine kernel, after the merge. One that still runs over the axis stays and is
    refused by `_check_folds`."""
    ready = {x.name for op in folds for x in op.results()}
    after = []
    for op in d.ordered_ops():
        if op in folds or not any(x.name in ready for x in op.inputs):
            continue
        if axis_name in {a.name for a in op.iteration_axes()}:
            continue
        after.append(op)
        ready.add(op.output.name)
    return after


def _check_folds(d: Diagram, folds: list[Op], after: list[Op], rules, atomic: bool, axis_name: str) -> None:
    for op in folds:
        users = [c for c in d.consumers(op.output.name) if c not in after]
        if users:
            raise DiagramError(f"split {axis_name}: '{op.output.name}' (folded by '{op.name}') is consumed inside "
                               f"the kernel by '{users[0].name}'; only folds whose result leaves the kernel, or "
                               f"feeds operations off the axis, can be split (a softmax needs online_softmax first)")
        if atomic and (rules[op.name] != "sum" or after):
            raise DiagramError(f"split {axis_name}: atomic combine needs a sum with nothing after it; "
                               f"'{op.name}' merges by {rules[op.name]}")
