"""The sweep (validation.sweep) on FakeEnv, a dry run: rows, records, timing and failures. No torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iomodel import families
from iomodel.accuracy import MIN_GROUP, evaluate
from iomodel.results import ResultRow, load_results
from validation.fake_env import FakeEnv
from validation.plan import make_shape
from validation.records import NOT_TIMED, progress_line
from validation.sweep import SweepOptions, run_sweep
from validation.timing import ROUND_ORDER


REPO = Path(__file__).resolve().parents[2]


def _shape(N=4096, d=128, causal=False):
    return make_shape(N, d, causal)


def test_progress_line():
    rec = ResultRow("flash_sm80", config_label="128x64 w4 s2", shape=_shape(4096, 128, True), ok=True,
                    measured_tflops=341.24, predicted_tflops=352.0)
    assert progress_line(12, 80, rec, 3.0).startswith(
        "[12/80] flash_sm80 128x64 w4 s2 d128 N4096 causal: 341.2 TFLOP/s (pred 352.0)")
    rec.ok, rec.error, rec.predicted_tflops = False, "RuntimeError: x", None
    assert "FAILED (RuntimeError: x) (pred -)" in progress_line(1, 2, rec, 0.0)


def test_dry_run_sweep_end_to_end(tmp_path, spec, fake_api, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)  # $OUT (set on the device) would take the calibration file
    out = tmp_path / "res.json"
    env = FakeEnv(spec, fail=("64x64 w4 s2",), nan=("128x32 w4 s3",), wrong=("64x64 w4 s1",),
                  unsupported_peers=("sdpa_cudnn",))
    lines = []
    res = run_sweep(env, spec, SweepOptions(out=out, quick=True, seed=1, dry_run=True),
                    predictor_api=fake_api, log=lines.append)
    on_disk = json.loads(out.read_text())
    assert on_disk["rows"] == json.loads(json.dumps(res["rows"]))
    for key in ("device", "sm_count", "torch", "cuda", "date", "calibration", "rows"):
        assert key in on_disk
    assert on_disk["calibration"]["gpu_key"] == "h100-sxm"
    assert (tmp_path / "res.calibration-h100-sxm.toml").is_file()
    # the fresh calibration reached the model
    assert all(c[2] is not None and c[2].device_name == env.device_name for c in fake_api.calls)
    rows = on_disk["rows"]
    by = {(r["kernel"], r["config_label"], r["shape"]["N_q"]): r for r in rows}
    for r in rows:
        for k in ("kernel", "config", "shape", "ok", "max_rel_err", "measured_ms", "measured_tflops",
                  "predicted_ms", "predicted_tflops", "predicted_bottleneck"):
            assert k in r
        assert set(r["shape"]) == {"B", "H", "H_kv", "N_q", "N_k", "d", "causal", "dtype"}
        if not r["ok"]:
            assert r["error"]
    assert "fake build failure" in by[("flash_sm80", "64x64 w4 s2", 4096)]["error"]
    assert by[("flash_sm80", "128x32 w4 s3", 4096)]["error"] == "output has NaN or Inf"
    assert by[("flash_sm80", "64x64 w4 s1", 4096)]["error"].startswith("wrong result: max_rel_err 0.05")
    assert "does not support" in by[("sdpa_cudnn", "-", 4096)]["error"]
    good = by[("flash_sm80", "128x64 w4 s2", 4096)]
    assert good["ok"] and good["measured_tflops"] > 0 and good["predicted_ms"] > 0
    assert good["timing"]["repeats"] >= 20 and good["timing"]["input_sets"] >= 3
    assert good["timing"]["interleaved"] is True and good["timing"]["rounds"] == 5 == on_disk["options"]["rounds"]
    assert on_disk["options"]["round_order"] == ROUND_ORDER
    assert not any(r.get("error") == NOT_TIMED for r in rows)
    assert by[("sdpa_flash", "-", 4096)]["peer_prediction"]["time_s"] > 0
    assert by[("sdpa_efficient", "-", 4096)]["predicted_ms"] is None
    # all d128 configs at N=4096, the model's top elsewhere
    n_d128 = sum(1 for r in rows if r["kernel"] == "flash_sm80" and r["shape"]["N_q"] == 4096)
    assert n_d128 == len(families.get("flash_sm80").shipped_for(_shape(4096, 128)))
    assert sum(1 for r in rows if r["kernel"] == "flash_sm80" and r["shape"]["N_q"] == 1024) == 1
    # progress lines, one per row
    prog = [ln for ln in lines if ln.startswith("[")]
    assert len(prog) == len(rows)
    assert prog[-1].startswith(f"[{len(rows)}/{len(rows)}]")
    # the results evaluate
    rep = evaluate(load_results(out), predictor=lambda k, s, sh, c, cal: fake_api.predict(k, s, sh, c, cal),
                   peer_predictor=lambda p, s, sh, cal: fake_api.peer_prediction(p, s, sh, cal))
    assert rep.ours.n > 0 and rep.groups and rep.groups[0].n >= MIN_GROUP
    # a dry run never imports torch; checked in a fresh interpreter, since other tests here may have
    code = ("import runpy, sys\n"
            f"sys.argv = ['validation', 'run', '--dry-run', '--quick', '--out', {str(tmp_path / 'fresh.json')!r}]\n"
            "try:\n    runpy.run_module('validation', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr[-2000:]


def _row_keys(res):
    return [((r["kernel"], r["config_label"], json.dumps(r["shape"], sort_keys=True)), r["ok"], sorted(r))
            for r in res["rows"]]


def test_dry_run_rounds_keep_rows_and_mark_timing(tmp_path, spec, fake_api):
    """--rounds changes how rows are timed, not which rows there are or what they hold."""
    runs = {}
    for rounds in (1, 3):
        lines = []
        runs[rounds] = run_sweep(FakeEnv(spec), spec,
                                 SweepOptions(out=tmp_path / f"r{rounds}.json", quick=True, seed=5, dry_run=True,
                                              rounds=rounds),
                                 predictor_api=fake_api, log=lines.append)
        assert len([ln for ln in lines if ln.startswith("[")]) == len(runs[rounds]["rows"])
    assert _row_keys(runs[1]) == _row_keys(runs[3])
    assert runs[3]["options"]["rounds"] == 3 and runs[1]["options"]["rounds"] == 1
    timed = [r for r in runs[3]["rows"] if r["ok"]]
    assert len(timed) > 10
    assert all(r["timing"]["interleaved"] is True and r["timing"]["rounds"] == 3 for r in timed)
    assert all(r["timing"]["interleaved"] is False and r["timing"]["rounds"] == 1 for r in runs[1]["rows"] if r["ok"])


def test_dry_run_timing_failure_marks_only_that_row(tmp_path, spec, fake_api):
    out = tmp_path / "res.json"
    lines = []
    env = FakeEnv(spec, fail_timing=("128x64 w4 s2",))
    res = run_sweep(env, spec, SweepOptions(out=out, quick=True, seed=2, dry_run=True, rounds=4),
                    predictor_api=fake_api, log=lines.append)
    rows = json.loads(out.read_text())["rows"]
    bad = [r for r in rows if r["config_label"] == "128x64 w4 s2"]
    assert len(bad) == 1 and bad[0]["kernel"] == "flash_sm80"
    bad = bad[0]
    assert not bad["ok"] and "while timing" in bad["error"] and bad["measured_ms"] is None and "timing" not in bad
    assert bad["max_rel_err"] is not None  # it passed its check
    same_shape = [r for r in rows if r["shape"] == bad["shape"] and r is not bad]
    baseline = run_sweep(FakeEnv(spec), spec, SweepOptions(out=tmp_path / "base.json", quick=True, seed=2,
                                                           dry_run=True, rounds=4),
                         predictor_api=fake_api, log=lambda s: None)
    base_by = {(r["kernel"], r["config_label"], r["shape"]["N_q"]): r for r in baseline["rows"]}
    for r in same_shape:  # every other row of that shape is as it is without the failure
        b = base_by[(r["kernel"], r["config_label"], r["shape"]["N_q"])]
        assert r["ok"] == b["ok"] and r.get("error") == b.get("error")
        if r["ok"]:
            assert r["measured_ms"] == pytest.approx(b["measured_ms"]) and r["timing"]["interleaved"]
    assert sum(r["ok"] for r in res["rows"]) == sum(r["ok"] for r in baseline["rows"]) - 1
    assert sum(1 for ln in lines if "FAILED (RuntimeError: fake launch failure while timing" in ln) == 1


def test_interrupted_timing_leaves_checked_rows_on_disk(tmp_path, spec, fake_api):
    """Rows are on disk, checked, before their shape is timed; an interrupt there loses no check."""
    out = tmp_path / "res.json"
    env = FakeEnv(spec)

    def interrupted(fns, inputs, rounds=5, *, on_error=None):
        raise KeyboardInterrupt

    env.timer.time_interleaved = interrupted
    with pytest.raises(KeyboardInterrupt):
        run_sweep(env, spec, SweepOptions(out=out, quick=True, seed=3, dry_run=True), predictor_api=fake_api,
                  log=lambda s: None)
    rows = json.loads(out.read_text())["rows"]
    first_shape = rows[0]["shape"]
    assert rows and all(r["shape"] == first_shape for r in rows)  # the second shape never started
    waiting = [r for r in rows if r.get("error") == NOT_TIMED]
    assert len(waiting) > 10
    assert all(not r["ok"] and r["measured_ms"] is None and r["max_rel_err"] < 1e-2 for r in waiting)
    assert any(r["error"] == "output has NaN or Inf" for r in rows)  # check failures are recorded too


def test_dry_run_budget_skips_rows(tmp_path, spec, fake_api):
    out = tmp_path / "res.json"
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=out, quick=True, budget_s=0.0, measure_ceilings=False,
                                                      dry_run=True),
                    predictor_api=fake_api, log=lambda s: None)
    assert res["rows"] and all(not r["ok"] and "time budget" in r["error"] for r in res["rows"])
    assert res["calibration"]["gpu_key"] == "h100-sxm"  # the shipped one
    assert any("ceilings not measured" in n for n in res["notes"])


def test_dry_run_with_real_model_completes(tmp_path, spec):
    """Whatever state the model is in, the sweep finishes and writes every row."""
    out = tmp_path / "res.json"
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=out, quick=True, dry_run=True, only=("flash_sm80", "peers")),
                    log=lambda s: None)
    assert len(json.loads(out.read_text())["rows"]) == len(res["rows"]) > 0


