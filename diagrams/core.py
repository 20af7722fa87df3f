"""Axes, arrays and primitive operations: the vocabulary of a diagram.

An axis is a named wire with a sympy size. An array is a tuple of axes and a
dtype. Operations are boxes of three primitive kinds (contraction, elementwise
map, reduction); composites such as softmax are subgraphs of primitives that
carry a shared tag so that rewrites can find them. Every cost rule lives with
its primitive: the derivation only multiplies rules by iteration counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import sympy as sp

DTYPE_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}
HALF_DTYPES = ("bf16", "fp16", "fp8")

# Units that execute work. "tensor" is the matrix unit (mma.sync / wgmma),
# "fp32" the FP32 pipe (one FMA, add, max or multiply per lane per clock),
# "exp" the special-function unit (one ex2 per lane per clock).
UNITS = ("tensor", "fp32", "exp")


class DiagramError(ValueError):
    """A diagram or relabeling that cannot be built; the message names the culprit."""


def size_expr(size) -> sp.Expr:
    """A positive integer symbol for a name, or the sympy form of a number/expression."""
    if isinstance(size, str):
        return sp.Symbol(size, positive=True, integer=True)
    expr = sp.sympify(size)
    if expr.is_number and not (expr.is_integer and expr > 0):
        raise DiagramError(f"axis size must be a positive integer, got {size!r}")
    return expr


@dataclass(frozen=True)
class Axis:
    name: str
    size: sp.Expr

    def __repr__(self) -> str:
        return f"{self.name}[{self.size}]"


def axis(name: str, size=None) -> Axis:
    """An axis named `name`; its size defaults to a symbol of the same name."""
    return Axis(name, size_expr(name if size is None else size))


@dataclass(frozen=True)
class Array:
    name: str
    axes: tuple[Axis, ...]
    dtype: str = "bf16"

    def __post_init__(self):
        if self.dtype not in DTYPE_BYTES:
            raise DiagramError(f"array {self.name}: unknown dtype {self.dtype!r}; known: {sorted(DTYPE_BYTES)}")
        names = [a.name for a in self.axes]
        if len(set(names)) != len(names):
            raise DiagramError(f"array {self.name}: repeated axis in {names}")

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def carries(self, axis_name: str) -> bool:
        return axis_name in self.axis_names

    def elements(self) -> sp.Expr:
        return sp.Mul(*[a.size for a in self.axes])

    def nbytes(self) -> sp.Expr:
        return self.elements() * self.itemsize

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.axes))}; {self.dtype})"


def costs_dict(pairs) -> dict[str, sp.Expr]:
    out: dict[str, sp.Expr] = {}
    for unit, c in pairs:
        out[unit] = out.get(unit, 0) + sp.Integer(c)
    return out


@dataclass(frozen=True)
class Work:
    """Operations a primitive adds to its per-point rule: `costs` per element of a tile over `axes`,
    paid at every point of those axes (`per="point"`), once per chunk of a stream over `chunks_of`
    (`per="chunk"`), or once per block (`per="block"`)."""
    costs: tuple[tuple[str, int], ...]
    axes: tuple[str, ...]
    per: str
    chunks_of: str = ""

    def __post_init__(self):
        if self.per not in ("point", "chunk", "block") or (self.per == "chunk") != bool(self.chunks_of):
            raise DiagramError(f"work per {self.per!r} (chunks of {self.chunks_of!r}): per is point, block, "
                               f"or chunk with the streamed axis")


@dataclass(frozen=True)
class Op:
    """A primitive box. Subclasses say how much work one execution costs per unit."""
    name: str
    inputs: tuple[Array, ...]
    output: Array
    tag: str = ""  # the composite this primitive belongs to ("softmax:P"), if any

    kind = "op"
    passes = 1  # how many times one execution reads its inputs

    def results(self) -> tuple[Array, ...]:
        """Every array the op writes: its output, then any side outputs (the LSE of an online softmax)."""
        return (self.output,)

    def state_arrays(self) -> tuple[Array, ...]:
        """Running state carried across the chunks of a stream (held in registers)."""
        return ()

    def extra_work(self) -> tuple[Work, ...]:
        """Work beyond `work_per_point` (per chunk, per block, or over a sub-space)."""
        return ()

    def computed_operands(self) -> tuple[Array, ...]:
        """Operands the op computes itself and feeds to the matrix unit (held in registers)."""
        return ()

    def iteration_axes(self) -> tuple[Axis, ...]:
        """Axes of the iteration space, in first-seen order (outputs first)."""
        seen: dict[str, Axis] = {}
        for arr in (self.output, *self.inputs):
            for a in arr.axes:
                seen.setdefault(a.name, a)
        return tuple(seen.values())

    def work_per_point(self) -> Mapping[str, sp.Expr]:
        """Operations per point of the iteration space, by unit."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Contraction(Op):
    """einsum over the axes the inputs share and the output drops; sums accumulate."""
    kind = "contraction"

    @property
    def contracted(self) -> tuple[str, ...]:
        out = set(self.output.axis_names)
        return tuple(a.name for a in self.iteration_axes() if a.name not in out)

    def work_per_point(self):
        half = all(x.dtype in HALF_DTYPES for x in self.inputs)
        # one multiply and one add per point; half inputs go to the matrix unit
        return {"tensor" if half else "fp32": sp.Integer(2)}

    def describe(self):
        return f"contract over {','.join(self.contracted)}"


