"""Accuracy statistics of the model against measured results (CPU only, numpy).

A results file (``iomodel.results``, written by ``python -m validation run``) holds measured times of our kernels and
of peers, with the calibration measured in the same run.  :func:`evaluate` recomputes every prediction with the
*current* model (``iomodel.api``), using that calibration, and reports (beside ``iomodel.peer_ratios``: our pick
against each peer a shape, and over the files):

* per-row signed error of predicted time: ``(predicted - measured) / measured`` in percent (positive: predicted slower);
* median and max absolute error over our kernels' rows and, separately, over peers' rows;
* for each (kernel, shape) timed with >= 3 tile configs: the Spearman rank correlation of predicted and measured
  time, whether the model's top config is within 5% of the best measured one (top-1), their pooled mean;
* the same over every family's configs of one shape (the kernel-and-tile choice);
* apart from all of these, which are the forward's, the same error statistics and tile ranking over our backward
  kernels' rows (``pass`` "bwd", ``iomodel.algo_peers.BACKWARD_KERNELS``), timed beside SDPA's backward.

The text and HTML forms are in ``iomodel.accuracy_text`` and ``iomodel.report``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from . import api, families
from .accuracy_algos import AlgoEval, Throughput, algo_eval
from .algo_peers import BACKWARD_KERNELS, algo_of
from .hardware import HardwareError, resolve_gpu
from .peer_ratios import PeerRatio, ShapeParity, parity, peer_ratios
from .peers import PEERS as PEER_KERNELS, peer_prediction
from .problems import conventional_flops
from .results import ResultRow, as_row, config_label, shape_key

__all__ = ["OUR_KERNELS", "PEER_KERNELS", "TOP1_TOLERANCE", "MIN_GROUP", "rankdata", "spearman", "Stats",
           "RowEval", "GroupEval", "Report", "evaluate"]

#: our kernels of the attention sweep: the attention families that ship kernels (flash_sm80, flash_sm90,
#: unfused); the decode kernel's rows belong to the algorithm phase (``algo_of``) and have tables of their own
OUR_KERNELS = tuple(f.name for f in families.for_problem("attention") if f.shipped and not algo_of(f.name))
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
class RowEval(Throughput):
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
    peer_ratios: list[PeerRatio] = field(default_factory=list)   # our pick of each shape against each peer
    parity: list[ShapeParity] = field(default_factory=list)      # the same over every file of a shape
    top1_hits: int = 0
    top1_total: int = 0
    failed: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    gpu_key: str | None = None
    calibrations: list[dict] = field(default_factory=list)
    recomputed: bool = True
    algorithms: list[AlgoEval] = field(default_factory=list)   # PyTorch's algorithms (iomodel.algo_peers)
    backward: Stats = field(default_factory=Stats)              # our backward kernels' rows (pass "bwd")
    backward_per_kernel: dict[str, Stats] = field(default_factory=dict)
    backward_groups: list[GroupEval] = field(default_factory=list)   # their tile ranking per shape


# --------------------------------------------------------------------------- one row's prediction

@dataclass
class _Pred:
    """A row's predicted time as the report uses it, and where it came from."""

    time_s: float | None = None
    bottleneck: str | None = None
    hbm_bytes: float | None = None
    how: str | None = None             # "recomputed", "stored" or None
    error: str | None = None
    raised: bool = False               # the model raised (counted in the report's notes)


@dataclass
class _Model:
    ours: Callable[..., Any]           # (kernel, spec, shape, config, calibration) -> prediction
    peer: Callable[..., Any]           # (peer, spec, shape, calibration) -> prediction or None


def _pred_time(pred: Any) -> tuple[float | None, str | None, float | None]:
    """(time_s, bottleneck, hbm_bytes) of a Prediction or dict; all None if its time is unusable."""
    if pred is None:
        return None, None, None
    if not isinstance(pred, Mapping) and not hasattr(pred, "time_s") and hasattr(pred, "as_dict"):
        pred = pred.as_dict()
    get = (lambda k: pred.get(k)) if isinstance(pred, Mapping) else (lambda k: getattr(pred, k, None))
    t = get("time_s")
    if get("feasible") is False or t is None or not (math.isfinite(float(t)) and float(t) > 0):
        return None, None, None
    hb = get("hbm_bytes")
    return float(t), get("bottleneck"), (float(hb) if hb is not None else None)


def _stored(row: ResultRow, is_peer: bool) -> _Pred:
    """The prediction the harness recorded at run time."""
    if not row.predicted_ms:
        return _Pred()
    stored = (row.peer_prediction if is_peer else row.prediction) or {}
    hb = stored.get("hbm_bytes") if isinstance(stored, Mapping) else None
    return _Pred(row.predicted_ms / 1e3, row.predicted_bottleneck, hb, "stored")


