"""The rows of a results file that time PyTorch's versions of the library's algorithms (``torch_matmul``,
``torch_cross_entropy``, ``torch_mlp``; ``iomodel.algo_peers``): measured time and TFLOP/s, and the
model's best-configuration prediction where it has one.

The prediction is recomputed through ``iomodel.algorithms.best_prediction`` when that imports, else
the one stored at run time is shown (or none).  These rows stay out of the attention statistics of
``iomodel.accuracy``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .algo_peers import algo_flops, algo_of, algo_prediction
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

    @property
    def err_pct(self) -> float | None:
        if not self.predicted_s:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s * 100.0


def _time_of(pred: dict | None) -> tuple[float | None, str | None]:
    t = (pred or {}).get("time_s")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not t > 0:
        return None, None
    return float(t), pred.get("bottleneck")


def algo_eval(source: str, device: str, gpu_key: str | None, row: ResultRow, *, recompute: bool = True,
              predict: Callable[..., tuple[dict | None, str | None]] = algo_prediction) -> AlgoEval:
    """A measured algorithm row (``row.ok`` and ``row.measured_ms`` set) with its prediction."""
    algo = algo_of(row.kernel)
    ev = AlgoEval(source, device, row.kernel, algo, dict(row.shape), row.measured_ms / 1e3,
                  algo_flops(algo, row.shape))
    if recompute and gpu_key:
        pred, err = predict(algo, gpu_key, row.shape)
        ev.predicted_s, ev.bottleneck = _time_of(pred)
        ev.prediction_error = err
        if ev.predicted_s is not None:
            ev.prediction_source = "recomputed"
            return ev
    if row.predicted_ms:
        ev.predicted_s, ev.bottleneck = row.predicted_ms / 1e3, row.predicted_bottleneck
        ev.prediction_source = "stored"
    return ev
