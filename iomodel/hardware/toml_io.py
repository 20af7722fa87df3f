"""Reading TOML with errors that name the file, and writing the TOML text of calibrations.

Python ships a TOML reader (``tomllib``) but no writer; calibrations only need strings,
numbers and ``{value, unit, source}`` tables, so a small writer suffices.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from .facts import HardwareError

__all__ = ["read_toml", "toml_str", "toml_num", "fact_table"]


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file; a missing or malformed file is a one-line :class:`HardwareError`."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise HardwareError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise HardwareError(f"{path.name}: not valid TOML: {exc}") from None


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}


def toml_str(s: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = ['"']
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_num(x: float) -> str:
    """A TOML number that reads back to exactly ``x`` (ints stay ints)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    x = float(x)
    if not math.isfinite(x):
        raise HardwareError(f"cannot write non-finite number {x!r}")
    r = repr(x)
    if "e" in r or "E" in r:
        # TOML wants a fraction before the exponent: repr's "1e+22" becomes "1.0e+22"
        mant, exp = r.lower().split("e")
        if "." not in mant:
            mant += ".0"
        return f"{mant}e{exp}"
    return r


def fact_table(name: str, value: float, unit: str, source: str) -> list[str]:
    """The lines of one ``[name]`` table holding a ``{value, unit, source}`` fact."""
    return [
        f"[{name}]",
        f"value = {toml_num(value)}",
        f"unit = {toml_str(unit)}",
        f"source = {toml_str(source)}",
    ]
