"""One sourced number: a ``{value, unit, source}`` table, checked and converted to base units.

Every number of a spec or calibration file goes through :func:`check_fact`, so the checks and
their one-line messages (``<file>: field '<name>' ...``) live in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Union

__all__ = ["HardwareError", "Fact", "UNITS", "Kind", "check_fact", "is_positive", "positive_number"]


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


# Each field has a dimension; the file may write any unit of that dimension and the
# loader converts to the base unit (factor 1).  A field with no dimension is a count
# whose unit is a free label ("SM", "threads").
UNITS: dict[str, dict[str, float]] = {
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

#: what a field holds: "int" (a whole positive number), "float" (a positive number)
#: or ("ints", n) (a list of n whole non-negative numbers, not all zero)
Kind = Union[str, tuple[str, int]]


def is_positive(x: Any) -> bool:
    """A finite number above zero; bools are not numbers here (TOML ``true`` is a mistake)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def positive_number(where: str, name: str, raw: Any) -> Any:
    """``raw`` unchanged if it is a positive number, else the one-line error."""
    if not is_positive(raw):
        raise HardwareError(f"{where}: field '{name}' must be a positive number (got {raw!r})")
    return raw


def check_fact(where: str, name: str, table: Any, dim: str | None, kind: Kind) -> Fact:
    """Check one ``{value, unit, source}`` table of field ``name`` in file ``where``."""
    unit, source = _unit_and_source(where, name, table)
    raw = table["value"]
    if isinstance(kind, tuple):  # a shape or version: no unit conversion
        return Fact(_whole_numbers(where, name, raw, kind[1]), unit, source, raw)
    value = positive_number(where, name, raw) * _unit_factor(where, name, unit, dim)
    if kind == "int":
        return Fact(_whole(where, name, value, raw, unit), unit, source, raw)
    return Fact(float(value), unit, source, raw)


def _unit_and_source(where: str, name: str, table: Any) -> tuple[str, str]:
    if not isinstance(table, Mapping) or "value" not in table:
        raise HardwareError(f"{where}: field '{name}' must be a table with value, unit and source")
    unit = table.get("unit")
    source = table.get("source")
    if not isinstance(unit, str) or not unit.strip():
        raise HardwareError(f"{where}: field '{name}' has no unit")
    if not isinstance(source, str) or not source.strip():
        raise HardwareError(f"{where}: field '{name}' has no source")
    return unit, source


def _whole_numbers(where: str, name: str, raw: Any, n: int) -> tuple[int, ...]:
    if not isinstance(raw, list) or len(raw) != n or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in raw
    ):
        raise HardwareError(f"{where}: field '{name}' must be a list of {n} whole numbers (got {raw!r})")
    if any(v < 0 for v in raw) or all(v == 0 for v in raw):
        raise HardwareError(f"{where}: field '{name}' must hold non-negative numbers (got {raw!r})")
    return tuple(raw)


def _unit_factor(where: str, name: str, unit: str, dim: str | None) -> float:
    if dim is None:
        return 1  # an int factor keeps a count an int
    table_units = UNITS[dim]
    if unit not in table_units:
        raise HardwareError(
            f"{where}: field '{name}' has unit '{unit}' but needs one of {', '.join(table_units)}"
        )
    return table_units[unit]


def _whole(where: str, name: str, value: Any, raw: Any, unit: str) -> int:
    if not isinstance(value, float):
        return value
    # 1.5 KB is 1500 bytes, fine; 132.5 SMs is not: allow only float rounding noise
    if abs(value - round(value)) > 1e-9 * max(1.0, abs(value)):
        raise HardwareError(f"{where}: field '{name}' must be a whole number (got {raw!r} {unit})")
    return int(round(value))
