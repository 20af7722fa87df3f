"""On a GPU: the algorithm peers' inputs, runners and checks (validation/algo_torch.py; the attention
backward's three SDPA backends too) and the L2 read kernel (validation/microbench.py).  Skipped without CUDA."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

from validation.algo_torch import TorchAlgorithms  # noqa: E402

SMALL = {"torch_matmul": {"M": 64, "N": 256, "K": 512, "dtype": "bf16"},
         "torch_cross_entropy": {"T": 128, "D": 256, "V": 1000, "dtype": "bf16"},
         "torch_mlp": {"T": 128, "D": 256, "F": 512, "dtype": "bf16"}}


@pytest.mark.parametrize("kernel", sorted(SMALL))
def test_peer_passes_its_check_on_random_inputs(kernel):
    algos = TorchAlgorithms(torch)
    inputs = algos.make_inputs(kernel, SMALL[kernel], 2, seed=3)
    assert len(inputs) == 2
    first = inputs[0][0]
    assert first.dtype == torch.bfloat16 and float(first.float().abs().sum()) > 0   # never zeros
    err, finite = algos.check(kernel, algos.runner(kernel), inputs)
    assert finite and err < 1e-2


@pytest.mark.parametrize("kernel", sorted(SMALL))
def test_check_fails_a_wrong_result(kernel):
    algos = TorchAlgorithms(torch)
    inputs = algos.make_inputs(kernel, SMALL[kernel], 1, seed=4)
    right = algos.runner(kernel)
    err, finite = algos.check(kernel, lambda *a: right(*a) * 1.1, inputs)
    assert finite and err > 5e-2


def test_matmul_check_catches_an_unwritten_output():
    algos = TorchAlgorithms(torch)
    inputs = algos.make_inputs("torch_matmul", SMALL["torch_matmul"], 1, seed=5)
    _err, finite = algos.check("torch_matmul", lambda a, b, c: c, inputs)   # the NaN-poisoned buffer
    assert not finite


def test_l2_read_kernel_measures_and_checks():
    cupy = pytest.importorskip("cupy")
    from validation.microbench import measure_l2

    sm = torch.cuda.get_device_properties(0).multi_processor_count
    m = measure_l2(cupy, sm, 50 << 20, target_s=0.002, repeats=3)
    assert m.buffer_bytes == 8 << 20 and m.passes >= 1
    assert 1e11 < m.bandwidth < 1e14
    assert "ld.global.cg" in m.source() and "8 MiB" in m.source()


# --------------------------------------------------------------------------- the attention backward

BWD_SHAPE = {"B": 2, "H": 3, "N": 256, "M": 256, "d": 64, "causal": False, "dtype": "bf16"}
BWD = ("torch_sdpa_flash_bwd", "torch_sdpa_cudnn_bwd", "torch_sdpa_efficient_bwd")
OURS = ("flash_bwd_sm80", "flash_bwd_sm80_deterministic")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel", BWD)
def test_backward_peer_passes_its_check(kernel, causal):
    algos = TorchAlgorithms(torch)
    inputs = algos.make_inputs(kernel, {**BWD_SHAPE, "causal": causal}, 2, seed=6)
    q, k, v, out, dout, flag = inputs[0]
    assert q.shape == (2, 3, 256, 64) and q.requires_grad and q.is_leaf and q.dtype == torch.bfloat16
    assert out.grad_fn is not None and dout.stride() == out.stride() and float(dout.float().abs().sum()) > 0
    assert flag is causal
    err, finite = algos.check(kernel, algos.runner(kernel), inputs)
    assert finite and err < 2e-2
    right = algos.runner(kernel)
    err, finite = algos.check(kernel, lambda *a: tuple(g * 1.1 for g in right(*a)), inputs)
    assert finite and err > 5e-2


def test_a_causal_forward_checked_against_the_full_reference_fails():
    """The reference follows the row's causality: a causal backward is wrong against the full one."""
    algos = TorchAlgorithms(torch)
    inputs = algos.make_inputs("torch_sdpa_flash_bwd", {**BWD_SHAPE, "causal": True}, 1, seed=9)
    q, k, v, out, dout, _causal = inputs[0]
    err, finite = algos.check("torch_sdpa_flash_bwd", algos.runner("torch_sdpa_flash_bwd"),
                              [(q, k, v, out, dout, False)])
    assert finite and err > 5e-2