def _recomputed(row: ResultRow, is_peer: bool, spec, cal, model: _Model) -> _Pred:
    """The current model's prediction; the stored one (with the model's error) when the model raises."""
    shape = dict(row.shape)
    try:
        if is_peer:
            pred = model.peer(row.kernel, spec, shape, cal)
        else:
            pred = model.ours(row.kernel, spec, shape, dict(row.config or {}), cal)
    except Exception as exc:  # noqa: BLE001 - any model failure falls back to the stored prediction
        return dataclasses.replace(_stored(row, is_peer), error=f"{type(exc).__name__}: {exc}", raised=True)
    t, bott, hb = _pred_time(pred)
    if t is not None:
        return _Pred(t, bott, hb, "recomputed")
    return _Pred(error="the model finds this configuration infeasible" if pred is not None else None)


# --------------------------------------------------------------------------- files and rows

@dataclass
class _File:
    source: str
    device: str
    spec: Any                          # None: predictions are not recomputed
    calibration: Any


def _resolve_calibration(calibration, stored: Mapping | None, notes: list[str], spec):
    from .hardware import calibration_from_dict

    if calibration is not None:
        # 'auto' needs the file's GPU; without one the stored predictions are used, no calibration
        return None if calibration == "auto" and spec is None else api.resolve_calibration(spec, calibration)
    if stored:
        try:
            return calibration_from_dict(stored)
        except HardwareError as exc:
            notes.append(f"stored calibration unusable ({exc}); predicting from the datasheet")
    return None


def _open_file(rep: Report, res: Mapping[str, Any], calibration, recompute: bool) -> _File:
    """A results file's device, spec and calibration, recorded in the report."""
    source = str(res.get("_source", res.get("device", "results")))
    device = str(res.get("device", "?"))
    if device not in rep.devices:
        rep.devices.append(device)
    spec = None
    try:
        spec = resolve_gpu(res.get("gpu_key") or device)
    except HardwareError as exc:
        rep.notes.append(f"{source}: {exc}; using stored predictions")
    if spec is not None and rep.gpu_key is None:
        rep.gpu_key = spec.key
    if res.get("complete") is False:  # written by a run that stopped; files without the key are complete
        planned = res.get("rows_planned")
        rep.notes.append(f"{source}: partial run, {len(res['rows'])} of {planned} planned rows" if planned
                         else f"{source}: partial run, {len(res['rows'])} rows, stopped before its plan was made")
    cal = _resolve_calibration(calibration, res.get("calibration"), rep.notes, spec)
    if cal is not None:
        rep.calibrations.append({"source": source, "gpu_key": cal.gpu_key, "date": cal.date, **cal.measured()})
    return _File(source, device, spec if recompute else None, cal)


def _row_eval(f: _File, row: ResultRow, model: _Model) -> tuple[RowEval, bool]:
    """A measured row with its prediction, and whether the model raised on it."""
    is_peer = row.kernel in PEER_KERNELS
    p = _recomputed(row, is_peer, f.spec, f.calibration, model) if f.spec is not None else _stored(row, is_peer)
    measured = row.measured_ms / 1e3
    err = (p.time_s - measured) / measured * 100.0 if p.time_s is not None else None
    shape = dict(row.shape)
    ev = RowEval(source=f.source, device=f.device, kernel=row.kernel, config=row.config,
                 config_label=row.config_label or config_label(row.kernel, row.config),
                 shape=shape, is_peer=is_peer, measured_s=measured, predicted_s=p.time_s, err_pct=err,
                 bottleneck=p.bottleneck, flops=conventional_flops(shape), hbm_bytes=p.hbm_bytes,
                 prediction_source=p.how, prediction_error=p.error)
    return ev, p.raised


def _failed(source: str, row: ResultRow) -> dict:
    return {"source": source, "kernel": row.kernel, "config": row.config_label or None, "shape": row.shape,
            "error": row.error or "not ok"}


# --------------------------------------------------------------------------- statistics over rows

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


def _grouped(rows: Iterable[RowEval], key: Callable[[RowEval], tuple]) -> dict[tuple, list[RowEval]]:
    """Predicted rows by ``key``, in the order first seen."""
    out: dict[tuple, list[RowEval]] = {}
    for r in rows:
        if r.predicted_s is not None:
            out.setdefault(key(r), []).append(r)
    return out


