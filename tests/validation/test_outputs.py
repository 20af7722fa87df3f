"""What the sweep writes (validation.sweep, validation.records): partial runs marked as such, Ctrl-C saving
what was done in one line, outputs refused before any work, and only the harness's own folder created."""

from __future__ import annotations

import json
import os
import random

import pytest

from iomodel.accuracy import evaluate
from iomodel.files import OutputError
from iomodel.results import load_results
from validation import records
from validation.fake_env import FakeEnv
from validation.sweep import SweepInterrupted, SweepOptions, run_sweep

SEED = random.randrange(2**32)   # a fresh sweep seed and interrupt point every run; in every failure message
RNG = random.Random(SEED)


def _opts(out, **kw):
    return SweepOptions(out=out, quick=True, seed=RNG.randrange(10**6), dry_run=True, **kw)


def test_complete_run_and_the_file_while_it_runs(tmp_path, spec, fake_api, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    out = tmp_path / "res.json"
    seen = []

    def log(line):  # read the file as a reader would while the run goes on
        if line.startswith("[") and not seen:
            seen.append(json.loads(out.read_text()))

    res = run_sweep(FakeEnv(spec), spec, _opts(out), predictor_api=fake_api, log=log)
    assert seen[0]["complete"] is False and seen[0]["rows_planned"] == len(res["rows"]), SEED
    on_disk = json.loads(out.read_text())
    assert on_disk["complete"] is True and on_disk["rows_planned"] == len(on_disk["rows"]) == len(res["rows"])
    assert not any("partial" in n for n in evaluate(load_results(out), recompute=False).notes)


def test_interrupt_saves_what_was_done_and_says_so(tmp_path, spec, fake_api):
    out = tmp_path / "res.json"
    env = FakeEnv(spec)
    real = env.timer.time_interleaved
    stop_at = RNG.randrange(1, 3)   # which shape's timing the interrupt hits
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    env.timer.time_interleaved = interrupted
    with pytest.raises(SweepInterrupted) as exc:
        run_sweep(env, spec, _opts(out), predictor_api=fake_api, log=lambda s: None)
    assert isinstance(exc.value, KeyboardInterrupt)
    on_disk = json.loads(out.read_text())
    saved, planned = len(on_disk["rows"]), on_disk["rows_planned"]
    assert str(exc.value) == f"interrupted: {saved} of {planned} rows saved to {out} (marked incomplete)", SEED
    assert on_disk["complete"] is False and 0 < saved <= planned and (saved < planned or stop_at == 2)
    assert (exc.value.saved, exc.value.planned, exc.value.path) == (saved, planned, out)
    notes = evaluate(load_results(out), recompute=False).notes
    assert f"{out}: partial run, {saved} of {planned} planned rows" in notes


def test_interrupt_before_the_plan(tmp_path, spec, fake_api):
    out = tmp_path / "res.json"
    env = FakeEnv(spec)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    env.measure_ceilings = interrupted
    with pytest.raises(SweepInterrupted, match=r"^interrupted: 0 rows \(before the plan was made\) saved to .*"
                                               r"res\.json \(marked incomplete\)$"):
        run_sweep(env, spec, _opts(out), predictor_api=fake_api, log=lambda s: None)
    on_disk = load_results(out)[0]
    assert on_disk["complete"] is False and on_disk["rows_planned"] is None and on_disk["rows"] == []


@pytest.mark.parametrize("make", ["directory", "fifo", "missing folder"])
def test_unwritable_output_stops_the_run_before_any_work(tmp_path, spec, fake_api, make):
    out = tmp_path / "res.json"
    if make == "directory":
        out.mkdir()
    elif make == "fifo":
        os.mkfifo(out)
    else:
        out = tmp_path / "missing" / "res.json"
    before = sorted(p.name for p in tmp_path.iterdir())
    env = FakeEnv(spec)
    measured = []
    env.measure_ceilings = lambda *a, **k: measured.append(1)
    with pytest.raises(OutputError) as exc:
        run_sweep(env, spec, _opts(out), predictor_api=fake_api, log=lambda s: None)
    assert str(out) in str(exc.value) and "\n" not in str(exc.value)
    assert not measured                                         # no ceilings, no rows
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no stray calibration beside it


def test_only_the_harness_folder_is_created(tmp_path, spec, fake_api, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    owned = tmp_path / "results"
    monkeypatch.setattr(records, "RESULTS_DIR", owned.resolve())
    out = records.default_out_path("NVIDIA H100 80GB HBM3", "2026-11-22")
    assert out.parent == owned.resolve() and not owned.exists() and records.owned_folder(out)
    res = run_sweep(FakeEnv(spec), spec, _opts(out), predictor_api=fake_api, log=lambda s: None)
    assert load_results(out)[0]["complete"] is True and res["rows"]
    stem = "nvidia-h100-80gb-hbm3-2026-11-22"
    assert sorted(p.name for p in owned.iterdir()) == [f"{stem}.calibration-h100-sxm.toml", f"{stem}.json"]
    assert not records.owned_folder(tmp_path / "elsewhere" / "r.json")
