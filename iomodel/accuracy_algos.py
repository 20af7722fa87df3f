"""The rows of a results file that time PyTorch's versions of the library's algorithms (``torch_matmul``,
``torch_cross_entropy``, ``torch_mlp``, SDPA's backward; ``iomodel.algo_peers``): measured time and
TFLOP/s, and the model's best-configuration prediction where it has one; and the rows of our backward
kernels timed beside them (``BACKWARD_KERNELS``), with the prediction of their own configuration.

A peer's prediction is recomputed through ``iomodel.algorithms.best_prediction`` when that imports; our
backward rows' through the model of their family (``ours``: ``iomodel.api.predict`` with the file's
calibration, as for the attention rows); else the one stored at run time is shown (or none).  These
rows stay out of the attention (forward) statistics of ``iomodel.accuracy``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .algo_peers import BACKWARD_KERNELS, algo_flops, algo_of, algo_prediction, attention_shape
from .results import ResultRow

__all__ = ["AlgoEval", "algo_eval", "Throughput"]


class Throughput:
    """TFLOP/s of a row with `flops`, `measured_s` and `predicted_s` (None without a prediction)."""

    @property
    def measured_tflops(self) -> float:
        return self.flops / self.measured_s / 1e12

    @property
    def predicted_tflops(self) -> float | None:
        return self.flops / self.predicted_s / 1e12 if self.predicted_s else None


@dataclass
class AlgoEval(Throughput):
    """One measured algorithm row and the model's prediction of it (None where it has none)."""

    source: str
    device: str
    kernel: str
    algo: str
    shape: dict
    measured_s: float
    flops: float
    predicted_s: float | None = None
    bottleneck: str | None = None
    prediction_source: str | None = None   # "recomputed", "stored" or None
    prediction_error: str | None = None
    config_label: str = "-"                # our backward kernels' tiles; "-" for a peer
    config: dict | None = None
    pass_: str | None = None               # the row's ``pass``: "bwd" for the backward

    @property
    def ours(self) -> bool:
        """One of our backward kernels' rows (not a peer)."""
        return self.kernel in BACKWARD_KERNELS

    @property
    def err_pct(self) -> float | None:
        if not self.predicted_s:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s * 100.0


def _time_of(pred: Any) -> tuple[float | None, str | None]:
    """(time_s, bottleneck) of a prediction dict or Prediction; None for none or an infeasible one."""
    if pred is not None and not isinstance(pred, Mapping):
        pred = {"time_s": getattr(pred, "time_s", None), "bottleneck": getattr(pred, "bottleneck", None),
                "feasible": getattr(pred, "feasible", True)}
    t = (pred or {}).get("time_s")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not t > 0 or pred.get("feasible") is False:
        return None, None
    return float(t), pred.get("bottleneck")


def _ours_prediction(ours: Callable[..., Any], row: ResultRow) -> tuple[Any, str | None]:
    """(prediction, error) of our backward row's own config; a model failure is its error."""
    try:
        return ours(row.kernel, attention_shape(row.shape), dict(row.config or {})), None
    except Exception as exc:  # noqa: BLE001 - the stored prediction stands in, with the model's error
        return None, f"{type(exc).__name__}: {exc}"


def algo_eval(source: str, device: str, gpu_key: str | None, row: ResultRow, *, recompute: bool = True,
              predict: Callable[..., tuple[dict | None, str | None]] = algo_prediction,
              ours: Callable[..., Any] | None = None) -> AlgoEval:
    """A measured algorithm row (``row.ok`` and ``row.measured_ms`` set) with its prediction.
    ``ours(kernel, attention shape, config)``: the model of our backward kernels (None: the stored
    prediction of their rows)."""
    algo = algo_of(row.kernel)
    ev = AlgoEval(source, device, row.kernel, algo, dict(row.shape), row.measured_ms / 1e3,
                  algo_flops(algo, row.shape), config_label=row.config_label or "-", config=row.config,
                  pass_=row.attention_pass)
    if ev.ours and recompute and ours is not None:
        pred, err = _ours_prediction(ours, row)
    elif not ev.ours and recompute and gpu_key:
        pred, err = predict(algo, gpu_key, row.shape)
    else:
        pred, err = None, None
    if pred is not None or err is not None:
        ev.predicted_s, ev.bottleneck = _time_of(pred)
        ev.prediction_error = err or (None if ev.predicted_s else "the model finds this configuration infeasible")
        if ev.predicted_s is not None:
            ev.prediction_source = "recomputed"
            return ev
    if row.predicted_ms:
        ev.predicted_s, ev.bottleneck = row.predicted_ms / 1e3, row.predicted_bottleneck
        ev.prediction_source = "stored"
    return ev
