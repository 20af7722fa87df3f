"""The variable-length prefill rows of the algorithm phase (``--only varlen``, validation/varlen.py) without
a GPU: the rows planned, the FLOPs and ratio arithmetic, a dry run's JSON (predictions, ratios, a peer's
error), the selection by ``--only`` and ``--algo-peers``, and the table printed at the end."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iomodel.accuracy import evaluate
from iomodel.algo_peers import (ALGO_KERNELS, ALGO_SIZES, VARLEN_DENSE, VARLEN_FAMILY, VARLEN_KERNELS, VARLEN_PEERS,
                                algo_flops, algo_of, algo_shape_label, default_pass, varlen_prediction)
from iomodel.problems import conventional_flops
from iomodel.results import ResultRow, load_results, shape_label
from validation.algorithms import algorithm_rows
from validation.fake_env import FakeEnv, FakeVarlen
from validation.plan import DEFAULT_ONLY, ONLY_CHOICES, SWEEP_KERNELS
from validation.sweep import SweepOptions, run_sweep
from validation.varlen import (DENSE_MIXES, DENSE_N, GROUPS, HEADS, MIXES, QUICK_GROUPS, TWINS, dense_shape,
                               log_uniform_lengths, ratios, summary, varlen_rows, varlen_shape, varlen_table)

ALL = (*VARLEN_KERNELS, *VARLEN_DENSE, *VARLEN_PEERS)


def _dry(spec, out, env=None, **kw):
    opts = dict(out=out, only=("varlen",), seed=3, measure_ceilings=False, dry_run=True)
    opts.update(kw)
    return run_sweep(env or FakeEnv(spec), spec, SweepOptions(**opts), log=lambda m: None)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The full varlen rows of a dry run on a (fake) H100, predicted by the real model."""
    from iomodel.hardware import resolve_gpu

    spec = resolve_gpu("h100-sxm")
    out = tmp_path_factory.mktemp("varlen") / "varlen.json"
    return _dry(spec, out), out, spec


# --------------------------------------------------------------------------- the rows

def test_the_mixes_and_groups_cover_the_issue():
    log = MIXES["log-uniform"]
    assert len(log) == 32 and min(log) >= 128 and max(log) <= 8192 and len(set(log)) > 20
    assert log == log_uniform_lengths(32, 128, 8192, 20261125)          # seeded: the same mix every run
    assert min(log) < 512 and max(log) > 4096                            # spread over the range, log-uniformly
    assert MIXES["uniform"] == (4096,) * 32
    assert {0, 1} <= set(MIXES["edge"]) and MIXES["edge"][0] == 0 and MIXES["edge"][-1] == 1
    assert set(HEADS) == {(128, 16, 16), (128, 32, 8), (64, 16, 16)}
    assert len(GROUPS) == 3 * 2 * 3 and {g[3] for g in GROUPS} == {False, True}
    assert DENSE_N == 4096 and "edge" not in DENSE_MIXES


def test_rows_of_a_group_ours_then_dense_then_peers():
    rows = varlen_rows()
    per = {m: len(VARLEN_KERNELS) + len(VARLEN_PEERS) + (len(VARLEN_DENSE) if m in DENSE_MIXES else 0) for m in MIXES}
    assert len(rows) == sum(per[g[4]] for g in GROUPS)
    first = [r.kernel for r in rows if r.group == 0]
    assert first == [*VARLEN_KERNELS, *VARLEN_DENSE, *VARLEN_PEERS]
    for r in rows:
        s = r.shape
        assert algo_of(r.kernel) == "varlen" and default_pass(r.kernel) == "fwd" and s["dtype"] == "bf16"
        assert s["T"] == sum(s["seqlens"]) and s["N_max"] == max(s["seqlens"]) and s["B"] == len(s["seqlens"])
        assert r.packed["layout"] == "packed" and r.packed["seqlens"] == list(MIXES[r.mix])
        if r.kernel in VARLEN_DENSE:   # the same tokens as B sequences of DENSE_N
            assert s["layout"] == "dense" and s["seqlens"] == [DENSE_N] * s["B"]
            assert s["B"] == r.packed["T"] // DENSE_N and s["backend"] == VARLEN_DENSE[r.kernel]
        else:
            assert s["layout"] == "packed" and s["seqlens"] == r.packed["seqlens"]
            assert s.get("backend") == VARLEN_KERNELS.get(r.kernel)
    assert [r.kernel for r in varlen_rows(quick=True)].count(VARLEN_FAMILY) == len(QUICK_GROUPS)