def _error_stats(rep: Report) -> None:
    rep.ours = Stats.of(r.err_pct for r in rep.rows if r.kernel in OUR_KERNELS)
    rep.peers = Stats.of(r.err_pct for r in rep.rows if r.is_peer)
    for k in sorted({r.kernel for r in rep.rows}, key=lambda k: (k not in OUR_KERNELS, k)):
        rep.per_kernel[k] = Stats.of(r.err_pct for r in rep.rows if r.kernel == k)


def _backward_stats(rep: Report) -> None:
    """Our backward kernels' rows, apart from the forward's: error statistics and tile ranking."""
    bwd = [a for a in rep.algorithms if a.ours and a.pass_ == "bwd"]
    rep.backward = Stats.of(a.err_pct for a in bwd)
    rep.backward_per_kernel = {k: Stats.of(a.err_pct for a in bwd if a.kernel == k)
                               for k in BACKWARD_KERNELS if any(a.kernel == k for a in bwd)}
    for (source, kernel, _sk), rows in _grouped(bwd, lambda a: (a.source, a.kernel, shape_key(a.shape))).items():
        if len({a.config_label for a in rows}) >= MIN_GROUP:
            rep.backward_groups.append(_rank_group(source, kernel, rows, lambda a: a.config_label))


def _rank_stats(rep: Report) -> None:
    """Tile ranking per (file, kernel, shape); then the user's question, which kernel and tiles for
    this shape: every configuration of every family of one shape ranked together."""
    ours = [r for r in rep.rows if r.kernel in OUR_KERNELS]
    for (source, kernel, _sk), rows in _grouped(ours, lambda r: (r.source, r.kernel, shape_key(r.shape))).items():
        if len({r.config_label for r in rows}) >= MIN_GROUP:
            rep.groups.append(_rank_group(source, kernel, rows, lambda r: r.config_label))
    rep.pooled_spearman = _mean_spearman(rep.groups)
    rep.top1_total = len(rep.groups)
    rep.top1_hits = sum(1 for g in rep.groups if g.top1)
    for (source, _sk), rows in _grouped(ours, lambda r: (r.source, shape_key(r.shape))).items():
        if len({(r.kernel, r.config_label) for r in rows}) >= MIN_GROUP and len({r.kernel for r in rows}) >= 2:
            rep.shape_groups.append(_rank_group(source, "all", rows, lambda r: f"{r.kernel} {r.config_label}"))
    rep.pooled_spearman_all = _mean_spearman(rep.shape_groups)
    rep.peer_ratios = peer_ratios(rep.rows)
    rep.parity = parity(rep.peer_ratios, {r.source: r.device for r in rep.rows})


def evaluate(
    results: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    calibration: Any = None,
    *,
    recompute: bool = True,
    predictor: Callable[..., Any] | None = None,
    peer_predictor: Callable[..., Any] | None = None,
) -> Report:
    """Statistics of predicted vs measured time.

    ``results``: dicts from :func:`iomodel.results.load_results` (or one dict; rows typed or plain).
    ``calibration``: used for every file: a Calibration, a key or path, 'auto' (each file's GPU's
    shipped calibration) or 'none' (datasheet rates); default: the calibration stored in each file.
    ``recompute=False`` uses the predictions stored in the file.
    ``predictor(kernel, spec, shape, config, calibration)`` and ``peer_predictor(peer, spec, shape,
    calibration)`` replace the model (tests use this); by default they call ``iomodel.api``.  A row
    whose prediction cannot be recomputed falls back to the stored one, and says so.
    """
    if isinstance(results, Mapping):
        results = [results]
    rep = Report(recomputed=recompute)
    model = _Model(predictor or api.predict, peer_predictor or peer_prediction)
    raised = 0
    for res in results:
        f = _open_file(rep, res, calibration, recompute)
        for row in map(as_row, res["rows"]):
            if not row.ok or not row.measured_ms:
                rep.failed.append(_failed(f.source, row))
                continue
            if algo_of(row.kernel):   # not the attention forward: its own tables
                ours = None if f.spec is None else (
                    lambda k, s, c, f=f: model.ours(k, f.spec, s, c, f.calibration))
                rep.algorithms.append(algo_eval(f.source, f.device, res.get("gpu_key"), row, recompute=recompute,
                                                ours=ours))
                continue
            ev, failed = _row_eval(f, row, model)
            rep.rows.append(ev)
            raised += failed
    if raised:
        rep.notes.append(f"{raised} rows could not be re-predicted by the current model "
                         f"(see prediction_error); their stored predictions were used where present")
    _error_stats(rep)
    _rank_stats(rep)
    _backward_stats(rep)
    return rep
