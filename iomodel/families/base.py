"""What every kernel family is: a typed tile configuration and the facts the model, the tile search,
the kernels' chooser, the harness and the CLI read about it.

A family pairs one CUDA kernel (its template parameters are the config's fields) with the relabeled
diagram that describes it and the execution plan of its code. Its search space is the grid of
`space` values filtered by the config's own `problems()`: the same check the kernel wrapper applies
before it builds, so every configuration the search can pick is one the kernel builds and runs.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..errors import ModelError
from ..plan import ExecutionPlan
from ..problems import DTYPES


#: Elements of an attention kernel's SMEM row of Q, K or V: whole 128-byte swizzle groups of 16-bit values
#: (the mma.sync kernel's XOR swizzle spans 8 chunks of 16 bytes; the wgmma kernel's tiles are 64-column
#: TMA boxes), so head dims 32 and 96 take rows of 64 and 128
SMEM_ROW = 64


def smem_row(head_dim: int) -> int:
    """Elements of a Q, K or V row in SMEM: the head dim rounded up to SMEM_ROW."""
    return -(-head_dim // SMEM_ROW) * SMEM_ROW


def spilling(cfg, *features: str) -> tuple:
    """Rows of a family's ``spilling_variants``: (cfg, the frozenset of one variant's space-separated
    features) for each of `features` (``"causal window softcap"``)."""
    return tuple((cfg, frozenset(f.split())) for f in features)


@dataclass(frozen=True)
class TileConfig:
    """Base of the families' configs: frozen dataclasses of integers (the kernel's template parameters)."""

    def problems(self) -> list[str]:
        """Why the kernel cannot be built with this configuration (empty when it can)."""
        return []

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        """A config from a mapping with every field but those with a default (extra keys are refused, values
        must be integers)."""
        names = cls.field_names()
        unknown = sorted(set(d) - set(names))
        optional = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        missing = [n for n in names if n not in d and n not in optional]
        if unknown or missing:
            what = (f"unknown {', '.join(unknown)}" if unknown else "") + ("; " if unknown and missing else "") + (
                f"missing {', '.join(missing)}" if missing else "")
            raise ModelError(f"{cls.__name__} takes {', '.join(names)}: {what}")
        vals = {}
        for n in names:
            if n not in d:
                continue   # a field with a default
            v = d[n]
            if isinstance(v, bool) or int(v) != v:
                raise ModelError(f"{cls.__name__}.{n} must be an integer, got {v!r}")
            vals[n] = int(v)
        return cls(**vals)


@dataclass(frozen=True)
class Family:
    """One kernel family: its config type, search space, shipped configs, model and labels."""

    name: str                      # architecture in the name: flash_sm80, flash_sm90, ...
    description: str
    problem: str                   # which shape it takes: attention | matmul | softmax
    config_type: type              # a TileConfig subclass
    symbols: Mapping[str, str]     # config field -> diagram symbol it sets
    plan: ExecutionPlan
    build: Callable[[bool, bool], Any]   # (causal, grouped kv heads) -> diagram or program
    label_format: str              # str.format over the config's fields
    space: Mapping[str, tuple]     # candidate values per searched field, in enumeration order
    shipped: tuple = ()            # configurations compiled, tested and measured (the kernels' chooser ranks these)
    bound: Mapping[str, str] = field(default_factory=dict)  # config field -> shape field that fixes it (head_dim -> d)
    head_dims: tuple[int, ...] = ()      # attention head dims the kernel is built for (empty: any)
    dtypes: tuple[str, ...] = DTYPES
    kernel_plans: Mapping[str, ExecutionPlan] = field(default_factory=dict)  # kernel name -> plan where it differs
    derived_symbols: Callable[[list], dict] | None = None  # configs -> {symbol: values} the code derives
    launch_symbols: Callable[[Mapping], dict] | None = None  # checked shape -> {symbol: value} the launch derives
    # a sliding window (the shape's window_left, window_right): (diagram, has left bound, has right bound)
    # -> the diagram with that band on its (query, key) axes; None: the kernel has no window
    window_band: Callable[[Any, bool, bool], Any] | None = None
    # variants of shipped configs that the kernels do not offer, their ptxas reports spilling (the build
    # tests hold this list to the reports): (config, features), features the variant's frozenset of
    # "causal", "window", "softcap", "alibi" (``problems.variant_features``)
    spilling_variants: tuple = ()
    # the score modifiers the kernel applies before its softmax (``diagrams.library.SCORE_MODS``: softcap,
    # alibi): the model draws them on the family's diagram (``library.score_mods``)
    score_mods: tuple[str, ...] = ()
    # the kernel's score-modifier variants run the eager online softmax (rescaled every chunk) whatever stale max
    # its diagram draws: the model redraws theirs eager (``Diagram.with_stale_max``)
    mods_eager: bool = False
    # config fields that are on/off switches of the code (0 or 1) -> the word a label adds when one is on
    label_flags: Mapping[str, str] = field(default_factory=dict)
    # what the kernel's launch asks of a shape beyond its inputs and outputs (limits.py): the bytes it
    # allocates for itself, and why its grid or indices cannot hold the shape ("" when they can)
    workspace_bytes: Callable[[Mapping], float] | None = None
    launch_problem: Callable[[Mapping], str] | None = None
    # a family made from a diagram (problem "diagram", iomodel.diagram_family): its size symbols are the
    # shape's fields; its diagram depends on the dtype; FLOPs and memory come from its derivation
    shape_fields: tuple[str, ...] = ()
    build_for_dtype: Callable[[str], Any] | None = None
    useful_flops: Callable[[Mapping], float] | None = None
    memory_bytes: Callable[[Mapping], float] | None = None

    # ---- configs
    def label(self, config) -> str:
        """A config in a few characters, e.g. ``128x64 w4 s2`` (``128x64 w8 s2 qregs`` with a flag set)."""
        fields = self.coerce_fields(config)
        return self.label_format.format(**fields) + "".join(
            f" {word}" for fld, word in self.label_flags.items() if fields.get(fld))

    def coerce_fields(self, config) -> dict:
        return config.as_dict() if isinstance(config, TileConfig) else dict(config)

    def config(self, config, shape: Mapping | None = None):
        """`config` (a config, or a mapping of its fields; fields bound to the shape may be left out) as
        this family's config type, checked against the shape and the kernel's own constraints.
        Raises ModelError (a ValueError) naming what is wrong."""
        if isinstance(config, self.config_type):
            cfg = config
        elif isinstance(config, Mapping):
            d = dict(config)
            for fld, shape_key in self.bound.items():
                if fld not in d and shape is not None and shape_key in shape:
                    d[fld] = shape[shape_key]
            cfg = self.config_type.from_dict(d)
        else:
            raise ModelError(f"{self.name} config must be a {self.config_type.__name__} or a mapping of its "
                             f"fields, got {type(config).__name__}")
        self._check_bound(cfg, shape)
        problems = cfg.problems()
        if problems:
            raise ModelError(f"{self.name} cannot build {self.label(cfg)}: {'; '.join(problems)}")
        return cfg

    def _check_bound(self, cfg, shape: Mapping | None) -> None:
        for fld, shape_key in self.bound.items():
            if shape is not None and shape_key in shape and getattr(cfg, fld) != shape[shape_key]:
                raise ModelError(f"config {fld} {getattr(cfg, fld)} does not match the shape's "
                                 f"{shape_key}={shape[shape_key]}")

    def tiles(self, config) -> dict:
        """The searched sizes of a config (the fields the shape does not fix)."""
        d = self.coerce_fields(config)
        return {k: v for k, v in d.items() if k not in self.bound}

    def candidates(self, shape: Mapping) -> list:
        """Every grid point of the search space for `shape`, as configs (unchecked: see `problems`)."""
        keys = list(self.space)
        fixed = {fld: shape[key] for fld, key in self.bound.items()}
        return [self.config_type(**dict(zip(keys, vals)), **fixed)
                for vals in itertools.product(*(self.space[k] for k in keys))]

    def shipped_for(self, shape: Mapping) -> list:
        """The shipped configs that fit `shape` (its bound fields) and whose variant for its features (causal,
        a window, score modifiers) the kernels offer."""
        return self.offered(self.shipped, shape)

    def offered(self, configs, shape: Mapping) -> list:
        """Those of `configs` (configs, or mappings of their fields: a field left out matches) that fit `shape`'s
        bound fields and whose variant for its features the kernels offer (not in ``spilling_variants``)."""
        from ..problems import variant_features

        feats = variant_features(shape) if self.spilling_variants else frozenset()
        return [c for c in configs
                if all(self.coerce_fields(c).get(fld, shape.get(key)) == shape.get(key)
                       for fld, key in self.bound.items())
                and (c, feats) not in self.spilling_variants]

    def unshipped_for(self, features) -> tuple:
        """The shipped configs whose variant with exactly these features spills (not offered)."""
        return tuple(c for c, f in self.spilling_variants if f == frozenset(features))

    # ---- the model's view
    @property
    def requires_wgmma(self) -> bool:
        return self.plan.tensor_instruction == "wgmma"

    def gpu_problem(self, spec) -> str:
        """Why this GPU cannot run the family ("" when it can)."""
        if self.requires_wgmma and spec.wgmma is None:
            return f"{spec.key} has no wgmma"
        return ""

    def symbol_values(self, configs: Iterable) -> dict:
        """Diagram symbol -> one value per config, for the model's vectorized evaluation."""
        import numpy as np

        configs = list(configs)
        vals: dict = {}
        if self.derived_symbols is not None:
            vals.update(self.derived_symbols(configs))
        for fld, sym in self.symbols.items():
            vals[sym] = np.array([int(getattr(c, fld)) for c in configs], dtype=np.float64)
        return vals
