"""HTML pages: self-contained (plotly bundle inline, no remote scripts), every point and number shown."""

from __future__ import annotations

import html
import re

import pytest

pytest.importorskip("plotly")

from iomodel.accuracy import evaluate
from iomodel.hardware import Calibration, load_spec
from iomodel.report import roofline_ceilings, roofline_html, validation_html


def _assert_self_contained(page: str) -> None:
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert page.rstrip().endswith("</html>")
    # the plotly.js bundle is inline ...
    assert re.search(r"plotly\.js v\d+\.\d+", page), "plotly bundle missing"
    assert len(page) > 1_000_000
    # ... and nothing is fetched from the network
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?(https?:)?//", page, re.I)
    assert not re.search(r"<link[^>]*href\s*=\s*[\"']?(https?:)?//", page, re.I)


POINTS = [
    dict(label="flash_sm80 128x64w4s2 d128 N4096", flops=5.497558e11, hbm_bytes=2.68e8, time_s=1.61e-3,
         kind="measured", family="flash_sm80"),
    dict(label="flash_sm80 128x64w4s2 d128 N4096", flops=5.497558e11, hbm_bytes=2.68e8, time_s=1.56e-3,
         kind="predicted", family="flash_sm80"),
    dict(label="unfused <128x128> & co", flops=5.497558e11, hbm_bytes=4.1e10, time_s=9.87e-3,
         kind="measured", family="unfused"),
    dict(label="sdpa_flash d64 N1024", flops=1.37e11, hbm_bytes=1.34e8, time_s=4.76e-4,
         kind="measured", family="sdpa_flash"),
]


def test_roofline_html_self_contained_with_every_point_and_number():
    spec = load_spec("h100-sxm")
    cal = Calibration(gpu_key="h100-sxm", gemm_flops=7.02e14, copy_bandwidth=3.0e12,
                      mma_sync_flops_per_clk_per_sm=2466.0, clock_hz=1.98e9, exp2_per_clk_per_sm=16.0)
    page = roofline_html(spec, POINTS, "Roofline test <H100>", calibration=cal)
    _assert_self_contained(page)
    assert "Roofline test &lt;H100&gt;" in page
    for p in POINTS:
        assert html.escape(p["label"]) in page, p["label"]
    # the table beside the plot carries the numbers
    assert "341.5" in page          # 5.497558e11 / 1.61e-3 = 341.5 TFLOP/s
    assert "1.610 ms" in page and "9.870 ms" in page
    assert "2051" in page           # intensity 5.497558e11 / 2.68e8
    assert "989.4 TFLOP/s" in page  # datasheet tensor ceiling
    assert "702.0 TFLOP/s" in page  # calibrated GEMM
    assert "644.5 TFLOP/s" in page  # calibrated mma.sync: 2466 x 132 x 1.98 GHz
    assert "3.350 TB/s" in page and "3.000 TB/s" in page
    assert "SMEM roof" in page
    assert 'type":"log"' in page.replace(" ", "")


def test_roofline_ceilings_data():
    spec = load_spec("a100-sxm-40gb")
    roofs = roofline_ceilings(spec)
    names = [c["name"] for c in roofs["compute"]]
    assert any("datasheet" in n for n in names)
    assert not any("calibrated" in n for n in names)
    tensor = [c for c in roofs["compute"] if "tensor" in c["name"]][0]
    assert tensor["flops"] == pytest.approx(311.9e12, rel=1e-3)
    exp128 = [c for c in roofs["compute"] if "d=128" in c["name"]][0]
    assert exp128["flops"] == pytest.approx(16 * 108 * 1.41e9 * 512)
    assert roofs["bandwidth"][0]["bytes_per_s"] == pytest.approx(1.555e12)


def test_roofline_html_tolerates_points_without_bytes():
    spec = load_spec("h100-sxm")
    page = roofline_html(spec, [dict(label="no bytes", flops=1e12, hbm_bytes=None, time_s=1e-3,
                                     kind="measured", family="x")], "t")
    _assert_self_contained(page)
    assert "no bytes" in page


def _results():
    shape = {"B": 4, "H": 16, "H_kv": 16, "N_q": 4096, "N_k": 4096, "d": 128, "causal": False, "dtype": "bf16"}
    rows = []
    for i, (m, p) in enumerate([(1.70, 1.60), (1.80, 1.75), (2.10, 1.90)]):
        rows.append({"kernel": "flash_sm80", "config": {"i": i}, "config_label": f"cfg{i}", "shape": shape,
                     "ok": True, "measured_ms": m, "predicted_ms": p, "predicted_bottleneck": "tensor",
                     "prediction": {"hbm_bytes": 2.68e8}})
    rows.append({"kernel": "sdpa_cudnn", "config": None, "config_label": "-", "shape": shape, "ok": True,
                 "measured_ms": 0.95, "predicted_ms": None})
    rows.append({"kernel": "flash_sm80", "config": {"i": 9}, "config_label": "cfg9", "shape": shape, "ok": False,
                 "error": "RuntimeError: ptxas <fatal>"})
    return {"device": "NVIDIA H100 80GB HBM3", "gpu_key": "h100-sxm", "date": "2026-11-23",
            "calibration": {"gpu_key": "h100-sxm", "gemm_flops": 7.0e14, "copy_bandwidth": 3.0e12}, "rows": rows}


def test_validation_html():
    spec = load_spec("h100-sxm")
    rep = evaluate(_results(), recompute=False)
    page = validation_html(rep, spec)
    _assert_self_contained(page)
    assert page.count("plotly.js v") >= 1
    for label in ("cfg0", "cfg1", "cfg2", "sdpa_cudnn"):
        assert label in page
    assert "y = x" in page and "+10%" in page and "-10%" in page
    assert "Predicted vs measured" in page and "Roofline" in page
    # stats: errors -5.9%, -2.8%, -9.5% -> median |err| 5.9%, max 9.5%
    assert "5.9%" in page and "9.5%" in page
    assert "+1.00" in page  # Spearman of the one group
    assert "top-1 within 5%: 1/1" in page
    assert "ptxas &lt;fatal&gt;" in page  # failed rows, escaped
    assert "700.0 TFLOP/s" in page  # the stored calibration's GEMM ceiling
