"""The committed H100 measurements against the current model: fails when the model drifts."""
from pathlib import Path

import pytest

from iomodel.validate import evaluate, load_results

RESULTS = sorted((Path(__file__).resolve().parent.parent / "validation" / "results").glob("h100-sxm-*.json"))


@pytest.fixture(scope="module")
def report():
    if not RESULTS:
        pytest.skip("no committed H100 results")
    return evaluate(load_results([str(p) for p in RESULTS]))


def test_committed_results_cover_the_acceptance(report):
    kernels = {r.kernel for r in report.rows}
    assert {"flash_sm80", "flash_sm90", "unfused", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"} <= kernels
    configs = {(r.kernel, r.config_label) for r in report.rows if not r.is_peer}
    assert len(configs) >= 20
    assert all(r.prediction_source == "recomputed" for r in report.rows if not r.is_peer)


def test_time_error_has_not_drifted(report):
    # measured at 7.4% median over our kernels' rows (2026-11-22); the issue's bound is 10%
    assert report.ours.median_abs_pct <= 10.0
    assert report.per_kernel["flash_sm80"].median_abs_pct <= 10.0
    assert report.per_kernel["flash_sm90"].median_abs_pct <= 12.0
    assert report.per_kernel["unfused"].median_abs_pct <= 15.0


def test_tile_ranking_has_not_drifted(report):
    sm80 = [g.spearman for g in report.groups if g.kernel == "flash_sm80" and g.spearman is not None]
    assert sm80 and sum(sm80) / len(sm80) >= 0.8
    assert all(g.top1 for g in report.groups if g.kernel == "flash_sm80")
    # kernel and tile choice across all families for a shape: what `python -m iomodel predict` picks
    assert report.pooled_spearman_all >= 0.9
    hits = sum(1 for g in report.shape_groups if g.top1)
    assert hits >= 0.8 * len(report.shape_groups)
