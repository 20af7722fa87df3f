"""Accuracy statistics (iomodel.accuracy) and their text (iomodel.accuracy_text), on synthetic results."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from iomodel.accuracy import MIN_GROUP, OUR_KERNELS, Stats, evaluate, rankdata, spearman
from iomodel.accuracy_text import format_report


# --------------------------------------------------------------------------- rank statistics

def test_rankdata_average_ties():
    assert rankdata([10, 20, 20, 30]).tolist() == [1, 2.5, 2.5, 4]
    assert rankdata([3, 1, 2]).tolist() == [3, 1, 2]
    assert rankdata([5, 5, 5]).tolist() == [2, 2, 2]
    assert rankdata([2.0, 1.0, 2.0, 1.0, 3.0]).tolist() == [3.5, 1.5, 3.5, 1.5, 5]


def test_spearman_matches_closed_form_for_distinct_ranks():
    rng = np.random.default_rng(0)
    for n in (3, 5, 11, 40):
        for _ in range(20):
            x = rng.normal(size=n)
            y = rng.normal(size=n)
            d = rankdata(x) - rankdata(y)
            expected = 1 - 6 * float(d @ d) / (n * (n * n - 1))
            assert spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_spearman_with_ties_matches_pearson_of_average_ranks():
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.integers(0, 4, size=9).astype(float)
        y = rng.integers(0, 4, size=9).astype(float)
        rx, ry = rankdata(x), rankdata(y)
        if rx.std() == 0 or ry.std() == 0:
            assert spearman(x, y) is None
            continue
        assert spearman(x, y) == pytest.approx(float(np.corrcoef(rx, ry)[0, 1]), abs=1e-12)


def test_spearman_brute_force_small():
    # every permutation of 4 items against the identity: rho = 1 - 6 sum d^2 / 60
    for perm in itertools.permutations(range(4)):
        d2 = sum((i - p) ** 2 for i, p in enumerate(perm))
        assert spearman(list(range(4)), list(perm)) == pytest.approx(1 - d2 / 10)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [7, 7, 7]) is None
    assert spearman([1], [2]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_stats_of():
    s = Stats.of([10.0, -30.0, 5.0, None, float("nan")])
    assert s.n == 3
    assert s.median_abs_pct == 10.0
    assert s.max_abs_pct == 30.0
    assert s.mean_signed_pct == pytest.approx(-5.0)
    assert Stats.of([]).n == 0 and Stats.of([]).median_abs_pct is None


def test_our_kernels_come_from_the_registry():
    assert OUR_KERNELS == ("flash_sm80", "flash_sm90", "unfused")


# --------------------------------------------------------------------------- synthetic results

def _shape(N=4096, d=128, causal=False):
    return {"B": 16384 // N, "H": 2048 // d, "H_kv": 2048 // d, "N_q": N, "N_k": N, "d": d, "causal": causal,
            "dtype": "bf16"}


def _row(kernel, label, shape, measured_ms, predicted_ms, ok=True, cfg=None):
    return {
        "kernel": kernel, "config": cfg if cfg is not None else {"label": label}, "config_label": label,
        "shape": shape, "ok": ok, "max_rel_err": 1e-3 if ok else None,
        "measured_ms": measured_ms if ok else None, "measured_tflops": None,
        "predicted_ms": predicted_ms, "predicted_tflops": None, "predicted_bottleneck": "tensor",
        **({} if ok else {"error": "boom"}),
    }


def _results(rows):
    return {"device": "NVIDIA H100 80GB HBM3", "gpu_key": "h100-sxm", "sm_count": 132, "date": "2026-11-23",
            "calibration": {"gpu_key": "h100-sxm", "date": "2026-11-23", "gemm_flops": 7.0e14},
            "rows": rows}


def _group(measured, predicted, kernel="flash_sm80", shape=None):
    shape = shape or _shape()
    return [_row(kernel, f"c{i}", shape, m, p) for i, (m, p) in enumerate(zip(measured, predicted))]


def test_evaluate_stored_predictions_known_spearman_and_errors():
    rng = np.random.default_rng(7)
    n = 8
    measured = np.sort(rng.uniform(1.0, 2.0, size=n))            # config i is the i-th fastest
    perm = [0, 2, 1, 3, 5, 4, 7, 6]                               # model's rank of config i
    predicted_sorted = np.sort(rng.uniform(0.8, 2.2, size=n))
    predicted = predicted_sorted[perm]
    expected_rho = 1 - 6 * sum((i - p) ** 2 for i, p in enumerate(perm)) / (n * (n * n - 1))
    shape = _shape()
    rows = [_row("flash_sm80", f"c{i}", shape, float(measured[i]), float(predicted[i])) for i in range(n)]
    # a second group with only 2 configs: no rank statistics
    rows += [_row("flash_sm90", f"s{i}", shape, 1.0 + i, 1.1 + i) for i in range(MIN_GROUP - 1)]
    # peers and a failed row
    rows += [_row("sdpa_flash", "-", shape, 2.0, 1.5), _row("sdpa_cudnn", "-", shape, 1.0, None),
             _row("flash_sm80", "bad", shape, None, 1.0, ok=False)]
    rep = evaluate(_results(rows), recompute=False)
    assert len(rep.groups) == 1
    g = rep.groups[0]
    assert g.kernel == "flash_sm80" and g.n == n
    assert g.spearman == pytest.approx(expected_rho)
    assert rep.pooled_spearman == pytest.approx(expected_rho)
    # the model's top (perm index 0 -> config 0) is also the fastest measured
    assert g.top_config == "c0" and g.best_config == "c0" and g.top1
    assert rep.top1_hits == 1 and rep.top1_total == 1
    ours_err = [(p - m) / m * 100 for p, m in zip(list(predicted) + [1.1, 2.1], list(measured) + [1.0, 2.0])]
    assert rep.ours.n == n + 2
    assert rep.ours.median_abs_pct == pytest.approx(float(np.median(np.abs(ours_err))))
    assert rep.ours.max_abs_pct == pytest.approx(float(np.max(np.abs(ours_err))))
    assert rep.peers.n == 1 and rep.peers.median_abs_pct == pytest.approx(25.0)
    assert rep.per_kernel["sdpa_cudnn"].n == 0  # measured but no prediction
    assert len(rep.failed) == 1 and rep.failed[0]["error"] == "boom"
    text = format_report(rep)
    for s in ("flash_sm80", "c0", "pooled mean spearman", "top-1 within 5%: 1/1", "boom", "-25.0%",
              "as stored in the results"):
        assert s in text, s


@pytest.mark.parametrize("slower, expected", [(1.04, True), (1.049, True), (1.06, False), (1.5, False)])
def test_top1_within_5pct(slower, expected):
    # model picks c1 (smallest prediction); the best measured is c0
    rep = evaluate(_results(_group([1.0, slower, 2.0], [0.9, 0.5, 0.7])), recompute=False)
    g = rep.groups[0]
    assert g.top_config == "c1" and g.best_config == "c0"
    assert g.top1 is expected
    assert g.top_slowdown_pct == pytest.approx((slower - 1) * 100)


def test_top1_tie_judged_by_slowest_tied():
    # c0 and c2 tie for the model's top; c2 is 20% slower than the best -> miss
    rep = evaluate(_results(_group([1.0, 1.1, 1.2], [0.5, 0.9, 0.5])), recompute=False)
    g = rep.groups[0]
    assert g.top_config == "c2" and not g.top1
    # ties in measured times: average ranks
    rep = evaluate(_results(_group([1.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])), recompute=False)
    assert rep.groups[0].spearman == pytest.approx(float(np.corrcoef([1.5, 1.5, 3, 4], [1, 2, 3, 4])[0, 1]))
    # all predictions equal: correlation undefined, not in the pooled mean
    rep = evaluate(_results(_group([1.0, 1.5, 2.0], [1.0, 1.0, 1.0])), recompute=False)
    assert rep.groups[0].spearman is None and rep.pooled_spearman is None


def test_groups_split_by_shape_and_pooled_mean():
    a = _group([1, 2, 3], [1, 2, 3], shape=_shape(causal=False))            # rho = 1
    b = _group([1, 2, 3], [3, 2, 1], shape=_shape(causal=True))             # rho = -1
    c = _group([1, 2, 3, 4], [1, 3, 2, 4], kernel="unfused", shape=_shape())  # rho = 0.8
    rep = evaluate(_results(a + b + c), recompute=False)
    rhos = sorted(g.spearman for g in rep.groups)
    assert rhos == pytest.approx([-1.0, 0.8, 1.0])
    assert rep.pooled_spearman == pytest.approx((1 - 1 + 0.8) / 3)
    # every family's configs of one shape ranked together: the non-causal shape has two families
    [choice] = rep.shape_groups
    assert choice.kernel == "all" and choice.n == 7 and choice.top_config == "flash_sm80 c0"


def test_evaluate_recomputes_with_given_predictor_and_stored_calibration():
    seen = []

    def predictor(kernel, spec, shape, config, cal):
        seen.append((kernel, spec.key, cal.gemm_flops if cal else None))
        return {"time_s": 2e-3, "bottleneck": "hbm", "hbm_bytes": 1e9, "feasible": True}

    def peer_predictor(peer, spec, shape, cal):
        return None

    rows = _group([1.0, 2.0, 4.0], [9.0, 9.0, 9.0]) + [_row("sdpa_flash", "-", _shape(), 1.0, 3.0)]
    rep = evaluate(_results(rows), predictor=predictor, peer_predictor=peer_predictor)
    assert seen and all(s == ("flash_sm80", "h100-sxm", 7.0e14) for s in seen)
    errs = sorted(r.err_pct for r in rep.rows if not r.is_peer)
    assert errs == pytest.approx([-50.0, 0.0, 100.0])
    assert all(r.prediction_source == "recomputed" for r in rep.rows if not r.is_peer)
    peer = [r for r in rep.rows if r.is_peer][0]
    assert peer.predicted_s is None and peer.prediction_source is None
    assert rep.recomputed


def test_evaluate_falls_back_to_stored_when_model_fails():
    def predictor(*a):
        raise RuntimeError("model broken")

    rep = evaluate(_results(_group([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])), predictor=predictor,
                   peer_predictor=lambda *a: None)
    assert all(r.prediction_source == "stored" for r in rep.rows)
    assert all("model broken" in r.prediction_error for r in rep.rows)
    assert any("could not be re-predicted" in n for n in rep.notes)
    assert "stored prediction (RuntimeError: model broken)" in format_report(rep)


def test_evaluate_marks_infeasible_and_unknown_gpu():
    rep = evaluate(_results(_group([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])),
                   predictor=lambda *a: {"time_s": 1e-3, "feasible": False}, peer_predictor=lambda *a: None)
    assert all(r.predicted_s is None and "infeasible" in r.prediction_error for r in rep.rows)
    res = {**_results(_group([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])), "gpu_key": None, "device": "Mystery GPU"}
    rep = evaluate(res)
    assert rep.gpu_key is None and any("Mystery GPU" in n for n in rep.notes)
    assert all(r.prediction_source == "stored" for r in rep.rows)
