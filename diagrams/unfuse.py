"""The composites differentiation sees whole, and the undoing of the online rewrites before it.

* `composites(d)`: the softmax and log-sum-exp composites (primitives tagged `softmax:<out>` or
  `logsumexp:<out>`: a max and a sum over one axis and two maps, one input from outside, nothing but the
  final output used outside) whose gradient has a rule of its own (`diagrams.autodiff`).
* `unfuse(d)`: the plain diagram an online rewrite came from: a normalized contraction becomes its softmax
  composite and contraction (plus a map for its LSE), a two-pass softmax its softmax composite, an online
  log-sum-exp its log-sum-exp composite. Their meaning is unchanged; the rules then apply.
"""
from __future__ import annotations

import dataclasses

from . import numeric
from .core import Array, Contraction, Map, NormalizedContraction, OnlineLogSumExp, OnlineSoftmax, Op, Reduce
from .diagram import Diagram


def _composite(d: Diagram, members: list[Op]) -> tuple[Op, Array, str] | None:
    """(final op, its one outside input, the folded axis) of a well-formed composite, else None."""
    names = {m.output.name for m in members}
    final = [m for m in members if not any(m.output.name == x.name for o in members for x in o.inputs)]
    external = {x.name: x for m in members for x in m.inputs if x.name not in names}
    reduces = [m for m in members if isinstance(m, Reduce)]
    maps = [m for m in members if type(m) is Map]
    if len(final) != 1 or len(external) != 1 or len(reduces) != 2 or len(maps) != 2 or len(members) != 4:
        return None
    if {r.combine for r in reduces} != {"max", "sum"} or len({r.axis_name for r in reduces}) != 1:
        return None
    member_names = {m.name for m in members}
    for m in members:
        if m is not final[0] and (m.output.name in d.outputs
                                  or any(c.name not in member_names for c in d.consumers(m.output.name))):
            return None
    return final[0], next(iter(external.values())), reduces[0].axis_name


def composites(d: Diagram) -> tuple[dict[str, tuple[str, Array, str]], set[str]]:
    """Rules by final op name: (kind "softmax" or "logsumexp", source array, axis); and the other members'
    op names, which the rule covers."""
    groups: dict[str, list[Op]] = {}
    for op in d.ops:
        if op.tag.startswith(("softmax:", "logsumexp:")):
            groups.setdefault(op.tag, []).append(op)
    rules, covered = {}, set()
    for tag, members in groups.items():
        found = _composite(d, members)
        if found is None:
            continue
        final, src, axis_name = found
        kind = tag.split(":")[0]
        if (kind == "softmax") != final.output.carries(axis_name):
            continue
        rules[final.name] = (kind, src, axis_name)
        covered |= {m.name for m in members if m is not final}
    return rules, covered


def _renamed(ops: tuple[Op, ...], suffix: str) -> tuple[Op, ...]:
    return tuple(dataclasses.replace(o, name=f"{o.name}:{suffix}") for o in ops)


def _plain(op: Op, taken: set[str]) -> tuple[Op, ...]:
    """The primitives an online op stands for (itself when it is none)."""
    from .algorithms import logsumexp_ops
    from .library import softmax_ops
    if isinstance(op, OnlineSoftmax):
        return _renamed(softmax_ops(op.inputs[0], op.axis_name, op.output.name, op.output.dtype, scale=False),
                        op.output.name)
    if isinstance(op, OnlineLogSumExp):
        return _renamed(logsumexp_ops(op.inputs[0], op.axis_name, op.output.name), op.output.name)
    if not isinstance(op, NormalizedContraction):
        return (op,)
    probs, k = f"{op.output.name}_p", 1
    while {probs, f"{probs}_max", f"{probs}_exp", f"{probs}_sum"} & taken:
        k += 1
        probs = f"{op.output.name}_p{k}"
    soft = _renamed(softmax_ops(op.scores, op.axis_name, probs, op.inputs[1].dtype, scale=False), probs)
    out = (Contraction(op.name, (soft[-1].output, *op.inputs[1:]), op.output, op.tag),)
    if op.lse:
        out += (Map(f"lse:{op.lse}", (soft[0].output, soft[2].output), op.results()[1], costs=op.lse_costs,
                    formula="max + log(sum)", **numeric.MAX_LOG),)
    return soft + out


def unfuse(d: Diagram) -> Diagram:
    """`d` with every online op replaced by the primitives it stands for."""
    if not any(isinstance(op, (NormalizedContraction, OnlineSoftmax, OnlineLogSumExp)) for op in d.ops):
        return d
    taken = set(d.arrays())
    return d._replace(ops=tuple(p for op in d.ops for p in _plain(op, taken)))
