"""The results file format (iomodel.results): typed rows, load and save, labels."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from iomodel import families
from iomodel.files import OutputError
from iomodel.results import (SCHEMA_VERSION, ResultRow, ResultsError, config_label, load_results, save_results,
                             shape_key, shape_label)

RESULTS = Path(__file__).resolve().parents[2] / "validation" / "results"
SHAPE = {"B": 4, "H": 16, "H_kv": 16, "N_q": 4096, "N_k": 4096, "d": 128, "causal": False, "dtype": "bf16"}


def _file(rows):
    return {"schema_version": SCHEMA_VERSION, "device": "NVIDIA H100 80GB HBM3", "gpu_key": "h100-sxm", "rows": rows}


def test_config_label_is_the_registry_label():
    assert config_label("flash_sm80", dict(block_m=128, block_n=64, warps=4, stages=2, head_dim=128)) == "128x64 w4 s2"
    assert config_label("unfused", dict(block_m=128, block_n=128, block_k=32, warps=4, stages=3)) == "128x128x32 w4 s3"
    sm90 = families.get("flash_sm90").shipped[0]
    assert config_label("flash_sm90", sm90) == families.get("flash_sm90").label(sm90) == "128x128 c2 s2"
    assert config_label("sdpa_flash", None) == "-"
    # outside the registry, or a config without the label's fields: its fields
    assert config_label("mystery", {"a": 1, "b": 2}) == "a=1,b=2"
    assert config_label("flash_sm80", {"block_m": 64}) == "block_m=64"


def test_shape_label_and_key():
    assert shape_label(SHAPE) == "d128 N4096 B4H16"
    gqa = {**SHAPE, "H_kv": 4, "N_k": 8192, "causal": True, "dtype": "fp16"}
    assert shape_label(gqa) == "d128 Nq4096Nk8192 B4H16/4 causal fp16"
    assert shape_key(SHAPE) == shape_key(dict(reversed(list(SHAPE.items()))))


def test_result_row_round_trips_every_committed_row():
    """A committed file read and written again is the same JSON: known keys typed, others kept."""
    for path in sorted(RESULTS.glob("h100-sxm-*.json")):
        raw = json.loads(path.read_text())["rows"]
        [data] = load_results(path)
        assert all(isinstance(r, ResultRow) for r in data["rows"])
        assert [r.as_dict() for r in data["rows"]] == raw
        # committed files keep the labels they stored (the format before the registry's)
        assert data["rows"][0].config_label == raw[0]["config_label"]


def test_result_row_optional_keys_only_when_set():
    row = ResultRow("flash_sm80", config={"block_m": 128}, config_label="x", shape=dict(SHAPE), extra={"note": 1})
    d = row.as_dict()
    assert "error" not in d and "timing" not in d and "prediction" not in d and d["note"] == 1
    row.error = "boom"
    assert row.as_dict()["error"] == "boom"
    with pytest.raises(ResultsError, match="row 3: field 'kernel' missing"):
        ResultRow.from_dict({"shape": SHAPE}, "row 3")


def test_save_and_load(tmp_path):
    rows = [ResultRow("flash_sm80", config={"block_m": 128}, config_label="c", shape=dict(SHAPE), ok=True,
                      measured_ms=1.0),
            {"kernel": "sdpa_flash", "shape": SHAPE, "ok": False, "error": "no"}]
    p = save_results(tmp_path / "r.json", _file(rows))
    [res] = load_results(p)
    assert res["_source"] == str(p) and [r.kernel for r in res["rows"]] == ["flash_sm80", "sdpa_flash"]
    assert res["rows"][1].error == "no" and res["rows"][1].config_label == ""
    assert len(load_results([p, str(p)])) == 2
    # an already loaded dict passes (rows typed), named by its device
    [again] = load_results(_file(rows))
    assert again["_source"] == "NVIDIA H100 80GB HBM3" and isinstance(again["rows"][1], ResultRow)


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ("{}", "no 'rows' list"),
    (json.dumps({"rows": [{"name": "x"}]}), "row 0: field 'kernel' missing"),
    (json.dumps({"schema_version": SCHEMA_VERSION + 1, "rows": []}), "newer than this iomodel reads"),
])
def test_load_errors_name_the_file(tmp_path, text, message):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(ResultsError, match=message) as e:
        load_results(bad)
    assert str(e.value).startswith(str(bad)) and "\n" not in str(e.value)


def test_load_missing_file(tmp_path):
    with pytest.raises(ResultsError, match="missing.json: cannot read"):
        load_results(tmp_path / "missing.json")


def test_save_results_atomic(tmp_path, monkeypatch):
    p = tmp_path / "sub" / "out.json"
    with pytest.raises(OutputError, match="sub does not exist"):  # only folders the tools own are made
        save_results(p, {"a": 1})
    save_results(p, {"a": 1, "nan": float("nan"), "t": (1, 2), "path": Path("/x")}, create_parent=True)
    assert json.loads(p.read_text()) == {"a": 1, "nan": None, "t": [1, 2], "path": "/x"}
    save_results(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2}
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.json"]

    # a failure while replacing leaves the old file whole and no temp file behind
    def broken_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OutputError, match=r"out\.json: cannot write \(disk on fire\); the old file is unchanged"):
        save_results(p, {"a": 3})
    assert json.loads(p.read_text()) == {"a": 2}
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.json"]
