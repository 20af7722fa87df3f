"""The committed H100 runs of the Hopper backward (validation/results/h100-sxm-2026-11-24-run5.json, the
first kernel; -run7.json and -run8.json, with 16-byte dK/dV stores and the causal launch order in
sections; -run9.json and -run10.json, with the tail split) against what the docs and the issue notes say of them: every row checked, our kernel at least
1.6x SDPA's FlashAttention-2 backward from N = 2048 and at least 0.95x cuDNN's at d = 64, the model within
a 10% median error on our rows.  (At d = 128 they are 0.94x to 1.02x, 0.94x to 1.06x, 0.97x to 1.08x,
0.98x to 1.12x and 0.975x to 1.095x cuDNN's: the notes say so, nothing here hides it.)"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from iomodel.accuracy import evaluate
from iomodel.results import load_results

RESULTS = Path(__file__).resolve().parents[2] / "validation" / "results"
RUNS = [RESULTS / f"h100-sxm-2026-11-24-run{i}.json" for i in (5, 7, 8, 9, 10)]
pytestmark = pytest.mark.parametrize("run", RUNS, ids=lambda p: p.stem)


def _rates(run: Path) -> dict:
    data = json.loads(run.read_text())
    by = defaultdict(dict)
    for r in data["rows"]:
        sh = r["shape"]
        by[(sh["d"], sh["N"], sh["causal"])][r["kernel"]] = r["measured_tflops"]
    return by


def test_every_row_was_checked_and_timed(run):
    data = json.loads(run.read_text())
    assert data["complete"] and data["device"].startswith("NVIDIA H100") and len(data["rows"]) == 80
    assert all(r["ok"] and r["measured_ms"] > 0 for r in data["rows"])


def test_against_the_peers_in_the_same_run(run):
    for (d, n, _), rate in _rates(run).items():
        ours = rate["flash_bwd_sm90"]
        if n >= 2048:
            assert ours >= 1.6 * rate["torch_sdpa_flash_bwd"], (d, n)
        if d == 64:
            assert ours >= 0.95 * rate["torch_sdpa_cudnn_bwd"], (d, n)
        assert rate["flash_bwd_sm90_deterministic"] <= ours * 1.02   # ordered adds cost, never pay


def test_the_model_predicts_our_rows_within_ten_percent(run):
    (res,) = load_results(run)
    rep = evaluate(res)
    stats = rep.backward_per_kernel
    assert set(stats) == {"flash_bwd_sm90", "flash_bwd_sm90_deterministic"}
    assert stats["flash_bwd_sm90"].n == 20 and stats["flash_bwd_sm90"].median_abs_pct <= 10.0
