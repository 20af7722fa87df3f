"""Accuracy statistics of the model against measured results (CPU only, numpy).

A results JSON (written by ``python -m validation run``) holds measured times
of our kernels and of peers, with the calibration measured in the same run.
``evaluate`` recomputes every prediction with the *current* model
(``iomodel.api``), using that calibration, and reports:

* per-row signed error of predicted time: ``(predicted - measured) / measured``
  in percent (positive = the model thinks it slower than it is);
* median and max absolute error over our kernels' rows (``flash_sm80``,
  ``flash_sm90``, ``unfused``) and, separately, over peers' rows;
* for each (kernel, shape) timed with >= 3 tile configs: the Spearman rank
  correlation between predicted and measured time, and whether the model's
  top-ranked config is within 5% of the best measured one (top-1);
* the pooled mean of those correlations.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "OUR_KERNELS",
    "PEER_KERNELS",
    "TOP1_TOLERANCE",
    "MIN_GROUP",
    "rankdata",
    "spearman",
    "Stats",
    "RowEval",
    "GroupEval",
    "Report",
    "load_results",
    "evaluate",
    "format_report",
    "conventional_flops",
    "shape_label",
    "shape_key",
    "config_dict",
    "config_label",
]

from . import api  # noqa: E402
from .api import PEERS as PEER_KERNELS  # noqa: E402  (the SDPA backends timed beside our kernels)
from .api import conventional_flops  # noqa: E402  (the one FLOP convention of every report)

OUR_KERNELS = ("flash_sm80", "flash_sm90", "unfused")
TOP1_TOLERANCE = 0.05  # the model's top config counts as right within 5% of the best measured
MIN_GROUP = 3          # configs needed in a (kernel, shape) group for rank statistics


# --------------------------------------------------------------------------- rank statistics

def rankdata(x: Sequence[float]) -> np.ndarray:
    """Ranks 1..n, ties given the average of the ranks they span."""
    a = np.asarray(x, dtype=float)
    n = a.size
    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(n, dtype=float)
    sorted_a = a[order]
    i = 0
    while i < n:
        j = i
        while j + 1 < n and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson correlation of average ranks.

    None when fewer than two pairs, or when either side is all ties (the
    correlation is undefined then)."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} x values but {len(y)} y values")
    if len(x) < 2:
        return None
    rx, ry = rankdata(x), rankdata(y)
    dx, dy = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if den == 0.0:
        return None
    return float(dx @ dy) / den


# --------------------------------------------------------------------------- labels (the harness writes them too)

def shape_label(shape: Mapping[str, Any]) -> str:
    """``d128 N4096 B4H16 causal``: ``/H_kv`` after H for grouped K/V heads, the dtype when not bf16."""
    n = f"N{shape['N_q']}" if shape["N_q"] == shape["N_k"] else f"Nq{shape['N_q']}Nk{shape['N_k']}"
    kv = "" if shape.get("H_kv", shape["H"]) == shape["H"] else f"/{shape['H_kv']}"
    dt = "" if shape.get("dtype", "bf16") == "bf16" else f" {shape['dtype']}"
    return f"d{shape['d']} {n} B{shape['B']}H{shape['H']}{kv}{' causal' if shape.get('causal') else ''}{dt}"


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
    """Short label of a row's config, as results files record it: ``128x64w4s2`` (flash_sm80),
    ``128x128c2s3`` (flash_sm90), ``128x128x32w4s3`` (unfused), ``-`` without a config."""
    d = config_dict(cfg)
    if not d:
        return "-"
    if kernel == "flash_sm80" and {"block_m", "block_n", "warps", "stages"} <= d.keys():
        return f"{d['block_m']}x{d['block_n']}w{d['warps']}s{d['stages']}"
    if kernel == "flash_sm90" and {"block_m", "block_n", "stages"} <= d.keys():
        return f"{d['block_m']}x{d['block_n']}c{d.get('consumers', '?')}s{d['stages']}"
    if kernel == "unfused" and {"block_m", "block_n", "block_k"} <= d.keys():
        return f"{d['block_m']}x{d['block_n']}x{d['block_k']}w{d.get('warps', '?')}s{d.get('stages', '?')}"
    for attr in ("short", "name"):
        v = getattr(cfg, attr, None)
        if callable(v):
            v = v()
        if isinstance(v, str):
            return v
    return ",".join(f"{k}={v}" for k, v in d.items())


# --------------------------------------------------------------------------- data


@dataclass
class Stats:
    """Absolute % error statistics of predicted time over a set of rows."""

    n: int = 0
    median_abs_pct: float | None = None
    max_abs_pct: float | None = None
    mean_signed_pct: float | None = None

    @classmethod
    def of(cls, errs: Iterable[float]) -> "Stats":
        e = np.asarray([v for v in errs if v is not None and math.isfinite(v)], dtype=float)
        if e.size == 0:
            return cls()
        a = np.abs(e)
        return cls(int(e.size), float(np.median(a)), float(a.max()), float(e.mean()))


@dataclass
class RowEval:
    source: str
    device: str
    kernel: str
    config: dict | None
    config_label: str
    shape: dict
    is_peer: bool
    measured_s: float
    predicted_s: float | None
    err_pct: float | None
    bottleneck: str | None
    flops: float
    hbm_bytes: float | None
    prediction_source: str | None      # "recomputed", "stored" or None
    prediction_error: str | None = None

    @property
    def measured_tflops(self) -> float:
        return self.flops / self.measured_s / 1e12

    @property
    def predicted_tflops(self) -> float | None:
        return self.flops / self.predicted_s / 1e12 if self.predicted_s else None


@dataclass
class GroupEval:
    source: str
    kernel: str
    shape: dict
    n: int
    spearman: float | None
    top_config: str
    best_config: str
    top_measured_s: float
    best_measured_s: float
    top1: bool

    @property
    def top_slowdown_pct(self) -> float:
        return (self.top_measured_s / self.best_measured_s - 1.0) * 100.0


@dataclass
class Report:
    rows: list[RowEval] = field(default_factory=list)
    groups: list[GroupEval] = field(default_factory=list)
    ours: Stats = field(default_factory=Stats)
    peers: Stats = field(default_factory=Stats)
    per_kernel: dict[str, Stats] = field(default_factory=dict)
    pooled_spearman: float | None = None
    shape_groups: list[GroupEval] = field(default_factory=list)   # every family's configs of one shape
    pooled_spearman_all: float | None = None
    top1_hits: int = 0
    top1_total: int = 0
    failed: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    gpu_key: str | None = None
    calibrations: list[dict] = field(default_factory=list)
    recomputed: bool = True


# --------------------------------------------------------------------------- loading

def load_results(paths: str | os.PathLike | Mapping | Iterable) -> list[dict[str, Any]]:
    """Read results JSON files (a path, a dict, or a list of them)."""
    if isinstance(paths, (str, os.PathLike, Mapping)):
        paths = [paths]
    out = []
    for p in paths:
        if isinstance(p, Mapping):
            data = dict(p)
            data.setdefault("_source", str(data.get("device", "results")))
        else:
            path = Path(p)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: not valid JSON: {exc}") from None
            data["_source"] = str(path)
        if not isinstance(data.get("rows"), list):
            raise ValueError(f"{data['_source']}: no 'rows' list; not a validation results file")
        out.append(data)
    return out


# --------------------------------------------------------------------------- evaluation

def _pred_time(pred: Any) -> tuple[float | None, str | None, float | None]:
    """(time_s, bottleneck, hbm_bytes) of a Prediction or dict; time None if unusable."""
    if pred is None:
        return None, None, None
    if not isinstance(pred, Mapping) and not hasattr(pred, "time_s") and hasattr(pred, "as_dict"):
        pred = pred.as_dict()
    get = (lambda k: pred.get(k)) if isinstance(pred, Mapping) else (lambda k: getattr(pred, k, None))
    t = get("time_s")
    if get("feasible") is False:
        t = None
    if t is not None:
        t = float(t)
        if not (math.isfinite(t) and t > 0):
            t = None
    hb = get("hbm_bytes")
    if t is None:
        return None, None, None
    return t, get("bottleneck"), (float(hb) if hb is not None else None)


def _model_prediction(kernel, spec, shape, config, calibration):
    return api.predict(kernel, spec, shape, config, calibration=calibration)


def _model_peer_prediction(name, spec, shape, calibration):
    return api.peer_prediction(name, spec, shape, calibration=calibration)


def _resolve_calibration(calibration, stored: Mapping | None, notes: list[str]):
    from iomodel.hardware import Calibration, HardwareError, calibration_from_dict, load_calibration

    if calibration is not None:
        if isinstance(calibration, Calibration):
            return calibration
        return load_calibration(calibration)
    if stored:
        try:
            return calibration_from_dict(stored)
        except HardwareError as exc:
            notes.append(f"stored calibration unusable ({exc}); predicting from the datasheet")
    return None


def _rank_group(source: str, kernel: str, rows: Sequence[RowEval], label: Callable[[RowEval], str]) -> GroupEval:
    """Rank statistics of rows timed on one shape: Spearman's rho of predicted vs measured time, and
    whether the model's top row is within TOP1_TOLERANCE of the fastest measured one (a tie at the
    top is judged by its slowest member)."""
    rho = spearman([r.predicted_s for r in rows], [r.measured_s for r in rows])
    best = min(rows, key=lambda r: r.measured_s)
    tmin = min(r.predicted_s for r in rows)
    top = max((r for r in rows if r.predicted_s <= tmin * (1 + 1e-12)), key=lambda r: r.measured_s)
    ok = top.measured_s <= best.measured_s * (1.0 + TOP1_TOLERANCE)
    return GroupEval(source, kernel, rows[0].shape, len(rows), rho, label(top), label(best),
                     top.measured_s, best.measured_s, ok)


def _mean_spearman(groups: Sequence[GroupEval]) -> float | None:
    rhos = [g.spearman for g in groups if g.spearman is not None]
    return float(np.mean(rhos)) if rhos else None


def evaluate(
    results: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    calibration: Any = None,
    *,
    recompute: bool = True,
    predictor: Callable[..., Any] | None = None,
    peer_predictor: Callable[..., Any] | None = None,
) -> Report:
    """Statistics of predicted vs measured time.

    ``results``: dicts from :func:`load_results` (or one dict).
    ``calibration``: a Calibration or path used for every file; default: the
    calibration stored in each file.  ``recompute=False`` uses the predictions
    stored in the file.  ``predictor(kernel, spec, shape, config, calibration)``
    and ``peer_predictor(peer, spec, shape, calibration)`` replace the model
    (tests use this); by default they call ``iomodel.api``.  A row whose
    prediction cannot be recomputed falls back to the stored one, and says so.
    """
    from iomodel.hardware import HardwareError, load_spec, spec_for_device

    if isinstance(results, Mapping):
        results = [results]
    rep = Report(recomputed=recompute)
    predictor = predictor or _model_prediction
    peer_predictor = peer_predictor or _model_peer_prediction

    recompute_failures = 0
    for res in results:
        source = str(res.get("_source", res.get("device", "results")))
        device = str(res.get("device", "?"))
        if device not in rep.devices:
            rep.devices.append(device)
        spec = None
        try:
            spec = load_spec(res["gpu_key"]) if res.get("gpu_key") else spec_for_device(device)
        except HardwareError as exc:
            rep.notes.append(f"{source}: {exc}; using stored predictions")
        if spec is not None and rep.gpu_key is None:
            rep.gpu_key = spec.key
        cal = _resolve_calibration(calibration, res.get("calibration"), rep.notes)
        if cal is not None:
            rep.calibrations.append({"source": source, "gpu_key": cal.gpu_key, "date": cal.date, **cal.measured()})
        for row in res["rows"]:
            kernel = row.get("kernel")
            if not row.get("ok") or not row.get("measured_ms"):
                rep.failed.append({"source": source, "kernel": kernel, "config": row.get("config_label"),
                                   "shape": row.get("shape"), "error": row.get("error", "not ok")})
                continue
            shape = dict(row["shape"])
            is_peer = kernel in PEER_KERNELS
            cfg = row.get("config")
            stored = row.get("peer_prediction" if is_peer else "prediction") or {}
            t_stored = row["predicted_ms"] / 1e3 if row.get("predicted_ms") else None
            bott_stored = row.get("predicted_bottleneck")
            hb_stored = stored.get("hbm_bytes") if isinstance(stored, Mapping) else None
            t, bott, hb, how, perr = None, None, None, None, None
            if recompute and spec is not None:
                try:
                    if is_peer:
                        pred = peer_predictor(kernel, spec, shape, cal)
                    else:
                        pred = predictor(kernel, spec, shape, dict(cfg or {}), cal)
                    t, bott, hb = _pred_time(pred)
                    how = "recomputed" if t is not None else None
                    if t is None and pred is not None:
                        perr = "the model finds this configuration infeasible"
                except Exception as exc:  # noqa: BLE001
                    perr = f"{type(exc).__name__}: {exc}"
                    recompute_failures += 1
                    if t_stored is not None:
                        t, bott, hb, how = t_stored, bott_stored, hb_stored, "stored"
            elif t_stored is not None:
                t, bott, hb, how = t_stored, bott_stored, hb_stored, "stored"
            measured = row["measured_ms"] / 1e3
            err = (t - measured) / measured * 100.0 if t is not None else None
            rep.rows.append(RowEval(
                source=source, device=device, kernel=kernel, config=cfg,
                config_label=row.get("config_label") or config_label(kernel, cfg),
                shape=shape, is_peer=is_peer, measured_s=measured, predicted_s=t, err_pct=err,
                bottleneck=bott, flops=conventional_flops(shape), hbm_bytes=hb,
                prediction_source=how, prediction_error=perr))
    if recompute_failures:
        rep.notes.append(f"{recompute_failures} rows could not be re-predicted by the current model "
                         f"(see prediction_error); their stored predictions were used where present")

    ours = [r for r in rep.rows if r.kernel in OUR_KERNELS]
    rep.ours = Stats.of(r.err_pct for r in ours)
    rep.peers = Stats.of(r.err_pct for r in rep.rows if r.is_peer)
    for k in sorted({r.kernel for r in rep.rows}, key=lambda k: (k not in OUR_KERNELS, k)):
        rep.per_kernel[k] = Stats.of(r.err_pct for r in rep.rows if r.kernel == k)

    # rank statistics per (file, kernel, shape)
    groups: dict[tuple[str, str, str], list[RowEval]] = {}
    for r in ours:
        if r.predicted_s is not None:
            groups.setdefault((r.source, r.kernel, shape_key(r.shape)), []).append(r)
    for (source, kernel, _sk), rows in groups.items():
        if len({r.config_label for r in rows}) >= MIN_GROUP:
            rep.groups.append(_rank_group(source, kernel, rows, lambda r: r.config_label))
    rep.pooled_spearman = _mean_spearman(rep.groups)
    rep.top1_total = len(rep.groups)
    rep.top1_hits = sum(1 for g in rep.groups if g.top1)

    # the user's question: which kernel and tiles for this shape? rank every configuration of every family
    by_shape: dict[tuple[str, str], list[RowEval]] = {}
    for r in ours:
        if r.predicted_s is not None:
            by_shape.setdefault((r.source, shape_key(r.shape)), []).append(r)
    for (source, _sk), rows in by_shape.items():
        if len({(r.kernel, r.config_label) for r in rows}) >= MIN_GROUP and len({r.kernel for r in rows}) >= 2:
            rep.shape_groups.append(_rank_group(source, "all", rows, lambda r: f"{r.kernel} {r.config_label}"))
    rep.pooled_spearman_all = _mean_spearman(rep.shape_groups)
    return rep


# --------------------------------------------------------------------------- text (cells shared with report.py)

def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.1f}%" if signed else f"{v:.1f}%"


def _num(v: float | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def stats_rows(report: Report) -> list[list[str]]:
    """The accuracy table: rows, n, median |err|, max |err|, mean signed; our kernels (then each
    family) and the peers (then each peer)."""
    named = ([("our kernels", report.ours)]
             + [(f"  {k}", s) for k, s in report.per_kernel.items() if k in OUR_KERNELS]
             + [("peers", report.peers)]
             + [(f"  {k}", s) for k, s in report.per_kernel.items() if k in PEER_KERNELS])
    return [[name, str(st.n), _pct(st.median_abs_pct), _pct(st.max_abs_pct), _pct(st.mean_signed_pct, True)]
            for name, st in named]


def group_cells(g: GroupEval) -> list[str]:
    """A rank-statistics row after its shape and size: spearman, model's top, best measured, top-1."""
    return [_num(g.spearman, "+.2f"), f"{g.top_config} ({g.top_measured_s * 1e3:.3f} ms)",
            f"{g.best_config} ({g.best_measured_s * 1e3:.3f} ms)",
            ("yes" if g.top1 else "no") + f" ({g.top_slowdown_pct:+.1f}%)"]


