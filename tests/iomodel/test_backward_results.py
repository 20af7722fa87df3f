"""A results row's ``pass`` (forward or backward attention) and the backward rows of our kernels in the
accuracy report: old files still load, the forward's numbers stay as they were, the backward's come apart."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from iomodel.accuracy import evaluate
from iomodel.accuracy_text import format_report, stats_rows
from iomodel.algo_peers import DECODE, VARLEN, algo_of, attention_shape, default_pass
from iomodel.report import validation_html
from iomodel.results import ResultRow, ResultsError, load_results, save_results

RESULTS = Path(__file__).resolve().parents[2] / "validation" / "results"
FWD = {"B": 4, "H": 16, "H_kv": 16, "N_q": 4096, "N_k": 4096, "d": 128, "causal": False, "dtype": "bf16"}
BWD = {"B": 4, "H": 16, "N": 4096, "M": 4096, "d": 128, "causal": True, "dtype": "bf16"}
MATMUL = {"M": 64, "N": 64, "K": 64, "dtype": "bf16"}


def _row(kernel, shape, measured_ms=1.0, predicted_ms=None, label="-", config=None, **kw):
    return {"kernel": kernel, "config": config, "config_label": label, "shape": shape, "ok": True,
            "measured_ms": measured_ms, "predicted_ms": predicted_ms, **kw}


def _file(rows):
    return {"schema_version": 1, "device": "NVIDIA H100 80GB HBM3", "gpu_key": "h100-sxm", "rows": rows,
            "_source": "run.json"}


def _cfg(bq, bk=128):
    return {"block_q": bq, "block_k": bk, "warps": 8, "stages": 2, "head_dim": 128}


# --------------------------------------------------------------------------- the field

@pytest.mark.parametrize("kernel, shape, want", [
    ("flash_sm80", FWD, "fwd"), ("sdpa_cudnn", FWD, "fwd"), ("torch_sdpa_flash_bwd", BWD, "bwd"),
    ("flash_bwd_sm80", BWD, "bwd"), ("flash_bwd_sm80_deterministic", BWD, "bwd"), ("torch_matmul", MATMUL, None),
])
def test_files_before_the_field_read_as_their_rows_were(kernel, shape, want):
    (res,) = load_results(_file([_row(kernel, shape)]))
    row = res["rows"][0]
    assert row.attention_pass == want == default_pass(kernel)
    assert row.pass_ is None and "pass" not in row.as_dict()   # rewritten as it was written
    assert "pass_" not in row.as_dict() and not row.extra


def test_pass_round_trips_and_is_checked(tmp_path):
    rows = [_row("flash_sm80", FWD, **{"pass": "fwd"}), _row("flash_bwd_sm80", BWD, label="64x128 w8 s2",
                                                                config=_cfg(64), **{"pass": "bwd"}),
            _row("torch_matmul", MATMUL)]
    p = save_results(tmp_path / "r.json", _file(rows))
    written = json.loads(p.read_text())["rows"]
    assert [r.get("pass") for r in written] == ["fwd", "bwd", None] and "pass" not in written[2]
    (back,) = load_results(p)
    assert [r.pass_ for r in back["rows"]] == ["fwd", "bwd", None]
    assert [r.attention_pass for r in back["rows"]] == ["fwd", "bwd", None]
    again = json.loads(save_results(tmp_path / "s.json", back).read_text())["rows"]   # typed rows, rewritten
    assert [r.get("pass") for r in again] == ["fwd", "bwd", None] and "pass" not in again[2]
    assert ResultRow(kernel="flash_sm80").attention_pass == "fwd"
    assert ResultRow(kernel="flash_sm80", pass_="bwd").attention_pass == "bwd"   # what the row says wins
    for bad, msg in (("sideways", "field 'pass' must be one of fwd, bwd (got 'sideways')"),
                     (1, "field 'pass' must be a string")):
        with pytest.raises(ResultsError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            load_results(_file([_row("flash_sm80", FWD, **{"pass": bad})]))
    with pytest.raises(ResultsError, match=r"row 0: field 'shape.causal' must be true or false"):
        load_results(_file([_row("torch_sdpa_cudnn_bwd", {**BWD, "causal": "yes"})]))


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_committed_files_load_with_their_pass(path):
    (res,) = load_results(path)
    for row in res["rows"]:
        assert row.attention_pass == default_pass(row.kernel)
        backward = row.kernel.endswith("_bwd") or row.kernel.startswith("flash_bwd")
        # PyTorch's matmul, loss and MLP rows have no attention pass; its decode and varlen peers are forwards
        no_pass = row.kernel.startswith("torch_") and algo_of(row.kernel) not in (DECODE, VARLEN)
        assert row.attention_pass == ("bwd" if backward else None if no_pass else "fwd")


# --------------------------------------------------------------------------- the report

def _mixed():
    """Forward rows of flash_sm80 and a peer, SDPA's backward, our backward's three configs and its pick."""
    fwd = [_row("flash_sm80", FWD, m, p, f"c{i}", {"label": f"c{i}"}) for i, (m, p) in
           enumerate(((1.0, 1.1), (1.2, 1.0), (1.5, 1.6)))] + [_row("sdpa_flash", FWD, 2.0, 1.5)]
    ours = [_row("flash_bwd_sm80", BWD, m, p, f"{bq}x128 w8 s2", _cfg(bq), **{"pass": "bwd"})
            for bq, m, p in ((64, 2.0, 2.2), (32, 2.5, 2.1), (128, 3.0, 3.3))]
    ours.append(_row("flash_bwd_sm80_deterministic", BWD, 4.0, 3.0, "64x128 w8 s2", _cfg(64)))
    peers = [_row("torch_sdpa_flash_bwd", BWD, 1.9, 2.0)]
    return fwd, peers, ours


def test_the_backward_has_its_own_number_and_the_forwards_stay():
    fwd, peers, ours = _mixed()
    alone = evaluate(_file(fwd), recompute=False)
    rep = evaluate(_file(fwd + peers + ours), recompute=False)
    for name in ("ours", "peers", "per_kernel", "groups", "pooled_spearman", "top1_hits", "top1_total"):
        assert getattr(rep, name) == getattr(alone, name), name
    assert stats_rows(alone) == stats_rows(rep)[:len(stats_rows(alone))]
    errs = [10.0, -16.0, 10.0, -25.0]   # (predicted - measured) / measured of our four backward rows
    assert rep.backward.n == 4 and rep.backward.median_abs_pct == pytest.approx(float(np.median(np.abs(errs))))
    assert rep.backward_per_kernel["flash_bwd_sm80"].median_abs_pct == pytest.approx(10.0)
    assert rep.backward_per_kernel["flash_bwd_sm80_deterministic"].max_abs_pct == pytest.approx(25.0)
    (g,) = rep.backward_groups
    assert (g.kernel, g.n, g.top_config, g.best_config, g.top1) == ("flash_bwd_sm80", 3, "32x128 w8 s2",
                                                                    "64x128 w8 s2", False)
    text = format_report(rep)
    assert "our backward kernels (bwd)" in text and "Our attention backward kernels" in text
    assert "flash_bwd_sm80_deterministic  64x128 w8 s2" in text and "top-1 within 5%: 0/1" in text
    assert "our backward kernels" not in format_report(alone)
    from iomodel.hardware import resolve_gpu

    html = validation_html(rep, resolve_gpu("h100-sxm"))
    assert "our backward kernels (bwd)" in html and "Our attention backward kernels" in html


def test_our_backward_rows_are_recomputed_with_their_config_and_the_files_calibration():
    _fwd, peers, ours = _mixed()
    calls = []

    def model(kernel, spec, shape, config, calibration):
        calls.append((kernel, spec.key, shape, config, calibration))
        if config["block_q"] == 128:
            raise ValueError("no fit")
        return {"time_s": 2e-3, "bottleneck": "tensor"}

    data = {**_file(peers + ours), "calibration": {"gpu_key": "h100-sxm", "date": "2026-11-23", "gemm_flops": 7e14}}
    rep = evaluate(data, predictor=model)
    assert [c[0] for c in calls] == ["flash_bwd_sm80"] * 3 + ["flash_bwd_sm80_deterministic"]
    assert all(c[2] == attention_shape(BWD) and c[4].gemm_flops == 7e14 for c in calls)
    assert calls[0][3] == _cfg(64)
    by = {(a.kernel, a.config_label): a for a in rep.algorithms if a.ours}
    assert by[("flash_bwd_sm80", "64x128 w8 s2")].prediction_source == "recomputed"
    failed = by[("flash_bwd_sm80", "128x128 w8 s2")]   # the model raised: the stored prediction stands
    assert failed.prediction_source == "stored" and failed.prediction_error == "ValueError: no fit"
    assert rep.backward.n == 4
