"""Differentiation of diagrams: `backward(d)` builds the backward diagram of a plain diagram from a rule per
primitive (reverse mode, the vector-Jacobian product).

The backward diagram reads the forward's inputs and, for every output X, its incoming gradient `dX` (same
axes); it writes `dX` for every input X asked for (`wrt`, all by default). It recomputes every forward
intermediate its rules read (the forward ops they depend on are copied in; nothing is saved), and keeps the
forward's masks. Rules (g is the gradient of the op's output Y):

| op | gradient of input X |
|---|---|
| contraction Y = X.W... | contraction of g with the other inputs onto X's axes |
| map Y = f(X, ...) | a map g * df/dX (the derivative `Map.grads` declares), summed over the axes X lacks |
| product Y = X * W ... | a product of g and the other factors, summed over the axes X lacks |
| reduce sum | a map broadcasting g over the reduced axis |
| reduce max | a map g * (X == Y): the gradient goes to the maximum |
| softmax composite (`softmax:` tag), two-pass softmax | D = rowsum(g * P) (a product and a reduce), then P * (g - D) |
| log-sum-exp composite (`logsumexp:` tag), online log-sum-exp | a map g * exp(X - L) |
| normalized contraction (online softmax) | undone first: its softmax and contraction, then the rules above |

Gradients reaching one array through several consumers are summed by a map (add). Gradient arrays are
named `d<name>` (intermediates `d<name>_<k>` when taken), in `dtype` (fp32 by default).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import numeric
from .core import Array, Contraction, DiagramError, Map, Op, Product, Reduce, product
from .diagram import Diagram
from .unfuse import composites, unfuse


@dataclass(frozen=True)
class Chain:
    """The chain rule through input `index` of `op`, as a map's numeric function: g * d op / d input."""
    op: Map
    index: int

    def __call__(self, g, *xs):
        return g * self.op.partial(self.index, *xs)


class _Backward:
    """The backward ops built so far and the gradient contributions waiting to be summed, per array."""

    def __init__(self, d: Diagram, dtype: str):
        self.d, self.dtype, self.ops = d, dtype, []
        self.taken = set(d.arrays())              # array names
        self.op_names = {op.name for op in d.ops}
        self.contrib: dict[str, list[tuple[int | None, Array]]] = {}

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def array(self, base: str, axes) -> Array:
        return Array(self.fresh(base), tuple(axes), self.dtype)

    def emit(self, op: Op) -> Array:
        if op.name in self.op_names:
            raise DiagramError(f"backward: diagram {self.d.name} already has an op named {op.name}")
        self.op_names.add(op.name)
        self.ops.append(op)
        return op.output

    def seed(self, y: Array) -> None:
        name = f"d{y.name}"
        if name in self.taken:
            raise DiagramError(f"backward: diagram {self.d.name} already has an array {name}, the gradient of {y.name}")
        self.contrib[y.name] = [(None, Array(self.fresh(name), y.axes, self.dtype))]

    def add_to(self, x: Array, emit_full, space: tuple) -> None:
        """Record a contribution to x's gradient: `emit_full(out)` emits the op writing it over the axes
        `space` (a superset of x's), then sums over the axes x lacks."""
        extra = [a for a in space if not x.carries(a.name)]
        full = self.array(f"d{x.name}_{len(self.contrib.get(x.name, [])) + 1}", x.axes if not extra else space)
        out = emit_full(full)
        for i, a in enumerate(extra):
            axes = x.axes if i == len(extra) - 1 else tuple(b for b in out.axes if b.name != a.name)
            red = Array(self.fresh(f"{full.name}_sum_{a.name}"), axes, self.dtype)
            out = self.emit(Reduce(f"{red.name}:sum", (out,), red, axis_name=a.name))
        self.contrib.setdefault(x.name, []).append((len(self.ops) - 1, out))

    def total(self, x: Array, name: str | None = None) -> Array | None:
        """x's whole gradient (its contributions summed), named `name` or a fresh `d<x>`; None if it has none."""
        parts = self.contrib.get(x.name, [])
        if not parts or (len(parts) == 1 and parts[0][0] is None):
            return parts[0][1] if parts else None
        final = name or self.fresh(f"d{x.name}")
        self.taken.add(final)
        if len(parts) == 1:
            idx, old = parts[0]
            op = self.ops[idx]
            new = dataclasses.replace(old, name=final)
            self.ops[idx] = dataclasses.replace(op, output=new, name=final + op.name[len(old.name):])
            self.op_names.add(self.ops[idx].name)
            return new
        ins = tuple(a for _, a in parts)
        return self.emit(Map(f"{final}:add", ins, Array(final, x.axes, self.dtype), costs=(("fp32", len(ins) - 1),),
                             formula=" + ".join(a.name for a in ins), fn=numeric.add, grads=numeric.add_grads(len(ins))))