def test_selection_by_algo_peers_and_only():
    assert {r.kernel for r in varlen_rows(peers=("torch_varlen_attn",))} == {"torch_varlen_attn"}
    assert varlen_rows(peers=("torch_matmul",)) == []
    every = [algo_of(r.kernel) for r in algorithm_rows(quick=True)]
    assert every[-1] == "varlen" and set(every[every.index("varlen"):]) == {"varlen"}   # last in the phase
    assert {r.kernel for r in algorithm_rows(quick=True, algos=("varlen",))} == set(ALL)
    picked = algorithm_rows(quick=True, peers=(VARLEN_FAMILY, "sdpa_flash_decode"))
    assert {r.kernel for r in picked} == {VARLEN_FAMILY, "sdpa_flash_decode"}
    assert "varlen" in ONLY_CHOICES and "varlen" not in DEFAULT_ONLY
    assert all(ALGO_KERNELS[k] == "varlen" for k in ALL) and not set(ALL) & set(SWEEP_KERNELS)
    assert TWINS == {"flash_varlen_sm80": "flash_dense_sm80", "flash_varlen": "flash_dense"}


def test_configs_are_the_dense_twins_picks(spec):
    from validation.predictor import Predictor

    rows = varlen_rows(quick=True, predictor=Predictor(spec, "auto"))
    group = [r for r in rows if r.group == 0]
    by = {r.kernel: r for r in group}
    for ours, twin in TWINS.items():   # the same tiles: their ratio is the packing's cost alone
        assert by[ours].config == by[twin].config and by[ours].config is not None
        assert by[ours].family == by[twin].family and by[ours].label == by[twin].label
    assert by["flash_varlen_sm80"].family == "flash_sm80" and by["flash_varlen"].family == "flash_sm90"  # sm_90 spec
    assert all(by[p].config is None and by[p].why == "peer" for p in VARLEN_PEERS)


# --------------------------------------------------------------------------- arithmetic

def test_flops_sum_over_sequences():
    s = varlen_shape((0, 1, 100, 4096), 128, 32, 8, False)
    want = sum(4 * 32 * n * n * 128 for n in (1, 100, 4096))
    assert algo_flops("varlen", s) == pytest.approx(want)
    causal = {**s, "causal": True}
    assert algo_flops("varlen", causal) == pytest.approx(want / 2)   # the convention: halved at N_q = N_k
    d = dense_shape(varlen_shape((4096,) * 3 + (5000,), 64, 16, 16, True), "sm80")
    assert (d["B"], d["T"], d["N_max"]) == (4, 4 * 4096, 4096)   # 17288 tokens: four whole sequences
    dense_attention = {"B": 4, "H": 16, "H_kv": 16, "N_q": 4096, "N_k": 4096, "d": 64, "causal": True}
    assert algo_flops("varlen", d) == pytest.approx(conventional_flops(dense_attention))   # comparable TFLOP/s
    assert dense_shape(varlen_shape((100, 200), 128, 16, 16, False), "auto") is None


def test_summary_and_labels():
    s = varlen_shape(MIXES["edge"], 128, 32, 8, True)
    v = summary(s, "edge")
    assert (v["sequences"], v["min"], v["max"], v["total"], v["empty"]) == (12, 0, 4096, sum(MIXES["edge"]), 2)
    assert v["flops"] == algo_flops("varlen", s) and v["layout"] == "packed" and "mix_seed" not in v
    assert summary(varlen_shape(MIXES["log-uniform"], 64, 16, 16, False), "log-uniform")["mix_seed"] == 20261125
    assert shape_label(s) == f"packed B12 T{sum(MIXES['edge'])} Nmax4096 H32/8 d128 causal"
    assert algo_shape_label(dense_shape(s, "sm80")) == "dense B1 T4096 Nmax4096 H32/8 d128 causal"
    assert ALGO_SIZES["varlen"] == ("B", "H", "H_kv", "T", "N_max", "d")


