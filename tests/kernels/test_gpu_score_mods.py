"""On a GPU: FlashAttention's score modifiers (``softcap``, ``alibi_slopes``) on both forward kernels
(mma.sync; wgmma on sm_90) against a float32 reference: alone and together, causal and not, with a
sliding window, N_q != N_k both ways, odd lengths, GQA, slopes per head and per (batch, head), large
scores under a small cap, fp16 and d = 64; the LSE of the logits; ``flash_attn_func``'s layout; and the
errors (slopes of a wrong dtype, shape or device, a backward asked for).  Skipped without CUDA."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402

TOL = {torch.bfloat16: 2e-2, torch.float16: 5e-3}
BACKENDS = ["sm80"] + (["sm90"] if torch.cuda.get_device_capability()[0] == 9 else [])


def _reference(q, k, v, softcap=0.0, slopes=None, left=-1, right=-1, scale=None):
    """(O, LSE) in float32 of q (B, H, N_q, d) over k, v (B, H_kv, N_k, d): logits scale q.k, capped
    (cap tanh(x / cap)), minus slope * |i + N_k - N_q - j|, masked to the band.  Written here apart from
    validation.reference (which the other tests use), so that each checks the other."""
    B, H, n_q, d = q.shape
    n_k, g = k.shape[2], H // k.shape[1]
    kf, vf = (x.float().repeat_interleave(g, dim=1) for x in (k, v))
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) * (d ** -0.5 if scale is None else scale)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)
    j = torch.arange(n_k, device=q.device)[None, :]
    if slopes is not None:
        sl = slopes.float().reshape(-1, H) if slopes.dim() == 2 else slopes.float()[None, :]
        s = s - sl[:, :, None, None] * (i - j).abs().float()
    live = torch.ones((n_q, n_k), dtype=torch.bool, device=q.device)
    if left >= 0:
        live &= j >= i - left
    if right >= 0:
        live &= j <= i + right
    s = s.masked_fill(~live, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    return torch.matmul(p, vf), lse


def _slopes(B, H, per_batch, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    shape = (B, H) if per_batch else (H,)
    return 0.01 + 0.5 * torch.rand(shape, generator=g, device="cuda")


@pytest.mark.parametrize("mods", ["softcap", "alibi", "both"])
@pytest.mark.parametrize("causal, window", [(False, (-1, -1)), (True, (-1, -1)), (True, (200, 0)), (False, (37, 5))])
@pytest.mark.parametrize("n_q, n_k", [(777, 777), (300, 1000), (1000, 300)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_mods_match_the_reference(mods, causal, window, n_q, n_k, backend, random_qkv, check_attention):
    B, H = 2, 4
    q, k, v = random_qkv(B, H, 2, n_q, n_k, 128, seed=n_q + 3 * n_k)
    cap = 20.0 if mods in ("softcap", "both") else 0.0
    slopes = _slopes(B, H, n_q % 2 == 0, n_q) if mods in ("alibi", "both") else None
    out, lse = kernels.flash_attention(q, k, v, causal=causal, window_size=window, softcap=cap, alibi_slopes=slopes,
                                       return_lse=True, backend=backend)
    check_attention(out, lse, q, k, v, causal, TOL[q.dtype], window_size=window, softcap=cap, alibi_slopes=slopes)


@pytest.mark.parametrize("d, dtype", [(64, torch.float16), (128, torch.float16), (64, torch.bfloat16)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_large_scores_under_a_small_cap_and_other_head_dims(d, dtype, backend, random_qkv, check_attention):
    q, k, v = random_qkv(1, 8, 8, 1531, 1531, d, dtype, seed=d, gain=4.0)   # logits of tens: the cap saturates
    slopes = _slopes(1, 8, False, d)
    for cap, sl in ((5.0, None), (5.0, slopes), (0.0, slopes)):
        out, lse = kernels.flash_attention(q, k, v, causal=True, softcap=cap, alibi_slopes=sl, return_lse=True,
                                           backend=backend)
        check_attention(out, lse, q, k, v, True, TOL[dtype], softcap=cap, alibi_slopes=sl)


def _wide_sm90_with_every_feature():
    """The wgmma configs above d = 128 whose causal window build with a softcap and ALiBi is offered (the kernels
    with the most values live at once: a build taken off flash_sm90.SPILLING is first run here)."""
    if "sm90" not in BACKENDS:
        return []
    from iomodel.families import flash_sm90

    every = frozenset({"causal", "window", "softcap", "alibi"})
    return [c for c in flash_sm90.SHIPPED if c.head_dim > 128 and (c, every) not in flash_sm90.SPILLING]


@pytest.mark.parametrize("cfg", _wide_sm90_with_every_feature(), ids=lambda c: f"{c.block_m}x{c.block_n}s{c.stages}"
                         f"-d{c.head_dim}")
def test_every_offered_wide_wgmma_config_with_a_window_softcap_and_alibi(cfg, random_qkv, check_attention):
    q, k, v = random_qkv(2, 4, 2, 611, 900, cfg.head_dim, seed=cfg.block_n + cfg.stages)
    slopes = _slopes(2, 4, True, cfg.block_n)
    feats = {"window_size": (300, 0), "softcap": 12.0, "alibi_slopes": slopes}
    out, lse = kernels.flash_attention(q, k, v, causal=True, config=cfg, return_lse=True, **feats)
    check_attention(out, lse, q, k, v, True, TOL[q.dtype], **feats)


def test_flash_attn_func_takes_softcap_and_alibi(check_attention):
    g = torch.Generator(device="cuda").manual_seed(11)
    q = torch.randn((2, 513, 8, 128), generator=g, device="cuda").bfloat16()        # (B, N, H, d)
    k = torch.randn((2, 700, 2, 128), generator=g, device="cuda").bfloat16()
    v = torch.randn((2, 700, 2, 128), generator=g, device="cuda").bfloat16()
    slopes = _slopes(2, 8, True, 5)
    out, lse = kernels.flash_attn_func(q, k, v, softmax_scale=0.1, causal=True, softcap=15.0, alibi_slopes=slopes,
                                       return_lse=True)
    ref, ref_lse = _reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 15.0, slopes, -1, 0, 0.1)
    assert out.shape == q.shape and lse.shape == (2, 8, 513)
    seen = torch.isfinite(ref_lse)
    assert ((out.transpose(1, 2).float() - ref).abs().max() / ref.abs().max()).item() < TOL[q.dtype]
    assert (lse[seen] - ref_lse[seen]).abs().max().item() < 2e-2


def test_bad_slopes_and_a_backward_are_one_line(random_qkv):
    q, k, v = random_qkv(2, 4, 4, 64, 64, 64)
    good = _slopes(2, 4, False, 0)
    for bad, err, msg in ((good.half(), TypeError, "alibi_slopes must be float32"),
                          (good[:3], ValueError, r"alibi_slopes must have shape \(4,\) or \(2, 4\)"),
                          (good.cpu(), ValueError, "alibi_slopes must be on q's device"),
                          ([0.5] * 4, TypeError, "alibi_slopes must be a torch.Tensor"),
                          (torch.rand((4, 2), device="cuda").t(), ValueError, "contiguous along the heads")):
        with pytest.raises(err, match=msg):
            kernels.flash_attention(q, k, v, alibi_slopes=bad)
    with pytest.raises(ValueError, match="softcap must be a finite number"):
        kernels.flash_attention(q, k, v, softcap=-2.0)
    qg = q.clone().requires_grad_()
    with pytest.raises(ValueError, match="softcap has no backward yet"):
        kernels.flash_attention(qg, k, v, softcap=10.0)
    with pytest.raises(ValueError, match="alibi_slopes has no backward yet"):
        kernels.flash_attention(qg, k, v, alibi_slopes=good)


@pytest.mark.slow
@pytest.mark.parametrize("tool", ("memcheck", "racecheck"))
def test_compute_sanitizer_is_clean(tool, sanitized):
    from validation.sanitize_forward import calls

    out = sanitized(tool, "validation.sanitize_forward")
    assert f"calls {calls(torch.cuda.get_device_capability())}" in out, out[-3000:]


@pytest.mark.parametrize("family", ["flash_sm80"] + (["flash_sm90"] if "sm90" in BACKENDS else []))
def test_kernels_run_and_the_harness_reference_take_the_features(family, random_qkv):
    from validation.reference import attention_reference

    q, k, v = random_qkv(2, 4, 2, 333, 517, 64, seed=9)
    slopes = _slopes(2, 4, True, 9)
    feats = {"window_size": (50, 0), "softcap": 8.0, "alibi_slopes": slopes}
    out = kernels.run(family, q, k, v, causal=True, **feats)
    ref, ref_lse = attention_reference(q, k, v, True, **feats)
    mine, mine_lse = _reference(q, k, v, 8.0, slopes, 50, 0)
    assert torch.allclose(ref, torch.where(torch.isfinite(mine_lse)[..., None], mine, 0.0), atol=1e-4)
    assert ((out.float() - ref).abs().max() / ref.abs().max()).item() < TOL[q.dtype]
    with pytest.raises(ValueError, match="unfused kernel has no window"):
        kernels.run("unfused", q, k, v, causal=True, softcap=8.0)