@dataclass(frozen=True)
class Map(Op):
    """Elementwise: `costs` gives operations per output element on each unit. Its numeric meaning, when
    declared: `fn(*inputs)` (numpy, the inputs broadcast over the output's axes) and `grads`, one function
    per input: `grads[i](*inputs)` is d output / d input i, elementwise (`diagrams.numeric` has the library's)."""
    costs: tuple[tuple[str, int], ...] = (("fp32", 1),)
    formula: str = ""
    fn: Callable | None = field(default=None, repr=False)
    grads: tuple[Callable, ...] | None = field(default=None, repr=False)
    # the result is written over the first input, which no later op reads (its registers are reused)
    in_place: bool = False
    kind = "map"

    def __post_init__(self):
        for unit, _ in self.costs:
            if unit not in UNITS:
                raise DiagramError(f"map {self.name}: unknown unit {unit!r}; known: {UNITS}")
        if self.grads is not None and len(self.grads) != len(self.inputs):
            raise DiagramError(f"map {self.name}: {len(self.grads)} grads for {len(self.inputs)} inputs")
        out = set(self.output.axis_names)
        if self.in_place and (not self.inputs or set(self.inputs[0].axis_names) != out):
            raise DiagramError(f"map {self.name}: in place needs a first input over the output's axes")
        for x in self.inputs:
            extra = set(x.axis_names) - out
            if extra:
                raise DiagramError(f"map {self.name}: input {x.name} has axes {sorted(extra)} the output lacks")

    def work_per_point(self):
        return costs_dict(self.costs)

    def describe(self):
        return self.formula or "map"

    def value(self, *xs):
        """The map's numeric value on numpy inputs (broadcast against each other)."""
        if self.fn is None:
            raise DiagramError(f"map {self.name} ({self.describe()}): no numeric definition; declare it with fn=")
        return self.fn(*xs)

    def partial(self, i: int, *xs):
        """d output / d input `i`, elementwise, on numpy inputs."""
        if self.grads is None:
            raise DiagramError(f"map {self.name} ({self.describe()}): no derivative; declare it with grads=")
        return self.grads[i](*xs)


@dataclass(frozen=True)
class Reduce(Op):
    """Reduction of one input over `axis` with a combine (sum or max)."""
    axis_name: str = ""
    combine: str = "sum"
    kind = "reduce"

    def __post_init__(self):
        if self.combine not in ("sum", "max"):
            raise DiagramError(f"reduce {self.name}: combine must be sum or max")
        if self.output.carries(self.axis_name):
            raise DiagramError(f"reduce {self.name}: output still carries {self.axis_name}")

    def work_per_point(self):
        return {"fp32": sp.Integer(1)}

    def describe(self):
        return f"{self.combine} over {self.axis_name}"


