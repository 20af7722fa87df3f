"""What a results file must hold before any report reads it: the header's types, the schema version,
and every row's required fields and value types.

Each check raises a one-line :class:`ResultsError` that names the file, and for a row its index and
field (``run.json: row 3: field 'shape.N_k' missing``), so a report never dies on a ``KeyError`` or a
``TypeError`` deep inside the statistics.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from .algo_peers import ALGO_SIZES, algo_of

__all__ = ["SCHEMA_VERSION", "ResultsError", "json_kind", "check_header", "check_row"]

#: version of the file format written now; a file without ``schema_version`` is version 1
SCHEMA_VERSION = 1


class ResultsError(ValueError):
    """A results file that cannot be read, in one line naming the file."""


_NUMBER = (int, float)
# optional header keys a report reads, and the JSON types they may hold (null is always allowed)
_HEADER = {"device": str, "gpu_key": str, "calibration": Mapping, "notes": list, "complete": bool,
           "rows_planned": int}
# optional row keys and their types (null always allowed); numbers are finite and not negative
_ROW = {"config": Mapping, "config_label": str, "why": str, "predicted_rank": int, "max_rel_err": _NUMBER,
        "measured_ms": _NUMBER, "measured_tflops": _NUMBER, "predicted_ms": _NUMBER,
        "predicted_tflops": _NUMBER, "predicted_bottleneck": str, "prediction": Mapping,
        "peer_prediction": Mapping, "prediction_error": str, "error": str, "traceback_tail": str,
        "timing": Mapping, "pass": str}
PASSES = ("fwd", "bwd")   # the attention pass a row times (``pass``; absent: iomodel.algo_peers.default_pass)
# the sizes every report reads (labels, FLOPs); H_kv, causal and dtype have defaults
_SHAPE_SIZES = ("B", "H", "N_q", "N_k", "d")
_SHAPE_OPTIONAL = {"H_kv": int, "causal": bool, "dtype": str}
_TYPE_NAMES = {str: "a string", bool: "true or false", int: "a whole number", list: "a list",
               Mapping: "an object", _NUMBER: "a number"}


def json_kind(v: Any) -> str:
    """What a parsed JSON value is, in the words of an error line."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    for t, name in ((str, "a string"), (_NUMBER, "a number"), (list, "a list"), (Mapping, "an object")):
        if isinstance(v, t):
            return name
    return type(v).__name__


def _is(v: Any, t: Any) -> bool:
    """``v`` is of JSON type ``t``; true/false is not a number (Python's bool is an int)."""
    if isinstance(v, bool):
        return t is bool
    if not isinstance(v, t):
        return False
    return not isinstance(v, float) or math.isfinite(v)


def _typed(where: str, name: str, v: Any, t: Any) -> None:
    if not _is(v, t):
        raise ResultsError(f"{where}: field '{name}' must be {_TYPE_NAMES[t]} (got {json_kind(v)} {v!r:.40})")


def check_header(data: Mapping[str, Any], src: str) -> None:
    """The file's top level: a ``rows`` list, a supported ``schema_version``, typed header fields."""
    if not isinstance(data.get("rows"), list):
        raise ResultsError(f"{src}: no 'rows' list; not a validation results file")
    version = data.get("schema_version", 1)
    if not _is(version, int) or version != SCHEMA_VERSION:
        why = "newer than" if _is(version, int) and version > SCHEMA_VERSION else "not a version"
        raise ResultsError(f"{src}: schema_version {version!r} is {why} this iomodel reads ({SCHEMA_VERSION})")
    for name, t in _HEADER.items():
        if data.get(name) is not None:
            _typed(src, name, data[name], t)
    if (data.get("rows_planned") or 0) < 0:
        raise ResultsError(f"{src}: field 'rows_planned' must not be negative")


def _check_shape(shape: Mapping[str, Any], where: str, kernel: str = "") -> None:
    """The sizes of an attention shape, or of the algorithm a peer kernel runs (``iomodel.algo_peers``)."""
    algo = algo_of(kernel)
    for name in ALGO_SIZES[algo] if algo else _SHAPE_SIZES:
        v = shape.get(name)
        if v is None:
            raise ResultsError(f"{where}: field 'shape.{name}' missing")
        if not _is(v, int) or v <= 0:
            raise ResultsError(f"{where}: field 'shape.{name}' must be a positive whole number (got {v!r:.40})")
    optional = _SHAPE_OPTIONAL.items() if not algo else (("dtype", str), ("causal", bool))
    for name, t in optional:
        if shape.get(name) is not None:
            _typed(where, f"shape.{name}", shape[name], t)


def check_row(d: Any, where: str) -> None:
    """One row: an object with ``kernel`` (a string), ``shape`` (the sizes) and ``ok``, typed fields."""
    if not isinstance(d, Mapping):
        raise ResultsError(f"{where}: not an object (got {json_kind(d)}); not a validation results row")
    for name, t in (("kernel", str), ("shape", Mapping), ("ok", bool)):
        if name not in d:
            raise ResultsError(f"{where}: field '{name}' missing; not a validation results row")
        _typed(where, name, d[name], t)
    if not d["kernel"].strip():
        raise ResultsError(f"{where}: field 'kernel' is empty")
    _check_shape(d["shape"], where, d["kernel"])
    for name, t in _ROW.items():
        v = d.get(name)
        if v is None:
            continue
        _typed(where, name, v, t)
        if t in (_NUMBER, int) and v < 0:
            raise ResultsError(f"{where}: field '{name}' must not be negative (got {v!r})")
    if d.get("pass") is not None and d["pass"] not in PASSES:
        raise ResultsError(f"{where}: field 'pass' must be one of {', '.join(PASSES)} (got {d['pass']!r:.40})")
