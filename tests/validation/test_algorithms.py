"""The sweep's algorithm phase (``--only algorithms``, the attention backward's peers and our backward
kernels included) and the L2 ceiling's host side, without a GPU."""
from __future__ import annotations

import json

import numpy as np
import pytest

import validation.algorithms as algorithms
from iomodel.algo_peers import ALGO_KERNELS, ALGO_PEERS, ALGO_SIZES, BACKWARD_KERNELS, algo_flops
from iomodel.problems import conventional_flops
from iomodel.results import load_results, shape_label
from validation.algorithms import (ALGORITHMS, BACKWARD_PEERS, BACKWARD_SHAPES, BACKWARD_TOLERANCE, MATMUL_SHAPES,
                                   algorithm_rows)
from iomodel.families.flash_bwd_sm80 import SHIPPED
from iomodel.families.flash_bwd_sm90 import SHIPPED as SHIPPED_SM90
from validation.fake_env import FakeAlgorithms, FakeEnv
from validation.microbench import _check_l2_sums, l2_buffer_bytes, measure_l2
from validation.plan import DEFAULT_ONLY, ONLY_CHOICES, make_shape
from validation.sweep import SweepOptions, run_sweep


@pytest.fixture()
def no_model(monkeypatch):
    """The model's prediction of an algorithm: 2 ms for every matmul, none for the others."""
    calls = []

    def fake(algo, gpu_key, shape):
        calls.append((algo, gpu_key))
        return ({"time_s": 2e-3, "bottleneck": "tensor"}, None) if algo == "matmul" else (None, "no model yet")

    monkeypatch.setattr(algorithms, "algo_prediction", fake)
    return calls


def test_the_rows_cover_the_issue():
    rows = [(r.kernel, r.shape) for r in algorithm_rows()]
    matmuls = [s for k, s in rows if k == "torch_matmul"]
    assert len(matmuls) >= 10 and len(matmuls) == len(MATMUL_SHAPES)
    assert {"M": 8192, "N": 8192, "K": 8192, "dtype": "bf16"} in matmuls
    assert any(s["M"] <= 128 and s["N"] >= 4096 for s in matmuls)      # skinny
    assert any(s["N"] <= 128 and s["M"] >= 4096 for s in matmuls)      # the transposed case
    assert any(s["K"] >= 65536 for s in matmuls)                        # K-large
    assert {"T": 8192, "D": 4096, "V": 128256, "dtype": "bf16"} in [s for k, s in rows if k == "torch_cross_entropy"]
    assert {"T": 16384, "D": 4096, "F": 14336, "dtype": "bf16"} in [s for k, s in rows if k == "torch_mlp"]
    for kernel, shape in rows:   # the library diagrams' size names, and nothing else but the dtype (and causal)
        algo = ALGO_KERNELS[kernel]
        causal = ("causal",) if algo in ("attention-backward", "decode", "varlen") else ()
        page = ("page_size",) if "page_size" in shape else ()   # decode's paged caches only
        # varlen's lengths and layout (a dense row's backend too): test_varlen_rows.py
        packing = ("seqlens", "layout", *(("backend",) if "backend" in shape else ())) if algo == "varlen" else ()
        assert set(shape) == {*ALGO_SIZES[algo], "dtype", *causal, *page, *packing}
    assert ALGORITHMS in ONLY_CHOICES and ALGORITHMS not in DEFAULT_ONLY   # the attention sweep is unchanged


