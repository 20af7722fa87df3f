"""GPU hardware facts (datasheet) and measured ceilings (calibration).

Two kinds of numbers live apart on purpose:

* ``iomodel/hardware_data/<key>.toml`` holds what the vendor states: SM count,
  clocks, memory sizes and bandwidths, per-SM limits, unit rates.  Every
  number is a table ``{value, unit, source}``; a rate computed from others says
  ``source = "derived: <formula>"``.
* ``iomodel/calibration/<key>.toml`` holds what a run of ``python -m validation``
  measured on a real device: GEMM rate, copy bandwidth, per-clock unit rates.
  Any of them may be missing.

``load_spec`` turns a spec file into a frozen :class:`GpuSpec`;
``load_calibration`` / ``write_calibration`` read and write calibration files.
Malformed files raise :class:`HardwareError` with a one-line message that names
the file and the field.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os
import re
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "HardwareError",
    "Fact",
    "WgmmaShape",
    "GpuSpec",
    "Calibration",
    "load_spec",
    "list_specs",
    "spec_for_device",
    "load_calibration",
    "write_calibration",
    "write_text_atomic",
    "DATA_DIR",
    "CALIBRATION_DIR",
]

DATA_DIR = Path(__file__).resolve().parent / "hardware_data"
CALIBRATION_DIR = Path(__file__).resolve().parent / "calibration"


class HardwareError(ValueError):
    """A GPU spec or calibration file is missing, malformed or unknown."""


@dataclass(frozen=True)
class Fact:
    """One number with its unit (as written in the file) and where it comes from.

    ``value`` is the number converted to the base unit of its field (bytes, Hz,
    bytes/s, FLOP/s, seconds, or a plain count); ``unit`` and ``raw`` keep what
    the file said, so a reader can find the datasheet figure again.
    """

    value: Any
    unit: str
    source: str
    raw: Any = None

    @property
    def derived(self) -> bool:
        return self.source.strip().lower().startswith("derived")


@dataclass(frozen=True)
class WgmmaShape:
    """Hopper ``wgmma.mma_async`` shape: m64 nN k16, N a multiple of 8 up to 256."""

    m: int = 64
    k: int = 16
    n_multiple: int = 8
    n_max: int = 256

    def valid_n(self, n: int) -> bool:
        return 0 < n <= self.n_max and n % self.n_multiple == 0


# --------------------------------------------------------------------------
# Units.  Each field has a dimension; the file may write any unit of that
# dimension and the loader converts to the base unit.

_UNITS: dict[str, dict[str, float]] = {
    "frequency": {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9},
    "bytes": {
        "B": 1, "bytes": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3,
        "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
    },
    "bandwidth": {
        "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
        "GiB/s": 1024.0**3, "TiB/s": 1024.0**4,
    },
    "flop_rate": {"FLOP/s": 1.0, "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15},
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9},
    "flop_per_clk": {"FLOP/clk/SM": 1},
    "fma_per_clk": {"FMA/clk/SM": 1},
    "op_per_clk": {"op/clk/SM": 1},
    "bytes_per_clk": {"B/clk/SM": 1},
}

# field name -> (dimension or None for a free count label, kind)
#   kind: "int" whole positive number, "float" positive number,
#         ("ints", n) list of n positive integers
_SPEC_FIELDS: dict[str, tuple[str | None, Any]] = {
    "compute_capability": (None, ("ints", 2)),
    "sm_count": (None, "int"),
    "clock_hz": ("frequency", "float"),
    "hbm_bandwidth": ("bandwidth", "float"),
    "hbm_bytes": ("bytes", "int"),
    "l2_bytes": ("bytes", "int"),
    "smem_per_sm": ("bytes", "int"),
    "smem_per_block": ("bytes", "int"),
    "smem_reserved_per_block": ("bytes", "int"),
    "regs_per_sm": (None, "int"),
    "regs_per_block": (None, "int"),
    "regs_per_thread_max": (None, "int"),
    "reg_alloc_unit": (None, "int"),
    "max_threads_per_sm": (None, "int"),
    "max_warps_per_sm": (None, "int"),
    "max_blocks_per_sm": (None, "int"),
    "max_threads_per_block": (None, "int"),
    "schedulers_per_sm": (None, "int"),
    "fp32_fma_per_clk_per_sm": ("fma_per_clk", "float"),
    "exp2_per_clk_per_sm": ("op_per_clk", "float"),
    "smem_bytes_per_clk_per_sm": ("bytes_per_clk", "float"),
    "mma_sync_shape": (None, ("ints", 3)),
    "launch_overhead_s": ("time", "float"),
}
# groups of facts keyed by dtype; at least one entry required where marked
_SPEC_GROUPS: dict[str, tuple[str, str, bool]] = {
    "tensor_flops_per_clk_per_sm": ("flop_per_clk", "float", True),
    "tensor_datasheet_flops": ("flop_rate", "float", False),
}
_WGMMA_FIELDS = ("m", "k", "n_multiple", "n_max")
_OPTIONAL_FIELDS: dict[str, tuple[str | None, Any]] = {
    "max_boost_clock_hz": ("frequency", "float"),
}
_ARCHES = ("ampere", "hopper")
# datasheet TFLOP/s and per-clock rate x SMs x clock must agree this closely
_CONSISTENCY_TOL = 0.02


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_positive(x: Any) -> bool:
    return _is_number(x) and math.isfinite(x) and x > 0


def _check_fact(where: str, name: str, table: Any, dim: str | None, kind: Any) -> Fact:
    if not isinstance(table, Mapping) or "value" not in table:
        raise HardwareError(
            f"{where}: field '{name}' must be a table with value, unit and source"
        )
    unit = table.get("unit")
    source = table.get("source")
    if not isinstance(unit, str) or not unit.strip():
        raise HardwareError(f"{where}: field '{name}' has no unit")
    if not isinstance(source, str) or not source.strip():
        raise HardwareError(f"{where}: field '{name}' has no source")
    raw = table["value"]
    if isinstance(kind, tuple):  # list of positive ints
        n = kind[1]
        if (
            not isinstance(raw, list)
            or len(raw) != n
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw)
        ):
            raise HardwareError(
                f"{where}: field '{name}' must be a list of {n} whole numbers (got {raw!r})"
            )
        if any(v < 0 for v in raw) or all(v == 0 for v in raw):
            raise HardwareError(
                f"{where}: field '{name}' must hold non-negative numbers (got {raw!r})"
            )
        return Fact(tuple(raw), unit, source, raw)
    if not _is_positive(raw):
        raise HardwareError(
            f"{where}: field '{name}' must be a positive number (got {raw!r})"
        )
    factor = 1
    if dim is not None:
        table_units = _UNITS[dim]
        if unit not in table_units:
            raise HardwareError(
                f"{where}: field '{name}' has unit '{unit}' but needs one of "
                f"{', '.join(table_units)}"
            )
        factor = table_units[unit]
    value = raw * factor
    if kind == "int":
        if isinstance(value, float):
            if abs(value - round(value)) > 1e-9 * max(1.0, abs(value)):
                raise HardwareError(
                    f"{where}: field '{name}' must be a whole number (got {raw!r} {unit})"
                )
            value = int(round(value))
    else:
        value = float(value)
    return Fact(value, unit, source, raw)


# --------------------------------------------------------------------------
# The spec.


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet facts of one GPU, in base units (bytes, Hz, bytes/s, FLOP/s, s).

    Per-SM rates are per clock; multiply by ``sm_count * clock_hz`` for a
    device rate (see the ``peak_*`` helpers).  ``facts`` keeps every number
    with its unit and source, keyed by field name (``group.dtype`` for the
    per-dtype tables).
    """

    key: str
    name: str
    arch: str
    compute_capability: tuple[int, int]
    aliases: tuple[str, ...]
    sm_count: int
    clock_hz: float
    hbm_bandwidth: float
    hbm_bytes: int
    l2_bytes: int
    smem_per_sm: int
    smem_per_block: int
    smem_reserved_per_block: int
    regs_per_sm: int
    regs_per_block: int
    regs_per_thread_max: int
    reg_alloc_unit: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    schedulers_per_sm: int
    tensor_flops_per_clk_per_sm: dict[str, float] = field(hash=False)
    fp32_fma_per_clk_per_sm: float
    exp2_per_clk_per_sm: float
    smem_bytes_per_clk_per_sm: float
    mma_sync_shape: tuple[int, int, int]
    wgmma: WgmmaShape | None
    launch_overhead_s: float
    facts: dict[str, Fact] = field(hash=False, repr=False, compare=False)
    path: Path | None = field(default=None, compare=False)

    # -- device-level rates ------------------------------------------------
    def peak_tensor_flops(self, dtype: str = "bf16") -> float:
        """Dense tensor-core FLOP/s for ``dtype`` at ``clock_hz`` (datasheet)."""
        try:
            per_clk = self.tensor_flops_per_clk_per_sm[dtype]
        except KeyError:
            known = ", ".join(sorted(self.tensor_flops_per_clk_per_sm))
            raise HardwareError(
                f"{self.key}: no tensor-core rate for dtype '{dtype}': known are {known}"
            ) from None
        return per_clk * self.sm_count * self.clock_hz

    @property
    def peak_exp2_per_s(self) -> float:
        """MUFU ``ex2`` operations per second over the whole device."""
        return self.exp2_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def peak_fp32_flops(self) -> float:
        """FP32 FLOP/s counting an FMA as two FLOPs."""
        return 2.0 * self.fp32_fma_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def peak_smem_bandwidth(self) -> float:
        """Shared-memory bytes/s summed over all SMs."""
        return self.smem_bytes_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def max_warps_per_scheduler(self) -> int:
        return self.max_warps_per_sm // self.schedulers_per_sm

    def summary(self) -> str:
        """A few lines a person can read."""
        bf16 = self.tensor_flops_per_clk_per_sm.get("bf16")
        lines = [
            f"{self.name} ({self.key}, sm_{self.compute_capability[0]}{self.compute_capability[1]}, {self.arch})",
            f"  {self.sm_count} SMs at {self.clock_hz / 1e6:.0f} MHz; HBM {self.hbm_bandwidth / 1e12:.2f} TB/s, "
            f"{self.hbm_bytes / 2**30:.0f} GiB; L2 {self.l2_bytes / 2**20:.0f} MiB",
            f"  SMEM {self.smem_per_sm // 1024} KiB/SM, {self.smem_per_block // 1024} KiB/block; "
            f"{self.regs_per_sm} regs/SM; {self.max_warps_per_sm} warps/SM",
        ]
        if bf16:
            lines.append(
                f"  bf16 tensor {bf16:.0f} FLOP/clk/SM = {self.peak_tensor_flops('bf16') / 1e12:.1f} TFLOP/s; "
                f"exp2 {self.peak_exp2_per_s / 1e12:.2f} T/s; fp32 {self.peak_fp32_flops / 1e12:.1f} TFLOP/s"
            )
        return "\n".join(lines)


