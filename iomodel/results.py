"""The results file of a validation run: its typed rows, load and save, and the labels every report prints.

``python -m validation run`` writes one JSON file per run (a header of device, calibration, ceilings,
options and notes, and ``rows``); ``python -m iomodel validate`` reads it back.  Both go through this
module, so the format has one description.  A row is a :class:`ResultRow`; in the file it is a plain
object whose optional keys (``error``, ``prediction``, ``timing``, ...) appear only when set.

A row's ``pass`` says which attention pass it times: ``"fwd"`` (the attention sweep's rows) or ``"bwd"``
(the attention backward: our ``flash_bwd_sm80`` and ``flash_bwd_sm90`` kernels and SDPA's backward
peers).  A file written before the field reads as those rows were (``ResultRow.attention_pass``) and is
rewritten as it was;
the rows of matmul, cross-entropy and the MLP time no attention pass and go without it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .files import not_regular, write_text_atomic
from .results_check import SCHEMA_VERSION, ResultsError, check_header, check_row, json_kind

__all__ = ["SCHEMA_VERSION", "ResultsError", "ResultRow", "as_row", "jsonable", "save_results", "load_results",
           "shape_label", "shape_key", "config_dict", "config_label"]


@dataclass
class ResultRow:
    """One row of a results file: a kernel (or peer) with one config on one shape, whether its output
    passed the check, its measured time and the model's prediction made during the run."""

    kernel: str
    config: dict | None = None            # the config's fields; None for peers
    config_label: str = ""                # as written at run time: committed files keep their labels
    why: str = ""                         # "sweep" (every config at the sweep N), "model-top" or "peer"
    predicted_rank: int | None = None     # the model's rank of the config among the shape's candidates
    shape: dict = field(default_factory=dict)
    ok: bool = False                      # checked and timed
    max_rel_err: float | None = None
    measured_ms: float | None = None
    measured_tflops: float | None = None
    predicted_ms: float | None = None
    predicted_tflops: float | None = None
    predicted_bottleneck: str | None = None
    # written only when set
    prediction: dict | None = None
    peer_prediction: dict | None = None
    prediction_error: str | None = None
    error: str | None = None
    traceback_tail: str | None = None
    timing: dict | None = None
    pass_: str | None = None              # "pass" in the file, as written: "fwd", "bwd" or None (absent)
    extra: dict = field(default_factory=dict)  # keys this version does not know, kept so a rewrite loses none

    @property
    def attention_pass(self) -> str | None:
        """The attention pass the row times: its ``pass``, or for a row written before the field the
        one its kernel implies (``iomodel.algo_peers.default_pass``); None for matmul, cross-entropy
        and the MLP.  Read from here, so that a file rewritten stays as it was written."""
        from .algo_peers import default_pass

        return self.pass_ or default_pass(self.kernel)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "row") -> "ResultRow":
        """A row of a file (``where`` names it in errors); ResultsError naming the field when the
        object is not a results row."""
        check_row(d, where)
        names = {_KEY.get(f.name, f.name): f.name for f in dataclasses.fields(cls) if f.name != "extra"}
        row = cls(**{names[k]: v for k, v in d.items() if k in names})
        row.shape = dict(row.shape)
        row.extra = {k: v for k, v in d.items() if k not in names}
        return row

    def as_dict(self) -> dict[str, Any]:
        """The row as the file holds it: the fixed keys, then the optional ones that are set."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "extra" or (f.name in _WHEN_SET and v is None):
                continue
            out[_KEY.get(f.name, f.name)] = v
        out.update(self.extra)
        return out


_WHEN_SET = ("prediction", "peer_prediction", "prediction_error", "error", "traceback_tail", "timing", "pass_")
#: a field's key in the file where the two differ (``pass`` is a Python keyword)
_KEY = {"pass_": "pass"}


def as_row(row: ResultRow | Mapping[str, Any]) -> ResultRow:
    return row if isinstance(row, ResultRow) else ResultRow.from_dict(row)


# --------------------------------------------------------------------------- save

def jsonable(x: Any) -> Any:
    """Convert to plain JSON types; non-finite floats become None."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, ResultRow):
        return jsonable(x.as_dict())
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return jsonable(dataclasses.asdict(x))
    # numpy scalars and arrays, without importing numpy
    if hasattr(x, "tolist"):
        return jsonable(x.tolist())
    if hasattr(x, "item"):
        try:
            return jsonable(x.item())
        except Exception:  # noqa: BLE001 - not a numpy scalar after all: its str below
            pass
    return str(x)


def save_results(path: str | os.PathLike, obj: Any, *, create_parent: bool = False) -> Path:
    """Write ``obj`` (a results dict, rows typed or plain) as JSON to ``path`` atomically: a reader,
    or a run interrupted mid-write, never sees a half-written file.  ``path`` is refused as
    :func:`iomodel.files.write_text_atomic` refuses (OutputError); ``create_parent``: the folder is
    the tools' own and may be created."""
    text = json.dumps(jsonable(obj), indent=1, allow_nan=False) + "\n"
    return write_text_atomic(path, text, create_parent=create_parent)


