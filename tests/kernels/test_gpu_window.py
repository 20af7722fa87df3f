"""On a GPU: the sliding window (``window_size``) of both forward kernels (mma.sync; wgmma on sm_90) and
FlashAttention's
``flash_attn_func`` against a float32 reference with the band as an explicit mask: (0, 0), (-1, 0),
windows not a multiple of the tile and wider than the sequence, a right bound without causal, N_q != N_k,
GQA, odd lengths, fp16; flash_attn_func's layout (a (B, N, H, d) tensor and a transposed view), its LSE,
its autograd without a window, and its errors.  Skipped without CUDA."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402

TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3}
BACKENDS = ["sm80"] + (["sm90"] if torch.cuda.get_device_capability()[0] == 9 else [])


def _band_reference(q, k, v, left, right):
    """(O, LSE) in float32 of q (B, H, N_q, d) over k, v (B, H_kv, N_k, d) with the window's band."""
    B, H, n_q, d = q.shape
    n_k, g = k.shape[2], H // k.shape[1]
    kf, vf = (x.float().repeat_interleave(g, dim=1) for x in (k, v))
    i = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)
    j = torch.arange(n_k, device=q.device)[None, :]
    live = torch.ones((n_q, n_k), dtype=torch.bool, device=q.device)
    if left >= 0:
        live &= j >= i - left
    if right >= 0:
        live &= j <= i + right
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) * d ** -0.5
    s = s.masked_fill(~live, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    return torch.matmul(p, vf), lse


def _qkv(B, H, H_kv, n_q, n_k, d, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda h, n: torch.randn((B, h, n, d), generator=g, device="cuda").to(dtype)   # noqa: E731
    return make(H, n_q), make(H_kv, n_k), make(H_kv, n_k)


def _rel(out, ref):
    return ((out.float() - ref).abs().max() / ref.abs().max()).item()


@pytest.mark.parametrize("window, causal", [((0, 0), False), ((-1, 0), False), ((100, 0), False), ((4096, 0), True),
                                            ((37, 5), False), ((-1, 21), False), ((64, -1), False), ((1, 1), False)])
@pytest.mark.parametrize("n_q, n_k", [(777, 777), (300, 1000), (1000, 300)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_window_matches_the_band_reference(window, causal, n_q, n_k, backend):
    q, k, v = _qkv(2, 4, 2, n_q, n_k, 128, seed=n_q + n_k)
    out, lse = kernels.flash_attention(q, k, v, causal=causal, window_size=window, return_lse=True, backend=backend)
    left, right = window[0], 0 if causal else window[1]
    ref, ref_lse = _band_reference(q, k, v, left, right)
    seen = torch.isfinite(ref_lse)
    assert _rel(out, torch.where(seen[..., None], ref, 0.0)) < TOL[q.dtype]
    assert torch.equal(torch.isfinite(lse), seen)
    assert (lse[seen] - ref_lse[seen]).abs().max().item() < 1e-2
    assert (out[~seen] == 0).all()


@pytest.mark.parametrize("d, dtype", [(64, torch.float16), (128, torch.float16), (64, torch.bfloat16)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_window_head_dims_and_dtypes(d, dtype, backend):
    q, k, v = _qkv(1, 8, 8, 1531, 1531, d, dtype, seed=d)
    out = kernels.flash_attention(q, k, v, window_size=(255, 0), backend=backend)
    ref, _ = _band_reference(q, k, v, 255, 0)
    assert _rel(out, ref) < TOL[dtype]


def test_flash_attn_func_layout_lse_and_views():
    g = torch.Generator(device="cuda").manual_seed(7)
    q = torch.randn((2, 513, 8, 128), generator=g, device="cuda").bfloat16()        # (B, N, H, d)
    kv = torch.randn((2, 2, 2, 700, 128), generator=g, device="cuda").bfloat16()    # (B, H_kv, 2, N, d) storage
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)                 # (B, N, H_kv, d) views
    out, lse = kernels.flash_attn_func(q, k, v, causal=True, window_size=(128, 0), return_lse=True)
    assert out.shape == (2, 513, 8, 128) and lse.shape == (2, 8, 513)
    ref, ref_lse = _band_reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 128, 0)
    assert _rel(out.transpose(1, 2), ref) < 2e-2 and (lse - ref_lse).abs().max().item() < 1e-2
    plain = kernels.flash_attn_func(q, k, v, softmax_scale=0.05)
    g = q.shape[2] // k.shape[2]
    kf, vf = (x.transpose(1, 2).float().repeat_interleave(g, dim=1) for x in (k, v))
    ref_plain = torch.softmax(q.transpose(1, 2).float() @ kf.transpose(-1, -2) * 0.05, dim=-1) @ vf
    assert _rel(plain.transpose(1, 2), ref_plain) < 2e-2


def test_flash_attn_func_backward_without_a_window():
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn((1, 300, 4, 64), generator=g, device="cuda").bfloat16().requires_grad_() for _ in range(3))
    out = kernels.flash_attn_func(q, k, v, causal=True)
    dout = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    qf, kf, vf = (x.detach().float().transpose(1, 2).requires_grad_() for x in (q, k, v))
    mask = torch.ones(300, 300, dtype=torch.bool, device="cuda").tril()
    s = (qf @ kf.transpose(-1, -2) * 64 ** -0.5).masked_fill(~mask, float("-inf"))
    ref = torch.softmax(s, dim=-1) @ vf
    rq, rk, rv = torch.autograd.grad(ref, (qf, kf, vf), dout.float().transpose(1, 2))
    for got, want in ((dq, rq), (dk, rk), (dv, rv)):
        assert _rel(got.transpose(1, 2), want) < 3e-2


def test_errors_name_the_argument():
    q = torch.randn((1, 64, 4, 64), device="cuda").bfloat16()
    with pytest.raises(ValueError, match="q must be 4-D \\(batch, seqlen, heads, head_dim\\)"):
        kernels.flash_attn_func(q[0], q, q)
    with pytest.raises(ValueError, match="has no backward yet"):
        kernels.flash_attn_func(q.clone().requires_grad_(), q, q, window_size=(8, 0))
    with pytest.raises(ValueError, match="window_size's left must be an int >= -1"):
        kernels.flash_attn_func(q, q, q, window_size=(-5, 0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_tiles_and_a_persistent_grid(backend):
    """Enough tiles that a CTA takes several (the wgmma kernel's persistent grid and its schedule), GQA 8:1,
    a window wider than a tile on both sides."""
    q, k, v = _qkv(3, 16, 2, 2100, 2100, 128, seed=11)
    out = kernels.flash_attention(q, k, v, window_size=(300, 200), backend=backend)
    ref, _ = _band_reference(q, k, v, 300, 200)
    assert _rel(out, ref) < 2e-2
