"""Strict loading of results files (iomodel.results.load_results, iomodel.results_check): whatever is not
a results file of this schema version is one ResultsError line naming the file, the row and the field."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest

from iomodel.accuracy import evaluate
from iomodel.accuracy_text import format_report
from iomodel.results import SCHEMA_VERSION, ResultsError, load_results

SEED = random.randrange(2**32)   # fresh rows every run; the seed is in every failure message
RNG = random.Random(SEED)
RESULTS = Path(__file__).resolve().parents[2] / "validation" / "results"


def _row() -> dict:
    """A random valid row of our kernel or a peer."""
    n, d = RNG.choice([1024, 4096, 16384]), RNG.choice([64, 128])
    row = {"kernel": RNG.choice(["flash_sm80", "flash_sm90", "sdpa_flash"]), "config": None, "config_label": "-",
           "shape": {"B": 16384 // n, "H": 2048 // d, "H_kv": 2048 // d, "N_q": n, "N_k": n, "d": d,
                     "causal": RNG.random() < 0.5, "dtype": "bf16"},
           "ok": RNG.random() < 0.8, "measured_ms": RNG.uniform(0.1, 30.0), "predicted_ms": RNG.uniform(0.1, 30.0)}
    return row


def _results(rows=None, **header) -> dict:
    rows = [_row() for _ in range(RNG.randrange(1, 8))] if rows is None else rows
    return {"schema_version": SCHEMA_VERSION, "device": "NVIDIA H100 80GB HBM3", "gpu_key": "h100-sxm",
            **header, "rows": rows}


def _error(path: Path, content: bytes | str) -> str:
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(ResultsError) as exc:
        load_results(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg, (SEED, msg)
    return msg


@pytest.mark.parametrize("content, message", [
    ("", "empty file"), ("  \n\t", "empty file"), ("null", r"not a JSON object \(got null\)"),
    ("[]", r"not a JSON object \(got a list\)"), ("{}", "no 'rows' list"), ('"rows"', "got a string"),
    ("3.5", "got a number"), ('{"hello": 1}', "no 'rows' list"), ('{"rows": {}}', "no 'rows' list"),
    (b"\xff\xfe\x00garbage", "not UTF-8 text"), ("{not json", "not valid JSON"), ("[" * 100000, "not valid JSON"),
    ('{"rows": [1, 2]}', r"row 0: not an object \(got a number\)"),
    ('{"rows": [[]]}', r"row 0: not an object \(got a list\)"),
])
def test_not_a_results_file(tmp_path, content, message):
    msg = _error(tmp_path / "r.json", content)
    assert re.search(message, msg), msg


def test_random_binary_is_refused(tmp_path):
    # 0xff is never valid UTF-8, so the file is binary whatever the random bytes before it
    blob = bytes(RNG.randrange(256) for _ in range(RNG.randrange(1, 512))) + b"\x00\xff"
    assert "not UTF-8 text (a binary file?)" in _error(tmp_path / "b.json", blob), SEED


@pytest.mark.parametrize("version, why", [(0, "not a version"), (SCHEMA_VERSION + 1, "newer than"),
                                           ("1", "not a version"), (True, "not a version"), (1.5, "not a version")])
def test_schema_version_other_than_the_supported_one(tmp_path, version, why):
    msg = _error(tmp_path / "r.json", json.dumps(_results(schema_version=version)))
    assert f"schema_version {version!r} is {why} this iomodel reads ({SCHEMA_VERSION})" in msg


def test_schema_version_absent_means_one(tmp_path):
    data = _results()
    del data["schema_version"]
    p = tmp_path / "r.json"
    p.write_text(json.dumps(data))
    assert len(load_results(p)[0]["rows"]) == len(data["rows"])


@pytest.mark.parametrize("field", ["kernel", "shape", "ok"])
def test_row_without_a_required_field_names_row_and_field(tmp_path, field):
    rows = [_row() for _ in range(RNG.randrange(1, 6))]
    i = RNG.randrange(len(rows))
    del rows[i][field]
    msg = _error(tmp_path / "r.json", json.dumps(_results(rows)))
    assert f": row {i}: field '{field}' missing" in msg, (SEED, msg)


@pytest.mark.parametrize("field", ["B", "H", "N_q", "N_k", "d"])
def test_shape_missing_or_bad_size(tmp_path, field):
    rows = [_row() for _ in range(RNG.randrange(1, 6))]
    i = RNG.randrange(len(rows))
    del rows[i]["shape"][field]
    assert f"row {i}: field 'shape.{field}' missing" in _error(tmp_path / "r.json", json.dumps(_results(rows)))
    rows[i]["shape"][field] = RNG.choice([0, -4, 1.5, "4096", True])
    assert f"row {i}: field 'shape.{field}' must be a positive whole number" in _error(
        tmp_path / "r.json", json.dumps(_results(rows)))


@pytest.mark.parametrize("field, value, message", [
    ("kernel", 3, "field 'kernel' must be a string"), ("kernel", " ", "field 'kernel' is empty"),
    ("ok", "yes", "field 'ok' must be true or false"), ("ok", 1, "field 'ok' must be true or false"),
    ("shape", [4, 16], "field 'shape' must be an object"), ("measured_ms", "fast", "field 'measured_ms' must be a number"),
    ("measured_ms", -1.0, "field 'measured_ms' must not be negative"), ("config", [1], "field 'config' must be an object"),
    ("timing", 5, "field 'timing' must be an object"), ("error", 7, "field 'error' must be a string"),
])
def test_row_field_of_the_wrong_type(tmp_path, field, value, message):
    rows = [_row() for _ in range(3)]
    rows[2][field] = value
    assert f"row 2: {message}" in _error(tmp_path / "r.json", json.dumps(_results(rows)))


def test_non_finite_number_is_refused(tmp_path):
    rows = [_row()]
    rows[0]["measured_ms"] = float("nan")
    assert "field 'measured_ms' must be a number" in _error(tmp_path / "r.json", json.dumps(_results(rows)))


@pytest.mark.parametrize("field, value", [("complete", "no"), ("rows_planned", "154"), ("rows_planned", -1),
                                          ("gpu_key", 5), ("calibration", [1]), ("notes", "x")])
def test_header_field_of_the_wrong_type(tmp_path, field, value):
    assert f"field '{field}'" in _error(tmp_path / "r.json", json.dumps(_results(**{field: value})))


def test_fifo_and_directory_are_not_read(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(ResultsError, match=r"pipe\.json: a named pipe \(FIFO\), not a results file"):
        load_results(fifo)   # would block forever if it were opened
    with pytest.raises(ResultsError, match="a directory, not a results file"):
        load_results(tmp_path)


def test_scratch_tables_are_refused_and_kept_out_of_the_tools_paths():
    scratch = sorted((RESULTS / "archive" / "scratch").glob("*.json"))
    assert len(scratch) == 4 and (RESULTS / "archive" / "scratch" / "README.md").is_file()
    for p in scratch:
        with pytest.raises(ResultsError, match="row 0: field 'kernel' missing"):
            load_results(p)
    # every results file the tools glob for loads
    for p in sorted(RESULTS.glob("*.json")) + sorted((RESULTS / "archive").glob("*.json")):
        assert load_results(p)[0]["rows"], p


def test_partial_run_is_noted_and_committed_files_are_complete(tmp_path):
    planned = RNG.randrange(10, 200)
    rows = [_row() for _ in range(RNG.randrange(1, 9))]
    p = tmp_path / "partial.json"
    p.write_text(json.dumps(_results(rows, complete=False, rows_planned=planned)))
    notes = evaluate(load_results(p), recompute=False).notes
    assert f"{p}: partial run, {len(rows)} of {planned} planned rows" in notes, (SEED, notes)
    p.write_text(json.dumps(_results(rows, complete=False, rows_planned=None)))
    assert any("stopped before its plan was made" in n for n in evaluate(load_results(p), recompute=False).notes)
    p.write_text(json.dumps(_results(rows, complete=True, rows_planned=planned)))
    assert not any("partial" in n for n in evaluate(load_results(p), recompute=False).notes)
    run11 = load_results(RESULTS / "h100-sxm-2026-11-22-run11.json")
    assert "complete" not in run11[0] and not any("partial" in n for n in evaluate(run11, recompute=False).notes)


def test_the_report_prints_the_partial_note(tmp_path):
    """The text ``python -m iomodel validate`` prints carries the note."""
    p = tmp_path / "partial.json"
    rows = [_row() for _ in range(5)]
    p.write_text(json.dumps(_results(rows, complete=False, rows_planned=154)))
    assert f"{p}: partial run, 5 of 154 planned rows" in format_report(evaluate(load_results(p), recompute=False))
