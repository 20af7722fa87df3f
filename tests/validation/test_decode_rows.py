"""The decode rows of the algorithm phase (``--only decode``, validation/decode.py) without a GPU: the rows
planned, the bytes and bandwidth arithmetic, a dry run's JSON (read roof, effective bandwidth, predictions,
a peer's error), the selection by ``--only`` and ``--algo-peers``, and the table printed at the end."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import iomodel.algo_peers as algo_peers
import validation.decode as decode
from iomodel.accuracy import evaluate
from iomodel.accuracy_text import format_report
from iomodel.algo_peers import (ALGO_KERNELS, DECODE_FAMILY, DECODE_FLOOR, DECODE_KERNELS, DECODE_PEERS, algo_flops,
                                algo_of,
                                decode_model_shape, default_pass)
from iomodel.problems import conventional_flops
from iomodel.results import ResultRow, load_results
from validation.algorithms import algorithm_rows
from validation.decode import (DECODE_SHAPES, MAX_INPUT_SETS, QUICK_SHAPES, bandwidth_fields, decode_bytes,
                               decode_rows, decode_shape, decode_table, input_sets)
from validation.fake_env import FakeDecode, FakeEnv
from validation.plan import DEFAULT_ONLY, ONLY_CHOICES, SWEEP_KERNELS
from validation.sweep import SweepOptions, run_sweep

MiB = 1 << 20
PEERS = (*DECODE_PEERS, DECODE_FLOOR)   # the rows after ours in a group: SDPA's backends, then the read floor
ALL = (*DECODE_KERNELS, *PEERS)


def _dry(spec, out, env=None, **kw):
    opts = dict(out=out, only=("decode",), seed=3, measure_ceilings=False, dry_run=True)
    opts.update(kw)
    return run_sweep(env or FakeEnv(spec), spec, SweepOptions(**opts), log=lambda m: None)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The full decode rows of a dry run on a (fake) H100, predicted by the real model."""
    from iomodel.hardware import resolve_gpu

    spec = resolve_gpu("h100-sxm")
    out = tmp_path_factory.mktemp("decode") / "decode.json"
    return _dry(spec, out), out, spec


# --------------------------------------------------------------------------- the rows

def test_the_shapes_cover_the_issue():
    gqa = {(B, n) for B, n, H, hk, nq, _p in DECODE_SHAPES if (H, hk, nq) == (32, 8, 1)}
    assert gqa >= {(1, 8192), (1, 32768), (1, 131072), (8, 8192), (8, 32768), (32, 8192), (64, 4096), (64, 16384)}
    mha = [s for s in DECODE_SHAPES if s[2] == s[3] == 32 and s[4] == 1]
    spec = [s for s in DECODE_SHAPES if s[4] == 4]
    paged = [s for s in DECODE_SHAPES if s[5]]
    assert len(mha) >= 3 and len(spec) >= 2 and all((s[2], s[3]) == (32, 8) for s in spec)
    assert len(paged) == 2 and all(s[5] == (16, 256) for s in paged)
    kv = [decode_bytes(decode_shape(*s[:5]))["kv_read"] for s in DECODE_SHAPES]
    assert min(kv) == 32 * MiB and max(kv) >= 256 * MiB
    assert {s[0] for s in DECODE_SHAPES} >= {1, 64} and {s[1] for s in DECODE_SHAPES} >= {4096, 131072}
    assert all(s[1] % p == 0 for s in DECODE_SHAPES for p in s[5])   # whole pages


def test_rows_of_a_group_ours_then_paged_twins_then_peers():
    rows = decode_rows()
    n_paged = sum(len(s[5]) for s in DECODE_SHAPES)
    assert len(rows) == len(DECODE_SHAPES) * (1 + len(PEERS)) + n_paged
    first = [(r.kernel, r.shape.get("page_size"), r.why) for r in rows[:3 + len(PEERS)]]
    assert first[0] == (DECODE_FAMILY, None, "model-top")
    assert [(k, w) for k, _p, w in first[1:1 + len(PEERS)]] == [(p, "peer") for p in PEERS]
    i = next(k for k, r in enumerate(rows) if r.shape.get("page_size"))
    assert [(r.kernel, r.shape.get("page_size")) for r in rows[i - 1:i + 2]] == [(DECODE_FAMILY, None),
                                                                                (DECODE_FAMILY, 16), (DECODE_FAMILY, 256)]
    assert rows[i].shape == {**rows[i - 1].shape, "page_size": 16}   # the contiguous twin: same shape, same run
    for r in rows:
        s = r.shape
        assert s["d"] == 128 and s["dtype"] == "bf16" and s["causal"] is True and s["H"] % s["H_kv"] == 0
        assert algo_of(r.kernel) == "decode" and default_pass(r.kernel) == "fwd"
    assert len(decode_rows(quick=True)) == len(QUICK_SHAPES) * (1 + len(PEERS)) + sum(len(s[5]) for s in QUICK_SHAPES)