def test_dry_run_of_the_algorithms(spec, tmp_path, no_model):
    out = tmp_path / "algo.json"
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=out, quick=True, only=(ALGORITHMS,), seed=1, dry_run=True),
                    log=lambda m: None)
    rows = res["rows"]
    assert res["complete"] and res["rows_planned"] == len(rows) == len(algorithm_rows(quick=True))
    assert {r["kernel"] for r in rows} == set(ALGO_KERNELS)
    peers = [r for r in rows if r["kernel"] in ALGO_PEERS]
    assert all(r["ok"] and r["config"] is None and r["why"] == "peer" for r in peers)
    for r in rows:
        algo = ALGO_KERNELS[r["kernel"]]
        if algo in ("decode", "varlen"):   # timed and predicted their own way: test_decode_rows.py, test_varlen_rows.py
            assert r["pass"] == "fwd" and algo in r
            continue
        rate = FakeAlgorithms().rate(r["kernel"], r["config"])
        assert r["measured_tflops"] == pytest.approx(algo_flops(algo, r["shape"]) / (r["measured_ms"] / 1e3) / 1e12)
        assert r["measured_tflops"] == pytest.approx(rate / 1e12, rel=0.02)
        assert r.get("pass") == ("bwd" if algo == "attention-backward" else None)
        if r["kernel"] in BACKWARD_KERNELS:   # our rows: the model of their own config (checked below)
            continue
        if algo == "matmul":
            assert r["predicted_ms"] == pytest.approx(2.0) and r["predicted_bottleneck"] == "tensor"
            assert r["predicted_tflops"] == pytest.approx(algo_flops(algo, r["shape"]) / 2e-3 / 1e12)
        else:
            assert r["predicted_ms"] is None and r["prediction_error"] == "no model yet"
    assert {c[1] for c in no_model} == {spec.key}
    (back,) = load_results(out)    # the file loads, its rows typed
    assert [r.kernel for r in back["rows"]] == [r["kernel"] for r in rows]
    assert json.loads(out.read_text())["calibration"]["l2_bandwidth"] > 0


def test_failing_and_wrong_algorithm_rows_are_recorded(spec, tmp_path, no_model):
    env = FakeEnv(spec)
    env.fake_algorithms = FakeAlgorithms(fail=("torch_mlp",), wrong=("torch_cross_entropy",))
    res = run_sweep(env, spec, SweepOptions(out=tmp_path / "a.json", quick=True, only=(ALGORITHMS,), seed=1,
                                            measure_ceilings=False, dry_run=True), log=lambda m: None)
    by = {r["kernel"]: r for r in res["rows"]}
    assert by["torch_mlp"]["ok"] is False and "fake failure of torch_mlp" in by["torch_mlp"]["error"]
    assert by["torch_cross_entropy"]["ok"] is False
    assert by["torch_cross_entropy"]["error"].startswith("wrong result: max_rel_err 0.05")
    assert by["torch_matmul"]["ok"] is True


def test_budget_skips_algorithm_rows(spec, tmp_path, no_model):
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=tmp_path / "a.json", quick=True, only=(ALGORITHMS,),
                                                      budget_s=1e-9, measure_ceilings=False, dry_run=True),
                    log=lambda m: None)
    assert res["rows"] and all(r["error"].startswith("skipped: time budget") for r in res["rows"])


def test_default_run_has_no_algorithm_rows(spec, tmp_path, no_model):
    res = run_sweep(FakeEnv(spec), spec, SweepOptions(out=tmp_path / "a.json", quick=True, seed=1,
                                                      measure_ceilings=False, dry_run=True), log=lambda m: None)
    assert not any(r["kernel"] in ALGO_PEERS for r in res["rows"]) and not no_model


# --------------------------------------------------------------------------- the L2 ceiling, host side

def test_l2_buffer_is_well_inside_l2():
    assert l2_buffer_bytes(50 * 2**20) == 8 * 2**20       # H100: under a quarter of 50 MiB, capped at 8 MiB
    assert l2_buffer_bytes(60 * 2**20) == 8 * 2**20
    assert l2_buffer_bytes(6 * 2**20) == 1 * 2**20        # a small L2: the largest power of two <= L2 / 4
    assert l2_buffer_bytes(40 * 2**20) == 8 * 2**20


def test_l2_sum_check_catches_missed_words():
    buf = np.random.default_rng(0).integers(0, 2**31, size=1024).astype(np.uint32)
    passes = 7
    per_thread = np.zeros(256, dtype=np.uint64)
    per_thread[0] = (int(buf.astype(np.uint64).sum()) * passes) % 2**32
    _check_l2_sums(np, buf, per_thread.astype(np.uint32), passes)     # every word read 7 times: passes
    per_thread[0] -= int(buf[5])                                      # one word read once less
    with pytest.raises(RuntimeError, match=r"^l2_read: sum of words read"):
        _check_l2_sums(np, buf, per_thread.astype(np.uint32), passes)


