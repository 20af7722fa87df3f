"""``python -m iomodel validate``: the one report command over results files (CPU only)."""

from __future__ import annotations

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
    code, out, _ = _validate(capsys, RUN11, "--calibration", "h200-sxm")
    assert code == 0 and "calibration h200-sxm" in out and out != stored_cal


@pytest.mark.parametrize("args, needle", [
    (["/nonexistent.json"], "/nonexistent.json: cannot read"),
    ([RUN11, "--calibration", "/nonexistent.toml"], "nonexistent.toml"),
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
