"""``python -m iomodel validate``: the one report command over results files (CPU only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iomodel.cli import main

RUN11 = str(Path(__file__).resolve().parents[2] / "validation" / "results" / "h100-sxm-2026-11-22-run11.json")


def _validate(capsys, *args):
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_recomputed_and_stored(capsys):
    code, out, _ = _validate(capsys, RUN11)
    assert code == 0 and "predictions recomputed with the current model" in out
    assert "our kernels       118" in out
    code, out, _ = _validate(capsys, RUN11, "--stored")
    assert code == 0 and "predictions as stored in the results" in out and "stored prediction" in out


def test_calibration_override(capsys):
    _, stored_cal, _ = _validate(capsys, RUN11)
    # an H200 calibration on H100 results: refused unless forced
    code, _, err = _validate(capsys, RUN11, "--calibration", "h200-sxm")
    assert code == 2 and "measured on h200-sxm, not h100-sxm" in err and "--force-calibration" in err
    code, out, _ = _validate(capsys, RUN11, "--calibration", "h200-sxm", "--force-calibration")
    assert code == 0 and "calibration h200-sxm" in out and out != stored_cal
    code, out, _ = _validate(capsys, RUN11, "--calibration", "none", "--json")
    assert code == 0 and json.loads(out)["calibrations"] == []


@pytest.mark.parametrize("args, needle", [
    (["/nonexistent.json"], "/nonexistent.json: cannot read"),
    ([RUN11, "--calibration", "/nonexistent.toml"], "nonexistent.toml"),
    ([RUN11, "--calibration", "nne"], "did you mean none?"),
    ([RUN11, "--stored", "--calibration", "h100-sxm"], "--calibration not used with --stored"),
    ([RUN11, "--gpu", "h100-sxm"], "--gpu not used without --html"),
    ([RUN11, "--html", "page.svg"], "--html page.svg: unknown suffix"),
    ([RUN11, "--html", "-", "--json"], "both write to standard output"),
])
def test_errors_one_line(capsys, args, needle):
    code, _, err = _validate(capsys, *args)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0]


def test_html_page(capsys, tmp_path):
    pytest.importorskip("plotly")
    page = tmp_path / "report.html"
    code, out, _ = _validate(capsys, RUN11, "--html", str(page), "--gpu", "h100-sxm")
    assert code == 0 and f"wrote {page}" in out
    assert page.read_text().rstrip().endswith("</html>")
    # the old option name still works (hidden from help); `-` puts the page on stdout instead of the text
    code, out, _ = _validate(capsys, RUN11, "--html", "-", "--gpu-spec", "h100-sxm")
    assert code == 0 and out.lstrip().startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")


def test_json_report(capsys):
    code, out, _ = _validate(capsys, RUN11, "--stored", "--json")
    report = json.loads(out)
    assert code == 0 and report["ours"]["n"] == 118 and report["recomputed"] is False  # accuracy.Report's fields
