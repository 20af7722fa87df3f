"""Accuracy statistics (iomodel.validate) and the sweep logic (validation, dry run). No torch."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from iomodel.hardware import load_spec
from iomodel.validate import (
    MIN_GROUP,
    Stats,
    evaluate,
    format_report,
    load_results,
    rankdata,
    spearman,
)
from validation.run import (
    NOT_TIMED,
    FakeEnv,
    KernelFamily,
    Predictor,
    SweepOptions,
    build_plan,
    config_label,
    default_shapes,
    make_shape,
    progress_line,
    run_sweep,
    write_json_atomic,
)

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- rank statistics

def test_rankdata_average_ties():
    assert rankdata([10, 20, 20, 30]).tolist() == [1, 2.5, 2.5, 4]
    assert rankdata([3, 1, 2]).tolist() == [3, 1, 2]
    assert rankdata([5, 5, 5]).tolist() == [2, 2, 2]
    assert rankdata([2.0, 1.0, 2.0, 1.0, 3.0]).tolist() == [3.5, 1.5, 3.5, 1.5, 5]


def test_spearman_matches_closed_form_for_distinct_ranks():
    rng = np.random.default_rng(0)
    for n in (3, 5, 11, 40):
        for _ in range(20):
            x = rng.normal(size=n)
            y = rng.normal(size=n)
            d = rankdata(x) - rankdata(y)
            expected = 1 - 6 * float(d @ d) / (n * (n * n - 1))
            assert spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_spearman_with_ties_matches_pearson_of_average_ranks():
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.integers(0, 4, size=9).astype(float)
        y = rng.integers(0, 4, size=9).astype(float)
        rx, ry = rankdata(x), rankdata(y)
        if rx.std() == 0 or ry.std() == 0:
            assert spearman(x, y) is None
            continue
        assert spearman(x, y) == pytest.approx(float(np.corrcoef(rx, ry)[0, 1]), abs=1e-12)


def test_spearman_brute_force_small():
    # every permutation of 4 items against the identity: rho = 1 - 6 sum d^2 / 60
    for perm in itertools.permutations(range(4)):
        d2 = sum((i - p) ** 2 for i, p in enumerate(perm))
        assert spearman(list(range(4)), list(perm)) == pytest.approx(1 - d2 / 10)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [7, 7, 7]) is None
    assert spearman([1], [2]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_stats_of():
    s = Stats.of([10.0, -30.0, 5.0, None, float("nan")])
    assert s.n == 3
    assert s.median_abs_pct == 10.0
    assert s.max_abs_pct == 30.0
    assert s.mean_signed_pct == pytest.approx(-5.0)
    assert Stats.of([]).n == 0 and Stats.of([]).median_abs_pct is None


# --------------------------------------------------------------------------- synthetic results

def _shape(N=4096, d=128, causal=False):
    return make_shape(N, d, causal)


def _row(kernel, label, shape, measured_ms, predicted_ms, ok=True, cfg=None):
    return {
        "kernel": kernel, "config": cfg if cfg is not None else {"label": label}, "config_label": label,
        "shape": shape, "ok": ok, "max_rel_err": 1e-3 if ok else None,
        "measured_ms": measured_ms if ok else None, "measured_tflops": None,
        "predicted_ms": predicted_ms, "predicted_tflops": None, "predicted_bottleneck": "tensor",
        **({} if ok else {"error": "boom"}),
    }


def _results(rows):
    return {"device": "NVIDIA H100 80GB HBM3", "gpu_key": "h100-sxm", "sm_count": 132, "date": "2026-11-23",
            "calibration": {"gpu_key": "h100-sxm", "date": "2026-11-23", "gemm_flops": 7.0e14},
            "rows": rows}


def test_evaluate_stored_predictions_known_spearman_and_errors():
    rng = np.random.default_rng(7)
    n = 8
    measured = np.sort(rng.uniform(1.0, 2.0, size=n))            # config i is the i-th fastest
    perm = [0, 2, 1, 3, 5, 4, 7, 6]                               # model's rank of config i
    predicted_sorted = np.sort(rng.uniform(0.8, 2.2, size=n))
    predicted = predicted_sorted[perm]
    expected_rho = 1 - 6 * sum((i - p) ** 2 for i, p in enumerate(perm)) / (n * (n * n - 1))
    shape = _shape()
    rows = [_row("flash_sm80", f"c{i}", shape, float(measured[i]), float(predicted[i])) for i in range(n)]
    # a second group with only 2 configs: no rank statistics
    rows += [_row("flash_sm90", f"s{i}", shape, 1.0 + i, 1.1 + i) for i in range(MIN_GROUP - 1)]
    # peers and a failed row
    rows += [_row("sdpa_flash", "-", shape, 2.0, 1.5), _row("sdpa_cudnn", "-", shape, 1.0, None),
             _row("flash_sm80", "bad", shape, None, 1.0, ok=False)]
    rep = evaluate(_results(rows), recompute=False)
    assert len(rep.groups) == 1
    g = rep.groups[0]
    assert g.kernel == "flash_sm80" and g.n == n
    assert g.spearman == pytest.approx(expected_rho)
    assert rep.pooled_spearman == pytest.approx(expected_rho)
    # the model's top (perm index 0 -> config 0) is also the fastest measured
    assert g.top_config == "c0" and g.best_config == "c0" and g.top1
    assert rep.top1_hits == 1 and rep.top1_total == 1
    ours_err = [(p - m) / m * 100 for p, m in zip(list(predicted) + [1.1, 2.1], list(measured) + [1.0, 2.0])]
    assert rep.ours.n == n + 2
    assert rep.ours.median_abs_pct == pytest.approx(float(np.median(np.abs(ours_err))))
    assert rep.ours.max_abs_pct == pytest.approx(float(np.max(np.abs(ours_err))))
    assert rep.peers.n == 1 and rep.peers.median_abs_pct == pytest.approx(25.0)
    assert rep.per_kernel["sdpa_cudnn"].n == 0  # measured but no prediction
    assert len(rep.failed) == 1 and rep.failed[0]["error"] == "boom"
    text = format_report(rep)
    for s in ("flash_sm80", "c0", "pooled mean spearman", "top-1 within 5%: 1/1", "boom", "-25.0%"):
        assert s in text, s


def _group(measured, predicted, kernel="flash_sm80", shape=None):
    shape = shape or _shape()
    return [_row(kernel, f"c{i}", shape, m, p) for i, (m, p) in enumerate(zip(measured, predicted))]


@pytest.mark.parametrize("slower, expected", [(1.04, True), (1.049, True), (1.06, False), (1.5, False)])
def test_top1_within_5pct(slower, expected):
    # model picks c1 (smallest prediction); the best measured is c0
    rep = evaluate(_results(_group([1.0, slower, 2.0], [0.9, 0.5, 0.7])), recompute=False)
    g = rep.groups[0]
    assert g.top_config == "c1" and g.best_config == "c0"
    assert g.top1 is expected
    assert g.top_slowdown_pct == pytest.approx((slower - 1) * 100)


def test_top1_tie_judged_by_slowest_tied():
    # c0 and c2 tie for the model's top; c2 is 20% slower than the best -> miss
    rep = evaluate(_results(_group([1.0, 1.1, 1.2], [0.5, 0.9, 0.5])), recompute=False)
    g = rep.groups[0]
    assert g.top_config == "c2" and not g.top1
    # ties in measured times: average ranks
    rep = evaluate(_results(_group([1.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])), recompute=False)
    assert rep.groups[0].spearman == pytest.approx(float(np.corrcoef([1.5, 1.5, 3, 4], [1, 2, 3, 4])[0, 1]))
    # all predictions equal: correlation undefined, not in the pooled mean
    rep = evaluate(_results(_group([1.0, 1.5, 2.0], [1.0, 1.0, 1.0])), recompute=False)
    assert rep.groups[0].spearman is None and rep.pooled_spearman is None


def test_groups_split_by_shape_and_pooled_mean():
    a = _group([1, 2, 3], [1, 2, 3], shape=_shape(causal=False))            # rho = 1
    b = _group([1, 2, 3], [3, 2, 1], shape=_shape(causal=True))             # rho = -1
    c = _group([1, 2, 3, 4], [1, 3, 2, 4], kernel="unfused", shape=_shape())  # rho = 0.8
    rep = evaluate(_results(a + b + c), recompute=False)
    rhos = sorted(g.spearman for g in rep.groups)
    assert rhos == pytest.approx([-1.0, 0.8, 1.0])
    assert rep.pooled_spearman == pytest.approx((1 - 1 + 0.8) / 3)


def test_evaluate_recomputes_with_given_predictor_and_stored_calibration():
    seen = []

    def predictor(kernel, spec, shape, config, cal):
        seen.append((kernel, spec.key, cal.gemm_flops if cal else None))
        return {"time_s": 2e-3, "bottleneck": "hbm", "hbm_bytes": 1e9, "feasible": True}

    def peer_predictor(peer, spec, shape, cal):
        return None

    rows = _group([1.0, 2.0, 4.0], [9.0, 9.0, 9.0]) + [_row("sdpa_flash", "-", _shape(), 1.0, 3.0)]
    rep = evaluate(_results(rows), predictor=predictor, peer_predictor=peer_predictor)
    assert seen and all(s == ("flash_sm80", "h100-sxm", 7.0e14) for s in seen)
    errs = sorted(r.err_pct for r in rep.rows if not r.is_peer)
    assert errs == pytest.approx([-50.0, 0.0, 100.0])
    assert all(r.prediction_source == "recomputed" for r in rep.rows if not r.is_peer)
    peer = [r for r in rep.rows if r.is_peer][0]
    assert peer.predicted_s is None and peer.prediction_source is None
    assert rep.recomputed


def test_evaluate_falls_back_to_stored_when_model_fails():
    def predictor(*a):
        raise RuntimeError("model broken")

    rep = evaluate(_results(_group([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])), predictor=predictor,
                   peer_predictor=lambda *a: None)
    assert all(r.prediction_source == "stored" for r in rep.rows)
    assert all("model broken" in r.prediction_error for r in rep.rows)
    assert any("could not be re-predicted" in n for n in rep.notes)


def test_load_results_files(tmp_path):
    rows = _group([1, 2, 3], [1, 2, 3])
    p = write_json_atomic(tmp_path / "r.json", _results(rows))
    [res] = load_results(p)
    assert res["_source"] == str(p) and len(res["rows"]) == 3
    assert len(load_results([p, str(p)])) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_results(bad)
    (tmp_path / "norows.json").write_text("{}")
    with pytest.raises(ValueError, match="no 'rows'"):
        load_results(tmp_path / "norows.json")


# --------------------------------------------------------------------------- atomic writing

def test_write_json_atomic(tmp_path, monkeypatch):
    p = tmp_path / "sub" / "out.json"
    write_json_atomic(p, {"a": 1, "nan": float("nan"), "t": (1, 2), "path": Path("/x")})
    assert json.loads(p.read_text()) == {"a": 1, "nan": None, "t": [1, 2], "path": "/x"}
    write_json_atomic(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2}
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.json"]

    # a failure while replacing leaves the old file whole and no temp file behind
    def broken_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        write_json_atomic(p, {"a": 3})
    assert json.loads(p.read_text()) == {"a": 2}
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.json"]


# --------------------------------------------------------------------------- the sweep, dry run

class FakeApi:
    """Stands in for iomodel.api: time = FLOPs / (400 TFLOP/s x a config factor)."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def _t(kernel, shape, config):
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
        self.calls.append(("rank", kernel, calibration))
        return sorted(((dict(c), None) for c in candidates), key=lambda cp: self._t(kernel, shape, cp[0]))

    def peer_prediction(self, peer, gpu, shape, calibration="auto"):
        if peer != "sdpa_flash":
            return None
        return self.predict("flash_sm80", gpu, shape, {"block_m": 128, "stages": 1}, calibration)