def test_selection_by_algo_peers_and_only():
    assert {r.kernel for r in decode_rows(peers=("sdpa_cudnn_decode",))} == {"sdpa_cudnn_decode"}
    assert decode_rows(peers=("torch_matmul",)) == []
    # the algorithm phase plans decode last but for varlen; --only decode plans decode alone
    every = [algo_of(r.kernel) for r in algorithm_rows(quick=True)]
    decode = every[every.index("decode"):every.index("varlen")]
    assert every[-1] == "varlen" and decode == ["decode"] * every.count("decode")
    assert {r.kernel for r in algorithm_rows(quick=True, algos=("decode",))} == set(ALL)
    picked = algorithm_rows(quick=True, peers=("flash_decode_sm80", "torch_matmul"))
    assert {r.kernel for r in picked} == {"flash_decode_sm80", "torch_matmul"}
    assert "decode" in ONLY_CHOICES and "decode" not in DEFAULT_ONLY
    assert all(k in ALGO_KERNELS for k in ALL) and not set(ALL) & set(algo_peers.ALGO_PEERS)
    assert DECODE_FAMILY not in SWEEP_KERNELS and DECODE_FAMILY not in DEFAULT_ONLY   # not an attention-sweep row


# --------------------------------------------------------------------------- arithmetic

def test_bytes_of_a_decode():
    s = decode_shape(8, 32768, 32, 8, 1)
    b = decode_bytes(s)
    assert b["kv_read"] == 2 * 8 * 32768 * 8 * 128 * 2 == 1 << 30
    assert b["q_read"] == b["o_written"] == 8 * 1 * 32 * 128 * 2
    assert b["total"] == b["kv_read"] + b["q_read"] + b["o_written"]
    mha = decode_bytes(decode_shape(1, 8192, 32, 32, 4))
    assert mha["kv_read"] == 128 * MiB and mha["q_read"] == 4 * 32 * 128 * 2
    assert decode_bytes({**s, "page_size": 16}) == b                 # paging moves the same bytes
    assert algo_flops("decode", s) == 4 * 8 * 32 * 1 * 32768 * 128   # one query: every key live
    four = decode_shape(1, 100, 4, 4, 4)                              # bottom-right: 97 + 98 + 99 + 100 keys
    assert algo_flops("decode", four) == pytest.approx(4 * 4 * 128 * (97 + 98 + 99 + 100))
    assert algo_flops("decode", four) == conventional_flops(decode_model_shape(four))


def test_effective_bandwidth_and_fraction_of_the_roof():
    rec = ResultRow(kernel=DECODE_FAMILY, shape=decode_shape(8, 32768, 32, 8, 1), measured_ms=0.4)
    rec.extra["decode"] = dict(decode_bytes(rec.shape))
    bandwidth_fields(rec, 3.0e12)
    eff = ((1 << 30) + 2 * 65536) / 4e-4
    assert rec.extra["decode"]["effective_bandwidth"] == pytest.approx(eff)
    assert rec.extra["decode"]["read_roof_fraction"] == pytest.approx(eff / 3.0e12)
    assert rec.extra["decode"]["read_floor_fraction"] is None   # no floor timed in the group
    bandwidth_fields(rec, None, floor_ms=0.38)
    assert rec.extra["decode"]["read_roof_fraction"] is None
    assert rec.extra["decode"]["read_floor_fraction"] == pytest.approx(0.95)


def test_input_sets_hold_three_times_the_l2():
    l2 = 50 * MiB
    assert input_sets(decode_shape(1, 8192, 32, 8, 1), 3, l2) == 5            # 32 MiB a set: 5 x 32 >= 150
    assert input_sets(decode_shape(8, 32768, 32, 8, 1), 3, l2) == 3           # 1 GiB: the sweep's three
    assert input_sets(decode_shape(1, 512, 32, 8, 1), 3, l2) == MAX_INPUT_SETS


def test_the_model_shape():
    one, four = decode_shape(2, 4096, 32, 8, 1, page_size=16), decode_shape(2, 4096, 32, 8, 4)
    assert decode_model_shape(one) == {"B": 2, "H": 32, "H_kv": 8, "N_q": 1, "N_k": 4096, "d": 128,
                                       "causal": False, "dtype": "bf16"}   # causal masks nothing: the kernel's shape
    assert decode_model_shape(four)["causal"] is True
    assert decode_model_shape(one, ("page_size",))["page_size"] == 16


