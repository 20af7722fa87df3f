"""Our kernels against the peers in the accuracy report (iomodel.peer_ratios): each family's model pick of a shape
against each peer's measured time, in the text, the HTML and the JSON of `iomodel validate`."""
from __future__ import annotations

import json
import random

from iomodel.accuracy import evaluate
from iomodel.accuracy_text import format_report
from iomodel.peer_ratios import peer_ratios
from iomodel.results import ResultRow


class Row:
    def __init__(self, kernel, config, shape, measured, predicted, peer=False, source="run.json"):
        self.kernel, self.config_label, self.shape, self.measured_s = kernel, config, shape, measured
        self.predicted_s, self.is_peer, self.source = predicted, peer, source


def shape(N, d, causal=False):
    return {"B": 16384 // N, "H": 2048 // d, "H_kv": 2048 // d, "N_q": N, "N_k": N, "d": d, "causal": causal,
            "dtype": "bf16"}


def test_each_family_is_held_at_its_own_pick_against_every_peer_of_its_shape():
    rnd = random.Random()
    s1, s2 = shape(4096, 128), shape(1024, 64, True)
    t = {k: rnd.uniform(0.5, 2.0) for k in ("a", "b", "c", "cudnn", "fa4", "d", "cudnn2")}
    rows = [Row("flash_sm90", "128x128", s1, t["a"], 1.0), Row("flash_sm90", "128x64", s1, t["b"], 2.0),
            Row("flash_sm80", "128x64 w4", s1, t["c"], 3.0), Row("sdpa_cudnn", "-", s1, t["cudnn"], None, True),
            Row("fa4", "-", s1, t["fa4"], None, True),
            Row("flash_sm90", "192x128", s2, t["d"], 1.0), Row("sdpa_cudnn", "-", s2, t["cudnn2"], None, True),
            Row("flash_sm80", "128x128", shape(16384, 64), 1.0, 1.0)]   # no peer on its shape: no entry
    got = peer_ratios(rows)
    assert [(p.kernel, p.config) for p in got] == [("flash_sm90", "128x128"), ("flash_sm80", "128x64 w4"),
                                                  ("flash_sm90", "192x128")]
    assert got[0].peers == {"sdpa_cudnn": t["cudnn"] / t["a"], "fa4": t["fa4"] / t["a"]}   # the pick, not the fastest
    assert got[1].peers["fa4"] == t["fa4"] / t["c"]
    assert got[2].peers == {"sdpa_cudnn": t["cudnn2"] / t["d"]}
    assert got[0].best_peer == min(got[0].peers.items(), key=lambda kv: kv[1])


def _record(ms_ours, ms_peer):
    s = shape(4096, 128)
    ours = ResultRow(kernel="flash_sm90", config={"block_m": 128, "block_n": 128, "stages": 2, "head_dim": 128,
                                                  "consumers": 2}, config_label="128x128 c2 s2", shape=s,
                     ok=True, measured_ms=ms_ours, predicted_ms=ms_ours)
    peer = ResultRow(kernel="fa4", config=None, config_label="-", shape=s, ok=True, measured_ms=ms_peer)
    return {"device": "NVIDIA H100 80GB HBM3", "gpu_key": "h100-sxm", "rows": [ours, peer]}


def test_the_report_says_where_a_peer_wins():
    ms = random.uniform(0.5, 2.0)
    rep = evaluate(_record(ms, ms * 0.9), recompute=False)
    assert len(rep.peer_ratios) == 1 and abs(rep.peer_ratios[0].peers["fa4"] - 0.9) < 1e-12
    text = format_report(rep)
    assert "Against the peers" in text and "0.900" in text
    assert "flash_sm90: a peer faster at 1 of 1 shapes" in text
    assert "a peer faster at 0 of 1" in format_report(evaluate(_record(ms, ms * 1.1), recompute=False))


def test_the_json_and_the_page_carry_it(tmp_path):
    from iomodel.cli.reports import print_json  # noqa: F401 - the CLI's JSON is the report's fields
    from iomodel.results import jsonable

    rep = evaluate(_record(1.0, 1.25), recompute=False)
    data = json.loads(json.dumps(jsonable(rep)))
    assert data["peer_ratios"][0]["kernel"] == "flash_sm90" and data["peer_ratios"][0]["peers"] == {"fa4": 1.25}
    from iomodel.hardware import resolve_gpu
    from iomodel.report import validation_html

    assert "Against the peers" in validation_html(rep, resolve_gpu("h100-sxm"))
