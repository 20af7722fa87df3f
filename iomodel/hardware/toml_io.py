"""Reading TOML with errors that name the file, and writing the TOML text of calibrations.

Python ships a TOML reader (``tomllib``) but no writer; calibrations only need strings,
numbers and ``{value, unit, source}`` tables, so a small writer suffices.
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Any, Mapping

from ..files import not_regular
from .facts import HardwareError

__all__ = ["SCHEMA_VERSION", "read_toml", "check_schema_version", "toml_str", "toml_num", "fact_table"]

#: the version of spec and calibration files this iomodel reads and writes; a file without the key is 1
SCHEMA_VERSION = 1


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file; a missing, unreadable, binary or malformed file is a one-line :class:`HardwareError`."""
    try:
        kind = not_regular(os.stat(path).st_mode)
        if kind is not None:  # a named pipe would block the read
            raise HardwareError(f"{path}: {kind}, not a TOML file")
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise HardwareError(f"{path}: no such file") from None
    except OSError as exc:
        raise HardwareError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise HardwareError(f"{path.name}: not UTF-8 text (a binary file?); not a TOML file") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise HardwareError(f"{path.name}: not valid TOML: {exc}") from None


def check_schema_version(data: Mapping[str, Any], where: str) -> None:
    """``schema_version`` absent (version 1) or the one this iomodel reads; anything else is refused."""
    v = data.get("schema_version", SCHEMA_VERSION)
    if isinstance(v, bool) or not isinstance(v, int) or v != SCHEMA_VERSION:
        raise HardwareError(f"{where}: schema_version {v!r} is not supported (this iomodel reads {SCHEMA_VERSION})")


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
