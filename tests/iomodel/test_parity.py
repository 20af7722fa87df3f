"""A peer against our pick over several results files (iomodel.peer_ratios.parity): one run's lead is not a win, a
lead in every run or by a median beyond 1% is; an mma.sync family faces only the mma.sync peers on a GPU with wgmma.
In the text, the JSON and the page of `iomodel validate`."""
from __future__ import annotations

import json
import random
import statistics

import pytest

from iomodel.accuracy import evaluate
from iomodel.accuracy_text import format_report
from iomodel.peer_ratios import PeerRatio, faces, parity
from iomodel.results import ResultRow, jsonable

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
SHAPE = {"B": 4, "H": 16, "H_kv": 16, "N_q": 4096, "N_k": 4096, "d": 128, "causal": False, "dtype": "bf16"}


def _runs(ratios, kernel="flash_sm90", peer="fa4"):
    ms = random.uniform(0.5, 2.0)
    return [PeerRatio(f"run{i}.json", dict(SHAPE), kernel, "128x128 c2 s2", ms, {peer: r})
            for i, r in enumerate(ratios)]


@pytest.mark.parametrize("ratios,wins", [
    ([0.995, 0.998], True),            # faster in every run, however little
    ([0.97, 1.01, 1.005], False),      # one run's lead, the median ours
    ([0.98, 0.985, 1.02], True),       # a median lead beyond 1%
    ([0.995], False),                  # one run, within 1%
    ([0.985], True),                   # one run, beyond 1%
    ([1.002, 0.9995, 1.0], False),
])
def test_a_peer_wins_by_a_lead_in_every_run_or_a_median_beyond_one_percent(ratios, wins):
    jitter = random.uniform(-1e-4, 1e-4) if len(ratios) > 1 else 0.0
    got = parity(_runs([r + jitter for r in ratios]), {f"run{i}.json": H100 for i in range(len(ratios))})
    assert len(got) == 1 and got[0].peer_wins is wins and len(got[0].sources) == len(ratios)
    assert got[0].median == pytest.approx(statistics.median([r + jitter for r in ratios]))


def test_the_mma_sync_family_faces_the_mma_sync_peers_on_hopper_and_every_peer_on_ampere():
    assert not faces("flash_sm80", "fa4", H100) and not faces("flash_sm80", "sdpa_cudnn", H100)
    assert faces("flash_sm80", "sdpa_flash", H100) and faces("flash_sm80", "sdpa_efficient", H100)
    assert faces("flash_sm90", "sdpa_cudnn", H100) and faces("flash_sm90", "fa4", H100)
    assert faces("flash_sm80", "sdpa_cudnn", A100)   # cuDNN runs mma.sync there
    assert faces("flash_sm80", "fa4", "some GPU no spec names")   # unknown: compared, as the per-file table
    rows = _runs([0.6, 0.65], kernel="flash_sm80", peer="sdpa_cudnn")
    assert parity(rows, {"run0.json": H100, "run1.json": H100}) == []
    assert parity(rows, {"run0.json": A100, "run1.json": A100})[0].peer_wins


def _file(name, ms_ours, ms_peer):
    ours = ResultRow(kernel="flash_sm90", config={"block_m": 128, "block_n": 128, "stages": 2, "head_dim": 128,
                                                  "consumers": 2}, config_label="128x128 c2 s2", shape=dict(SHAPE),
                     ok=True, measured_ms=ms_ours, predicted_ms=ms_ours)
    peer = ResultRow(kernel="fa4", config=None, config_label="-", shape=dict(SHAPE), ok=True, measured_ms=ms_peer)
    return {"_source": name, "device": H100, "gpu_key": "h100-sxm", "rows": [ours, peer]}


def test_validate_shows_the_runs_together_in_text_json_and_page():
    ms = random.uniform(0.5, 2.0)
    one = evaluate([_file("a.json", ms, ms * 0.98)], recompute=False)
    assert "Over the runs" not in format_report(one)   # one file: the per-file table says it all
    rep = evaluate([_file("a.json", ms, ms * 0.98), _file("b.json", ms, ms * 1.03), _file("c.json", ms, ms * 1.01)],
                   recompute=False)
    text = format_report(rep)
    assert "Over the runs" in text and "a peer wins 0 of 1 (shape, family) pairs" in text
    assert "flash_sm90: a peer faster at 1 of 3 shapes" in text   # the per-file count still says where it led
    data = json.loads(json.dumps(jsonable(rep)))
    (sp,) = data["parity"]
    assert sp["peer"] == "fa4" and sp["sources"] == ["a.json", "b.json", "c.json"] and not sp["peer_wins"]
    assert abs(sp["median"] - 1.01) < 1e-9
    lost = evaluate([_file("a.json", ms, ms * 0.98), _file("b.json", ms, ms * 0.99)], recompute=False)
    assert "a peer wins 1 of 1" in format_report(lost)
    from iomodel.hardware import resolve_gpu
    from iomodel.report import validation_html

    assert "Over the runs" in validation_html(rep, resolve_gpu("h100-sxm"))