def test_ratios_to_the_dense_rows():
    def rec(kernel, tflops, ok=True):
        r = ResultRow(kernel=kernel, shape={}, ok=ok, measured_tflops=tflops)
        r.extra["varlen"] = {}
        return r

    recs = [rec("flash_varlen_sm80", 300.0), rec("flash_varlen", 520.0), rec("flash_dense_sm80", 330.0),
            rec("flash_dense", 560.0), rec("torch_varlen_attn", 310.0), rec("sdpa_flash_nested", None, ok=False)]
    ratios(recs)
    ours = recs[0].extra["varlen"]
    assert ours["ratio_to_dense"] == pytest.approx({"flash_dense_sm80": 300 / 330, "flash_dense": 300 / 560})
    assert ours["dense_twin"] == "flash_dense_sm80" and ours["dense_ratio"] == pytest.approx(300 / 330)
    assert recs[1].extra["varlen"]["dense_ratio"] == pytest.approx(520 / 560)
    assert "dense_ratio" not in recs[4].extra["varlen"] and "ratio_to_dense" in recs[4].extra["varlen"]
    assert recs[2].extra["varlen"] == {} and recs[5].extra["varlen"] == {}   # dense rows and failed rows: none
    alone = [rec("flash_varlen_sm80", 300.0)]
    ratios(alone)
    assert alone[0].extra["varlen"] == {}   # no dense row in the group


def test_the_prediction_sums_the_sequences():
    s = varlen_shape((0, 1, 300, 1, 2048), 128, 16, 16, True)
    p = varlen_prediction("h100-sxm", s)
    from iomodel.chooser import choose
    from iomodel.algo_peers import varlen_sequence_shape

    want = sum(choose(["flash_sm80"], "h100-sxm", varlen_sequence_shape(s, n)).time_s for n in (1, 300, 1, 2048))
    assert p["time_s"] == pytest.approx(want) and p["kernel"] == "flash_sm80"
    assert p["method"].startswith("sum over sequences of flash_sm80 (B=1)")
    assert p["tflops"] == pytest.approx(algo_flops("varlen", s) / want / 1e12)
    d = varlen_prediction("h100-sxm", dense_shape(varlen_shape((4096,) * 4, 128, 16, 16, False), "auto"))
    assert d["kernel"] == "flash_sm90" and d["method"].startswith("dense batch")   # sm_90: flash_sm90 may be picked


# --------------------------------------------------------------------------- a dry run

def test_dry_run_rows_and_json(full):
    res, out, _spec = full
    rows = res["rows"]
    assert res["complete"] and res["rows_planned"] == len(rows) == len(varlen_rows())
    ok = [r for r in rows if r["ok"]]
    assert {r["kernel"] for r in ok} == set(ALL)
    for r in ok:
        v, t = r["varlen"], r["measured_ms"] / 1e3
        rate = FakeVarlen().rate(r["kernel"], r["config"])
        assert t == pytest.approx(FakeVarlen.LAUNCH_S + algo_flops("varlen", r["shape"]) / rate, rel=0.02)
        assert r["measured_tflops"] == pytest.approx(v["flops"] / t / 1e12)
        assert v["total"] == r["shape"]["T"] and v["sequences"] == r["shape"]["B"] and v["call"]
        assert r["pass"] == "fwd" and r["timing"]["queued_ahead"] is True and r["max_rel_err"] == 2e-3
        assert r["predicted_ms"] > 0 and r["prediction"]["time_s"] == pytest.approx(r["predicted_ms"] / 1e3)
        assert v["prediction_method"] == r["prediction"]["method"]
        if r["kernel"] in VARLEN_KERNELS and v["mix"] in DENSE_MIXES:   # the issue's acceptance, in the row
            twin = next(x for x in ok if x["kernel"] == TWINS[r["kernel"]] and x["varlen"]["mix"] == v["mix"]
                        and x["shape"]["H"] == r["shape"]["H"] and x["shape"]["d"] == r["shape"]["d"]
                        and x["shape"]["causal"] == r["shape"]["causal"])
            assert v["dense_ratio"] == pytest.approx(r["measured_tflops"] / twin["measured_tflops"])
        if v["mix"] == "edge":
            assert "ratio_to_dense" not in v
    (back,) = load_results(out)                                # the file loads; the varlen object is kept
    assert [r.kernel for r in back["rows"]] == [r["kernel"] for r in rows]
    assert back["rows"][0].extra["varlen"] == rows[0]["varlen"]