def _row_state(op: Op, streamed: Array, axis_name: str) -> tuple[Array, ...]:
    """Running max and running sum over `axis_name`: fp32, one per row of `streamed`."""
    rows = tuple(a for a in streamed.axes if a.name != axis_name)
    return (Array(f"{op.output.name}_max", rows, "fp32"), Array(f"{op.output.name}_sum", rows, "fp32"))


@dataclass(frozen=True)
class NormalizedContraction(Op):
    """softmax over `axis_name` followed by a contraction over the same axis, kept online.

    State: running max and running sum (the scores' axes minus the streamed one) and the output accumulator.
    Every chunk pays the softmax's map costs per score plus a rescale of the state (or, with a stale max, a
    compare); the final division happens once."""
    axis_name: str = ""
    score_costs: tuple[tuple[str, int], ...] = ()   # per score: exp, scale/subtract, max, sum
    rescale_costs: tuple[tuple[str, int], ...] = (("exp", 1), ("fp32", 2))  # per state row per chunk
    out_rescale_costs: tuple[tuple[str, int], ...] = (("fp32", 1),)  # per accumulator element per chunk
    finalize_costs: tuple[tuple[str, int], ...] = (("fp32", 1),)  # per output element, once
    lse: str = ""  # name of the optional log-sum-exp output (fp32, one per row): max + log(sum)
    lse_costs: tuple[tuple[str, int], ...] = (("exp", 1), ("fp32", 1))  # per row, once: log and add
    # > 0: a row's max may lag its scores by 2^stale_max (exp2's exponent); state and accumulator are rescaled
    # only when one passes it (a few times a row), so a chunk pays a compare a row (stale_costs), no rescale
    stale_max: float = 0.0
    stale_costs: tuple[tuple[str, int], ...] = (("fp32", 2),)  # per state row per chunk: subtract, compare
    kind = "normalized-contraction"

    def results(self) -> tuple[Array, ...]:
        rows = self.state_arrays()[0].axes
        return (self.output,) + ((Array(self.lse, rows, "fp32"),) if self.lse else ())

    @property
    def scores(self) -> Array:
        return self.inputs[0]

    @property
    def contracted(self) -> tuple[str, ...]:
        return (self.axis_name,)

    def state_arrays(self) -> tuple[Array, ...]:
        return _row_state(self, self.scores, self.axis_name)

    def work_per_point(self):
        # per point of (scores x value) space: the P.V product
        return {"tensor" if self.inputs[1].dtype in HALF_DTYPES else "fp32": sp.Integer(2)}

    def extra_work(self) -> tuple[Work, ...]:
        rows, out = self.state_arrays()[0].axis_names, self.output.axis_names
        per_chunk = ((Work(self.stale_costs, rows, "chunk", self.axis_name),) if self.stale_max > 0 else
                     (Work(self.rescale_costs, rows, "chunk", self.axis_name), Work(self.out_rescale_costs, out, "chunk", self.axis_name)))
        return (Work(self.score_costs, self.scores.axis_names, "point"), *per_chunk, Work(self.finalize_costs, out, "block"),
                *((Work(self.lse_costs, rows, "block"),) if self.lse else ()))

    def computed_operands(self) -> tuple[Array, ...]:
        # the probabilities: one per score, in the other operand's dtype
        return (Array(f"{self.output.name}_p", self.scores.axes, self.inputs[1].dtype),)

    def describe(self):
        return f"online softmax + contract over {self.axis_name}"


@dataclass(frozen=True)
class OnlineSoftmax(Op):
    """Softmax over `axis_name` computed in two passes over its input (online normalizer):
    pass 1 folds the running max and sum chunk by chunk, pass 2 re-reads the input and writes
    exp(s - max) / sum. Streamable along the axis; its input is read `passes` times."""
    axis_name: str = ""
    passes: int = 2
    element_costs: tuple[tuple[str, int], ...] = (("exp", 2), ("fp32", 4))  # per element, both passes
    rescale_costs: tuple[tuple[str, int], ...] = (("exp", 1), ("fp32", 2))  # per row per chunk of pass 1
    kind = "online-softmax"

    def state_arrays(self) -> tuple[Array, ...]:
        return _row_state(self, self.inputs[0], self.axis_name)

    def work_per_point(self):
        return costs_dict(self.element_costs)

    def extra_work(self) -> tuple[Work, ...]:
        return (Work(self.rescale_costs, self.state_arrays()[0].axis_names, "chunk", self.axis_name),)

    def describe(self):
        return f"two-pass online softmax over {self.axis_name}"