def _parse_spec(data: Mapping[str, Any], where: str, path: Path | None) -> GpuSpec:
    facts: dict[str, Fact] = {}

    def text(name: str) -> str:
        v = data.get(name)
        if v is None:
            raise HardwareError(f"{where}: field '{name}' missing")
        if not isinstance(v, str) or not v.strip():
            raise HardwareError(f"{where}: field '{name}' must be a non-empty string")
        return v.strip()

    key = text("key")
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", key):
        raise HardwareError(
            f"{where}: field 'key' must be lower-case letters, digits, '.', '-' or '_' (got {key!r})"
        )
    name = text("name")
    arch = text("arch").lower()
    if arch not in _ARCHES:
        raise HardwareError(
            f"{where}: field 'arch' must be one of {', '.join(_ARCHES)} (got {arch!r})"
        )
    aliases_raw = data.get("aliases", [])
    if not isinstance(aliases_raw, list) or not all(isinstance(a, str) for a in aliases_raw):
        raise HardwareError(f"{where}: field 'aliases' must be a list of strings")

    values: dict[str, Any] = {}
    for fname, (dim, kind) in _SPEC_FIELDS.items():
        if fname not in data:
            raise HardwareError(f"{where}: field '{fname}' missing")
        fact = _check_fact(where, fname, data[fname], dim, kind)
        facts[fname] = fact
        values[fname] = fact.value
    for fname, (dim, kind) in _OPTIONAL_FIELDS.items():
        if fname in data:
            facts[fname] = _check_fact(where, fname, data[fname], dim, kind)

    groups: dict[str, dict[str, float]] = {}
    for gname, (dim, kind, required) in _SPEC_GROUPS.items():
        table = data.get(gname)
        if table is None:
            if required:
                raise HardwareError(f"{where}: field '{gname}' missing")
            groups[gname] = {}
            continue
        if not isinstance(table, Mapping) or "value" in table or not table:
            raise HardwareError(
                f"{where}: field '{gname}' must be a table of dtype -> {{value, unit, source}}"
            )
        groups[gname] = {}
        for dtype, sub in table.items():
            fact = _check_fact(where, f"{gname}.{dtype}", sub, dim, kind)
            facts[f"{gname}.{dtype}"] = fact
            groups[gname][dtype] = fact.value

    wgmma = None
    if "wgmma" in data:
        table = data["wgmma"]
        if not isinstance(table, Mapping):
            raise HardwareError(f"{where}: field 'wgmma' must be a table of m, k, n_multiple, n_max")
        parts = {}
        for wname in _WGMMA_FIELDS:
            full = f"wgmma.{wname}"
            if wname not in table:
                raise HardwareError(f"{where}: field '{full}' missing")
            fact = _check_fact(where, full, table[wname], None, "int")
            facts[full] = fact
            parts[wname] = fact.value
        wgmma = WgmmaShape(**parts)
    elif arch == "hopper":
        raise HardwareError(f"{where}: field 'wgmma' missing (arch is hopper)")

    # cross-checks a wrong file would fail
    sm, clk = values["sm_count"], values["clock_hz"]
    for dtype, per_clk in groups["tensor_flops_per_clk_per_sm"].items():
        stated = groups["tensor_datasheet_flops"].get(dtype)
        if stated is not None:
            derived = per_clk * sm * clk
            if abs(derived / stated - 1.0) > _CONSISTENCY_TOL:
                raise HardwareError(
                    f"{where}: field 'tensor_flops_per_clk_per_sm.{dtype}' gives "
                    f"{derived / 1e12:.1f} TFLOP/s at {clk / 1e6:.0f} MHz x {sm} SMs, but "
                    f"'tensor_datasheet_flops.{dtype}' says {stated / 1e12:.1f}"
                )
    if values["smem_per_block"] > values["smem_per_sm"]:
        raise HardwareError(f"{where}: field 'smem_per_block' exceeds 'smem_per_sm'")
    if values["max_warps_per_sm"] * 32 != values["max_threads_per_sm"]:
        raise HardwareError(
            f"{where}: field 'max_warps_per_sm' must be max_threads_per_sm / 32"
        )

    return GpuSpec(
        key=key,
        name=name,
        arch=arch,
        compute_capability=tuple(values["compute_capability"]),
        aliases=tuple(a.strip() for a in aliases_raw),
        sm_count=values["sm_count"],
        clock_hz=values["clock_hz"],
        hbm_bandwidth=values["hbm_bandwidth"],
        hbm_bytes=values["hbm_bytes"],
        l2_bytes=values["l2_bytes"],
        smem_per_sm=values["smem_per_sm"],
        smem_per_block=values["smem_per_block"],
        smem_reserved_per_block=values["smem_reserved_per_block"],
        regs_per_sm=values["regs_per_sm"],
        regs_per_block=values["regs_per_block"],
        regs_per_thread_max=values["regs_per_thread_max"],
        reg_alloc_unit=values["reg_alloc_unit"],
        max_threads_per_sm=values["max_threads_per_sm"],
        max_warps_per_sm=values["max_warps_per_sm"],
        max_blocks_per_sm=values["max_blocks_per_sm"],
        max_threads_per_block=values["max_threads_per_block"],
        schedulers_per_sm=values["schedulers_per_sm"],
        tensor_flops_per_clk_per_sm=dict(groups["tensor_flops_per_clk_per_sm"]),
        fp32_fma_per_clk_per_sm=values["fp32_fma_per_clk_per_sm"],
        exp2_per_clk_per_sm=values["exp2_per_clk_per_sm"],
        smem_bytes_per_clk_per_sm=values["smem_bytes_per_clk_per_sm"],
        mma_sync_shape=tuple(values["mma_sync_shape"]),
        wgmma=wgmma,
        launch_overhead_s=values["launch_overhead_s"],
        facts=facts,
        path=path,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise HardwareError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise HardwareError(f"{path.name}: not valid TOML: {exc}") from None


_SPEC_CACHE: dict[str, GpuSpec] = {}
_PATH_CACHE: dict[tuple[str, int], GpuSpec] = {}


def list_specs() -> list[str]:
    """Keys of the GPU specs shipped with iomodel, sorted."""
    return sorted(p.stem for p in DATA_DIR.glob("*.toml"))


def _norm(name: str) -> str:
    return " ".join(name.strip().lower().replace("_", " ").split())


def _load_builtin(key: str) -> GpuSpec:
    spec = _SPEC_CACHE.get(key)
    if spec is None:
        path = DATA_DIR / f"{key}.toml"
        spec = _parse_spec(_read_toml(path), path.name, path)
        if spec.key != key:
            raise HardwareError(
                f"{path.name}: field 'key' is {spec.key!r} but the file is named {key}.toml"
            )
        _SPEC_CACHE[key] = spec
    return spec


def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for key in list_specs():
        spec = _load_builtin(key)
        for alias in (spec.key, spec.name, *spec.aliases):
            index.setdefault(_norm(alias), key)
    return index


def load_spec(name_or_path: str | os.PathLike | GpuSpec) -> GpuSpec:
    """Load a GPU spec by key (``"h100-sxm"``), device alias or TOML path.

    A :class:`GpuSpec` passes through unchanged.
    """
    if isinstance(name_or_path, GpuSpec):
        return name_or_path
    text = os.fspath(name_or_path)
    if text in list_specs():
        return _load_builtin(text)
    p = Path(text).expanduser()
    if text.endswith(".toml") or os.sep in text or p.is_file():
        if not p.is_file():
            raise HardwareError(f"{text}: no such file")
        st = p.stat()
        ck = (str(p.resolve()), st.st_mtime_ns)
        spec = _PATH_CACHE.get(ck)
        if spec is None:
            spec = _parse_spec(_read_toml(p), p.name, p.resolve())
            _PATH_CACHE[ck] = spec
        return spec
    key = _alias_index().get(_norm(text))
    if key is not None:
        return _load_builtin(key)
    raise HardwareError(f"unknown GPU {text!r}: known are {', '.join(list_specs())}")


def spec_for_device(device_name: str) -> GpuSpec:
    """The shipped spec whose aliases include ``device_name`` (as torch reports it)."""
    key = _alias_index().get(_norm(device_name))
    if key is None:
        known = []
        for k in list_specs():
            known.extend(_load_builtin(k).aliases)
        raise HardwareError(
            f"unknown GPU device {device_name!r}: known devices are {', '.join(known)}; "
            f"pass --gpu-spec KEY or a TOML path"
        )
    return _load_builtin(key)


# --------------------------------------------------------------------------
# Calibration: measured ceilings.

_CAL_FIELDS: dict[str, tuple[str, str]] = {
    # field -> (dimension, canonical unit written by write_calibration)
    "clock_hz": ("frequency", "Hz"),
    "gemm_flops": ("flop_rate", "FLOP/s"),
    "mma_sync_flops_per_clk_per_sm": ("flop_per_clk", "FLOP/clk/SM"),
    "copy_bandwidth": ("bandwidth", "B/s"),
    "exp2_per_clk_per_sm": ("op_per_clk", "op/clk/SM"),
    "fp32_fma_per_clk_per_sm": ("fma_per_clk", "FMA/clk/SM"),
}


@dataclass(frozen=True)
class Calibration:
    """Ceilings measured on one device; any number may be None (not measured).

    ``gemm_flops``: bf16 dense 8192^3 GEMM through torch (FLOP/s).
    ``copy_bandwidth``: device-to-device copy, bytes read + written per second.
    ``*_per_clk_per_sm``: unit rates at ``clock_hz`` (the SM clock sampled
    during the run).  ``sources`` says how each number was obtained.
    """

    gpu_key: str
    device_name: str | None = None
    date: str | None = None
    source: str | None = None
    clock_hz: float | None = None
    gemm_flops: float | None = None
    mma_sync_flops_per_clk_per_sm: float | None = None
    copy_bandwidth: float | None = None
    exp2_per_clk_per_sm: float | None = None
    fp32_fma_per_clk_per_sm: float | None = None
    sources: dict[str, str] = field(default_factory=dict, hash=False, compare=False, repr=False)
    path: Path | None = field(default=None, compare=False, repr=False)

    def measured(self) -> dict[str, float]:
        """The numbers that were measured, by field name."""
        return {
            k: getattr(self, k) for k in _CAL_FIELDS if getattr(self, k) is not None
        }

    def mma_sync_flops(self, sm_count: int) -> float | None:
        """Device mma.sync FLOP/s at the calibrated clock, if both are known."""
        if self.mma_sync_flops_per_clk_per_sm is None or self.clock_hz is None:
            return None
        return self.mma_sync_flops_per_clk_per_sm * sm_count * self.clock_hz


def _parse_calibration(data: Mapping[str, Any], where: str, path: Path | None) -> Calibration:
    gpu_key = data.get("gpu_key")
    if not isinstance(gpu_key, str) or not gpu_key.strip():
        raise HardwareError(f"{where}: field 'gpu_key' missing")
    meta: dict[str, Any] = {}
    for name in ("device_name", "date", "source"):
        v = data.get(name)
        if isinstance(v, (_dt.date, _dt.datetime)):
            v = v.isoformat()
        if v is not None and not isinstance(v, str):
            raise HardwareError(f"{where}: field '{name}' must be a string")
        meta[name] = v
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for name, (dim, _unit) in _CAL_FIELDS.items():
        if name not in data:
            continue
        fact = _check_fact(where, name, data[name], dim, "float")
        values[name] = fact.value
        sources[name] = fact.source
    unknown = sorted(set(data) - set(_CAL_FIELDS) - {"gpu_key", "device_name", "date", "source", "schema_version"})
    if unknown:
        raise HardwareError(f"{where}: unknown field '{unknown[0]}'")
    return Calibration(gpu_key=gpu_key.strip(), **meta, **values, sources=sources, path=path)


def load_calibration(gpu_key_or_path: str | os.PathLike | GpuSpec) -> Calibration | None:
    """Load measured ceilings.

    Accepts a path to a calibration TOML, or a GPU key / alias / spec, in
    which case ``iomodel/calibration/<key>.toml`` is read.  Returns None when
    no calibration exists for that GPU.  A path that does not exist raises.
    """
    if isinstance(gpu_key_or_path, GpuSpec):
        key = gpu_key_or_path.key
    else:
        text = os.fspath(gpu_key_or_path)
        p = Path(text).expanduser()
        if text.endswith(".toml") or os.sep in text:
            if not p.is_file():
                raise HardwareError(f"{text}: no such file")
            return _parse_calibration(_read_toml(p), p.name, p.resolve())
        key = text
        if key not in list_specs():
            try:
                key = load_spec(key).key
            except HardwareError:
                pass  # a calibration for a user GPU may still exist under its key
    path = CALIBRATION_DIR / f"{key}.toml"
    if not path.is_file():
        return None
    return _parse_calibration(_read_toml(path), path.name, path)


def _toml_str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_num(x: float) -> str:
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    x = float(x)
    if not math.isfinite(x):
        raise HardwareError(f"cannot write non-finite number {x!r}")
    r = repr(x)
    if "e" in r or "E" in r:
        mant, exp = r.lower().split("e")
        if "." not in mant:
            mant += ".0"
        return f"{mant}e{exp}"
    return r


def calibration_toml(cal: Calibration) -> str:
    """The TOML text ``write_calibration`` writes."""
    lines = [
        "# Measured ceilings (iomodel calibration). Datasheet facts live in hardware_data/.",
        "schema_version = 1",
        f"gpu_key = {_toml_str(cal.gpu_key)}",
    ]
    for name in ("device_name", "date", "source"):
        v = getattr(cal, name)
        if v is not None:
            lines.append(f"{name} = {_toml_str(str(v))}")
    for name, (_dim, unit) in _CAL_FIELDS.items():
        v = getattr(cal, name)
        if v is None:
            continue
        if not _is_positive(v):
            raise HardwareError(f"calibration field '{name}' must be a positive number (got {v!r})")
        src = cal.sources.get(name) or cal.source or "measured"
        lines += [
            "",
            f"[{name}]",
            f"value = {_toml_num(v)}",
            f"unit = {_toml_str(unit)}",
            f"source = {_toml_str(src)}",
        ]
    return "\n".join(lines) + "\n"


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder, synced and then
    ``os.replace``d, so a reader never sees a half-written file; on failure the old file
    stays whole and the temp file is removed."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def write_calibration(path: str | os.PathLike, cal: Calibration) -> Path:
    """Write ``cal`` as TOML at ``path`` (atomically, see :func:`write_text_atomic`)."""
    return write_text_atomic(path, calibration_toml(cal))


def calibration_from_dict(d: Mapping[str, Any]) -> Calibration:
    """Build a Calibration from a plain dict (as embedded in a results JSON).

    Accepts either plain numbers or ``{value, unit, source}`` tables.
    """
    kwargs: dict[str, Any] = {}
    sources: dict[str, str] = dict(d.get("sources") or {})
    for name in ("gpu_key", "device_name", "date", "source"):
        if d.get(name) is not None:
            kwargs[name] = str(d[name])
    if "gpu_key" not in kwargs:
        raise HardwareError("calibration: field 'gpu_key' missing")
    for name, (dim, _unit) in _CAL_FIELDS.items():
        v = d.get(name)
        if v is None:
            continue
        if isinstance(v, Mapping):
            fact = _check_fact("calibration", name, v, dim, "float")
            kwargs[name] = fact.value
            sources[name] = fact.source
        else:
            if not _is_positive(v):
                raise HardwareError(
                    f"calibration: field '{name}' must be a positive number (got {v!r})"
                )
            kwargs[name] = float(v)
    return Calibration(**kwargs, sources=sources)


def calibration_to_dict(cal: Calibration) -> dict[str, Any]:
    """Plain-JSON form of a Calibration (numbers in base units, plus sources)."""
    out: dict[str, Any] = {
        f.name: getattr(cal, f.name)
        for f in dataclasses.fields(cal)
        if f.name not in ("sources", "path")
    }
    out["sources"] = dict(cal.sources)
    return out