def _contraction(b: _Backward, op: Contraction, g: Array, needs: set[str]) -> None:
    for i, x in enumerate(op.inputs):
        if x.name not in needs:
            continue
        others = op.inputs[:i] + op.inputs[i + 1:]
        avail = {a.name for y in (g, *others) for a in y.axes}
        kept = tuple(a for a in x.axes if a.name in avail)

        def emit(out, kept=kept, others=others):
            if kept == x.axes:
                return b.emit(Contraction(f"{out.name}:contract", (g, *others), out))
            part = b.emit(Contraction(f"{out.name}_part:contract", (g, *others), b.array(f"{out.name}_part", kept)))
            return b.emit(Map(f"{out.name}:broadcast", (part,), out, costs=(), formula="broadcast", **numeric.IDENTITY))
        b.add_to(x, emit, x.axes)


def _map(b: _Backward, op: Map, g: Array, needs: set[str]) -> None:
    y = op.output
    for i, x in enumerate(op.inputs):
        if x.name not in needs:
            continue
        space = x.axes if set(x.axis_names) == set(y.axis_names) else y.axes
        if isinstance(op, Product):
            others = op.inputs[:i] + op.inputs[i + 1:]
            b.add_to(x, lambda out, others=others: b.emit(product(f"{out.name}:product", (g, *others), out)), space)
            continue
        if op.grads is None:
            raise DiagramError(f"backward: map {op.name} ({op.describe()}) declares no derivative; give it grads=")
        formula = f"d{y.name} * d({op.describe()})/d{x.name}"
        b.add_to(x, lambda out, i=i: b.emit(Map(f"{out.name}:chain", (g, *op.inputs), out, costs=op.costs + (("fp32", 1),),
                                                formula=formula, fn=Chain(op, i))), space)


def _reduce(b: _Backward, op: Reduce, g: Array, needs: set[str]) -> None:
    (x,) = op.inputs
    if x.name not in needs:
        return
    if op.combine == "sum":
        b.add_to(x, lambda out: b.emit(Map(f"{out.name}:broadcast", (g,), out, costs=(), formula="broadcast",
                                           **numeric.IDENTITY)), x.axes)
    else:
        b.add_to(x, lambda out: b.emit(Map(f"{out.name}:argmax", (g, x, op.output), out, costs=(("fp32", 2),),
                                           formula=f"d{op.output.name} * (x == max)", fn=numeric.max_grad)), x.axes)


def _softmax(b: _Backward, src: Array, probs: Array, axis_name: str, g: Array) -> None:
    """dS = P (g - D), D = rowsum(g P): the softmax's whole Jacobian in one product, one reduce, one map."""
    gp = b.emit(product(f"{g.name}_{probs.name}:product", (g, probs), b.array(f"{g.name}_{probs.name}", src.axes)))
    dd = b.array(f"D_{probs.name}", tuple(a for a in src.axes if a.name != axis_name))
    dd = b.emit(Reduce(f"{dd.name}:sum", (gp,), dd, axis_name=axis_name))
    b.add_to(src, lambda out: b.emit(Map(f"{out.name}:softmax", (probs, g, dd), out, costs=(("fp32", 2),),
                                         formula=f"{probs.name} * ({g.name} - {dd.name})", **numeric.SOFTMAX_GRAD)),
             src.axes)


def _logsumexp(b: _Backward, src: Array, lse: Array, g: Array) -> None:
    b.add_to(src, lambda out: b.emit(Map(f"{out.name}:logsumexp", (g, src, lse), out, costs=(("exp", 1), ("fp32", 2)),
                                         formula=f"{g.name} * exp(x - {lse.name})", fn=numeric.logsumexp_backward)),
             src.axes)


