"""On a GPU: the forward kernels at every head dim they take (32, 64, 96, 128, 192, 256; d = 32 and 96 in
SMEM rows padded to 64 and 128) against a float32 reference: every shipped config of the new head dims on
both kernels (mma.sync; wgmma on sm_90), causal and not, odd lengths, N_q != N_k both ways, GQA, fp16; the
model's pick with a window and a softcap; FlashAttention's layout; a packed varlen batch; and the one-line
errors (a head dim no kernel takes, a backward the head dim does not have).  Skipped without CUDA."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402
from iomodel.families import flash_sm80, flash_sm90  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

TOL = {torch.bfloat16: 2e-2, torch.float16: 5e-3}
SM90 = torch.cuda.get_device_capability() == (9, 0)
NEW_DIMS = (32, 96, 192)
CONFIGS = [c for c in flash_sm80.SHIPPED if c.head_dim in NEW_DIMS + (256,)]
CONFIGS += [c for c in flash_sm90.SHIPPED if c.head_dim in NEW_DIMS] if SM90 else []


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{type(c).__name__}-{c.block_m}x{c.block_n}-d{c.head_dim}")
@pytest.mark.parametrize("causal", [False, True])
def test_every_shipped_config_of_the_new_head_dims(cfg, causal, random_qkv, check_attention):
    n_q, n_k = (333, 517) if causal else (517, 333)
    q, k, v = random_qkv(2, 4, 2, n_q, n_k, cfg.head_dim, seed=cfg.head_dim + n_q)
    out, lse = kernels.flash_attention(q, k, v, causal=causal, config=cfg, return_lse=True)
    check_attention(out, lse, q, k, v, causal, TOL[q.dtype])


@pytest.mark.parametrize("d", (32, 64, 96, 128, 192, 256))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_models_pick_at_every_head_dim(d, dtype, random_qkv, check_attention):
    q, k, v = random_qkv(1, 8, 8, 1031, 1031, d, dtype, seed=d)
    out, lse = kernels.flash_attention(q, k, v, causal=True, return_lse=True)
    check_attention(out, lse, q, k, v, True, TOL[dtype])


@pytest.mark.parametrize("d", NEW_DIMS)
@pytest.mark.parametrize("backend", ["sm80"] + (["sm90"] if SM90 else []))
def test_a_window_and_a_softcap_at_the_new_head_dims(d, backend, random_qkv, check_attention):
    q, k, v = random_qkv(2, 4, 1, 700, 700, d, seed=3 * d)
    out, lse = kernels.flash_attention(q, k, v, causal=True, window_size=(100, 0), softcap=10.0, return_lse=True,
                                       backend=backend)
    check_attention(out, lse, q, k, v, True, TOL[q.dtype], window_size=(100, 0), softcap=10.0)


def test_flash_attn_func_and_varlen_at_d_96():
    g = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn((2, 300, 8, 96), generator=g, device="cuda").bfloat16()
    k = torch.randn((2, 300, 2, 96), generator=g, device="cuda").bfloat16()
    v = torch.randn((2, 300, 2, 96), generator=g, device="cuda").bfloat16()
    out = kernels.flash_attn_func(q, k, v, causal=True)
    ref, _ = attention_reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), True)
    assert ((out.transpose(1, 2).float() - ref).abs().max() / ref.abs().max()).item() < TOL[q.dtype]
    lens = [5, 0, 130, 1, 77]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    total = sum(lens)
    qv = torch.randn((total, 4, 96), generator=g, device="cuda").bfloat16()
    kv = torch.randn((total, 2, 96), generator=g, device="cuda").bfloat16()
    vv = torch.randn((total, 2, 96), generator=g, device="cuda").bfloat16()
    o = kernels.flash_attention_varlen(qv, kv, vv, cu, cu, max(lens), max(lens), causal=True)
    for b, n in enumerate(lens):
        if n == 0:
            continue
        s = slice(int(cu[b]), int(cu[b + 1]))
        r, _ = attention_reference(qv[s].transpose(0, 1)[None], kv[s].transpose(0, 1)[None],
                                   vv[s].transpose(0, 1)[None], True)
        assert ((o[s].transpose(0, 1)[None].float() - r).abs().max() / r.abs().max()).item() < TOL[qv.dtype]


def test_head_dims_no_kernel_or_no_backward_takes_are_one_line(random_qkv):
    q, k, v = random_qkv(1, 2, 2, 64, 64, 80)
    with pytest.raises(ValueError, match="head dim 80 is not supported"):
        kernels.flash_attention(q, k, v)
    q, k, v = random_qkv(1, 2, 2, 64, 64, 192)
    with pytest.raises(ValueError, match="head dim 192 has no backward yet"):
        kernels.flash_attention(q.requires_grad_(), k, v)
