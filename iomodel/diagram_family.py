"""A kernel family made from any relabeled diagram and a kernel style: the bridge that opens the model.

Nothing here knows an algorithm. From the diagram (or program) it reads:

* the size symbols (free symbols of the sizes of the program's inputs' and final outputs' axes, and of
  the masks' bounds): the shape's fields;
* the tile parameters (every other free symbol of the relabelings): the config's fields, each with a
  role read off where it appears. A symbol that is a group's or stream's size by itself is a tile; one
  that is a stream's stage count is a depth; one that divides a tile (``Br / w``) is a count of units;
  one that divides an axis's size (``M / sp`` after a split) counts parts; a raster's group is a
  block-order group. The candidate values of each role come from the style's instruction shapes;
* the build check of a config: every tile a positive integer, a register-level unit's rows a multiple
  of the instruction's m (16 for mma.sync, 64 for a wgmma warpgroup), its other axes of the
  instruction's n granularity, a streamed chunk of a contracted axis a multiple of its k;
* the FLOPs a result is reported against: the matrix work of the diagram's live points (the
  derivation at tile 1, so masks count exactly), or all its work when it has no matrix product;
* the memory a shape needs: its inputs and outputs once.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import sympy as sp

from diagrams.core import DiagramError
from diagrams.diagram import Diagram, Program, as_program

from .errors import ModelError
from .families.base import Family, TileConfig
from .styles import KernelStyle

TILE_CHOICES = (16, 32, 64, 128, 192, 256)
COUNT_CHOICES = (1, 2, 4, 8)
STAGE_CHOICES = (1, 2, 3, 4)
PART_CHOICES = (1, 2, 4, 8, 16, 32, 64)
RASTER_CHOICES = (1, 4, 8, 16)   # block-order groups (1: the plain grid order)


def size_symbols(prog: Program) -> set[str]:
    """The problem's sizes: free symbols of the axes of the program's inputs and final outputs, and of the
    masks' bounds (a window is a size). Arrays passed between kernels (a split's partials, over an axis
    of `parts`) carry tile parameters, not sizes."""
    produced = {op.output.name for k in prog.kernels for op in k.ops}
    final = set(prog.kernels[-1].outputs)
    arrays = [x for k in prog.kernels for x in k.arrays().values() if x.name not in produced or x.name in final]
    exprs = [a.size for x in arrays for a in x.axes]
    exprs += [b for k in prog.kernels for m in k.masks for b in (m.offset, m.lower) if b is not None]
    return {s.name for e in exprs for s in sp.sympify(e).free_symbols} - split_parts(prog)


def split_parts(prog: Program) -> set[str]:
    """Symbols a split relabeling introduced: an axis of size S split into p parts becomes axes of sizes
    p and S / p, so a symbol dividing an axis's size counts parts."""
    sizes = [a.size for k in prog.kernels for x in k.arrays().values() for a in x.axes]
    return {s.name for e in sizes for s in sp.fraction(sp.sympify(e))[1].free_symbols}


def _contracted(d: Diagram) -> set[str]:
    return {a for op in d.ops for a in getattr(op, "contracted", ())}


def tile_roles(prog: Program) -> dict[str, str]:
    """Tile symbol -> role (tile, unit-tile, depth, count, parts, raster), in first-seen order."""
    sizes = size_symbols(prog)
    roles: dict[str, str] = {name: "parts" for name in sorted(split_parts(prog))}
    for k in prog.kernels:
        if k.raster_order is not None:
            roles.update({s.name: "raster" for s in sp.sympify(k.raster_order[1]).free_symbols if s.name not in sizes})
        for p in k.partitions:
            size, stages = sp.sympify(p.size), sp.sympify(p.stages)
            for s in stages.free_symbols:
                if s.name not in sizes:
                    roles.setdefault(s.name, "depth")
            if isinstance(size, sp.Symbol) and size.name not in sizes:
                roles.setdefault(size.name, "unit-tile" if p.level == "reg" else "tile")
                continue
            for s in size.free_symbols:
                if s.name not in sizes:
                    # a count divides a size; dividing a size symbol (M / parts) splits an axis into parts
                    parts = any(t.name in sizes for t in size.free_symbols)
                    roles.setdefault(s.name, "parts" if parts else "count")
    return roles


def _choices(role: str, style: KernelStyle) -> tuple[int, ...]:
    if role == "unit-tile":
        return tuple(t for t in TILE_CHOICES if t % style.row_multiple == 0)
    return {"tile": TILE_CHOICES, "depth": STAGE_CHOICES, "count": COUNT_CHOICES, "parts": PART_CHOICES,
            "raster": RASTER_CHOICES}[role]


def _partition_checks(prog: Program, fields: list[str], style: KernelStyle) -> list[tuple[str, Callable, int]]:
    """(where, size as a function of the tile fields, the multiple it must be) per partition whose size
    depends on tiles only (one that depends on the shape, a split's part, is rounded up like the grid)."""
    syms = [sp.Symbol(f, positive=True, integer=True) for f in fields]
    checks = []
    for k in prog.kernels:
        contracted = _contracted(k)
        first_reg = True
        for p in k.partitions:
            size = sp.sympify(p.size)
            if size.free_symbols - set(syms) or size.is_number:
                continue  # a size the diagram fixes (one warp per head) pads to the instruction; not searched
            multiple = 1
            if p.level == "reg" and p.kind == "group":
                multiple = style.row_multiple if first_reg else style.col_multiple
                first_reg = False
            elif p.kind == "stream" and p.axis_name in contracted:
                multiple = style.k_multiple
            checks.append((f"{k.name}: {p.kind} {p.axis_name} at {p.level}", sp.lambdify(syms, size, "math"), multiple))
    return checks