# --------------------------------------------------------------------------- a dry run

def test_dry_run_rows_and_json(full):
    res, out, spec = full
    rows, roof = res["rows"], res["read_roof"]["bandwidth"]
    assert res["complete"] and res["rows_planned"] == len(rows) == len(decode_rows())
    assert roof == pytest.approx(0.92 * spec.hbm_bandwidth) and res["read_roof"]["source"].startswith("dry run")
    ok = [r for r in rows if r["ok"]]
    assert {r["kernel"] for r in ok} == set(ALL) - {"sdpa_cudnn_decode"}
    for r in ok:
        dec, t = r["decode"], r["measured_ms"] / 1e3
        rate = FakeDecode.BANDWIDTH[r["kernel"]] * (0.97 if r["shape"].get("page_size") else 1.0)
        assert t == pytest.approx(FakeDecode.LAUNCH_S + dec["total"] / rate, rel=0.02)
        floor = r["kernel"] == DECODE_FLOOR   # reads K and V, nothing else
        assert dec["total"] == decode_bytes(r["shape"])["kv_read" if floor else "total"]
        assert dec["cache_seqlens"] == r["shape"]["N_k"]
        assert dec["effective_bandwidth"] == pytest.approx(dec["total"] / t)
        assert dec["read_roof_fraction"] == pytest.approx(dec["effective_bandwidth"] / roof)
        assert r["measured_tflops"] == pytest.approx(algo_flops("decode", r["shape"]) / t / 1e12)
        assert r["pass"] == "fwd" and r["timing"]["queued_ahead"] is True and r["max_rel_err"] == 2e-3
        twin = next(x for x in ok if x["kernel"] == DECODE_FLOOR and x["shape"] == decode.base_shape(r["shape"]))
        assert dec["read_floor_fraction"] == pytest.approx(twin["measured_ms"] / r["measured_ms"])
        if floor:
            assert dec["cache"] == "read floor" and r["predicted_ms"] is None and dec["read_floor_fraction"] == 1
            continue
        assert dec["cache"] == ("dense" if r["kernel"] in PEERS else "paged" if r["shape"].get("page_size")
                                else "contiguous")
        # the model's fastest decode of the shape, with its kernel and tiles named
        assert r["predicted_ms"] > 0 and r["prediction"]["time_s"] == pytest.approx(r["predicted_ms"] / 1e3)
        assert dec["predicted_bandwidth"] == pytest.approx(dec["total"] / (r["predicted_ms"] / 1e3))
        assert dec["predicted_kernel"]
    small = next(r for r in ok if r["shape"]["N_k"] == 8192 and r["shape"]["B"] == 1 and r["shape"]["N_q"] == 1)
    assert small["timing"]["input_sets"] == input_sets(small["shape"], 3, spec.l2_bytes) > 3
    (back,) = load_results(out)                                # the file loads; the decode object is kept
    assert [r.kernel for r in back["rows"]] == [r["kernel"] for r in rows]
    assert back["rows"][0].extra["decode"] == rows[0]["decode"]


def test_our_rows_carry_the_choosers_pick(full):
    res, _out, _spec = full
    ours = [r for r in res["rows"] if r["kernel"] == DECODE_FAMILY]
    if algo_peers.decode_family() is None:   # before the family lands: the kernel picks its own
        assert all(r["config"] is None for r in ours) and any(DECODE_FAMILY in n for n in res["notes"])
        return
    from iomodel.chooser import choose
    from iomodel.hardware import load_calibration

    for r in ours:   # a paged row's page size goes to the model (the family models the gather)
        shape = decode_model_shape(r["shape"], ("page_size",))
        pick = choose([DECODE_FAMILY], "h100-sxm", shape, load_calibration("h100-sxm"))
        assert r["config"] == pick.config.as_dict() and r["why"] == "model-top"
        assert r["predicted_ms"] == pytest.approx(pick.time_s * 1e3)
        assert r["decode"]["predicted_kernel"] == DECODE_FAMILY


def test_a_peer_that_refuses_records_its_error(full):
    res, _out, _spec = full
    cudnn = [r for r in res["rows"] if r["kernel"] == "sdpa_cudnn_decode"]
    assert cudnn and all(not r["ok"] and "fake: sdpa_cudnn_decode does not take these inputs" in r["error"]
                         for r in cudnn)
    assert all(r["decode"]["peer"] == {"gqa": "enable_gqa", "mask": "fake"} and "traceback_tail" in r for r in cudnn)
    assert all(r["predicted_ms"] for r in cudnn)   # predicted all the same