@pytest.fixture()
def spec():
    return load_spec("h100-sxm")


def test_default_shapes():
    shapes = default_shapes()
    assert len(shapes) == 12
    assert {s["N_q"] for s in shapes} == {1024, 4096, 16384}
    assert all(s["B"] * s["N_q"] == 16384 and s["H"] * s["d"] == 2048 for s in shapes)
    assert [s["N_q"] for s in shapes[:4]] == [4096] * 4  # the config sweeps first
    assert len(default_shapes(quick=True)) == 2


def test_build_plan_sweeps_at_4096_and_top_elsewhere(spec):
    cfgs = [dict(block_m=bm, block_n=64, warps=4, stages=s, head_dim=d)
            for d in (64, 128) for bm in (64, 128) for s in (1, 2)]
    fams = {"flash_sm80": KernelFamily("flash_sm80", cfgs, run=lambda *a: None),
            "flash_sm90": KernelFamily("flash_sm90", skip="not here")}
    pred = Predictor(spec, None, api=FakeApi())
    shapes = [_shape(4096, 128), _shape(1024, 64)]
    plan = build_plan(shapes, fams, pred)
    at4096 = [r for r in plan if r.shape["N_q"] == 4096 and r.kernel == "flash_sm80"]
    assert len(at4096) == 4 and all(r.why == "sweep" for r in at4096)
    assert [r.predicted_rank for r in at4096] == [0, 1, 2, 3]
    assert at4096[0].config["block_m"] == 128 and at4096[0].config["stages"] == 1  # the model's order
    at1024 = [r for r in plan if r.shape["N_q"] == 1024 and r.kernel == "flash_sm80"]
    assert len(at1024) == 1 and at1024[0].why == "model-top" and at1024[0].config["head_dim"] == 64
    assert [r.kernel for r in plan if r.is_peer] == ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient"] * 2
    assert not any(r.kernel == "flash_sm90" for r in plan)
    only = build_plan(shapes, fams, pred, only=("peers",))
    assert all(r.is_peer for r in only)
    # without a model: shipped order, and a note says so
    notes = []
    plan = build_plan(shapes, fams, Predictor(spec, None, api=SimpleNamespace()), notes=notes)
    assert [r.config["block_m"] for r in plan if r.kernel == "flash_sm80" and r.shape["N_q"] == 4096] == [64, 64, 128, 128]
    assert any("could not rank" in n for n in notes)


