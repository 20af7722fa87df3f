"""On a GPU: the mma.sync forward with Q held in registers (FlashConfig.q_regs, the kernel's Q_REGS): every
shipped config that holds it gives, bit for bit, what its twin reading Q from SMEM every chunk gives (the same
fragments feed the same products), causal and not, with a window, a softcap and ALiBi, and in a packed varlen
batch; and matches the float32 reference.  Skipped without CUDA."""
from __future__ import annotations

import dataclasses

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402
from iomodel.families import flash_sm80  # noqa: E402

HELD = [c for c in flash_sm80.SHIPPED if c.q_regs]
TOL = {torch.bfloat16: 2e-2, torch.float16: 5e-3}
FEATURES = [  # (causal, window_size, softcap, ALiBi)
    (False, (-1, -1), 0.0, False),
    (True, (-1, -1), 0.0, False),
    (True, (150, 0), 0.0, False),
    (False, (77, 201), 8.0, True),
    (True, (-1, -1), 12.0, True),
]


def _twin(cfg):
    return dataclasses.replace(cfg, q_regs=0)


@pytest.mark.parametrize("cfg", HELD, ids=flash_sm80.FAMILY.label)
@pytest.mark.parametrize("causal,window,softcap,alibi", FEATURES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_held_q_equals_q_from_smem_and_float32(cfg, causal, window, softcap, alibi, dtype, random_qkv,
                                               check_attention):
    n_q, n_k = (411, 653) if causal else (653, 411)   # odd lengths, N_q != N_k both ways, GQA
    q, k, v = random_qkv(2, 6, 3, n_q, n_k, cfg.head_dim, dtype, seed=n_q + int(softcap) + 7 * alibi)
    slopes = torch.rand(6, device="cuda") * 0.1 if alibi else None
    kw = dict(causal=causal, window_size=window, softcap=softcap, alibi_slopes=slopes, return_lse=True)
    out, lse = kernels.flash_attention(q, k, v, config=cfg, **kw)
    twin, twin_lse = kernels.flash_attention(q, k, v, config=_twin(cfg), **kw)
    assert torch.equal(out, twin) and torch.equal(lse, twin_lse)
    feats = dict(window_size=window, softcap=softcap, alibi_slopes=slopes)
    check_attention(out, lse, q, k, v, causal, TOL[dtype], **feats)


@pytest.mark.parametrize("cfg", HELD, ids=flash_sm80.FAMILY.label)
def test_held_q_in_a_packed_varlen_batch(cfg):
    lens = [5, 0, 190, 1, 77, 129]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(len(lens) + cfg.block_m)
    q, k, v = (torch.randn((sum(lens), h, cfg.head_dim), generator=g, device="cuda").bfloat16() for h in (4, 2, 2))
    for causal in (False, True):
        o = kernels.flash_attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=causal, config=cfg)
        twin = kernels.flash_attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=causal,
                                              config=_twin(cfg))
        assert torch.equal(o, twin)
