"""On a GPU: the algorithm peers' inputs, runners and checks (validation/algo_torch.py) and the L2 read
kernel (validation/microbench.py).  Skipped without CUDA."""
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
