"""The committed H100 measurements against the current model: fails when the model drifts."""
from pathlib import Path

import pytest

from iomodel.accuracy import evaluate
from iomodel.results import load_results

# the attention runs of the current kernels (runs 9 to 11); validation/results/archive/ keeps runs of earlier
# kernel versions, and the algorithm run of 2026-11-23 (PyTorch peers only) is checked in test_open_model
RESULTS_DIR = Path(__file__).resolve().parents[2] / "validation" / "results"
RESULTS = sorted(RESULTS_DIR.glob("h100-sxm-2026-11-22-run*.json"))


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
    # the rows keep the labels they were written with
    assert ("flash_sm80", "128x64w4s2") in configs


def test_time_error_has_not_drifted(report):
    # runs 9 to 11 (2026-11-22): 6.9% median over our kernels' rows; sm80 7.3, sm90 4.4 (max 19.9), unfused
    # 12.0. The bound is 10%; the per-family bounds sit a little above what was measured.
    assert report.ours.median_abs_pct <= 10.0
    assert report.per_kernel["flash_sm80"].median_abs_pct <= 10.0
    assert report.per_kernel["flash_sm90"].median_abs_pct <= 7.0
    assert report.per_kernel["flash_sm90"].max_abs_pct <= 25.0
    assert report.per_kernel["unfused"].median_abs_pct <= 15.0


def _family(report, kernel):
    return [g for g in report.groups if g.kernel == kernel and g.spearman is not None]


def test_tile_ranking_has_not_drifted(report):
    sm80 = _family(report, "flash_sm80")
    assert sm80 and sum(g.spearman for g in sm80) / len(sm80) >= 0.8
    assert all(g.top1 for g in sm80)
    # the Hopper kernel, runs 9 to 11: mean 0.88 over 12 groups (0.91 before the overlap cap of 2026-11-24);
    # the model's pick the fastest in all
    sm90 = _family(report, "flash_sm90")
    assert sm90 and sum(g.spearman for g in sm90) / len(sm90) >= 0.85
    assert all(g.top1 for g in sm90)
    # kernel and tile choice across all families for a shape: what `python -m iomodel predict` picks
    assert report.pooled_spearman_all >= 0.95
    assert all(g.top1 for g in report.shape_groups)