@pytest.mark.parametrize("size", [0, 8, 3 << 20])
def test_l2_buffer_must_be_a_power_of_two(size):
    with pytest.raises(ValueError, match="buffer_bytes must be a power of two of at least 16"):
        measure_l2(None, 132, 50 << 20, buffer_bytes=size or 12)


# --------------------------------------------------------------------------- the attention backward

BWD = {k for k, algo in ALGO_PEERS.items() if algo == "attention-backward"}
N_CFG = sum(c.head_dim == 128 for c in SHIPPED)   # shipped configs of the last shape's head dim
N_SM90 = sum(c.head_dim == 128 for c in SHIPPED_SM90)
# the three SDPA backends, then of each of our kernels the shipped configs of the head dim and the deterministic pick
PER_SHAPE = 3 + N_CFG + 1 + N_SM90 + 1
SM80 = ("flash_bwd_sm80", "flash_bwd_sm80_deterministic")


def test_backward_rows_are_the_attention_sweeps_shapes():
    all_rows = [r for r in algorithm_rows() if ALGO_KERNELS[r.kernel] not in ("decode", "varlen")]   # they come last
    rows = [(r.kernel, r.shape) for r in all_rows if r.kernel in BWD]
    assert BWD == {"torch_sdpa_flash_bwd", "torch_sdpa_cudnn_bwd", "torch_sdpa_efficient_bwd"}
    assert len(rows) == 3 * 20 and {k for k, _s in rows} == BWD and len(BACKWARD_SHAPES) == 20
    assert {(s["N"], s["d"], s["causal"]) for _k, s in rows} == {
        (n, d, c) for n in (1024, 2048, 4096, 8192, 16384) for d in (64, 128) for c in (False, True)}
    for _k, s in rows:
        assert s["B"] * s["N"] == 16384 and s["H"] * s["d"] == 2048 and s["N"] == s["M"] and s["dtype"] == "bf16"
        fwd = make_shape(s["N"], s["d"], s["causal"])
        assert algo_flops("attention-backward", s) == pytest.approx(2.5 * conventional_flops(fwd))
        assert algo_flops("attention-backward", s) == 10 * s["B"] * s["H"] * s["N"] * s["M"] * s["d"] / (
            2 if s["causal"] else 1)
    # a shape's rows together, after the forward algorithms: the backends, then our kernels
    kernels = [r.kernel for r in all_rows]
    assert kernels[-PER_SHAPE:] == [*BACKWARD_PEERS, *["flash_bwd_sm80"] * N_CFG, "flash_bwd_sm80_deterministic",
                                    *["flash_bwd_sm90"] * N_SM90, "flash_bwd_sm90_deterministic"]
    assert kernels.index("torch_sdpa_flash_bwd") > kernels.index("torch_mlp")
    assert shape_label(rows[0][1]) == "B16 H32 N1024 M1024 d64"
    assert shape_label(rows[3][1]) == "B16 H32 N1024 M1024 d64 causal"


def test_causal_backward_flops_count_the_live_pairs():
    full = {"B": 2, "H": 3, "N": 1000, "M": 3000, "d": 64, "dtype": "bf16"}
    causal = {**full, "causal": True}
    live = sum(min(i + 1 + 2000, 3000) for i in range(1000))   # query i sees keys up to i + (M - N)
    full_flops = algo_flops("attention-backward", full)
    assert algo_flops("attention-backward", causal) == pytest.approx(full_flops * live / 3e6)
    square = {**full, "M": 1000}
    assert algo_flops("attention-backward", {**square, "causal": True}) == algo_flops("attention-backward", square) / 2