def test_config_label_and_progress_line():
    assert config_label("flash_sm80", dict(block_m=128, block_n=64, warps=4, stages=2, head_dim=128)) == "128x64w4s2"
    assert config_label("unfused", dict(block_m=128, block_n=128, block_k=32, warps=4, stages=3)) == "128x128x32w4s3"
    assert config_label("sdpa_flash", None) == "-"
    rec = {"kernel": "flash_sm80", "config_label": "128x64w4s2", "shape": _shape(4096, 128, True), "ok": True,
           "measured_tflops": 341.24, "predicted_tflops": 352.0}
    assert progress_line(12, 80, rec, 3.0).startswith(
        "[12/80] flash_sm80 128x64w4s2 d128 N4096 causal: 341.2 TFLOP/s (pred 352.0)")
    rec.update(ok=False, error="RuntimeError: x", predicted_tflops=None)
    assert "FAILED (RuntimeError: x) (pred -)" in progress_line(1, 2, rec, 0.0)


def test_dry_run_sweep_end_to_end(tmp_path, spec, capsys, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)  # $OUT (set on the device) would take the calibration file
    out = tmp_path / "res.json"
    api = FakeApi()
    env = FakeEnv(spec, fail=("64x64w4s2",), nan=("128x32w4s3",), wrong=("64x64w4s1",),
                  unsupported_peers=("sdpa_cudnn",))
    lines = []
    res = run_sweep(env, spec, SweepOptions(out=out, quick=True, seed=1, dry_run=True),
                    predictor_api=api, log=lines.append)
    on_disk = json.loads(out.read_text())
    assert on_disk["rows"] == json.loads(json.dumps(res["rows"]))
    for key in ("device", "sm_count", "torch", "cuda", "date", "calibration", "rows"):
        assert key in on_disk
    assert on_disk["calibration"]["gpu_key"] == "h100-sxm"
    assert (tmp_path / "res.calibration-h100-sxm.toml").is_file()
    # the fresh calibration reached the model
    assert all(c[2] is not None and c[2].device_name == env.device_name for c in api.calls)
    rows = on_disk["rows"]
    by = {(r["kernel"], r["config_label"], r["shape"]["N_q"]): r for r in rows}
    for r in rows:
        for k in ("kernel", "config", "shape", "ok", "max_rel_err", "measured_ms", "measured_tflops",
                  "predicted_ms", "predicted_tflops", "predicted_bottleneck"):
            assert k in r
        assert set(r["shape"]) == {"B", "H", "H_kv", "N_q", "N_k", "d", "causal", "dtype"}
        if not r["ok"]:
            assert r["error"]
    assert "fake build failure" in by[("flash_sm80", "64x64w4s2", 4096)]["error"]
    assert by[("flash_sm80", "128x32w4s3", 4096)]["error"] == "output has NaN or Inf"
    assert by[("flash_sm80", "64x64w4s1", 4096)]["error"].startswith("wrong result: max_rel_err 0.05")
    assert "does not support" in by[("sdpa_cudnn", "-", 4096)]["error"]
    good = by[("flash_sm80", "128x64w4s2", 4096)]
    assert good["ok"] and good["measured_tflops"] > 0 and good["predicted_ms"] > 0
    assert good["timing"]["repeats"] >= 20 and good["timing"]["input_sets"] >= 3
    assert good["timing"]["interleaved"] is True and good["timing"]["rounds"] == 5 == on_disk["options"]["rounds"]
    assert not any(r.get("error") == NOT_TIMED for r in rows)
    assert by[("sdpa_flash", "-", 4096)]["peer_prediction"]["time_s"] > 0
    assert by[("sdpa_efficient", "-", 4096)]["predicted_ms"] is None
    # all d128 configs at N=4096, the model's top elsewhere
    n_d128 = sum(1 for r in rows if r["kernel"] == "flash_sm80" and r["shape"]["N_q"] == 4096)
    from kernels.configs import flash_configs_for

    assert n_d128 == len(flash_configs_for(128))
    assert sum(1 for r in rows if r["kernel"] == "flash_sm80" and r["shape"]["N_q"] == 1024) == 1
    # progress lines, one per row
    prog = [ln for ln in lines if ln.startswith("[")]
    assert len(prog) == len(rows)
    assert prog[-1].startswith(f"[{len(rows)}/{len(rows)}]")
    # the results evaluate
    rep = evaluate(load_results(out), predictor=lambda k, s, sh, c, cal: api.predict(k, s, sh, c, cal),
                   peer_predictor=lambda p, s, sh, cal: api.peer_prediction(p, s, sh, cal))
    assert rep.ours.n > 0 and rep.groups and rep.groups[0].n >= MIN_GROUP
    # a dry run never imports torch; checked in a fresh interpreter, since other tests here may have
    code = ("import runpy, sys\n"
            f"sys.argv = ['validation', 'run', '--dry-run', '--quick', '--out', {str(tmp_path / 'fresh.json')!r}]\n"
            "try:\n    runpy.run_module('validation', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def _row_keys(res):
    return [((r["kernel"], r["config_label"], json.dumps(r["shape"], sort_keys=True)), r["ok"], sorted(r))
            for r in res["rows"]]


def test_dry_run_rounds_keep_rows_and_mark_timing(tmp_path, spec):
    """--rounds changes how rows are timed, not which rows there are or what they hold."""
    runs = {}
    for rounds in (1, 3):
        lines = []
        runs[rounds] = run_sweep(FakeEnv(spec), spec,
                                 SweepOptions(out=tmp_path / f"r{rounds}.json", quick=True, seed=5, dry_run=True,
                                              rounds=rounds),
                                 predictor_api=FakeApi(), log=lines.append)
        assert len([ln for ln in lines if ln.startswith("[")]) == len(runs[rounds]["rows"])
    assert _row_keys(runs[1]) == _row_keys(runs[3])
    assert runs[3]["options"]["rounds"] == 3 and runs[1]["options"]["rounds"] == 1
    timed = [r for r in runs[3]["rows"] if r["ok"]]
    assert len(timed) > 10
    assert all(r["timing"]["interleaved"] is True and r["timing"]["rounds"] == 3 for r in timed)
    assert all(r["timing"]["interleaved"] is False and r["timing"]["rounds"] == 1 for r in runs[1]["rows"] if r["ok"])


def test_dry_run_timing_failure_marks_only_that_row(tmp_path, spec):
    out = tmp_path / "res.json"
    lines = []
    env = FakeEnv(spec, fail_timing=("128x64w4s2",))
    res = run_sweep(env, spec, SweepOptions(out=out, quick=True, seed=2, dry_run=True, rounds=4),
                    predictor_api=FakeApi(), log=lines.append)
    rows = json.loads(out.read_text())["rows"]
    bad = [r for r in rows if r["config_label"] == "128x64w4s2"]
    assert len(bad) == 1 and bad[0]["kernel"] == "flash_sm80"
    bad = bad[0]
    assert not bad["ok"] and "while timing" in bad["error"] and bad["measured_ms"] is None and "timing" not in bad
    assert bad["max_rel_err"] is not None  # it passed its check
    same_shape = [r for r in rows if r["shape"] == bad["shape"] and r is not bad]
    baseline = run_sweep(FakeEnv(spec), spec, SweepOptions(out=tmp_path / "base.json", quick=True, seed=2,
                                                           dry_run=True, rounds=4),
                         predictor_api=FakeApi(), log=lambda s: None)
    base_by = {(r["kernel"], r["config_label"], r["shape"]["N_q"]): r for r in baseline["rows"]}
    for r in same_shape:  # every other row of that shape is as it is without the failure
        b = base_by[(r["kernel"], r["config_label"], r["shape"]["N_q"])]
        assert r["ok"] == b["ok"] and r.get("error") == b.get("error")
        if r["ok"]:
            assert r["measured_ms"] == pytest.approx(b["measured_ms"]) and r["timing"]["interleaved"]
    assert sum(r["ok"] for r in res["rows"]) == sum(r["ok"] for r in baseline["rows"]) - 1
    assert sum(1 for ln in lines if "FAILED (RuntimeError: fake launch failure while timing" in ln) == 1


def test_interrupted_timing_leaves_checked_rows_on_disk(tmp_path, spec):
    """Rows are on disk, checked, before their shape is timed; an interrupt there loses no check."""
    out = tmp_path / "res.json"
    env = FakeEnv(spec)

    def interrupted(fns, inputs, rounds=5, *, on_error=None):
        raise KeyboardInterrupt

    env.timer.time_interleaved = interrupted
    with pytest.raises(KeyboardInterrupt):
        run_sweep(env, spec, SweepOptions(out=out, quick=True, seed=3, dry_run=True), predictor_api=FakeApi(),
                  log=lambda s: None)
    rows = json.loads(out.read_text())["rows"]
    first_shape = rows[0]["shape"]
    assert rows and all(r["shape"] == first_shape for r in rows)  # the second shape never started
    waiting = [r for r in rows if r.get("error") == NOT_TIMED]
    assert len(waiting) > 10
    assert all(not r["ok"] and r["measured_ms"] is None and r["max_rel_err"] < 1e-2 for r in waiting)
    assert any(r["error"] == "output has NaN or Inf" for r in rows)  # check failures are recorded too


def test_dry_run_budget_skips_rows(tmp_path, spec):
    out = tmp_path / "res.json"
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=out, quick=True, budget_s=0.0, measure_ceilings=False,
                                                      dry_run=True),
                    predictor_api=FakeApi(), log=lambda s: None)
    assert res["rows"] and all(not r["ok"] and "time budget" in r["error"] for r in res["rows"])
    assert res["calibration"]["gpu_key"] == "h100-sxm"  # the shipped one
    assert any("ceilings not measured" in n for n in res["notes"])