def test_a_peer_that_refuses_records_its_error(full):
    res, _out, _spec = full
    nested = [r for r in res["rows"] if r["kernel"] == "sdpa_flash_nested"]
    gqa = [r for r in nested if r["shape"]["H"] != r["shape"]["H_kv"]]
    assert gqa and all(not r["ok"] and "fake: sdpa_flash_nested does not take these inputs" in r["error"]
                       and "traceback_tail" in r and r["varlen"]["peer"]["call"] for r in gqa)
    assert all(r["ok"] for r in nested if r not in gqa) and all(r["predicted_ms"] for r in gqa)


def test_wrong_results_and_missing_kernel(spec, tmp_path):
    env = FakeEnv(spec)
    env.fake_varlen = FakeVarlen(wrong=(VARLEN_FAMILY,), fail=("torch_varlen_attn",), refuse_gqa=())
    res = _dry(spec, tmp_path / "w.json", env, quick=True)
    for r in res["rows"]:
        assert r["ok"] is (r["kernel"] not in (VARLEN_FAMILY, "torch_varlen_attn"))
        if r["kernel"] == VARLEN_FAMILY:
            assert r["error"].startswith("wrong result: max_rel_err 0.05 >= 0.01") and r["max_rel_err"] == 0.05
    res = _dry(spec, tmp_path / "b.json", quick=True, budget_s=1e-9)
    assert res["rows"] and all(r["error"].startswith("skipped: time budget") for r in res["rows"])


def test_the_report_keeps_varlen_apart(full):
    _res, out, _spec = full
    rep = evaluate(load_results(out), recompute=False)
    assert not rep.rows and rep.ours.n == 0 and rep.peers.n == 0    # the attention forward's statistics see none
    assert {a.kernel for a in rep.algorithms} == set(ALL)
    again = evaluate(load_results(out))   # python -m iomodel validate: predictions made again by the model
    assert all(a.prediction_source == "recomputed" and a.predicted_s > 0 for a in again.algorithms)
    stored = {(a.kernel, shape_label(a.shape)): a.predicted_s for a in rep.algorithms}
    for a in again.algorithms:   # a dense row's prediction is the same function as at run time
        if a.kernel in VARLEN_DENSE:
            assert a.predicted_s == pytest.approx(stored[(a.kernel, shape_label(a.shape))])


def test_the_table_at_the_end(full):
    res, _out, _spec = full
    lines = varlen_table(res).splitlines()
    assert lines[0].startswith("Variable-length prefill rows") and len(lines) == 2 + len(res["rows"])
    ours = next(r for r in res["rows"] if r["kernel"] == VARLEN_FAMILY and r["varlen"].get("dense_ratio"))
    assert any(VARLEN_FAMILY in ln and f"{ours['varlen']['dense_ratio']:.2f}" in ln for ln in lines)
    assert any("sdpa_flash_nested" in ln and "fake: sdpa_flash_nested" in ln for ln in lines)
    assert varlen_table({"rows": [r for r in res["rows"] if r["kernel"] not in ALL]}) is None


# --------------------------------------------------------------------------- the command line

def test_cli_dry_run_of_varlen_alone(tmp_path):
    """``--only varlen`` and ``--only algorithms --algo-peers`` run just the varlen rows (torch blocked)."""
    repo = Path(__file__).resolve().parents[2]
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('torch must not be imported here')\n")
    env = {"PYTHONPATH": f"{blocker}:{repo}", "PATH": "/usr/bin:/bin"}
    for args in (["--only", "varlen"], ["--only", "algorithms", "--algo-peers", "flash_varlen_sm80,flash_dense_sm80"]):
        out = tmp_path / "v.json"
        r = subprocess.run([sys.executable, "-m", "validation", "run", "--dry-run", "--quick", "--no-ceilings",
                            "--out", str(out), "--seed", "4", *args], capture_output=True, text=True, env=env,
                           cwd=repo, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "x flash_dense_sm80" in r.stderr and "Variable-length prefill rows" in r.stdout
        kernels = {row["kernel"] for row in json.loads(out.read_text())["rows"]}
        assert kernels == (set(ALL) if args[1] == "varlen" else {"flash_varlen_sm80", "flash_dense_sm80"})
