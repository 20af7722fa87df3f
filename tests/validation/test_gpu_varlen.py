"""On a GPU: the varlen rows' inputs, reference, peers and our kernels' checks (validation/varlen_torch.py).
Skipped without CUDA."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

from validation.reference import attention_reference  # noqa: E402
from validation.varlen import dense_shape, varlen_shape  # noqa: E402
from validation.varlen_torch import TorchVarlen, varlen_reference  # noqa: E402

LENS = (0, 1, 130, 1, 700, 0, 64, 1)


@pytest.fixture(scope="module")
def impl():
    return TorchVarlen(torch)


@pytest.mark.parametrize("causal", [False, True])
def test_inputs_and_reference(impl, causal):
    shape = varlen_shape((300, 4096, 1000, 4000), 128, 8, 2, causal)
    dense = dense_shape(shape, "sm80")
    (s,), (t,) = impl.make_inputs(shape, dense, True, 2, seed=1)
    assert s.q.shape == (9396, 8, 128) and s.k.shape == (9396, 2, 128) and s.q.dtype == torch.bfloat16
    assert s.cu.dtype == torch.int32 and s.cu.tolist() == [0, 300, 4396, 5396, 9396] and s.max_len == 4096
    assert not torch.equal(s.q, t.q)                                            # the sets differ
    dq, dk, _dv = s.dense
    assert dq.shape == (2, 8, 4096, 128) and dq.is_contiguous()
    assert torch.equal(dq[1], s.q[4096:8192].transpose(0, 1))                  # the first B N tokens
    assert torch.equal(dk[0], s.k[:4096].transpose(0, 1))
    assert not isinstance(s.nested, BaseException), s.nested
    ref = impl.reference(s)
    one = attention_reference(*(x[300:4396].transpose(0, 1)[None] for x in (s.q, s.k, s.v)), causal)[0]
    assert torch.allclose(ref.packed[300:4396], one[0].transpose(0, 1), atol=1e-6)   # each sequence alone
    assert ref.dense.shape == (2, 8, 4096, 128)


def test_reference_of_empty_and_one_token_sequences():
    q, k, v = (torch.randn(sum(LENS), 4, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = varlen_reference(torch, q, k, v, list(LENS), causal=True)
    ones = [sum(LENS[:i]) for i, n in enumerate(LENS) if n == 1]
    for i in ones:   # one key: the output is its value
        assert torch.allclose(ref[i], v[i].float(), atol=1e-6)


@pytest.mark.parametrize("kernel", ["torch_varlen_attn", "sdpa_flash_nested"])
@pytest.mark.parametrize("causal", [False, True])
def test_peers_pass_their_check_or_say_why(impl, kernel, causal):
    shape = varlen_shape((300, 4096, 1000, 17), 128, 16, 16, causal)
    inputs = impl.make_inputs(shape, None, kernel == "sdpa_flash_nested", 2, seed=2)
    ref = impl.reference(inputs[0][0])
    try:
        fn = impl.runner(kernel, None, shape)
        err, finite = impl.check(kernel, fn, inputs, ref)
    except RuntimeError as exc:   # a torch without it (recorded as the row's error in a run)
        pytest.skip(f"{kernel}: {exc}")
    assert finite and err < 1e-2 and fn.how["call"]


@pytest.mark.parametrize("kernel", ["flash_varlen_sm80", "flash_varlen", "flash_dense_sm80", "flash_dense"])
@pytest.mark.parametrize("causal", [False, True])
def test_our_kernels_pass_the_check(impl, kernel, causal):
    kernels = pytest.importorskip("kernels")
    if not hasattr(kernels, "flash_attention_varlen"):
        pytest.skip("kernels.flash_attention_varlen not there yet")
    from validation.varlen import MIXES

    shape = varlen_shape(MIXES["edge"] if "varlen" in kernel else (4096, 4096, 700), 128, 32, 8, causal)
    dense = dense_shape(shape, "sm80" if kernel.endswith("sm80") else "auto") if "dense" in kernel else None
    row_shape = dense or {**shape, "backend": "sm80" if kernel.endswith("sm80") else "auto"}
    inputs = impl.make_inputs(shape, dense, False, 2, seed=3)
    ref = impl.reference(inputs[0][0])
    from iomodel import families

    sm80 = next(c for c in families.get("flash_sm80").shipped if c.head_dim == 128)
    fn = impl.runner(kernel, sm80 if kernel.endswith("sm80") else None, row_shape)   # "auto": the kernel's pick
    err, finite = impl.check(kernel, fn, inputs, ref)
    assert finite and err < 1e-2
