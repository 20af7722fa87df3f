"""flash_bwd_sm90's rows in the algorithm phase: planned and predicted on a (fake) H100, left out with the
reason on a (fake) A100, and timed through ``kernels.flash_bwd_sm90.backward``."""
from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import pytest

from iomodel import api
from iomodel.algo_peers import BACKWARD_KERNELS, algo_flops, attention_shape
from iomodel.chooser import choose
from iomodel.families.flash_bwd_sm90 import SHIPPED
from iomodel.hardware import resolve_gpu
from iomodel.results import config_label
from validation.algo_torch import TorchAlgorithms
from validation.algorithms import ALGORITHMS, backward_skips
from validation.fake_env import FakeAlgorithms, FakeEnv
from validation.sweep import SweepOptions, run_sweep

SM90 = ("flash_bwd_sm90", "flash_bwd_sm90_deterministic")
WHY = "needs sm_90a; this device is sm_80"


def _dry(gpu: str, out, peers):
    spec = resolve_gpu(gpu)
    opts = SweepOptions(out=out, quick=True, only=(ALGORITHMS,), seed=3, measure_ceilings=False, dry_run=True,
                        algo_peers=peers)
    return run_sweep(FakeEnv(spec), spec, opts, log=lambda m: None)


def test_rows_on_h100_carry_config_and_prediction(tmp_path):
    res = _dry("h100-sxm", tmp_path / "h.json", SM90)
    rows = res["rows"]
    n = sum(c.head_dim == 64 for c in SHIPPED)
    assert res["complete"] and not res["skipped_families"] and len(rows) == 2 * (n + 1)
    for r in rows:
        assert r["ok"] and r["pass"] == "bwd" and r["shape"]["d"] == 64
        cfg = r["config"]
        assert set(cfg) == {"block_m", "block_n", "stages", "head_dim", "consumers"}
        assert r["config_label"] == config_label(r["kernel"], cfg)
        assert r["why"] == ("model-top" if r["kernel"] == SM90[1] else "sweep")
        want = api.predict(r["kernel"], "h100-sxm", attention_shape(r["shape"]), cfg)
        assert r["prediction"]["time_s"] == pytest.approx(want.time_s)
        assert r["predicted_tflops"] == pytest.approx(algo_flops("attention-backward", r["shape"]) / want.time_s / 1e12)
        assert r["measured_tflops"] == pytest.approx(FakeAlgorithms().rate(r["kernel"], cfg) / 1e12, rel=0.02)
        if r["kernel"] == SM90[1]:   # the chooser's pick
            pick = choose([SM90[1]], "h100-sxm", attention_shape(r["shape"]))
            assert cfg == pick.config.as_dict()


def test_rows_on_a100_are_skipped_not_failed(tmp_path):
    res = _dry("a100-sxm-80gb", tmp_path / "a.json", BACKWARD_KERNELS)
    assert res["complete"] and res["skipped_families"] == {k: WHY for k in SM90}
    kernels = {r["kernel"] for r in res["rows"]}
    assert kernels == set(BACKWARD_KERNELS[:2]) and all(r["ok"] for r in res["rows"])
    assert res["rows_planned"] == len(res["rows"])


def test_backward_skips_names_the_wgmma_families_off_sm90():
    assert backward_skips((9, 0)) == {}
    assert backward_skips((8, 0)) == {k: WHY for k in SM90}
    assert backward_skips((8, 6), peers=("flash_bwd_sm80", SM90[1])) == {SM90[1]: "needs sm_90a; this device is sm_86"}
    assert backward_skips((10, 0), peers=("torch_sdpa_flash_bwd",)) == {}


def test_the_runner_calls_the_hopper_entry_point(monkeypatch):
    calls = []
    fake = ModuleType("kernels.flash_bwd_sm90")
    fake.backward = lambda *args, **kw: calls.append((args, kw)) or "grads"
    monkeypatch.setitem(sys.modules, "kernels.flash_bwd_sm90", fake)
    monkeypatch.delattr("kernels.flash_bwd_sm90", raising=False)
    algos = TorchAlgorithms(SimpleNamespace(nn=SimpleNamespace(functional=None)))
    for kernel, det in ((SM90[0], False), (SM90[1], True)):
        fn = algos.runner(kernel, SHIPPED[0])
        assert fn("q", "k", "v", "out", "lse", "dout", True) == "grads"
        assert calls[-1] == (("dout", "q", "k", "v", "out", "lse"),
                             {"causal": True, "config": SHIPPED[0], "deterministic": det})
