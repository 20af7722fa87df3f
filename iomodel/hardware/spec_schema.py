"""The spec file's schema as one table, and the short loop that reads a parsed file by it.

``SPEC_FIELDS`` lists every number a spec file holds: its unit dimension, what kind of
number it is, whether it is required, where it goes (a :class:`GpuSpec` attribute or only
``facts``) and how its TOML is laid out.  Fields are checked in table order, so the first
error a broken file reports is stable.  Adding a field is one row here plus one attribute
on :class:`GpuSpec`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .facts import Fact, HardwareError, Kind, check_fact
from .gpu_spec import GpuSpec, WgmmaShape
from .toml_io import check_schema_version

__all__ = ["SpecField", "SPEC_FIELDS", "ARCHES", "parse_spec"]

ARCHES = ("ampere", "hopper")
_TOP_LEVEL = {"schema_version", "key", "name", "arch", "aliases"}
_KEY_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
# datasheet TFLOP/s and per-clock rate x SMs x clock must agree this closely
_CONSISTENCY_TOL = 0.02


@dataclass(frozen=True)
class SpecField:
    """One row of the spec schema."""

    name: str
    dim: str | None = None       # unit dimension (facts.UNITS); None: a count with any unit label
    kind: Kind = "int"           # "int", "float" or ("ints", n)
    required: bool | str = True  # True, False, or the arch that requires it
    on_spec: bool = True         # a GpuSpec attribute of the same name; False: kept in `facts` only
    layout: str = "fact"         # "fact": one {value, unit, source} table;
                                 # "by_dtype": dtype -> fact table; "parts": the sub-facts in `parts`
    parts: tuple[str, ...] = ()
    build: Callable[[Any], Any] | None = None  # turns the checked value into the attribute


SPEC_FIELDS: tuple[SpecField, ...] = (
    SpecField("compute_capability", kind=("ints", 2)),
    SpecField("sm_count"),
    SpecField("clock_hz", "frequency", "float"),
    SpecField("hbm_bandwidth", "bandwidth", "float"),
    SpecField("hbm_bytes", "bytes"),
    SpecField("l2_bytes", "bytes"),
    SpecField("smem_per_sm", "bytes"),
    SpecField("smem_per_block", "bytes"),
    SpecField("smem_reserved_per_block", "bytes"),
    SpecField("regs_per_sm"),
    SpecField("regs_per_block"),
    SpecField("regs_per_thread_max"),
    SpecField("reg_alloc_unit"),
    SpecField("max_threads_per_sm"),
    SpecField("max_warps_per_sm"),
    SpecField("max_blocks_per_sm"),
    SpecField("max_threads_per_block"),
    SpecField("schedulers_per_sm"),
    SpecField("fp32_fma_per_clk_per_sm", "fma_per_clk", "float"),
    SpecField("exp2_per_clk_per_sm", "op_per_clk", "float"),
    SpecField("smem_bytes_per_clk_per_sm", "bytes_per_clk", "float"),
    SpecField("mma_sync_shape", kind=("ints", 3)),
    SpecField("launch_overhead_s", "time", "float"),
    SpecField("max_boost_clock_hz", "frequency", "float", required=False, on_spec=False),
    # no datasheet states it: where a published figure allows an estimate the file says how; a measured
    # one (calibration l2_bandwidth) replaces it
    SpecField("l2_bandwidth", "bandwidth", "float", required=False, on_spec=False),
    SpecField("tensor_flops_per_clk_per_sm", "flop_per_clk", "float", layout="by_dtype"),
    SpecField("tensor_datasheet_flops", "flop_rate", "float", required=False, on_spec=False,
              layout="by_dtype"),
    SpecField("wgmma", required="hopper", layout="parts", parts=("m", "k", "n_multiple", "n_max"),
              build=lambda parts: WgmmaShape(**parts)),
)


def parse_spec(data: Mapping[str, Any], where: str, path: Path | None) -> GpuSpec:
    """Check a parsed spec file (``where`` names it in errors) and build its :class:`GpuSpec`."""
    check_schema_version(data, where)
    header = _read_header(data, where)
    facts: dict[str, Fact] = {}
    values = {f.name: _read_field(data, where, f, header["arch"], facts) for f in SPEC_FIELDS}
    # after the fields, so a misspelt required field says "missing"; a misspelt optional one would
    # otherwise be dropped without a word
    unknown = sorted(set(data) - _TOP_LEVEL - {f.name for f in SPEC_FIELDS})
    if unknown:
        raise HardwareError(f"{where}: unknown field '{unknown[0]}'")
    _cross_check(values, where)
    attrs = {f.name: _attribute(f, values[f.name]) for f in SPEC_FIELDS if f.on_spec}
    return GpuSpec(**header, **attrs, facts=facts, path=path)


def _text(data: Mapping[str, Any], where: str, name: str) -> str:
    v = data.get(name)
    if v is None:
        raise HardwareError(f"{where}: field '{name}' missing")
    if not isinstance(v, str) or not v.strip():
        raise HardwareError(f"{where}: field '{name}' must be a non-empty string")
    return v.strip()


def _read_header(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The top-level strings: key, name, arch and aliases."""
    key = _text(data, where, "key")
    if not _KEY_RE.fullmatch(key):
        raise HardwareError(
            f"{where}: field 'key' must be lower-case letters, digits, '.', '-' or '_' (got {key!r})"
        )
    name = _text(data, where, "name")
    arch = _text(data, where, "arch").lower()
    if arch not in ARCHES:
        raise HardwareError(f"{where}: field 'arch' must be one of {', '.join(ARCHES)} (got {arch!r})")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise HardwareError(f"{where}: field 'aliases' must be a list of strings")
    return {"key": key, "name": name, "arch": arch, "aliases": tuple(a.strip() for a in aliases)}