def _config_type(name: str, fields: list[str], prog: Program, style: KernelStyle) -> type:
    checks = _partition_checks(prog, fields, style)

    def problems(self) -> list[str]:
        """Why the code cannot be built: tiles that are not positive integers or miss the instruction's shape."""
        vals = [getattr(self, f) for f in fields]
        out = []
        for where, size_of, multiple in checks:
            size = size_of(*vals)
            if size < 1 or abs(size - round(size)) > 1e-9:
                out.append(f"{where} is {size:g}, not a positive integer")
            elif round(size) % multiple:
                out.append(f"{where}: {round(size)} is not a multiple of the instruction's {multiple}")
        return out

    cls = dataclasses.make_dataclass(f"Tiles_{abs(hash(name)) % 10**8}", [(f, int) for f in fields],
                                     bases=(TileConfig,), frozen=True, namespace={"problems": problems})
    return cls


@dataclass(frozen=True)
class DiagramFamily(Family):
    """A Family whose candidates are pruned by the shape: tiles no larger than their axis needs."""

    tile_extent: Mapping[str, sp.Expr] = field(default_factory=dict)  # tile symbol -> the axis size it tiles

    def candidates(self, shape: Mapping) -> list:
        keys = list(self.space)
        grids = [self._pruned(k, shape) for k in keys]
        return [self.config_type(**dict(zip(keys, vals))) for vals in itertools.product(*grids)]

    def _pruned(self, name: str, shape: Mapping) -> tuple:
        extent = self.tile_extent.get(name)
        if extent is None:
            return tuple(self.space[name])
        size = sp.sympify(extent).subs({sp.Symbol(k, positive=True, integer=True): v for k, v in shape.items()
                                        if isinstance(v, (int, np.integer))})
        if not size.is_number:
            return tuple(self.space[name])
        keep = tuple(v for v in self.space[name] if v < 2 * int(size) or v == min(self.space[name]))
        return keep or (min(self.space[name]),)


def _tile_extents(prog: Program, roles: Mapping[str, str]) -> dict[str, sp.Expr]:
    """Tile symbol -> the size of the axis it tiles (a tile past twice its axis only pads)."""
    out = {}
    for k in prog.kernels:
        sizes = k.axes()
        for p in k.partitions:
            size = sp.sympify(p.size)
            if isinstance(size, sp.Symbol) and roles.get(size.name) in ("tile", "unit-tile"):
                out.setdefault(size.name, sizes[p.axis_name])
    return out


def _model_hooks(name: str, roles: Mapping[str, str]) -> tuple[Callable, Callable]:
    """(useful FLOPs, memory bytes) of a shape, from the family's own derivation."""

    def evaluated(shape: Mapping, key: str) -> float:
        from .api import family_model
        model = family_model(name, False, False, shape.get("dtype", "bf16"))
        values = {**{k: shape[k] for k in shape if isinstance(shape[k], (int, np.integer))},
                  **{t: 1 for t in roles}}
        return float(sum(np.sum(ck.evaluate(values)[key]) for ck in model.kernels))

    def flops(shape: Mapping) -> float:
        tensor = evaluated(shape, "work_tensor")
        return tensor if tensor > 0 else evaluated(shape, "work_fp32") + evaluated(shape, "work_exp")

    def memory(shape: Mapping) -> float:
        return evaluated(shape, "hbm_bytes")
    return flops, memory


def diagram_family(name: str, build: Callable[[str], Diagram | Program], style: KernelStyle,
                   dtypes: tuple[str, ...] = ("bf16", "fp16"), description: str = "") -> DiagramFamily:
    """The family of `build(dtype)`'s diagram run in `style`. Raises ModelError when the diagram has no
    tile to search and no size, or DiagramError when it cannot be built."""
    prog = as_program(build(dtypes[0]))
    roles = tile_roles(prog)
    fields = list(roles)
    sizes = tuple(sorted(size_symbols(prog)))
    overlap = set(fields) & {"dtype", "causal"}
    if overlap:
        raise DiagramError(f"{name}: tile symbol {sorted(overlap)[0]!r} clashes with a shape option")
    flops, memory = _model_hooks(name, roles)
    label = " ".join(f"{f}={{{f}}}" for f in fields) or "(no tiles)"
    return DiagramFamily(
        name=name, description=description or f"{prog.name} in the {style.name} style ({style.description})",
        problem="diagram", config_type=_config_type(name, fields, prog, style), symbols={f: f for f in fields},
        plan=style.plan, build=lambda causal, gqa: build(dtypes[0]), label_format=label,
        space={f: _choices(roles[f], style) for f in fields}, dtypes=dtypes, shape_fields=sizes,
        build_for_dtype=build, useful_flops=flops, memory_bytes=memory,
        tile_extent=_tile_extents(prog, roles))


def check_program(obj, where: str) -> Program:
    """`obj` as a Program, or ModelError saying what it is instead."""
    if isinstance(obj, (Diagram, Program)):
        return as_program(obj)
    raise ModelError(f"{where} returned {type(obj).__name__}, not a Diagram or Program")