def _check(d: Diagram, wrt) -> list[Array]:
    if d.partitions or d.staged or d.accumulated:
        raise DiagramError(f"backward: diagram {d.name} is relabeled (groups, streams, staging or atomics); "
                           f"differentiate the plain diagram, then relabel its backward")
    inputs = {x.name: x for x in d.inputs()}
    names = list(inputs) if wrt is None else [wrt] if isinstance(wrt, str) else list(wrt)
    unknown = [n for n in names if n not in inputs]
    if unknown:
        raise DiagramError(f"backward: {', '.join(unknown)} not an input of {d.name}; inputs: {sorted(inputs)}")
    return [inputs[n] for n in names]


def _recomputed(d: Diagram, ops: list[Op], saved: frozenset = frozenset()) -> list[Op]:
    """The forward ops the backward ops read, directly or through each other, in the forward's order; an
    array in `saved` is read from global memory instead (the forward wrote it), so its op is not rerun."""
    need = {x.name for op in ops for x in op.inputs}
    keep = []
    for op in reversed(d.ordered_ops()):
        if any(y.name in need and y.name not in saved for y in op.results()):
            keep.append(op)
            need |= {x.name for x in op.inputs}
    return keep[::-1]


def _check_saved(d: Diagram, save) -> frozenset:
    names = frozenset([save] if isinstance(save, str) else save)
    made = {y.name for op in d.ops for y in op.results()}
    unknown = sorted(names - made)
    if unknown:
        raise DiagramError(f"backward: cannot save {unknown[0]!r}: no operation of {d.name} computes it; "
                           f"computed: {sorted(made)}")
    return names


def saving(diagram: Diagram, save) -> Diagram:
    """The forward that also writes the intermediates `save` to global memory, for a backward that reads
    them (`backward(..., save=...)`): recomputation traded for their bytes, written once and read once."""
    d = unfuse(diagram)   # an online op's intermediates (its probabilities) exist only unfused
    names = _check_saved(d, save)
    return dataclasses.replace(d, outputs=tuple(dict.fromkeys(d.outputs + tuple(sorted(names)))))


def backward(diagram: Diagram, wrt=None, dtype: str = "fp32", save=()) -> Diagram:
    """The backward diagram of a plain diagram: inputs the forward's and `d<output>` per output, outputs
    `d<input>` for every input in `wrt` (a name or names; all inputs when None). Intermediates named in
    `save` are read (inputs of the backward, written by `saving(forward, save)`) instead of recomputed."""
    d = unfuse(diagram)
    saved = _check_saved(d, save)
    targets = _check(d, wrt)
    needs = {x.name for x in targets}
    for op in d.ordered_ops():
        if any(x.name in needs for x in op.inputs):
            needs |= {y.name for y in op.results()}
    b = _Backward(d, dtype)
    for o in d.output_arrays():
        b.seed(o)
    rules, members = composites(d)
    for op in reversed(d.ordered_ops()):
        if op.name in members or op.output.name not in needs:
            continue
        g = b.total(op.output)
        if g is None:
            continue
        if op.name in rules:
            kind, src, axis_name = rules[op.name]
            _softmax(b, src, op.output, axis_name, g) if kind == "softmax" else _logsumexp(b, src, op.output, g)
        elif isinstance(op, Contraction):
            _contraction(b, op, g, needs)
        elif isinstance(op, Map):
            _map(b, op, g, needs)
        elif isinstance(op, Reduce):
            _reduce(b, op, g, needs)
        else:
            raise DiagramError(f"backward: op {op.name} ({op.kind}) has no differentiation rule")
    outs = []
    for x in targets:
        if f"d{x.name}" in b.taken:
            raise DiagramError(f"backward: diagram {d.name} already has an array d{x.name}, the gradient of {x.name}")
        got = b.total(x, f"d{x.name}")
        if got is None:
            raise DiagramError(f"backward: no output of {d.name} depends on input {x.name}")
        outs.append(got.name)
    ops = _recomputed(d, b.ops, saved) + b.ops
    return Diagram(f"{d.name}-backward", tuple(ops), tuple(outs), masks=d.masks)