def test_wrong_results_and_the_budget(spec, tmp_path):
    env = FakeEnv(spec, unsupported_peers=())
    env.fake_decode = FakeDecode(spec, wrong=(DECODE_FAMILY,))
    res = _dry(spec, tmp_path / "w.json", env, quick=True)
    for r in res["rows"]:
        assert r["ok"] is (r["kernel"] in PEERS)
        if not r["ok"]:
            assert r["error"].startswith("wrong result: max_rel_err 0.05 >= 0.01") and r["max_rel_err"] == 0.05
    res = _dry(spec, tmp_path / "b.json", quick=True, budget_s=1e-9)
    assert res["rows"] and all(r["error"].startswith("skipped: time budget") for r in res["rows"])
    assert "read_roof" not in res   # not measured once the budget is gone


def test_the_report_keeps_decode_apart(full):
    _res, out, _spec = full
    rep = evaluate(load_results(out), recompute=False)
    assert not rep.rows and rep.ours.n == 0 and rep.peers.n == 0    # the attention forward's statistics see none
    assert {a.kernel for a in rep.algorithms} >= set(ALL) - {"sdpa_cudnn_decode", DECODE_FLOOR}
    assert all(a.predicted_s for a in rep.algorithms if a.kernel != DECODE_FLOOR)
    assert "sdpa_flash_decode" in format_report(rep)
    again = evaluate(load_results(out))   # python -m iomodel validate: predictions made again by the model
    assert all(a.prediction_source == "recomputed" and a.predicted_s > 0 for a in again.algorithms)


def test_the_table_at_the_end(full):
    res, _out, _spec = full
    text = decode_table(res)
    lines = text.splitlines()
    assert lines[0].startswith("Decode rows (read roof 3.") and len(lines) == 2 + len(res["rows"])
    assert any("paged16" in ln and DECODE_FAMILY in ln for ln in lines)
    assert any("sdpa_cudnn_decode" in ln and "fake: sdpa_cudnn_decode" in ln for ln in lines)
    ok = next(r for r in res["rows"] if r["ok"])
    assert f"{ok['decode']['read_roof_fraction']:.0%}" in lines[2]
    assert decode_table({"rows": [r for r in res["rows"] if r["kernel"] not in ALL]}) is None
    assert "no read roof (boom)" in decode_table({**res, "read_roof": {"bandwidth": None, "error": "boom"}})


def test_without_the_family_rows_run_with_the_kernels_own_pick(spec, tmp_path, monkeypatch):
    """Before flash_decode_sm80 is in the registry: no config, a note, and the split-KV diagram's prediction."""
    monkeypatch.setattr(algo_peers, "decode_family", lambda: None)
    monkeypatch.setattr(decode, "decode_family", lambda: None)
    res = _dry(spec, tmp_path / "n.json", quick=True)
    ours = [r for r in res["rows"] if r["kernel"] == DECODE_FAMILY]
    assert ours and all(r["config"] is None and r["config_label"] == "-" and r["ok"] for r in ours)
    assert any("no model family" in n for n in res["notes"])
    assert all(r["decode"]["predicted_kernel"].startswith("attention-split-kv/") for r in res["rows"]
               if r["kernel"] != DECODE_FLOOR)


# --------------------------------------------------------------------------- the command line

def test_cli_dry_run_of_decode_alone(tmp_path):
    """``--only decode`` and ``--only algorithms --algo-peers`` run just the decode rows (torch blocked)."""
    repo = Path(__file__).resolve().parents[2]
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('torch must not be imported here')\n")
    env = {"PYTHONPATH": f"{blocker}:{repo}", "PATH": "/usr/bin:/bin"}
    for args in (["--only", "decode"], ["--only", "algorithms", "--algo-peers", "flash_decode_sm80,sdpa_flash_decode"]):
        out = tmp_path / "d.json"
        r = subprocess.run([sys.executable, "-m", "validation", "run", "--dry-run", "--quick", "--no-ceilings",
                            "--out", str(out), "--seed", "4", *args], capture_output=True, text=True, env=env,
                           cwd=repo, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "read roof: " in r.stderr and "of read roof)" in r.stderr and "Decode rows (read roof" in r.stdout
        kernels = {row["kernel"] for row in json.loads(out.read_text())["rows"]}
        assert kernels == (set(ALL) if args[1] == "decode" else {"flash_decode_sm80", "sdpa_flash_decode"})
