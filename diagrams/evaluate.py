"""Run a diagram on numbers: the meaning of its operations in float64, not their streaming or cost.

`evaluate(d, inputs, sizes)` takes one numpy array per input of the diagram (or of a program's kernels,
run in order), indexed by the array's axes in order, and returns the outputs. Contractions are einsums
over named axes, maps call their declared `fn` (`Map.value`), reductions sum or take the max, and the
online ops (normalized contraction, two-pass softmax, online log-sum-exp) compute what they stand for.
A band mask (`Diagram.mask`, `band`) removes the dead (row, col) points from every op that spans both
axes: reductions and contractions skip them and arrays carrying both axes hold 0 there. Partitions
(groups, streams) change nothing here.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from .core import Array, Contraction, DiagramError, Map, NormalizedContraction, OnlineLogSumExp, OnlineSoftmax, \
    Op, Reduce
from .diagram import Diagram, Program, as_program
from .masks import combined_masks


def _int(expr, values: dict[str, int], what: str) -> int:
    expr = sp.sympify(expr)
    missing = sorted(s.name for s in expr.free_symbols if s.name not in values)
    if missing:
        raise DiagramError(f"evaluate: no size for {', '.join(missing)} ({what}); pass it in sizes")
    return int(expr.subs({s: values[s.name] for s in expr.free_symbols}))


def _sizes(d: Diagram, inputs: dict, sizes: dict | None) -> tuple[dict[str, int], dict[str, int]]:
    """The symbols' values (from `sizes`, then the shapes of the given inputs) and every axis's size."""
    symbols = dict(sizes or {})
    for x in d.inputs():
        if x.name in inputs and np.ndim(inputs[x.name]) == len(x.axes):
            for a, n in zip(x.axes, np.shape(inputs[x.name])):
                if isinstance(a.size, sp.Symbol):
                    symbols.setdefault(a.size.name, int(n))
    return symbols, {name: _int(size, symbols, f"axis {name}") for name, size in d.axes().items()}


def _align(val: np.ndarray, axes: tuple[str, ...], to: tuple[str, ...]) -> np.ndarray:
    """`val` (indexed by `axes`) transposed to the order of `to`, with size-1 dims for the axes it lacks."""
    if not set(axes) <= set(to):
        raise DiagramError(f"evaluate: axes {axes} do not fit in {to}")
    order = [a for a in to if a in axes]
    arr = np.transpose(val, [axes.index(a) for a in order])
    return arr.reshape([arr.shape[order.index(a)] if a in axes else 1 for a in to])


class _Run:
    """One kernel's evaluation: axis sizes, live-point masks and the arrays computed so far."""

    def __init__(self, d: Diagram, env: dict[str, np.ndarray], sizes: dict | None):
        self.d, self.env = d, env
        symbols, self.size = _sizes(d, env, sizes)
        self.bands = []
        for band in combined_masks(d.masks).values():
            rows = np.arange(self.size[band.row_axis])[:, None]
            cols = np.arange(self.size[band.col_axis])[None, :]
            live = np.ones((rows.size, cols.size), bool)
            if band.offset is not None:
                live &= cols <= rows + _int(band.offset, symbols, "mask bound")
            if band.lower is not None:
                live &= cols >= rows + _int(band.lower, symbols, "mask bound")
            self.bands.append((band.row_axis, band.col_axis, live))

    def shape(self, x: Array) -> tuple[int, ...]:
        return tuple(self.size[a] for a in x.axis_names)

    def live(self, axes: tuple[str, ...]) -> np.ndarray | None:
        """Where the points of a space over `axes` are live (broadcast to `axes`), None when all are."""
        out = None
        for row, col, live in self.bands:
            if row in axes and col in axes:
                here = _align(live, (row, col), axes)
                out = here if out is None else out & here
        return out

    def get(self, x: Array, to: tuple[str, ...] | None = None) -> np.ndarray:
        val = self.env[x.name]
        return val if to is None else _align(val, x.axis_names, to)

    def put(self, x: Array, val, axes: tuple[str, ...]) -> None:
        val = np.broadcast_to(_align(np.asarray(val, np.float64), axes, x.axis_names), self.shape(x))
        live = self.live(x.axis_names)
        self.env[x.name] = np.array(val if live is None else np.where(live, val, 0.0))