# --------------------------------------------------------------------------- load

def _read(path: Path) -> dict[str, Any]:
    """The JSON object of a file; ResultsError naming the file when it is not one."""
    try:
        kind = not_regular(os.stat(path).st_mode)
        if kind is not None:  # a named pipe would block the read; a device never ends
            raise ResultsError(f"{path}: {kind}, not a results file")
        raw = path.read_bytes()
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise ResultsError(f"{path}: empty file; not a validation results file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ResultsError(f"{path}: not UTF-8 text (a binary file?); not a validation results file") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; so are huge numbers
        raise ResultsError(f"{path}: not valid JSON: {str(exc).splitlines()[0] if str(exc) else exc!r}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: not a JSON object (got {json_kind(data)}); not a validation results file")
    data["_source"] = str(path)
    return data


def _typed(data: dict[str, Any]) -> dict[str, Any]:
    """Check a results dict and type its rows."""
    src = data["_source"]
    check_header(data, src)
    data["rows"] = [r if isinstance(r, ResultRow) else ResultRow.from_dict(r, f"{src}: row {i}")
                    for i, r in enumerate(data["rows"])]
    return data


def load_results(paths: str | os.PathLike | Mapping | Iterable) -> list[dict[str, Any]]:
    """Results files (a path, an already loaded dict, or a list of them) as dicts with typed ``rows``
    and ``_source`` (the path).  Raises ResultsError naming the file (and the row and field) on
    anything that is not a results file of this schema version (iomodel.results_check)."""
    if isinstance(paths, (str, os.PathLike, Mapping)):
        paths = [paths]
    out = []
    for p in paths:
        if isinstance(p, Mapping):
            data = dict(p)
            data.setdefault("_source", str(data.get("device", "results")))
        else:
            data = _read(Path(p))
        out.append(_typed(data))
    return out


# --------------------------------------------------------------------------- labels

def shape_label(shape: Mapping[str, Any]) -> str:
    """``d128 N4096 B4H16 causal``: ``/H_kv`` after H for grouped K/V heads, the dtype when not bf16;
    an algorithm's shape by its sizes (``M8192 N8192 K8192``, ``iomodel.algo_peers``)."""
    from .algo_peers import algo_shape_label

    if "N_q" not in shape and algo_shape_label(shape):
        return algo_shape_label(shape)
    n = f"N{shape['N_q']}" if shape["N_q"] == shape["N_k"] else f"Nq{shape['N_q']}Nk{shape['N_k']}"
    kv = "" if shape.get("H_kv", shape["H"]) == shape["H"] else f"/{shape['H_kv']}"
    dt = "" if shape.get("dtype", "bf16") == "bf16" else f" {shape['dtype']}"
    return (f"d{shape['d']} {n} B{shape['B']}H{shape['H']}{kv}{' causal' if shape.get('causal') else ''}{dt}"
            f"{_feature_label(shape)}")


def _feature_label(shape: Mapping[str, Any]) -> str:
    """`` w4096,0 softcap30 alibi``: a shape's window and score modifiers ("" without)."""
    parts = []
    left, right = shape.get("window_left", -1), shape.get("window_right", -1)
    if left >= 0 or right >= 0:
        parts.append(f"w{left},{right}")
    if shape.get("softcap", 0) > 0:
        parts.append(f"softcap{shape['softcap']:g}")
    if shape.get("alibi"):
        parts.append("alibi")
    return "".join(" " + p for p in parts)


def shape_key(shape: Mapping[str, Any]) -> str:
    """A shape as a hashable string: rows with equal keys have the same shape."""
    return json.dumps(dict(shape), sort_keys=True)


def config_dict(cfg: Any) -> dict[str, Any]:
    """A tile configuration (dict, ``as_dict()`` object or dataclass) as a plain dict; None -> {}."""
    if cfg is None:
        return {}
    if isinstance(cfg, Mapping):
        return dict(cfg)
    if hasattr(cfg, "as_dict"):
        return dict(cfg.as_dict())
    if dataclasses.is_dataclass(cfg):
        return dataclasses.asdict(cfg)
    return dict(vars(cfg))


def config_label(kernel: str, cfg: Any) -> str:
    """A row's config in a few characters: the family's own label (``128x64 w4 s2``, ``128x128 c2 s3``,
    ``128x128x32 w4 s3``); ``-`` without a config; ``field=value,...`` for a kernel outside the
    registry or a config missing a field the label names."""
    from . import families

    d = config_dict(cfg)
    if not d:
        return "-"
    fam = families.FAMILIES.get(kernel)
    if fam is not None:
        try:
            return fam.label(d)
        except (KeyError, IndexError):
            pass
    return ",".join(f"{k}={v}" for k, v in d.items())
