"""The model as the sweep calls it: every call guarded, so a model error is recorded, never a crash."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from iomodel import api as _model_api
from iomodel import peers as _model_peers
from iomodel.results import config_dict, jsonable

from .records import short_error

__all__ = ["Predictor"]

#: the fields of a Prediction a results row keeps (the rest is the model's working)
_KEEP = ("time_s", "tflops", "flops", "hbm_bytes", "bottleneck", "terms", "blocks_per_sm", "occupancy_limit",
         "smem_bytes", "regs_per_thread", "waves", "calibration_used", "feasible", "reason")


class _DefaultApi:
    """``iomodel.api`` with ``peer_prediction`` from ``iomodel.peers``: the surface a stand-in mimics."""

    predict = staticmethod(_model_api.predict)
    rank_configs = staticmethod(_model_api.rank_configs)
    peer_prediction = staticmethod(_model_peers.peer_prediction)


class Predictor:
    """The model (or a stand-in with its ``predict``, ``peer_prediction`` and ``rank_configs``) for one
    GPU spec and calibration.  Each call returns ``(result, None)`` or ``(None, why)``."""

    def __init__(self, spec, calibration, api: Any = None):
        self.spec = spec
        self.calibration = calibration
        self.api = api if api is not None else _DefaultApi()

    @staticmethod
    def summarize(pred: Any) -> dict[str, Any] | None:
        if pred is None:
            return None
        d = pred.as_dict() if hasattr(pred, "as_dict") else dict(vars(pred))
        return jsonable({k: d[k] for k in _KEEP if k in d})

    def _guarded(self, call) -> tuple[dict | None, str | None]:
        try:
            return self.summarize(call()), None
        except Exception as exc:  # noqa: BLE001 - recorded in the row; the sweep goes on
            return None, short_error(exc)

    def predict(self, kernel: str, shape: Mapping, cfg: Any) -> tuple[dict | None, str | None]:
        return self._guarded(lambda: self.api.predict(kernel, self.spec, dict(shape), cfg,
                                                      calibration=self.calibration))

    def peer(self, peer: str, shape: Mapping) -> tuple[dict | None, str | None]:
        return self._guarded(lambda: self.api.peer_prediction(peer, self.spec, dict(shape),
                                                              calibration=self.calibration))

    def rank(self, kernel: str, shape: Mapping, configs: Sequence[Any]) -> tuple[list[int] | None, str | None]:
        """Indices of ``configs`` best first (the model's order; configs the model finds infeasible are
        left out), or None with why."""
        if not configs:
            return [], None
        try:
            ranked = self.api.rank_configs(kernel, self.spec, dict(shape), list(configs),
                                           calibration=self.calibration)
        except Exception as exc:  # noqa: BLE001 - the plan falls back to the shipped order
            return None, short_error(exc)
        # fields are compared, not objects: a candidate may leave out what the shape fixes (head_dim)
        return _indices([config_dict(p.config) for p in ranked], [config_dict(c) for c in configs]), None


def _indices(ranked: Sequence[dict], candidates: Sequence[dict]) -> list[int]:
    """Each ranked config's index among the candidates: the first unused one that agrees on every
    field both have (a candidate may leave out fields the shape fixes, like head_dim)."""
    order: list[int] = []
    for cfg in ranked:
        for i, cand in enumerate(candidates):
            if i not in order and all(cand.get(k) == v for k, v in cfg.items() if k in cand):
                order.append(i)
                break
    return order