def test_backward_reference_in_chunks_equals_one_piece(monkeypatch):
    import validation.algo_torch as algo_torch

    algos = TorchAlgorithms(torch)
    q, k, v, _out, dout, _causal = algos.make_inputs("torch_sdpa_flash_bwd", BWD_SHAPE, 1, seed=7)[0]
    whole = algos._backward_reference(q, k, v, dout, True)
    monkeypatch.setattr(algo_torch, "_REF_ELEMENTS", 256 * 256 * 2)   # two of the six heads at a time
    for a, b in zip(whole, algos._backward_reference(q, k, v, dout, True)):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel", OURS)
def test_our_backward_passes_the_peers_check(kernel, causal):
    kernels = pytest.importorskip("kernels")
    if not hasattr(kernels, "flash_attention_backward"):
        pytest.skip("kernels.flash_attention_backward not there yet")
    from iomodel.families.flash_bwd_sm80 import SHIPPED

    algos = TorchAlgorithms(torch)
    shape = {**BWD_SHAPE, "causal": causal}
    inputs = algos.make_inputs(kernel, shape, 2, seed=10)
    q, k, v, out, lse, dout, flag = inputs[0]
    assert not q.requires_grad and lse.shape == (2, 3, 256) and lse.dtype == torch.float32 and flag is causal
    assert float(dout.float().abs().sum()) > 0 and dout.stride() == out.stride()
    cfg = next(c for c in SHIPPED if c.head_dim == 64)
    err, finite = algos.check(kernel, algos.runner(kernel, cfg), inputs)
    assert finite and err < 2e-2
    right = algos.runner(kernel, cfg)
    err, finite = algos.check(kernel, lambda *a: tuple(g * 1.1 for g in right(*a)), inputs)
    assert finite and err > 5e-2


@pytest.mark.parametrize("causal", [False, True])
def test_a_backward_group_checks_every_row_on_one_reference(causal):
    """validation.backward's group: one set of q, k, v, dout for the peers and ours, each kernel's
    arguments there (the peers' leaves share q's memory), one float32 reference; a row 10% off fails."""
    kernels = pytest.importorskip("kernels")
    from iomodel.families.flash_bwd_sm80 import SHIPPED
    from validation.algo_torch import BackwardSet

    algos = TorchAlgorithms(torch)
    shape = {**BWD_SHAPE, "causal": causal}
    names = (*BWD, "flash_bwd_sm80")
    inputs = algos.make_backward_group(shape, names, 2, seed=12)
    assert len(inputs) == 2 and all(isinstance(s, BackwardSet) for (s,) in inputs)
    s = inputs[0][0]
    assert float(s.q.float().abs().sum()) > 0 and s.causal is causal
    assert not torch.equal(inputs[0][0].q, inputs[1][0].q)   # fresh values each set
    for peer in BWD:
        if isinstance(s.args[peer], Exception):
            continue
        q_leaf = s.args[peer][0]
        assert q_leaf.requires_grad and q_leaf.data_ptr() == s.q.data_ptr()
    ref = algos.reference(s)
    cfg = next(c for c in SHIPPED if c.head_dim == 64)
    for name in names:
        if isinstance(s.args[name], Exception):
            continue
        run = algos.group_runner(name, cfg if name == "flash_bwd_sm80" else None)
        err, finite = algos.check(name, run, inputs, ref)
        assert finite and err < 2e-2, name
        err, finite = algos.check(name, lambda x, run=run: tuple(g * 1.1 for g in run(x)), inputs, ref)
        assert finite and err > 5e-2, name