def _read_field(data: Mapping[str, Any], where: str, f: SpecField, arch: str,
                facts: dict[str, Fact]) -> Any:
    """The checked value of one field (facts recorded into ``facts``); None or {} when absent."""
    if f.name in data:
        return _READERS[f.layout](data[f.name], where, f, facts)
    if f.required is True:
        raise HardwareError(f"{where}: field '{f.name}' missing")
    if f.required == arch:
        raise HardwareError(f"{where}: field '{f.name}' missing (arch is {arch})")
    return {} if f.layout == "by_dtype" else None


def _record(facts: dict[str, Fact], where: str, name: str, table: Any, f: SpecField) -> Any:
    fact = check_fact(where, name, table, f.dim, f.kind)
    facts[name] = fact
    return fact.value


def _read_fact(table: Any, where: str, f: SpecField, facts: dict[str, Fact]) -> Any:
    return _record(facts, where, f.name, table, f)


def _read_by_dtype(table: Any, where: str, f: SpecField, facts: dict[str, Fact]) -> dict[str, Any]:
    if not isinstance(table, Mapping) or "value" in table or not table:
        raise HardwareError(f"{where}: field '{f.name}' must be a table of dtype -> {{value, unit, source}}")
    return {dtype: _record(facts, where, f"{f.name}.{dtype}", sub, f) for dtype, sub in table.items()}


def _read_parts(table: Any, where: str, f: SpecField, facts: dict[str, Fact]) -> dict[str, Any]:
    if not isinstance(table, Mapping):
        raise HardwareError(f"{where}: field '{f.name}' must be a table of {', '.join(f.parts)}")
    values = {}
    for part in f.parts:
        full = f"{f.name}.{part}"
        if part not in table:
            raise HardwareError(f"{where}: field '{full}' missing")
        values[part] = _record(facts, where, full, table[part], f)
    return values


_READERS = {"fact": _read_fact, "by_dtype": _read_by_dtype, "parts": _read_parts}


def _attribute(f: SpecField, value: Any) -> Any:
    if value is None or f.build is None:
        return value
    return f.build(value)


def _cross_check(values: Mapping[str, Any], where: str) -> None:
    """Checks across fields that a wrong (mistyped, mis-copied) file would fail."""
    sm, clk = values["sm_count"], values["clock_hz"]
    stated_flops = values["tensor_datasheet_flops"]
    for dtype, per_clk in values["tensor_flops_per_clk_per_sm"].items():
        stated = stated_flops.get(dtype)
        if stated is None:
            continue
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
        raise HardwareError(f"{where}: field 'max_warps_per_sm' must be max_threads_per_sm / 32")