def test_algo_peers_selects_rows():
    assert [r.kernel for r in algorithm_rows(peers=("torch_sdpa_cudnn_bwd",))] == ["torch_sdpa_cudnn_bwd"] * 20
    assert len(algorithm_rows(quick=True, peers=tuple(BWD))) == 3 * 2
    assert algorithm_rows(peers=()) == []
    ours = algorithm_rows(quick=True, peers=("flash_bwd_sm80_deterministic",))
    assert [(r.kernel, r.why, r.shape["causal"]) for r in ours] == [("flash_bwd_sm80_deterministic", "model-top", c)
                                                                     for c in (False, True)]


class _Reversed:
    """A predictor ranking configs in the reverse of the shipped order, its last one infeasible."""

    def __init__(self):
        self.calls = []

    def rank(self, kernel, shape, configs):
        self.calls.append((kernel, shape))
        return list(range(len(configs)))[::-1][1:], None


def test_our_rows_in_the_models_order():
    from iomodel.algo_peers import attention_shape

    notes, model = [], _Reversed()
    rows = algorithm_rows(quick=True, peers=SM80, predictor=model, notes=notes)
    first = [r for r in rows if not r.shape["causal"]]
    shipped = [c for c in SHIPPED if c.head_dim == 64]
    n = len(shipped)
    assert [r.why for r in first] == ["sweep"] * n + ["model-top"] and not notes
    assert [r.config for r in first[:n]] == [*shipped[n - 2::-1], shipped[-1]]   # the model's order, unranked last
    assert [r.predicted_rank for r in first] == [*range(n - 1), None, 0]
    assert first[n].config == shipped[n - 2]                                      # the deterministic kernel's pick
    assert {k for k, _s in model.calls} == set(SM80)
    assert model.calls[0][1] == attention_shape(first[0].shape)             # ranked on the attention form
    # no model: the shipped order (as the attention sweep's plan) and a note saying so
    rows = algorithm_rows(quick=True, peers=("flash_bwd_sm80",), notes=notes)
    assert [r.config for r in rows[:n]] == shipped and "model could not rank" in notes[0]


class _Within(FakeAlgorithms):
    """Backward gradients off by 1.5%: inside the backward's tolerance, outside a forward's."""

    def runner(self, kernel, config=None):
        run = super().runner(kernel, config)
        return lambda x: {**run(x), "err": 0.015}


def test_dry_run_of_the_backward_alone(spec, tmp_path, no_model):
    env = FakeEnv(spec)
    env.fake_algorithms = _Within(fail=("torch_sdpa_cudnn_bwd",))   # a backend the device lacks
    opts = SweepOptions(out=tmp_path / "b.json", only=(ALGORITHMS,), seed=1, measure_ceilings=False,
                        dry_run=True, algo_peers=tuple(sorted(BWD)))
    res = run_sweep(env, spec, opts, log=lambda m: None)
    rows = res["rows"]
    assert res["complete"] and res["rows_planned"] == len(rows) == 60 and {r["kernel"] for r in rows} == BWD
    assert res["options"]["algo_peers"] == sorted(BWD)
    for r in rows:
        if r["kernel"] == "torch_sdpa_cudnn_bwd":
            assert not r["ok"] and "fake failure of torch_sdpa_cudnn_bwd" in r["error"]
            continue
        assert r["ok"] and r["max_rel_err"] == pytest.approx(0.015) and 0.015 < BACKWARD_TOLERANCE
        assert r["pass"] == "bwd"
        rate = FakeAlgorithms.RATE[r["kernel"]]
        assert r["measured_tflops"] == pytest.approx(rate / 1e12, rel=0.02)
    assert {c[0] for c in no_model} == {"attention-backward"}
    (back,) = load_results(tmp_path / "b.json")
    assert {r.kernel for r in back["rows"]} == BWD
    # a matmul off by as much fails: the looser tolerance is the backward's alone
    env.fake_algorithms = _Within()
    res = run_sweep(env, spec, SweepOptions(out=tmp_path / "m.json", only=(ALGORITHMS,), seed=1, dry_run=True,
                                            measure_ceilings=False, algo_peers=("torch_matmul",), quick=True),
                    log=lambda m: None)
    assert all(r["error"].startswith("wrong result: max_rel_err 0.015") for r in res["rows"])
