"""The attention backward's rows of one shape run as a group (validation/backward.py), in a dry run: one set
of inputs per shape for every kernel of it, each row checked, the rows that passed timed together
(interleaved), a failing or wrong peer failing its own row only, the numbering and the other phases kept."""
from __future__ import annotations

import pytest

from iomodel.algo_peers import algo_of
from validation.algorithms import ALGORITHMS
from validation.fake_env import FakeAlgorithms, FakeEnv
from validation.sweep import SweepOptions, run_sweep

KERNELS = ("torch_sdpa_flash_bwd", "torch_sdpa_cudnn_bwd", "flash_bwd_sm90", "flash_bwd_sm90_deterministic",
           "torch_matmul")


def _dry(tmp_path, algos: FakeAlgorithms, seed: int):
    from iomodel.hardware import resolve_gpu

    spec = resolve_gpu("h100-sxm")
    env = FakeEnv(spec)
    env.fake_algorithms = algos
    opts = SweepOptions(out=tmp_path / "g.json", quick=True, only=(ALGORITHMS,), seed=seed, measure_ceilings=False,
                        dry_run=True, algo_peers=KERNELS)
    return run_sweep(env, spec, opts, log=lambda m: None)


def test_a_shapes_rows_share_inputs_and_are_timed_together(tmp_path):
    algos = FakeAlgorithms()
    res = _dry(tmp_path, algos, seed=11)
    bwd = [r for r in res["rows"] if algo_of(r["kernel"]) == "attention-backward"]
    shapes = {(r["shape"]["N"], r["shape"]["causal"]) for r in bwd}
    assert len(shapes) == 2 and res["complete"]
    # one group a shape, holding every kernel of its rows (our atomic kernel once a config)
    assert len(algos.groups) == len(shapes)
    for shape, kernels, n_sets in algos.groups:
        mine = [r["kernel"] for r in bwd if r["shape"] == shape]
        assert list(kernels) == mine and n_sets >= 1
        assert {"torch_sdpa_cudnn_bwd", "flash_bwd_sm90"} <= set(kernels)
    for r in bwd:
        assert r["ok"] and r["pass"] == "bwd"
        assert r["timing"]["interleaved"] is True and r["timing"]["rounds"] > 1
        assert r["measured_tflops"] > 0
    # the matmul rows are still timed alone, and come before the backward's
    mm = [r for r in res["rows"] if r["kernel"] == "torch_matmul"]
    assert mm and all(r["ok"] and r["timing"]["interleaved"] is False for r in mm)
    assert max(res["rows"].index(r) for r in mm) < min(res["rows"].index(r) for r in bwd)


def test_a_failing_or_wrong_peer_fails_its_row_only(tmp_path):
    algos = FakeAlgorithms(fail=("torch_sdpa_flash_bwd",), wrong=("torch_sdpa_cudnn_bwd",))
    res = _dry(tmp_path, algos, seed=12)
    bwd = [r for r in res["rows"] if algo_of(r["kernel"]) == "attention-backward"]
    for r in bwd:
        if r["kernel"] == "torch_sdpa_flash_bwd":
            assert not r["ok"] and "fake failure" in r["error"]
        elif r["kernel"] == "torch_sdpa_cudnn_bwd":
            assert not r["ok"] and r["error"].startswith("wrong result")
        else:
            assert r["ok"] and r["timing"]["interleaved"] is True


@pytest.mark.parametrize("err, ok", [(1.5e-2, True), (2.5e-2, False)])
def test_the_backward_bound_is_looser_than_a_forwards(tmp_path, err, ok):
    """2e-2 for bf16 gradients (BACKWARD_TOLERANCE), where a forward row's bound is 1e-2."""
    algos = FakeAlgorithms()
    base = algos.runner

    def runner(kernel, config=None):
        run = base(kernel, config)
        return (lambda x: {**run(x), "err": err}) if kernel == "torch_sdpa_flash_bwd" else run

    algos.runner = runner
    res = _dry(tmp_path, algos, seed=13)
    rows = [r for r in res["rows"] if r["kernel"] == "torch_sdpa_flash_bwd"]
    assert rows and all(r["ok"] is ok for r in rows)