def _einsum(run: _Run, operands: list[tuple[np.ndarray, tuple[str, ...]]], out: tuple[str, ...]) -> np.ndarray:
    space = tuple(dict.fromkeys([a for _, ax in operands for a in ax] + list(out)))
    for row, col, live in run.bands:  # a mask joins the product as one more operand over its two axes
        if row in space and col in space:
            operands = operands + [(live.astype(np.float64), (row, col))]
    letters = {a: chr(97 + i) for i, a in enumerate(space)}
    spec = ",".join("".join(letters[a] for a in ax) for _, ax in operands) + "->" + "".join(letters[a] for a in out)
    return np.einsum(spec, *[v for v, _ in operands], optimize=True)


def _softmax(run: _Run, x: np.ndarray, axes: tuple[str, ...], over: str) -> tuple[np.ndarray, np.ndarray]:
    """Softmax of `x` over axis `over` (dead points excluded) and each row's log-sum-exp (rows keep a size-1
    dim at `over`)."""
    live = run.live(axes)
    k = axes.index(over)
    xs = x if live is None else np.where(live, x, -np.inf)
    mx = np.max(xs, axis=k, keepdims=True)
    e = np.exp(xs - mx)
    s = np.sum(e, axis=k, keepdims=True)
    return e / s, mx + np.log(s)


def _reduce(run: _Run, op: Reduce) -> None:
    (x,) = op.inputs
    val, axes, live = run.get(x), x.axis_names, run.live(x.axis_names)
    if op.axis_name not in axes:
        raise DiagramError(f"evaluate: reduce {op.name} folds {op.axis_name}, which its input {x.name} lacks")
    if live is not None:
        val = np.where(live, val, -np.inf if op.combine == "max" else 0.0)
    red = (np.max if op.combine == "max" else np.sum)(val, axis=axes.index(op.axis_name))
    run.put(op.output, red, tuple(a for a in axes if a != op.axis_name))


def _step(run: _Run, op: Op) -> None:
    out = op.output.axis_names
    if isinstance(op, Reduce):
        _reduce(run, op)
    elif isinstance(op, Map):
        space = tuple(a.name for a in op.iteration_axes())
        run.put(op.output, op.value(*[run.get(x, space) for x in op.inputs]), space)
    elif isinstance(op, Contraction):
        run.put(op.output, _einsum(run, [(run.get(x), x.axis_names) for x in op.inputs], out), out)
    elif isinstance(op, NormalizedContraction):
        s = op.scores
        p, lse = _softmax(run, run.get(s), s.axis_names, op.axis_name)
        run.put(op.output, _einsum(run, [(p, s.axis_names)] + [(run.get(x), x.axis_names) for x in op.inputs[1:]],
                                   out), out)
        if op.lse:
            run.put(op.results()[1], np.squeeze(lse, s.axis_names.index(op.axis_name)),
                    tuple(a for a in s.axis_names if a != op.axis_name))
    elif isinstance(op, OnlineSoftmax):
        x = op.inputs[0]
        run.put(op.output, _softmax(run, run.get(x), x.axis_names, op.axis_name)[0], x.axis_names)
    elif isinstance(op, OnlineLogSumExp):
        x = op.inputs[0]
        lse = _softmax(run, run.get(x), x.axis_names, op.axis_name)[1]
        run.put(op.output, np.squeeze(lse, x.axis_names.index(op.axis_name)),
                tuple(a for a in x.axis_names if a != op.axis_name))
    else:
        raise DiagramError(f"evaluate: op {op.name} ({op.kind}) has no numeric meaning here")


def evaluate(diagram: Diagram | Program, inputs: dict[str, np.ndarray], sizes: dict[str, int] | None = None,
             ) -> dict[str, np.ndarray]:
    """The outputs of `diagram` (every kernel's, for a program) on `inputs`, in float64. `sizes` gives the
    symbols of axis sizes by name (`{"N": 17}`); a bare symbol an input's shape shows needs none."""
    env = {k: np.asarray(v, np.float64) for k, v in inputs.items()}
    out: dict[str, np.ndarray] = {}
    for d in as_program(diagram).kernels:
        missing = [x.name for x in d.inputs() if x.name not in env]
        if missing:
            raise DiagramError(f"evaluate: no value for input {', '.join(missing)} of {d.name}")
        run = _Run(d, env, sizes)
        for x in d.inputs():
            if env[x.name].shape != run.shape(x):
                raise DiagramError(f"evaluate: input {x.name} has shape {env[x.name].shape}, its axes "
                                   f"{x.axis_names} say {run.shape(x)}")
        for op in d.ordered_ops():
            _step(run, op)
        out.update({o: env[o] for o in d.outputs})
    return out
