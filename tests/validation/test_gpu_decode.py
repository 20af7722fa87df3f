"""On a GPU: the decode rows' inputs, reference, SDPA peers and our kernel's check (validation/decode_torch.py),
and the read roof.  Skipped without CUDA."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

from validation.decode import decode_shape  # noqa: E402
from validation.decode_torch import TorchDecode, decode_reference  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

PEERS = ("sdpa_flash_decode", "sdpa_cudnn_decode", "sdpa_efficient_decode")


@pytest.fixture(scope="module")
def dec():
    return TorchDecode(torch)


@pytest.mark.parametrize("n_q", [1, 4])
def test_inputs_and_reference(dec, n_q):
    shape = decode_shape(2, 1024, 8, 2, n_q)
    (s,), (t,) = dec.make_inputs(shape, [16, 256], True, 2, seed=1)
    assert s.q.shape == (2, n_q, 8, 128) and s.k_cache.shape == (2, 1024, 2, 128) and s.q.dtype == torch.bfloat16
    assert s.seqlens.dtype == torch.int32 and s.seqlens.tolist() == [1024, 1024]
    assert not torch.equal(s.k_cache, t.k_cache)                       # the sets differ
    for page in (16, 256):
        k_pool, v_pool, table = s.paged[page]
        assert table.dtype == torch.int32 and table.shape == (2, 1024 // page)
        assert sorted(table.view(-1).tolist()) == list(range(2 * 1024 // page))          # a permutation
        assert torch.equal(k_pool[table.long()].reshape(s.k_cache.shape), s.k_cache)
        assert torch.equal(v_pool[table.long()].reshape(s.v_cache.shape), s.v_cache)
    assert torch.equal(s.k_peer, s.k_cache.transpose(1, 2)) and s.k_peer.is_contiguous()
    assert (s.mask is None) == (n_q == 1)
    ref = dec.reference(s)
    want = attention_reference(s.q_peer, s.k_peer, s.v_peer, causal=True)[0].transpose(1, 2)   # bottom-right
    assert torch.allclose(ref, want, atol=1e-5, rtol=1e-4)
    assert torch.allclose(decode_reference(torch, s.q, s.k_cache, s.v_cache), ref)


@pytest.mark.parametrize("n_q", [1, 4])
@pytest.mark.parametrize("kernel", PEERS)
def test_peers_pass_their_check_and_say_how(dec, kernel, n_q):
    shape = decode_shape(2, 2048, 32, 8, n_q)
    inputs = dec.make_inputs(shape, [], True, 2, seed=2)
    ref = dec.reference(inputs[0][0])
    fn = dec.runner(kernel)
    err, finite = dec.check(kernel, fn, inputs, ref)
    assert finite and err < 1e-2
    assert fn.how["gqa"].startswith(("enable_gqa", "K/V heads repeated")) and fn.how["mask"]
    out = fn(inputs[1][0])                                  # the timed call on the other set
    assert out.shape == (2, 32, n_q, 128)
    wrong = dec.runner(kernel)   # the same backend, its output 10% off: the check fails it
    sdpa = torch.nn.functional.scaled_dot_product_attention
    wrong.F = SimpleNamespace(scaled_dot_product_attention=lambda *a, **kw: sdpa(*a, **kw) * 1.1)
    err, finite = dec.check(kernel, wrong, inputs, ref)
    assert finite and err > 5e-2


@pytest.mark.parametrize("page", [None, 16, 256])
@pytest.mark.parametrize("n_q", [1, 4])
def test_our_kernel_passes_the_check(dec, page, n_q):
    kernels = pytest.importorskip("kernels")
    if not hasattr(kernels, "flash_attention_with_kvcache"):
        pytest.skip("kernels.flash_attention_with_kvcache not there yet")
    shape = decode_shape(2, 4096, 32, 8, n_q)
    inputs = dec.make_inputs(shape, [page] if page else [], False, 2, seed=3)
    ref = dec.reference(inputs[0][0])
    fn = dec.runner("flash_decode_sm80", None, page)
    err, finite = dec.check("flash_decode_sm80", fn, inputs, ref)
    assert finite and err < 1e-2
    assert fn(inputs[1][0]).shape == (2, n_q, 32, 128)


def test_read_roof(dec):
    roof = dec.read_roof(quick=True)
    assert roof["bytes"] == 1 << 30 and 1e11 < roof["bandwidth"] < 2e13 and "torch.sum" in roof["source"]


@pytest.mark.parametrize("n_k", [4096, 1000, 7])   # whole grid strides, and a tail in every block's last step
def test_read_floor_reads_every_byte_once(dec, n_k):
    pytest.importorskip("cupy")
    shape = decode_shape(3, n_k, 8, 2, 1)
    inputs = dec.make_inputs(shape, [], False, 2, seed=5)
    fn = dec.runner("read_floor_decode")
    assert dec.check("read_floor_decode", fn, inputs, None) == (0.0, True)   # the exact sum of the words
    s = inputs[1][0]
    want = fn.expected(s)
    s.k_cache.view(-1)[-1] += 1   # one element changed at the very end: the sum sees it
    assert int(fn(s).sum()) == fn.expected(s) != want


def test_hbm_latency_by_littles_law():
    pytest.importorskip("cupy")
    from validation.read_floor import measure_hbm_latency

    latency, source = measure_hbm_latency(torch, nbytes=64 << 20, grids=(2, 8), repeats=3)
    assert 100e-9 < latency < 5e-6 and "median" in source
