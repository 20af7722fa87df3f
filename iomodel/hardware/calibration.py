"""Measured ceilings of one device (``iomodel/calibration/<key>.toml``): read, write, round trip.

Any number may be missing (not measured).  In files every number is a
``{value, unit, source}`` table; the plain dict embedded in validation results JSON may
also hold bare numbers in base units.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..files import write_text_atomic
from .facts import HardwareError, check_fact, is_positive, positive_number
from .gpu_spec import GpuSpec
from .spec import list_specs, load_spec
from .toml_io import check_schema_version, fact_table, read_toml, toml_str

__all__ = [
    "CALIBRATION_DIR", "CalField", "CAL_FIELDS", "Calibration", "load_calibration",
    "write_calibration", "calibration_toml", "calibration_from_dict", "calibration_to_dict",
]

CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "calibration"


@dataclass(frozen=True)
class CalField:
    """One measured number: its unit dimension and the unit ``write_calibration`` writes."""

    name: str
    dim: str
    unit: str


CAL_FIELDS: tuple[CalField, ...] = (
    CalField("clock_hz", "frequency", "Hz"),
    CalField("gemm_flops", "flop_rate", "FLOP/s"),
    CalField("mma_sync_flops_per_clk_per_sm", "flop_per_clk", "FLOP/clk/SM"),
    CalField("copy_bandwidth", "bandwidth", "B/s"),
    CalField("l2_bandwidth", "bandwidth", "B/s"),
    CalField("exp2_per_clk_per_sm", "op_per_clk", "op/clk/SM"),
    CalField("fp32_fma_per_clk_per_sm", "fma_per_clk", "FMA/clk/SM"),
    CalField("hbm_latency_s", "time", "s"),
)
# the optional top-level strings, in the order they are written
_META = ("device_name", "date", "source")
_FILE_KEYS = {"gpu_key", *_META, "schema_version", *(f.name for f in CAL_FIELDS)}


@dataclass(frozen=True)
class Calibration:
    """Ceilings measured on one device; any number may be None (not measured).

    ``gemm_flops``: bf16 dense 8192^3 GEMM through torch (FLOP/s).
    ``copy_bandwidth``: device-to-device copy, bytes read + written per second.
    ``l2_bandwidth``: bytes read per second from a buffer resident in L2, all SMs reading.
    ``*_per_clk_per_sm``: unit rates at ``clock_hz`` (the SM clock sampled
    during the run).  ``hbm_latency_s``: Little's law on a read with few bytes
    in flight (bytes in flight / the bandwidth they drew), the latency a grid's
    loads wait when HBM is far from busy.  ``sources`` says how each number was obtained.
    """

    gpu_key: str
    device_name: str | None = None
    date: str | None = None
    source: str | None = None
    clock_hz: float | None = None
    gemm_flops: float | None = None
    mma_sync_flops_per_clk_per_sm: float | None = None
    copy_bandwidth: float | None = None
    l2_bandwidth: float | None = None
    exp2_per_clk_per_sm: float | None = None
    fp32_fma_per_clk_per_sm: float | None = None
    hbm_latency_s: float | None = None
    sources: dict[str, str] = field(default_factory=dict, hash=False, compare=False, repr=False)
    path: Path | None = field(default=None, compare=False, repr=False)

    def measured(self) -> dict[str, float]:
        """The numbers that were measured, by field name."""
        return {f.name: getattr(self, f.name) for f in CAL_FIELDS if getattr(self, f.name) is not None}

    def mma_sync_flops(self, sm_count: int) -> float | None:
        """Device mma.sync FLOP/s at the calibrated clock, if both are known."""
        if self.mma_sync_flops_per_clk_per_sm is None or self.clock_hz is None:
            return None
        return self.mma_sync_flops_per_clk_per_sm * sm_count * self.clock_hz


def _read_measured(data: Mapping[str, Any], where: str, bare_ok: bool) -> tuple[dict, dict]:
    """(values in base units, sources) of the measured numbers present in ``data``.

    ``bare_ok``: a plain number (already in base units, no source) is accepted too.
    """
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for f in CAL_FIELDS:
        v = data.get(f.name)
        if v is None:
            continue
        if bare_ok and not isinstance(v, Mapping):
            values[f.name] = float(positive_number(where, f.name, v))
            continue
        fact = check_fact(where, f.name, v, f.dim, "float")
        values[f.name] = fact.value
        sources[f.name] = fact.source
    return values, sources


def _meta_text(where: str, name: str, v: Any) -> str | None:
    if isinstance(v, (_dt.date, _dt.datetime)):  # an unquoted TOML date
        v = v.isoformat()
    if v is not None and not isinstance(v, str):
        raise HardwareError(f"{where}: field '{name}' must be a string")
    return v


def _check_gpu_key(data: Mapping[str, Any], where: str, expected: str | None) -> str:
    """The file's ``gpu_key``: the key it was asked for (``expected``), or else a shipped GPU's key, so
    a calibration is never silently applied to a GPU it was not measured on."""
    gpu_key = data.get("gpu_key")
    if not isinstance(gpu_key, str) or not gpu_key.strip():
        raise HardwareError(f"{where}: field 'gpu_key' missing")
    gpu_key = gpu_key.strip()
    if expected is not None and gpu_key != expected:
        raise HardwareError(f"{where}: field 'gpu_key' is {gpu_key!r} but the file is for {expected!r}")
    if expected is None and gpu_key not in list_specs():
        raise HardwareError(f"{where}: field 'gpu_key' is {gpu_key!r}, not a known GPU "
                            f"(known are {', '.join(list_specs())})")
    return gpu_key


def _parse_calibration(data: Mapping[str, Any], where: str, path: Path | None,
                       expected: str | None = None) -> Calibration:
    check_schema_version(data, where)
    gpu_key = _check_gpu_key(data, where, expected)
    meta = {name: _meta_text(where, name, data.get(name)) for name in _META}
    values, sources = _read_measured(data, where, bare_ok=False)
    unknown = sorted(set(data) - _FILE_KEYS)
    if unknown:  # a misspelt field would otherwise be dropped without a word
        raise HardwareError(f"{where}: unknown field '{unknown[0]}'")
    return Calibration(gpu_key=gpu_key, **meta, **values, sources=sources, path=path)


def _calibration_key(name: str) -> str:
    """The spec key a calibration file is named after: a key or alias resolves to its key."""
    if name in list_specs():
        return name
    try:
        return load_spec(name).key
    except HardwareError:
        return name  # a calibration for a user GPU may still exist under its key


def load_calibration(gpu_key_or_path: str | os.PathLike | GpuSpec) -> Calibration | None:
    """Load measured ceilings.

    Accepts a path to a calibration TOML, or a GPU key / alias / spec, in
    which case ``iomodel/calibration/<key>.toml`` is read.  Returns None when
    no calibration exists for that GPU.  A path that does not exist raises, and so does a
    file whose ``gpu_key`` is not the GPU asked for (by key) or not a shipped GPU (by path).
    """
    if isinstance(gpu_key_or_path, GpuSpec):
        key = gpu_key_or_path.key
    else:
        text = os.fspath(gpu_key_or_path)
        if text.endswith(".toml") or os.sep in text:
            p = Path(text).expanduser()
            if not os.path.lexists(p):
                raise HardwareError(f"{text}: no such file")
            return _parse_calibration(read_toml(p), p.name, p.resolve())
        key = _calibration_key(text)
    path = CALIBRATION_DIR / f"{key}.toml"
    if not path.is_file():
        return None
    return _parse_calibration(read_toml(path), path.name, path, expected=key)


def calibration_toml(cal: Calibration) -> str:
    """The TOML text ``write_calibration`` writes."""
    lines = [
        "# Measured ceilings (iomodel calibration). Datasheet facts live in hardware_data/.",
        "schema_version = 1",
        f"gpu_key = {toml_str(cal.gpu_key)}",
    ]
    lines += [f"{name} = {toml_str(str(getattr(cal, name)))}" for name in _META if getattr(cal, name) is not None]
    for f in CAL_FIELDS:
        v = getattr(cal, f.name)
        if v is None:
            continue
        if not is_positive(v):
            raise HardwareError(f"calibration field '{f.name}' must be a positive number (got {v!r})")
        src = cal.sources.get(f.name) or cal.source or "measured"
        lines += ["", *fact_table(f.name, v, f.unit, src)]
    return "\n".join(lines) + "\n"


def write_calibration(path: str | os.PathLike, cal: Calibration, *, create_parent: bool = False) -> Path:
    """Write ``cal`` as TOML at ``path`` (atomically; refused as :func:`iomodel.files.write_text_atomic`
    refuses; ``create_parent``: the folder is the tools' own and may be created)."""
    return write_text_atomic(path, calibration_toml(cal), create_parent=create_parent)


def calibration_from_dict(d: Mapping[str, Any]) -> Calibration:
    """Build a Calibration from a plain dict (as embedded in a results JSON).

    Accepts either plain numbers or ``{value, unit, source}`` tables.
    """
    sources: dict[str, str] = dict(d.get("sources") or {})
    meta = {name: str(d[name]) for name in ("gpu_key", *_META) if d.get(name) is not None}
    if "gpu_key" not in meta:
        raise HardwareError("calibration: field 'gpu_key' missing")
    values, table_sources = _read_measured(d, "calibration", bare_ok=True)
    return Calibration(**meta, **values, sources={**sources, **table_sources})


def calibration_to_dict(cal: Calibration) -> dict[str, Any]:
    """Plain-JSON form of a Calibration (numbers in base units, plus sources)."""
    out: dict[str, Any] = {
        f.name: getattr(cal, f.name)
        for f in dataclasses.fields(cal)
        if f.name not in ("sources", "path")
    }
    out["sources"] = dict(cal.sources)
    return out
