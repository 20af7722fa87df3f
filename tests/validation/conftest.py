"""Fixtures of the harness tests: the H100 spec and a stand-in for the model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from iomodel.hardware import resolve_gpu
from iomodel.results import config_dict


class FakeApi:
    """Stands in for iomodel.api: time = FLOPs / (400 TFLOP/s x a config factor)."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def _t(kernel, shape, config):
        config = config_dict(config)   # the sweep passes the families' typed configs
        f = 4.0 * shape["B"] * shape["H"] * shape["N_q"] * shape["N_k"] * shape["d"] / (2 if shape["causal"] else 1)
        k = 1.0 + 0.01 * (config.get("block_m", 128) != 128) + 0.001 * config.get("stages", 0)
        return f / 400e12 * k

    def predict(self, kernel, gpu, shape, config, calibration="auto"):
        self.calls.append(("predict", kernel, calibration))
        if kernel == "unfused" and shape["N_q"] > 8192:
            raise ValueError("does not fit")
        t = self._t(kernel, shape, config)
        return SimpleNamespace(as_dict=lambda: {"time_s": t, "tflops": 1.0, "bottleneck": "tensor",
                                                 "hbm_bytes": 1e8, "feasible": True})

    def rank_configs(self, kernel, gpu, shape, candidates, calibration="auto"):
        """Predictions best first, each with its config (as iomodel.api.rank_configs returns them)."""
        self.calls.append(("rank", kernel, calibration))
        preds = [SimpleNamespace(config=c, time_s=self._t(kernel, shape, c)) for c in candidates]
        return sorted(preds, key=lambda p: p.time_s)

    def peer_prediction(self, peer, gpu, shape, calibration="auto"):
        if peer != "sdpa_flash":
            return None
        return self.predict("flash_sm80", gpu, shape, {"block_m": 128, "stages": 1}, calibration)


@pytest.fixture()
def spec():
    return resolve_gpu("h100-sxm")


@pytest.fixture()
def fake_api():
    return FakeApi()
