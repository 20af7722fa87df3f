"""Results rows of PyTorch's algorithms (torch_matmul, torch_cross_entropy, torch_mlp): the format, the
labels, the report, and the committed runs that hold them."""
from __future__ import annotations

from pathlib import Path

import pytest

from iomodel.accuracy import evaluate
from iomodel.accuracy_algos import algo_eval
from iomodel.accuracy_text import format_report
from iomodel.algo_peers import ALGO_PEERS, algo_flops, algo_shape_label
from iomodel.results import ResultRow, ResultsError, load_results, save_results, shape_label

RESULTS = Path(__file__).resolve().parents[2] / "validation" / "results"
COMMITTED = (RESULTS / "h200-sxm-2026-11-23-run3.json", RESULTS / "h100-sxm-2026-11-23-run1.json")


def _row(kernel="torch_matmul", shape=None, **kw):
    shape = shape or {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}
    return {"kernel": kernel, "config": None, "config_label": "-", "why": "peer", "shape": shape, "ok": True,
            "measured_ms": 0.2, **kw}


def _file(rows, gpu_key="h100-sxm"):
    return {"schema_version": 1, "device": "NVIDIA H100 80GB HBM3", "gpu_key": gpu_key, "rows": rows,
            "_source": "run.json"}


def test_algorithm_rows_load_and_save(tmp_path):
    rows = [_row(), _row("torch_cross_entropy", {"T": 8192, "D": 4096, "V": 32000, "dtype": "bf16"}),
            _row("torch_mlp", {"T": 16384, "D": 4096, "F": 14336, "dtype": "bf16"})]
    p = save_results(tmp_path / "r.json", _file(rows))
    (back,) = load_results(p)
    assert [r.as_dict()["shape"] for r in back["rows"]] == [r["shape"] for r in rows]


@pytest.mark.parametrize("kernel, shape, msg", [
    ("torch_matmul", {"M": 8, "N": 8}, "row 0: field 'shape.K' missing"),
    ("torch_mlp", {"T": 8, "D": 8, "F": 0}, "row 0: field 'shape.F' must be a positive whole number"),
    ("torch_cross_entropy", {"T": 8, "D": 8, "V": 8, "dtype": 16}, "row 0: field 'shape.dtype' must be a string"),
    ("flash_sm80", {"M": 8, "N": 8, "K": 8}, "row 0: field 'shape.B' missing"),   # attention rows as before
])
def test_bad_algorithm_shapes_say_so_in_one_line(kernel, shape, msg):
    with pytest.raises(ResultsError) as exc:
        load_results(_file([_row(kernel, shape)]))
    assert str(exc.value).startswith(f"run.json: {msg}")
    assert "\n" not in str(exc.value)


def test_labels_and_flops():
    assert shape_label({"M": 16, "N": 4096, "K": 4096, "dtype": "bf16"}) == "M16 N4096 K4096"
    assert shape_label({"T": 8192, "D": 4096, "V": 128256, "dtype": "fp16"}) == "T8192 D4096 V128256 fp16"
    assert algo_shape_label({"B": 1, "H": 1, "N_q": 1, "N_k": 1, "d": 64}) is None
    assert algo_flops("matmul", {"M": 2, "N": 3, "K": 5}) == 60
    assert algo_flops("cross-entropy", {"T": 2, "D": 3, "V": 5}) == 60
    assert algo_flops("mlp", {"T": 2, "D": 3, "F": 5}) == 120
    with pytest.raises(ValueError, match="unknown algorithm 'conv'"):
        algo_flops("conv", {})


def test_report_keeps_algorithms_out_of_the_attention_statistics():
    rows = [_row(predicted_ms=0.25, predicted_bottleneck="tensor"), _row("torch_mlp", {"T": 8, "D": 8, "F": 8}),
            _row("torch_matmul", ok=False, measured_ms=None, error="wrong result")]
    rep = evaluate(load_results(_file(rows)), recompute=False)
    assert not rep.rows and rep.ours.n == 0 and rep.peers.n == 0
    assert [a.kernel for a in rep.algorithms] == ["torch_matmul", "torch_mlp"]
    mm = rep.algorithms[0]
    assert mm.prediction_source == "stored" and mm.predicted_s == pytest.approx(2.5e-4)
    assert mm.err_pct == pytest.approx(25.0)
    assert mm.measured_tflops == pytest.approx(2 * 4096**3 / 2e-4 / 1e12)
    assert rep.algorithms[1].predicted_s is None
    assert [f["kernel"] for f in rep.failed] == ["torch_matmul"]
    text = format_report(rep)
    assert "Algorithms as PyTorch runs them" in text and "M4096 N4096 K4096" in text and "+25.0%" in text
    assert "torch_matmul - M4096 N4096 K4096: wrong result" in text


def test_predictions_are_recomputed_where_the_model_has_them():
    row = ResultRow.from_dict(_row(predicted_ms=0.25))
    calls = []

    def model(algo, gpu_key, shape):
        calls.append((algo, gpu_key, shape["M"]))
        return {"time_s": 1e-4, "bottleneck": "l2"}, None

    ev = algo_eval("run.json", "dev", "h100-sxm", row, predict=model)
    assert calls == [("matmul", "h100-sxm", 4096)]
    assert (ev.prediction_source, ev.predicted_s, ev.bottleneck) == ("recomputed", 1e-4, "l2")
    failed = algo_eval("run.json", "dev", "h100-sxm", row, predict=lambda *a: (None, "ModelError: no fit"))
    assert failed.prediction_source == "stored" and failed.prediction_error == "ModelError: no fit"


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_algorithm_runs(path):
    (res,) = load_results(path)
    rows = res["rows"]
    forward = {k for k, algo in ALGO_PEERS.items() if algo != "attention-backward"}   # issue 14's peers
    assert res["complete"] and all(r.ok for r in rows) and {r.kernel for r in rows} == forward
    matmuls = [r.shape for r in rows if r.kernel == "torch_matmul"]
    assert len(matmuls) >= 10 and {"M": 8192, "N": 8192, "K": 8192, "dtype": "bf16"} in matmuls
    assert all(r.max_rel_err < 1e-2 and r.timing["input_sets"] == 3 for r in rows)
    cal = res["calibration"]
    # the ceilings are complete, the L2 read rate above the HBM copy rate
    for name in ("gemm_flops", "copy_bandwidth", "l2_bandwidth", "mma_sync_flops_per_clk_per_sm",
                 "exp2_per_clk_per_sm", "fp32_fma_per_clk_per_sm", "clock_hz"):
        assert cal[name] > 0, name
    assert 2.0 < cal["l2_bandwidth"] / cal["copy_bandwidth"] < 4.0
