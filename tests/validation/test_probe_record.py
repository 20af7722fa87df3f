"""validation.probe_record: a probe's record under $OUT with the device, torch, date and command beside its rows
(torch stood in for by a stub with a device name and a version, so it runs without a GPU)."""
import json
import sys
import types

import pytest

from validation import probe_record


def test_record_holds_rows_command_and_where_it_ran(tmp_path, monkeypatch):
    stub = types.SimpleNamespace(__version__="9.9.9+stub", cuda=types.SimpleNamespace(get_device_name=lambda: "Stub GPU"))
    monkeypatch.setitem(sys.modules, "torch", stub)
    monkeypatch.setenv("OUT", str(tmp_path))
    rows = [{"impl": "a", "median_ms": 1.25}, {"impl": "b", "median_ms": 2.5}]
    path = probe_record.write("probe.json", rows, "python3 probe.py", note="extra field")
    got = json.loads((tmp_path / "probe.json").read_text())
    assert path == str(tmp_path / "probe.json")
    assert got["rows"] == rows and got["command"] == "python3 probe.py" and got["note"] == "extra field"
    assert got["device"] == "Stub GPU" and got["torch"] == "9.9.9+stub" and len(got["date"]) == 10
    assert list(got)[-1] == "rows"   # the rows last, after what says where they came from


def test_timed_rows_label_each_callable_and_keep_a_failure():
    from validation.timing import FakeTimer

    def bad(*a):
        raise RuntimeError("launch failed")

    timer = FakeTimer(lambda fn, inputs: 2e-3, repeats=5, noise=0.0)
    rows = probe_record.timed_rows(timer, [lambda *a: None, bad], ["good", "bad"], [(1,), (2,)], rounds=2,
                                   unit="us", d=64, causal=True)
    assert [r["impl"] for r in rows] == ["good", "bad"]
    assert rows[0]["median_us"] == 2e3 and rows[0]["min_us"] == 2e3 and rows[0]["d"] == 64 and rows[0]["causal"]
    assert rows[1]["median_us"] is None and rows[1]["min_us"] is None


def test_load_runs_a_probe_with_its_arguments_and_restores_argv(tmp_path):
    script = tmp_path / "other_probe.py"
    script.write_text("import sys\nSEEN = list(sys.argv[1:])\n\ndef twice(x):\n    return 2 * x\n")
    before = list(sys.argv)
    mod = probe_record.load(str(script), "none", "quiet")
    assert mod.SEEN == ["none", "quiet"] and mod.twice(21) == 42 and mod.__name__ == "other_probe"
    assert sys.argv == before
    script.write_text("import sys\nraise SystemExit(sys.argv[1])\n")
    with pytest.raises(SystemExit, match="stop"):
        probe_record.load(str(script), "stop")
    assert sys.argv == before   # restored when the script fails too
