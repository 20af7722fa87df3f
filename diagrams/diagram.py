"""Diagrams (one fused kernel each), programs (kernels in sequence) and relabelings.

A Diagram is a networkx graph whose nodes are arrays and operations; inputs and
outputs live in global memory. Relabelings (`group`, `stream`, `online_softmax`,
`mask`, `stage`) return new diagrams and never touch the original.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import networkx as nx
import sympy as sp

from . import rewrites
from .core import (Array, Contraction, DiagramError, Map, NormalizedContraction, OnlineSoftmax, Op, Partition,
                   Reduce, Triangular, size_expr)
from .masks import combined_masks
from . import placement
from .placement import LEVELS



@dataclass(frozen=True)
class Diagram:
    name: str
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]
    partitions: tuple[Partition, ...] = ()
    masks: tuple[Triangular, ...] = ()
    staged: tuple[tuple[str, str], ...] = ()  # (array name, level) placements chosen by the user
    threads: int | None = None  # threads per block when no reg-level group fixes them
    accumulated: tuple[str, ...] = ()  # outputs added into global memory by several blocks (atomics, fp32)
    raster_order: tuple[str, sp.Expr] | None = None  # (block-grouped axis, group): the block order (`raster`)
    buffered: tuple[tuple[str, "int | sp.Expr"], ...] = ()  # (intermediate, copies: an int or a size symbol) staged in SMEM more than once
    # how many times the kernel runs in its program: 1, or an expression of the sizes that is 0 where the
    # program needs no such kernel (`split(direct_when_one=True)`: no combine kernel for a single part)
    runs: sp.Expr | None = None
    # (staged input, alignment): its SMEM tile's rows padded along its last axis to a multiple of the
    # alignment in elements (a swizzle atom's row: 64 16-bit values for 128-byte swizzled rows), `stage`
    row_aligned: tuple[tuple[str, sp.Expr], ...] = ()
    # (staged input, flag: 1, or a symbol whose values are 0 and 1): each register-level unit reads its tile of
    # the input from SMEM once and holds it in registers through the streams the input does not carry (`hold`)
    held: tuple[tuple[str, sp.Expr], ...] = ()

    # ---------- structure ----------
    def __post_init__(self):
        produced = [x.name for op in self.ops for x in op.results()]
        if len(set(produced)) != len(produced):
            raise DiagramError(f"diagram {self.name}: an array is produced twice: {produced}")
        for o in self.outputs:
            if o not in produced:
                raise DiagramError(f"diagram {self.name}: output {o} is produced by no operation")
        self.graph()  # raises on cycles

    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for op in self.ops:
            g.add_node(("op", op.name), op=op)
            for x in op.inputs:
                g.add_node(("array", x.name), array=x)
                g.add_edge(("array", x.name), ("op", op.name))
            for y in op.results():
                g.add_node(("array", y.name), array=y)
                g.add_edge(("op", op.name), ("array", y.name))
        if not nx.is_directed_acyclic_graph(g):
            raise DiagramError(f"diagram {self.name}: the operations form a cycle")
        return g

    def ordered_ops(self) -> list[Op]:
        g = self.graph()
        return [g.nodes[n]["op"] for n in nx.topological_sort(g) if n[0] == "op"]

    def arrays(self) -> dict[str, Array]:
        out: dict[str, Array] = {}
        for op in self.ops:
            for x in (*op.inputs, *op.results()):
                out.setdefault(x.name, x)
        return out

    def inputs(self) -> list[Array]:
        produced = {x.name for op in self.ops for x in op.results()}
        seen, out = set(), []
        for op in self.ordered_ops():
            for x in op.inputs:
                if x.name not in produced and x.name not in seen:
                    seen.add(x.name)
                    out.append(x)
        return out

    def output_arrays(self) -> list[Array]:
        arrs = self.arrays()
        return [arrs[o] for o in self.outputs]

    def axes(self) -> dict[str, sp.Expr]:
        sizes: dict[str, sp.Expr] = {}
        for x in self.arrays().values():
            for a in x.axes:
                if sizes.setdefault(a.name, a.size) != a.size:
                    raise DiagramError(f"axis {a.name} has two sizes: {sizes[a.name]} and {a.size}")
        return sizes

    def consumers(self, array_name: str) -> list[Op]:
        return [op for op in self.ops if any(x.name == array_name for x in op.inputs)]

    def producer(self, array_name: str) -> Op | None:
        for op in self.ops:
            if any(x.name == array_name for x in op.results()):
                return op
        return None

    # ---------- relabelings ----------
    def _replace(self, **kw) -> "Diagram":
        return dataclasses.replace(self, **kw)

    def _check_axis(self, axis_name: str, what: str) -> sp.Expr:
        sizes = self.axes()
        if axis_name not in sizes:
            raise DiagramError(f"{what}: diagram {self.name} has no axis {axis_name!r}; axes: {sorted(sizes)}")
        return sizes[axis_name]

    def _check_size(self, axis_name: str, size, what: str) -> sp.Expr:
        full = self._check_axis(axis_name, what)
        s = size_expr(size)
        for p in self.partitions:
            if p.axis_name == axis_name and p.level == "smem" and p.kind == "group":
                full = p.size
        if s.is_number and full.is_number and s > full:
            raise DiagramError(f"{what}: tile {s} of {axis_name} exceeds its size {full}")
        return s

    def group(self, axis_name: str, tile, level: str = "smem", unit_threads: int = 32) -> "Diagram":
        """Split `axis_name` into independent tiles of `tile`, one per unit of `level`
        (thread blocks for "smem", warps or warpgroups for "reg")."""
        if level not in ("smem", "reg"):
            raise DiagramError(f"group {axis_name}: level must be 'smem' (blocks) or 'reg' (warps), got {level!r}")
        s = self._check_size(axis_name, tile, f"group {axis_name}")
        if any(p.axis_name == axis_name and p.level == level for p in self.partitions):
            raise DiagramError(f"group {axis_name}: axis already partitioned at level {level}")
        return self._replace(partitions=self.partitions + (Partition(axis_name, s, "group", level, 1, unit_threads),))

    def stream(self, axis_name: str, chunk, level: str = "smem", stages: int = 1) -> "Diagram":
        """Fold `axis_name` in chunks of `chunk`, in sequence, with an accumulator.
        Fails, naming the operation, when an operation cannot carry a state across chunks."""
        if level not in ("smem", "reg"):
            raise DiagramError(f"stream {axis_name}: level must be 'smem' or 'reg', got {level!r}")
        stages = size_expr(stages)  # a number, or a symbol for tile search
        s = self._check_size(axis_name, chunk, f"stream {axis_name}")
        blocker = self.stream_blocker(axis_name)
        if blocker is not None:
            op, need = blocker
            raise DiagramError(
                f"cannot stream {axis_name}: operation '{op.name}' ({op.describe()}) needs '{need}', "
                f"which is complete only after all of {axis_name} has been reduced; "
                f"rewrite it first (e.g. online_softmax)")
        if any(p.axis_name == axis_name and p.level == level for p in self.partitions):
            raise DiagramError(f"stream {axis_name}: axis already partitioned at level {level}")
        return self._replace(partitions=self.partitions + (Partition(axis_name, s, "stream", level, stages),))

    def stream_blocker(self, axis_name: str) -> tuple[Op, str] | None:
        """The first op that would need a value complete over `axis_name` while a chunk is live."""
        complete_after: set[str] = set()  # arrays final only once the whole axis is folded
        for op in self.ordered_ops():
            space = {a.name for a in op.iteration_axes()}
            if axis_name in space:
                for x in op.inputs:
                    if x.name in complete_after:
                        return op, x.name
            folds = axis_name in space and not op.output.carries(axis_name)
            if folds or any(x.name in complete_after for x in op.inputs):
                complete_after.add(op.output.name)
        return None

    def online_softmax(self, lse: bool | str = False, stale_max: float = 0.0) -> "Diagram":
        """Rewrite softmax over an axis followed by a contraction over that axis into a
        streamable normalized contraction (running max, running sum, rescale). A softmax whose
        probabilities are the diagram's output becomes a two-pass online softmax instead.
        With `lse` (True: named `<output>_lse`, or a name) the normalized contraction also writes the
        log-sum-exp of each row, fp32, as an output of the diagram (for backward and split-KV).
        `stale_max` > 0: a row's max may lag its scores by up to 2^stale_max (exp2's exponent) before the
        state and accumulator are rescaled (`NormalizedContraction.stale_max`)."""
        if stale_max < 0:
            raise DiagramError(f"online_softmax: stale_max is a margin in exp2's exponent, >= 0; got {stale_max}")
        groups: dict[str, list[Op]] = {}
        for op in self.ops:
            if op.tag.startswith("softmax:"):
                groups.setdefault(op.tag, []).append(op)
        new_ops, lse_names = list(self.ops), []
        done = 0
        for tag, members in groups.items():
            names = {m.output.name for m in members}
            final = [m for m in members if not any(m.output.name == x.name for o in members for x in o.inputs)]
            if len(final) != 1:
                continue
            probs = final[0].output
            red = [m for m in members if isinstance(m, Reduce)]
            if not red:
                continue
            ax = red[0].axis_name
            cons = [c for c in self.consumers(probs.name) if c not in members]
            external = [x for m in members for x in m.inputs if x.name not in names]
            if not cons and probs.name in self.outputs:
                # nothing to fuse with: the probabilities are the result; compute them in two passes
                new_ops = [o for o in new_ops if o not in members]
                new_ops.append(OnlineSoftmax(name=f"softmax_{ax}", inputs=(external[0],), output=probs,
                                             axis_name=ax, tag=tag))
                done += 1
                continue
            if len(cons) != 1 or not isinstance(cons[0], Contraction) or ax not in cons[0].contracted:
                continue
            contraction = cons[0]
            scores = external[0]
            other = [x for x in contraction.inputs if x.name != probs.name]
            per_score: dict[str, int] = {}
            for m in members:  # the softmax's own per-element work stays, run chunk by chunk
                for u, c in m.work_per_point().items():
                    per_score[u] = per_score.get(u, 0) + int(c)
            per_score["fp32"] = per_score.get("fp32", 0) - 1  # the division moves to the end
            lse_names += [lse if isinstance(lse, str) else f"{contraction.output.name}_lse"] if lse else []
            fused = NormalizedContraction(
                name=f"{contraction.name}", inputs=(scores, *other), output=contraction.output,
                axis_name=ax, score_costs=tuple(sorted(per_score.items())), tag=tag, lse=lse_names[-1] if lse else "",
                stale_max=float(stale_max))
            new_ops = [o for o in new_ops if o not in members and o is not contraction]
            new_ops.append(fused)
            done += 1
        if not done or (lse and not lse_names):
            raise DiagramError(f"online_softmax: diagram {self.name} has no softmax followed by a contraction over the same axis")
        return self._replace(ops=tuple(new_ops), outputs=self.outputs + tuple(lse_names))

    def with_stale_max(self, stale_max: float) -> "Diagram":
        """This diagram (relabeled or not) with every online softmax's stale-max margin set to `stale_max`
        (0: the eager softmax, rescaled every chunk): for kernels whose variants differ in that policy alone."""
        if stale_max < 0:
            raise DiagramError(f"with_stale_max: a margin in exp2's exponent, >= 0; got {stale_max}")
        if not any(isinstance(op, NormalizedContraction) for op in self.ops):
            raise DiagramError(f"with_stale_max: diagram {self.name} has no online softmax (Diagram.online_softmax)")
        return self._replace(ops=tuple(dataclasses.replace(op, stale_max=float(stale_max))
                                       if isinstance(op, NormalizedContraction) else op for op in self.ops))

    def defer_scales(self) -> "Diagram":
        """Move a factor that is constant along a contraction's axis but complete only after that axis is
        reduced (RMSNorm's 1/rms) past the contraction, onto its accumulator (`diagrams.rewrites`)."""
        return rewrites.defer_scales(self)

    def online_logsumexp(self) -> "Diagram":
        """Rewrite each log-sum-exp composite into an online one: running max and sum across chunks."""
        return rewrites.online_logsumexp(self)

    def mask(self, row_axis: str, col_axis: str, offset=0, per_unit: bool = False, lower=None) -> "Diagram":
        """Keep only points with row + lower <= col <= row + offset (`lower` None: no lower bound, `offset`
        None: no upper one); streams over `col_axis` skip dead chunks (with `per_unit`, each register-level
        unit skips those dead for its own rows). A second mask on the same pair keeps the intersection."""
        self._check_axis(row_axis, "mask")
        self._check_axis(col_axis, "mask")
        if offset is None and lower is None:
            raise DiagramError(f"mask {col_axis} against {row_axis}: give an upper bound (offset), a lower one, or both")
        new = Triangular(row_axis, col_axis, None if offset is None else sp.sympify(offset), per_unit,
                         None if lower is None else sp.sympify(lower))
        masks = self.masks + (new,)
        combined_masks(masks)  # raises on masks that do not compose or a band that keeps nothing
        return self._replace(masks=masks)

    def band(self, row_axis: str, col_axis: str, lower=None, upper=None, per_unit: bool = False) -> "Diagram":
        """Keep only points with row + lower <= col <= row + upper (sliding window: lower = -(W - 1), upper = 0)."""
        return self.mask(row_axis, col_axis, upper, per_unit, lower)

    def stage(self, array_name: str, level: str, buffers: int = 1, row_align=None) -> "Diagram":
        """Place an array at a memory level (an input staged in SMEM, an intermediate kept there).
        `buffers` > 1: an intermediate kept in that many SMEM copies, so that one step writes the next
        while the units still read the last (a double-buffered tile); a size symbol (its name) when the copies
        differ between tile configs (the family's derived symbols give its values).  `row_align`: an array's SMEM tile
        holds its rows (along its last axis) padded to a multiple of this many elements (a swizzle atom's
        row; the padding takes SMEM, moves no bytes from global memory).  An intermediate kept in SMEM takes it
        too, and is then made padding and all: the operation producing it computes the padded columns
        (iomodel.derive's `_padded_output`)."""
        return placement.stage(self, array_name, level, buffers, row_align)

    def hold(self, array_name: str, held=1) -> "Diagram":
        """Hold a staged input's register tile in registers: each register-level unit reads its tile from SMEM
        once per step of the streams the input carries (once per block tile when it carries none) and keeps it
        live through the others, instead of reading its fragments again at every use (FlashAttention's Q, held
        through the key loop: its SMEM reads leave the loop, its registers stay taken).  `held`: 1, or a symbol
        (its name) whose values, 0 or 1, say per tile config whether the code holds it (the family's symbols
        give them)."""
        return placement.hold(self, array_name, held)

    def held_flag(self, array_name: str) -> sp.Expr:
        """1 (or its symbol) where the units hold `array_name` in registers (`hold`), else 0."""
        return dict(self.held).get(array_name, sp.Integer(0))

    def split(self, axis_name: str, parts, chunk=None, stages=1, level: str = "smem", combine: str = "kernel",
              direct_when_one: bool = False) -> "Program":
        """Group `axis_name` over `parts` thread blocks and stream it within each part (split-K, split-KV): a
        partial kernel writing fp32 partials, then a combine kernel derived from each fold's combine rule
        (sum, max, log-sum-exp, online-softmax merge by LSE); `combine="atomic"` adds sums with atomics
        instead; `direct_when_one`: with one part the partial kernel writes the results itself and the
        combine kernel does not run (`diagrams.split`)."""
        from .split import split
        return split(self, axis_name, parts, chunk, stages, level, combine, direct_when_one)

    def split_units(self, axis_name: str, units, unit_threads: int = 32) -> "Diagram":
        """The register-level units split every streamed chunk of `axis_name`, each folding its own share
        with its own state; the units' partial results are merged once after the stream, through SMEM, by
        each fold's combine rule (`diagrams.unit_split`)."""
        from .unit_split import split_units
        return split_units(self, axis_name, units, unit_threads)

    def fuse(self, axes, into: str) -> "Diagram":
        """Read the adjacent axes `axes` of every array as one axis `into` (packed rows; `diagrams.reshape`)."""
        from .reshape import fuse
        return fuse(self, axes, into)

    def accumulate_global(self, array_name: str) -> "Diagram":
        """Mark output `array_name` as accumulated across thread blocks with atomic adds into global memory:
        it becomes fp32, and every block's write of its tile is a read-modify-write (read + write).
        The output must be zero before the kernel runs (a memset, not counted here)."""
        if array_name not in self.outputs:
            raise DiagramError(f"accumulate_global: {array_name!r} is not an output of {self.name}; outputs: {self.outputs}")
        retyped = map_arrays(self.ops, lambda x: dataclasses.replace(x, dtype="fp32") if x.name == array_name else x)
        return self._replace(ops=retyped, accumulated=tuple(dict.fromkeys(self.accumulated + (array_name,))))

    def rename_array(self, old: str, new: str) -> "Diagram":
        """The diagram with array `old` called `new` in its ops, outputs, placements and accumulations (a
        kernel's output that a later kernel of the program reads under another name)."""
        if old not in self.arrays():
            raise DiagramError(f"rename_array: {self.name} has no array {old!r}; arrays: {sorted(self.arrays())}")
        ops = map_arrays(self.ops, lambda x: dataclasses.replace(x, name=new) if x.name == old else x)
        swap = lambda n: new if n == old else n   # noqa: E731
        return self._replace(ops=ops, outputs=tuple(map(swap, self.outputs)),
                             staged=tuple((swap(a), lvl) for a, lvl in self.staged),
                             accumulated=tuple(map(swap, self.accumulated)),
                             buffered=tuple((swap(a), n) for a, n in self.buffered),
                             row_aligned=tuple((swap(a), n) for a, n in self.row_aligned),
                             held=tuple((swap(a), f) for a, f in self.held))

    def with_threads(self, threads: int) -> "Diagram":
        return self._replace(threads=int(threads))

    def raster(self, axis_name: str, group) -> "Diagram":
        """Order the thread blocks in groups of `group` tiles of `axis_name` (a block-level group): within a
        group that axis varies fastest, then the others, then the next group (grouped or swizzled
        rasterization: a wave of blocks then spans `group` tiles of the axis, so the operands it shares
        are re-read from L2, not HBM). `group` 1 is the plain order. The work and traffic are unchanged;
        the L2 reuse model (iomodel.traffic) reads the order."""
        if axis_name not in {p.axis_name for p in self.partitions_at("smem", "group")}:
            raise DiagramError(f"raster {axis_name}: not grouped over thread blocks in {self.name}; group it first")
        return self._replace(raster_order=(axis_name, size_expr(group)))

    def compose(self, other: "Diagram", name: str | None = None) -> "Diagram":
        """Fuse two diagrams into one kernel: outputs of self feed inputs of other by name."""
        outs = tuple(o for o in self.outputs if not other.consumers(o)) + other.outputs
        return Diagram(name or f"{self.name}+{other.name}", self.ops + other.ops, outs,
                       self.partitions + other.partitions, self.masks + other.masks,
                       self.staged + other.staged, other.threads or self.threads,
                       tuple(a for a in self.accumulated + other.accumulated if a in outs),
                       buffered=self.buffered + other.buffered, row_aligned=self.row_aligned + other.row_aligned,
                       held=self.held + tuple(p for p in other.held if self.producer(p[0]) is None))

    # ---------- views used by the derivation ----------
    def partitions_at(self, level: str, kind: str | None = None) -> list[Partition]:
        return [p for p in self.partitions if p.level == level and (kind is None or p.kind == kind)]

    def level_of(self, array: Array) -> str:
        """Where an array lives while the kernel runs."""
        for name, lvl in self.staged:
            if name == array.name:
                return lvl
        if array.name in self.outputs or self.producer(array.name) is None:
            return "global"
        return "reg" if self.partitions_at("reg") or not self.partitions_at("smem") else "smem"


@dataclass(frozen=True)
class Program:
    """Kernels run one after another; arrays passed between them go through global memory."""
    name: str
    kernels: tuple[Diagram, ...] = field(default_factory=tuple)


def map_arrays(ops: tuple[Op, ...], fn) -> tuple[Op, ...]:
    """The ops with every input and output array replaced by `fn(array)`."""
    return tuple(dataclasses.replace(op, inputs=tuple(fn(x) for x in op.inputs), output=fn(op.output)) for op in ops)


def as_program(d: Diagram | Program) -> Program:
    return d if isinstance(d, Program) else Program(d.name, (d,))


__all__ = ["Diagram", "Program", "as_program", "LEVELS", "Map", "Reduce", "Contraction"]
