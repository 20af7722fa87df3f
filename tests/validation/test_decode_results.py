"""The committed H100 run of the decode rows (validation/results/h100-sxm-2026-11-24-decode-run2.json)
against what the docs and the issue note say of it: every row of ours checked and timed; a read roof
measured in the run; the paged cache (pages of 16 and 256) within 10% of the same kernel on a contiguous
cache; with N_q = 4 (GQA 32:8) at least 1.5x the best SDPA backend; the model within a 10% median error
on our rows; at N_q = 1 within 5% of the best SDPA backend.  (Not the issue's 1.5x under 64 MiB, nor 0.92
of the roof at 256 MiB: the docs and the note say so, nothing here hides it.)"""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "validation" / "results" / "h100-sxm-2026-11-24-decode-run2.json"
OURS = "flash_decode_sm80"


def _groups() -> dict:
    by = defaultdict(list)
    for r in json.loads(RUN.read_text())["rows"]:
        s = r["shape"]
        by[(s["B"], s["H"], s["H_kv"], s["N_q"], s["N_k"])].append(r)
    return by


def test_our_rows_were_checked_and_timed_beside_a_read_roof():
    data = json.loads(RUN.read_text())
    assert data["complete"] and data["device"].startswith("NVIDIA H100")
    assert 2.5e12 < data["read_roof"]["bandwidth"] < 3.4e12
    ours = [r for r in data["rows"] if r["kernel"] == OURS]
    assert len(ours) == 18 and all(r["ok"] and r["measured_ms"] > 0 for r in ours)
    assert all(r["timing"]["queued_ahead"] for r in data["rows"] if r["ok"])


def test_paged_caches_cost_little_over_contiguous():
    paged = 0
    for rows in _groups().values():
        mine = {r["shape"].get("page_size", 0): r["measured_ms"] for r in rows if r["kernel"] == OURS}
        for page, ms in mine.items():
            if page:
                paged += 1
                assert ms <= 1.10 * mine[0], page
    assert paged == 4


def test_speculative_rows_beat_the_best_sdpa_backend():
    spec = 0
    for key, rows in _groups().items():
        if key[3] == 4:
            spec += 1
            ours = min(r["measured_ms"] for r in rows if r["kernel"] == OURS)
            best = min(r["measured_ms"] for r in rows if r["kernel"] != OURS and r["ok"])
            assert best >= 1.5 * ours, key
    assert spec == 2


def test_single_query_rows_at_parity_with_the_best_backend():
    for key, rows in _groups().items():
        if key[3] == 1:
            ours = min(r["measured_ms"] for r in rows if r["kernel"] == OURS and "page_size" not in r["shape"])
            best = min(r["measured_ms"] for r in rows if r["kernel"] != OURS and r["ok"])
            assert ours <= 1.05 * best, key


def test_model_median_error_on_our_rows():
    errs = [abs(r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"]
            for rows in _groups().values() for r in rows if r["kernel"] == OURS]
    assert statistics.median(errs) <= 0.10