@dataclass(frozen=True)
class Product(Map):
    """Elementwise product of the inputs (a scale, a gain, a gate). Being linear in each factor, a factor
    constant along a contracted axis can move past the contraction (`Diagram.defer_scales`)."""
    kind = "product"

    def value(self, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out

    def partial(self, i: int, *xs):
        return Product.value(self, *(x for j, x in enumerate(xs) if j != i)) if len(xs) > 1 else 1.0


def product(name: str, inputs: tuple[Array, ...], output: Array, tag: str = "") -> Product:
    """`output = inputs[0] * inputs[1] * ...`: one FP32 multiply per output element and extra factor."""
    return Product(name, tuple(inputs), output, tag, costs=(("fp32", max(1, len(inputs) - 1)),),
                   formula=" * ".join(x.name for x in inputs))


@dataclass(frozen=True)
class OnlineLogSumExp(Op):
    """log(sum over `axis_name` of exp(x)) kept online: a running max and a running sum per row, rescaled
    each chunk; no probabilities are formed. Produced by `Diagram.online_logsumexp()`."""
    axis_name: str = ""
    element_costs: tuple[tuple[str, int], ...] = (("exp", 1), ("fp32", 3))  # per element: max, x - max, exp, add
    rescale_costs: tuple[tuple[str, int], ...] = (("exp", 1), ("fp32", 2))  # per row per chunk
    finalize_costs: tuple[tuple[str, int], ...] = (("exp", 1), ("fp32", 1))  # per row once: log(sum) + max
    kind = "online-logsumexp"

    def __post_init__(self):
        if self.output.carries(self.axis_name) or not self.inputs[0].carries(self.axis_name):
            raise DiagramError(f"logsumexp {self.name}: must fold axis {self.axis_name!r} of its input")

    def state_arrays(self) -> tuple[Array, ...]:
        return _row_state(self, self.inputs[0], self.axis_name)

    def work_per_point(self):
        return costs_dict(self.element_costs)

    def extra_work(self) -> tuple[Work, ...]:
        rows = self.output.axis_names
        return (Work(self.rescale_costs, rows, "chunk", self.axis_name), Work(self.finalize_costs, rows, "block"))

    def describe(self):
        return f"online log-sum-exp over {self.axis_name}"


@dataclass(frozen=True)
class Partition:
    """One relabeling: `group` spreads tiles over units of `level`; `stream` folds chunks in sequence."""
    axis_name: str
    size: sp.Expr      # tile (group) or chunk (stream)
    kind: str          # "group" | "stream"
    level: str         # "smem" (thread blocks own SMEM) | "reg" (warps own registers)
    stages: sp.Expr = sp.Integer(1)  # buffers of a streamed chunk kept in flight at `level`
    unit_threads: int = 32  # threads of one unit at the reg level (32 warp, 128 warpgroup)


@dataclass(frozen=True)
class Triangular:
    """Band mask: point (row, col) is live when row + lower <= col <= row + offset. `offset` is the upper
    bound (causal attention: offset = N_k - N_q); `lower` None means no lower bound, `offset` None no
    upper one. Several masks on one (row, col) pair keep the intersection (`diagrams.masks`).

    Streams over `col_axis` skip the chunks with no live point of the block's rows; with `per_unit`
    each register-level unit also skips those with none of its own rows (it still waits for them)."""
    row_axis: str
    col_axis: str
    offset: sp.Expr | None = field(default_factory=lambda: sp.Integer(0))
    per_unit: bool = False
    lower: sp.Expr | None = None

    def describe(self) -> str:
        low = "" if self.lower is None else f"{self.row_axis} + {self.lower} <= "
        high = "" if self.offset is None else f" <= {self.row_axis} + {self.offset}"
        return f"mask {low}{self.col_axis}{high}"