def row_cells(r: RowEval) -> list[str]:
    """kernel, config, shape, measured ms and TFLOP/s, predicted ms and TFLOP/s, error, bottleneck."""
    return [r.kernel, r.config_label, shape_label(r.shape), f"{r.measured_s * 1e3:.3f}",
            f"{r.measured_tflops:.1f}", _num(r.predicted_s * 1e3 if r.predicted_s else None),
            _num(r.predicted_tflops, ".1f"), _pct(r.err_pct, True), r.bottleneck or "-"]


def failed_cells(f: Mapping[str, Any]) -> list[str]:
    """kernel, config, shape, error of a row that is not ok."""
    return [f["kernel"], f.get("config") or "-", shape_label(f["shape"]) if f.get("shape") else "?", f["error"]]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> list[str]:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r)]
    right = right or [False] * len(headers)

    def fmt(cells):
        return "  ".join((c.rjust(w) if rj else c.ljust(w)) for c, w, rj in zip(cells, widths, right)).rstrip()

    return [fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def _row_note(r: RowEval) -> str:
    if r.prediction_source == "recomputed":
        return ""
    if r.prediction_source == "stored":
        return "stored prediction" + (f" ({r.prediction_error[:60]})" if r.prediction_error else "")
    return (r.prediction_error or "no prediction")[:80]


#: calibration numbers in the report's header: field, format of the scaled value, scale
_CALIBRATION_BITS = (
    ("gemm_flops", "GEMM {:.0f} TFLOP/s", 1e12),
    ("copy_bandwidth", "copy {:.2f} TB/s", 1e12),
    ("mma_sync_flops_per_clk_per_sm", "mma.sync {:.0f} FLOP/clk/SM", 1.0),
    ("exp2_per_clk_per_sm", "ex2 {:.1f}/clk/SM", 1.0),
    ("fp32_fma_per_clk_per_sm", "FMA {:.1f}/clk/SM", 1.0),
    ("clock_hz", "at {:.0f} MHz", 1e6),
)


def format_report(report: Report, *, max_rows: int | None = None) -> str:
    """A readable plain-text report."""
    out: list[str] = []
    how = "recomputed with the current model" if report.recomputed else "as stored in the results"
    out.append(f"iomodel validation: {', '.join(report.devices) or '?'}"
               f"{f' ({report.gpu_key})' if report.gpu_key else ''}; predictions {how}")
    for c in report.calibrations:
        bits = [fmt.format(c[k] / scale) for k, fmt, scale in _CALIBRATION_BITS if c.get(k)]
        out.append(f"calibration {c.get('gpu_key')} ({c.get('date')}): {', '.join(bits) or 'nothing measured'}")
    out.append("")
    out.append("Error of predicted time, (predicted - measured) / measured:")
    out += ["  " + ln for ln in _table(["rows", "n", "median |err|", "max |err|", "mean signed"], stats_rows(report),
                                       [False, True, True, True, True])]
    out.append("")
    out.append(f"Tile ranking (each kernel x shape timed with >= {MIN_GROUP} configs):")
    if report.groups:
        grows = [[g.kernel, shape_label(g.shape), str(g.n), *group_cells(g)] for g in report.groups]
        out += ["  " + ln for ln in _table(["kernel", "shape", "n", "spearman", "model's top", "best measured",
                                            "top-1 within 5%"], grows, [False, False, True, True, False, False, False])]
        out.append(f"  pooled mean spearman: {_num(report.pooled_spearman, '+.3f')}; "
                   f"top-1 within 5%: {report.top1_hits}/{report.top1_total}")
    else:
        out.append("  (no group with enough configs)")
    if report.shape_groups:
        out.append("")
        out.append("Kernel and tile choice (every family's configurations of one shape ranked together):")
        srows = [[shape_label(g.shape), str(g.n), *group_cells(g)] for g in report.shape_groups]
        out += ["  " + ln for ln in _table(["shape", "n", "spearman", "model's top", "best measured", "top-1 within 5%"],
                                           srows, [False, True, True, False, False, False])]
        hits = sum(1 for g in report.shape_groups if g.top1)
        out.append(f"  mean spearman: {_num(report.pooled_spearman_all, '+.3f')}; "
                   f"top-1 within 5%: {hits}/{len(report.shape_groups)}")
    out.append("")
    out.append("Rows:")
    shown = report.rows if max_rows is None else report.rows[:max_rows]
    rrows = [row_cells(r) + [_row_note(r)] for r in shown]
    out += ["  " + ln for ln in _table(["kernel", "config", "shape", "meas ms", "meas TFLOP/s", "pred ms",
                                        "pred TFLOP/s", "err", "bottleneck", "note"], rrows,
                                       [False, False, False, True, True, True, True, True, False, False])]
    if max_rows is not None and len(report.rows) > max_rows:
        out.append(f"  ... {len(report.rows) - max_rows} more rows")
    if report.failed:
        out.append("")
        out.append(f"Rows not ok ({len(report.failed)}):")
        for f in report.failed:
            kernel, config, shape, error = failed_cells(f)
            out.append(f"  {kernel} {config} {shape}: {error}")
    if report.notes:
        out.append("")
        out.append("Notes:")
        out += [f"  - {n}" for n in report.notes]
    return "\n".join(out) + "\n"