def test_dry_run_with_real_model_completes(tmp_path, spec):
    """Whatever state the model is in, the sweep finishes and writes every row."""
    out = tmp_path / "res.json"
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=out, quick=True, dry_run=True, only=("flash_sm80", "peers")),
                    log=lambda s: None)
    assert len(json.loads(out.read_text())["rows"]) == len(res["rows"]) > 0


def test_cli_help_and_dry_run_without_torch(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OUT", None)
    # make any `import torch` fail loudly, even where torch is installed
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('torch must not be imported here')\n")
    env["PYTHONPATH"] = f"{blocker}{os.pathsep}{REPO}"
    r = subprocess.run([sys.executable, "-m", "validation", "--help"], capture_output=True, text=True, env=env,
                       cwd=REPO)
    assert r.returncode == 0 and "run" in r.stdout
    r = subprocess.run([sys.executable, "-m", "validation", "run", "--help"], capture_output=True, text=True,
                       env=env, cwd=REPO)
    assert r.returncode == 0 and "--dry-run" in r.stdout and "--gpu-spec" in r.stdout and "--rounds" in r.stdout
    out = tmp_path / "dry.json"
    r = subprocess.run([sys.executable, "-m", "validation", "run", "--dry-run", "--quick", "--only",
                        "flash_sm80,peers", "--out", str(out), "--seed", "3", "--rounds", "3"],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "DRY RUN" in r.stderr and "[1/" in r.stderr
    data = json.loads(out.read_text())
    assert data["dry_run"] is True and data["rows"] and data["options"]["rounds"] == 3
    assert all(row["timing"]["rounds"] == 3 for row in data["rows"] if row["ok"])
    r = subprocess.run([sys.executable, "-m", "validation", "run", "--dry-run", "--rounds", "0"],
                       capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 2 and "--rounds" in r.stderr
    r = subprocess.run([sys.executable, "-m", "validation", "run", "--only", "nope"], capture_output=True,
                       text=True, env=env, cwd=REPO)
    assert r.returncode == 2 and "--only" in r.stderr
    # a real run without torch fails with one clear line
    r = subprocess.run([sys.executable, "-m", "validation", "run", "--out", str(tmp_path / "x.json")],
                       capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 2 and r.stderr.startswith("error: ImportError")


# --------------------------------------------------------------------------- timing and clock helpers

def test_choose_repeats():
    from validation.timing import choose_repeats

    assert choose_repeats(1e-3) == 120
    assert choose_repeats(1.0) == 20
    assert choose_repeats(1e-7) == 200
    assert choose_repeats(0.0) == 20 and choose_repeats(float("nan")) == 20


def test_fake_timer_median_and_rotation():
    from validation.timing import FakeTimer

    seen = []
    t = FakeTimer(lambda fn, inputs: 2e-3, repeats=21, noise=0.0)
    res = t(lambda *a: seen.append(a[0]), [(0,), (1,), (2,)])
    assert res.median_s == pytest.approx(2e-3) and res.repeats == 21 and res.input_sets == 3
    assert set(seen) == {0, 1, 2}


def _random_sets(n: int = 3) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng()
    return [tuple(rng.standard_normal(8) for _ in range(3)) for _ in range(n)]


class _Drift:
    """A device that slows down with every call made, whoever makes it:
    call k takes 1 ms * (1 + per_call * k)."""

    def __init__(self, per_call: float = 0.01):
        self.per_call = per_call
        self.calls = 0
        self.now = 0.0
        self.used: list[int] = []   # id of the q of each call, in order

    def fn(self):
        def f(q, k, v):
            self.calls += 1
            self.used.append(id(q))
            self.now += self.current()
        return f

    def current(self) -> float:
        return 1e-3 * (1 + self.per_call * self.calls)


def _rel_gap(a, b) -> float:
    return abs(a.median_s / b.median_s - 1)


def test_fake_timer_interleaving_cancels_drift():
    from validation.timing import FakeTimer

    for rounds, close in ((1, False), (8, True), (10, True)):
        dev = _Drift()
        t = FakeTimer(lambda fn, inputs: dev.current(), repeats=40, noise=0.0)
        a, b = t.time_interleaved([dev.fn(), dev.fn()], _random_sets(), rounds)
        assert a.repeats == b.repeats == 40 and a.rounds == rounds
        if close:
            assert _rel_gap(a, b) < 0.01 and a.interleaved
        else:  # one after the other: the second looks much slower than the identical first
            assert b.median_s > a.median_s and _rel_gap(a, b) > 0.2 and not a.interleaved


class _FakeCuda:
    """torch.cuda stand-in: events read the fake device clock; counts synchronizes."""

    def __init__(self, dev: _Drift):
        self.dev = dev
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1

    def Event(self, enable_timing=False):  # noqa: N802 - torch's name
        dev = self.dev

        class Ev:
            def record(self):
                self.t = dev.now

            def elapsed_time(self, end):
                return (end.t - self.t) * 1e3

        return Ev()


def test_cuda_event_timer_interleaves_rounds_and_rotates_inputs():
    from validation.timing import CudaEventTimer

    gaps = {}
    for rounds in (1, 8):
        dev = _Drift(per_call=0.005)
        cuda = _FakeCuda(dev)
        t = CudaEventTimer(torch=SimpleNamespace(cuda=cuda), warmup=3, min_repeats=40, max_repeats=40)
        sets = _random_sets()
        fns = [dev.fn(), dev.fn(), dev.fn()]
        res = t.time_interleaved(fns, sets, rounds)
        assert [r.repeats for r in res] == [40, 40, 40]
        assert cuda.syncs == 2 * len(fns) + rounds  # warm-up and estimate of each, then one per round
        timed = dev.used[len(fns) * 4:]  # after the warm-up and estimate calls
        # 40 timed calls of each callable plus one untimed lead-in call per callable and round
        assert len(timed) == 120 + rounds * len(fns)
        assert all(x != y for x, y in zip(timed, timed[1:]))  # no set twice in a row
        assert set(timed) == {id(s[0]) for s in sets}
        gaps[rounds] = max(_rel_gap(res[0], res[-1]), _rel_gap(res[1], res[0]))
    assert gaps[1] > 0.15 and gaps[8] < 0.01


@pytest.mark.parametrize("timer_kind", ["fake", "cuda"])
def test_timer_failure_of_one_callable_spares_the_others(timer_kind):
    from validation.timing import CudaEventTimer, FakeTimer, Timing

    dev = _Drift(per_call=0.0)
    calls = {"bad": 0}

    def bad(q, k, v):
        calls["bad"] += 1
        if calls["bad"] > 5:  # fine at first (warm-up, estimate), then a launch fails
            raise RuntimeError("launch failed")
        dev.fn()(q, k, v)

    recovered = []
    if timer_kind == "fake":
        t = FakeTimer(lambda fn, inputs: dev.current(), repeats=30, noise=0.0)
    else:
        t = CudaEventTimer(torch=SimpleNamespace(cuda=_FakeCuda(dev)), min_repeats=30, max_repeats=30)
    res = t.time_interleaved([dev.fn(), bad, dev.fn()], _random_sets(), 5, on_error=lambda: recovered.append(1))
    assert isinstance(res[1], RuntimeError) and "launch failed" in str(res[1])
    assert isinstance(res[0], Timing) and isinstance(res[2], Timing) and res[0].repeats == res[2].repeats == 30
    assert res[0].median_s == pytest.approx(1e-3) and recovered == [1]
    with pytest.raises(RuntimeError, match="launch failed"):
        t(bad, _random_sets())


def test_clock_sampler_with_fake_nvidia_smi(tmp_path, monkeypatch):
    from validation.ceilings import ClockSampler

    script = tmp_path / "nvidia-smi"
    # refuses the UUID, answers for the index
    script.write_text('#!/bin/sh\ncase "$*" in *GPU-*) echo "No devices were found" >&2; exit 6;; esac\necho 1980\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    import time as _time

    with ClockSampler(["GPU-nope", "0"], period_s=0.02) as s:
        _time.sleep(0.4)
    assert s.device_id == "0"
    assert s.median_hz() == pytest.approx(1.98e9)
    assert len(s.samples) >= 2
    script.write_text("#!/bin/sh\necho broken >&2\nexit 9\n")
    with ClockSampler([None], period_s=0.02) as s:
        _time.sleep(0.1)
    assert s.median_hz() is None and s.error == "broken"
