"""Rewrites that make an axis streamable, found from the graph (the Diagram methods call these).

* `defer_scales`: a product feeding a contraction whose factor is constant along the contracted axis but
  complete only after that axis is reduced (RMSNorm's 1/rms) moves past the contraction:
  sum_k (x * s) w = s * sum_k x w. The factor is then applied once to the accumulator, after the stream.
* `online_logsumexp`: a log-sum-exp composite (primitives tagged `logsumexp:<out>`) becomes one
  `OnlineLogSumExp` that carries a running max and sum across the chunks of its axis.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .core import Array, Contraction, DiagramError, OnlineLogSumExp, Op, Product, Reduce, costs_dict, product

if TYPE_CHECKING:
    from .diagram import Diagram


def complete_after(d: "Diagram", axis_name: str) -> set[str]:
    """Arrays whose value is final only once every chunk of `axis_name` has been folded."""
    late: set[str] = set()
    for op in d.ordered_ops():
        space = {a.name for a in op.iteration_axes()}
        folds = axis_name in space and not op.output.carries(axis_name)
        if folds or any(x.name in late for x in op.inputs):
            late.add(op.output.name)
    return late


def _late_factors(d: "Diagram", prod: Product, c: Contraction) -> list[Array]:
    """Factors of `prod` that lack every axis `c` contracts, fit `c`'s output and are complete only after
    one of those axes is reduced: they block a stream over it and can be applied after `c`."""
    out = set(c.output.axis_names)
    late = set().union(*[complete_after(d, k) for k in c.contracted])
    return [s for s in prod.inputs
            if s.name in late and not set(s.axis_names) & set(c.contracted) and set(s.axis_names) <= out]


def _fresh(d: "Diagram", name: str) -> str:
    if name in d.arrays():
        raise DiagramError(f"defer_scales: diagram {d.name} already has an array {name!r}")
    return name


def _defer_one(d: "Diagram", c: Contraction) -> "Diagram | None":
    """`d` with the late factors of one product feeding `c` moved past it, or None when there is none."""
    for x in c.inputs:
        prod = d.producer(x.name)
        if not isinstance(prod, Product) or x.name in d.outputs or len(d.consumers(x.name)) != 1:
            continue
        late = _late_factors(d, prod, c)
        if not late:
            continue
        rest = [s for s in prod.inputs if s not in late]
        new_ops: list[Op] = []
        if len(rest) == 1:
            operand = rest[0]
        else:
            operand = Array(_fresh(d, f"{x.name}_unscaled"), x.axes, x.dtype)
            new_ops.append(product(prod.name, tuple(rest), operand, prod.tag))
        acc = Array(_fresh(d, f"{c.output.name}_unscaled"), c.output.axes, "fp32")
        inputs = tuple(operand if y.name == x.name else y for y in c.inputs)
        new_ops.append(Contraction(c.name, inputs, acc, c.tag))
        new_ops.append(product(f"scale {c.output.name}", (acc, *late), c.output))
        kept = [o for o in d.ops if o is not prod and o is not c]
        return d._replace(ops=tuple(kept + new_ops))
    return None


def defer_scales(d: "Diagram") -> "Diagram":
    """Move every late per-row factor past the contraction it feeds (see the module docstring)."""
    out, done = d, 0
    for c in d.ordered_ops():
        if not isinstance(c, Contraction):
            continue
        current = next((o for o in out.ops if o.name == c.name and isinstance(o, Contraction)), None)
        step = _defer_one(out, current) if current is not None else None
        if step is not None:
            out, done = step, done + 1
    if not done:
        raise DiagramError(f"defer_scales: diagram {d.name} has no product feeding a contraction with a factor "
                           f"that is complete only after the contracted axis is reduced")
    return out


def _lse_of(members: list[Op]) -> OnlineLogSumExp | None:
    """The online op replacing one tagged log-sum-exp composite, or None when it is not one."""
    names = {m.output.name for m in members}
    final = [m for m in members if not any(m.output.name == x.name for o in members for x in o.inputs)]
    external = {x.name: x for m in members for x in m.inputs if x.name not in names}
    reduces = [m for m in members if isinstance(m, Reduce)]
    if len(final) != 1 or len(external) != 1 or not reduces:
        return None
    ax = reduces[0].axis_name
    (source,) = external.values()
    if final[0].output.carries(ax) or not source.carries(ax):
        return None
    per_element: dict[str, int] = {}
    per_row: dict[str, int] = {}
    for m in members:  # work over the folded axis runs per element; what is left runs once per row
        into = per_element if ax in {a.name for a in m.iteration_axes()} else per_row
        for u, c in costs_dict(m.work_per_point().items()).items():
            into[u] = into.get(u, 0) + int(c)
    return OnlineLogSumExp(f"logsumexp_{ax}", (source,), final[0].output, members[0].tag, axis_name=ax,
                           element_costs=tuple(sorted(per_element.items())),
                           finalize_costs=tuple(sorted(per_row.items())))


def online_logsumexp(d: "Diagram") -> "Diagram":
    """Replace each log-sum-exp composite by an online one (running max and sum across chunks)."""
    groups: dict[str, list[Op]] = {}
    for op in d.ops:
        if op.tag.startswith("logsumexp:"):
            groups.setdefault(op.tag, []).append(op)
    ops, done = list(d.ops), 0
    for members in groups.values():
        online = _lse_of(members)
        if online is None:
            continue
        ops = [o for o in ops if o not in members] + [online]
        done += 1
    if not done:
        raise DiagramError(f"online_logsumexp: diagram {d.name} has no log-sum-exp composite "
                           f"(primitives tagged 'logsumexp:<out>' folding one axis of one input)")
    return d._replace(ops=tuple(ops))
