"""Our backward kernels' rows in the algorithm phase (``flash_bwd_sm80``, ``flash_bwd_sm80_deterministic``),
in a dry run with the real model: their configs, predictions and ``pass``, and the report's backward number."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

import iomodel.algo_peers as algo_peers
from iomodel import api
from iomodel.accuracy import evaluate
from iomodel.accuracy_text import format_report
from iomodel.algo_peers import BACKWARD_KERNELS, algo_flops, attention_shape
from iomodel.families.flash_bwd_sm80 import SHIPPED
from iomodel.results import config_label, load_results
from validation.algorithms import ALGORITHMS
from validation.fake_env import FakeAlgorithms, FakeEnv
from validation.sweep import SweepOptions, run_sweep

SM80 = BACKWARD_KERNELS[:2]   # flash_bwd_sm80 and its twin (flash_bwd_sm90's: test_backward_sm90_rows.py)
KERNELS = (*SM80, "torch_sdpa_flash_bwd")


@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    """The quick backward rows of a dry run (d=64, N=1024, causal and not), predicted by the model."""
    from iomodel.hardware import resolve_gpu

    spec = resolve_gpu("h100-sxm")
    out = tmp_path_factory.mktemp("bwd") / "bwd.json"
    opts = SweepOptions(out=out, quick=True, only=(ALGORITHMS,), seed=5, measure_ceilings=False, dry_run=True,
                        algo_peers=KERNELS)
    res = run_sweep(FakeEnv(spec), spec, opts, log=lambda m: None)
    return res, out


def test_our_rows_carry_pass_config_and_prediction(dry):
    res, _out = dry
    rows = [r for r in res["rows"] if r["kernel"] in SM80]
    n = sum(c.head_dim == 64 for c in SHIPPED)
    assert len(rows) == 2 * (n + 1) and res["complete"]
    for r in rows:
        assert r["ok"] and r["pass"] == "bwd" and r["shape"]["d"] == 64
        cfg = r["config"]
        assert set(cfg) == {"block_q", "block_k", "warps", "stages", "head_dim"} and cfg["head_dim"] == 64
        assert r["config_label"] == config_label(r["kernel"], cfg) and r["config_label"] != "-"
        assert r["why"] == ("model-top" if r["kernel"] == "flash_bwd_sm80_deterministic" else "sweep")
        # the prediction of the row's own config, the run's calibration (here the shipped one)
        want = api.predict(r["kernel"], "h100-sxm", attention_shape(r["shape"]), cfg)
        assert r["prediction"]["time_s"] == pytest.approx(want.time_s)
        assert r["predicted_ms"] == pytest.approx(want.time_s * 1e3) and r["predicted_bottleneck"] == want.bottleneck
        assert r["predicted_tflops"] == pytest.approx(algo_flops("attention-backward", r["shape"]) / want.time_s / 1e12)
        rate = FakeAlgorithms().rate(r["kernel"], cfg)
        assert r["measured_tflops"] == pytest.approx(rate / 1e12, rel=0.02)
    for causal in (False, True):
        shape_rows = [r for r in rows if r["shape"]["causal"] is causal and r["kernel"] == "flash_bwd_sm80"]
        assert [r["predicted_rank"] for r in shape_rows] == list(range(n))
        assert sorted(r["predicted_ms"] for r in shape_rows) == [r["predicted_ms"] for r in shape_rows]


def test_the_deterministic_row_is_the_choosers_pick(dry):
    from iomodel.chooser import choose

    res, _out = dry
    for r in (r for r in res["rows"] if r["kernel"] == "flash_bwd_sm80_deterministic"):
        pick = choose(["flash_bwd_sm80_deterministic"], "h100-sxm", attention_shape(r["shape"]))
        assert {k: r["config"][k] for k in ("block_q", "block_k", "warps", "stages")} == api.families.get(
            "flash_bwd_sm80_deterministic").tiles(pick.config)


def test_the_file_loads_and_the_report_gives_the_backward_error(dry):
    _res, out = dry
    (back,) = load_results(out)
    assert {r.pass_ for r in back["rows"]} == {r.attention_pass for r in back["rows"]} == {"bwd"}
    rep = evaluate([back])
    assert rep.ours.n == 0 and rep.peers.n == 0            # the forward's numbers see none of these rows
    assert rep.backward.n == 2 * (sum(c.head_dim == 64 for c in SHIPPED) + 1)
    assert set(rep.backward_per_kernel) == set(SM80)
    assert len(rep.backward_groups) == 2                   # the five configs of each shape, ranked
    text = format_report(rep)
    assert re.search(rf"\n  our backward kernels \(bwd\) +{rep.backward.n} +\d+\.\d%", text), text
    assert "tile ranking over 2 kernel x shape groups" in text


def test_failing_rows_of_our_kernel_are_recorded(spec, tmp_path):
    env = FakeEnv(spec)
    env.fake_algorithms = FakeAlgorithms(fail=("flash_bwd_sm80",), wrong=("flash_bwd_sm80_deterministic",))
    res = run_sweep(env, spec, SweepOptions(out=tmp_path / "f.json", quick=True, only=(ALGORITHMS,), seed=1,
                                            measure_ceilings=False, dry_run=True, algo_peers=SM80),
                    log=lambda m: None)
    for r in res["rows"]:
        assert not r["ok"] and r["pass"] == "bwd" and r["config"]
        if r["kernel"] == "flash_bwd_sm80":
            assert "fake failure of flash_bwd_sm80" in r["error"]
        else:
            assert r["error"].startswith("wrong result: max_rel_err 0.05 >= 0.02")


def test_a_causal_peer_is_predicted_by_the_family_search(monkeypatch):
    """best_prediction's backward diagrams are not causal: a causal shape goes to the flash_bwd_sm80 search,
    a non-causal one to best_prediction without the causal key."""
    import iomodel.algorithms
    import iomodel.tiles

    calls = []
    pred = SimpleNamespace(as_dict=lambda: {"time_s": 1e-3, "bottleneck": "tensor"})
    monkeypatch.setattr(iomodel.tiles, "search", lambda kernel, gpu, shape, top: (
        calls.append(("search", kernel, shape)), SimpleNamespace(ranked=[pred]))[1])
    monkeypatch.setattr(iomodel.algorithms, "best_prediction", lambda algo, gpu, shape: (
        calls.append(("best", algo, shape)), pred)[1])
    shape = {"B": 16, "H": 32, "N": 1024, "M": 1024, "d": 64, "dtype": "bf16"}
    assert algo_peers.algo_prediction("attention-backward", "h100-sxm", {**shape, "causal": True})[0]["time_s"] == 1e-3
    assert algo_peers.algo_prediction("attention-backward", "h100-sxm", {**shape, "causal": False})[1] is None
    assert calls == [("search", "flash_bwd_sm80", attention_shape({**shape, "causal": True})),
                     ("best", "attention-backward", shape)]


def test_the_attention_sweeps_rows_say_fwd(spec, tmp_path, fake_api):
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=tmp_path / "f.json", quick=True, only=("flash_sm80", "peers"),
                                                      seed=1, measure_ceilings=False, dry_run=True),
                    predictor_api=fake_api, log=lambda m: None)
    assert res["rows"] and all(r["pass"] == "fwd" for r in res["rows"])   # failed and skipped rows too
    assert any(not r["ok"] for r in res["rows"])
