"""GPU correctness of ``kernels.flash_attention_varlen`` (the mma.sync forward in its packed varlen form, and
on Hopper the wgmma one, the model's pick there).

Each sequence against float32 attention on its own rows (bottom-right causal in each): random lengths
with sequences of length 0 and 1, N_q != N_k per sequence, GQA, both dtypes and head dims, the LSE
against the dense kernel's; the error at most twice PyTorch's own in the input dtype plus the rounding.
Bad cu_seqlens values and shapes: one clear error."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402
from iomodel.families import flash_sm80  # noqa: E402

# "sm80": the mma.sync kernel (a shipped config); "auto": the model's pick (the wgmma kernel on Hopper)
FAMILIES = ("sm80", "auto")


def config_for(family: str, d: int):
    return None if family == "auto" else next(c for c in flash_sm80.SHIPPED if c.head_dim == d)


def cu(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")


def reference(q, k, v, causal, upcast):
    """One sequence: q (N_q, H, d), k and v (N_k, H_kv, d) -> (N_q, H, d)."""
    n_q, H, d = q.shape
    n_k, H_kv = k.shape[:2]
    if n_q == 0:
        return q.float() if upcast else q
    if n_k == 0:
        return torch.zeros(n_q, H, d, device=q.device, dtype=torch.float32 if upcast else q.dtype)
    qh, kh, vh = (x.transpose(0, 1) for x in (q, k, v))
    kh, vh = (x.repeat_interleave(H // H_kv, dim=0) for x in (kh, vh))
    if upcast:
        qh, kh, vh = qh.float(), kh.float(), vh.float()
    s = (qh * (1.0 / math.sqrt(d))) @ kh.transpose(-1, -2)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s.float(), dim=-1).nan_to_num(0.0).to(s.dtype)
    return (p @ vh).transpose(0, 1)


CASES = [  # (query lengths, key lengths (None: the same), H, H_kv)
    ([1, 17, 0, 300, 128, 1000], None, 4, 4),
    ([5, 0, 64, 777], [9, 3, 64, 100], 8, 2),          # N_q != N_k both ways; a sequence of 0 queries
    ([2049, 1, 513], None, 8, 1),                      # GQA 8:1, a tile tail
    ([0, 0, 3], [0, 5, 0], 2, 2),                      # a sequence with no keys: zeros
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d, dtype", [(32, torch.bfloat16), (64, torch.float16), (128, torch.bfloat16)])
@pytest.mark.parametrize("causal", (False, True))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_each_sequence_matches_float32(case, causal, d, dtype, family):
    lq, lk, H, H_kv = CASES[case]
    lk = lq if lk is None else lk
    g = torch.Generator(device="cuda")
    g.seed()
    q = torch.randn(sum(lq), H, d, generator=g, device="cuda").to(dtype)
    k, v = (torch.randn(sum(lk), H_kv, d, generator=g, device="cuda").to(dtype) for _ in range(2))
    out, lse = kernels.flash_attention_varlen(q, k, v, cu(lq), cu(lk), max(lq), max(lk), causal=causal,
                                              return_lse=True, config=config_for(family, d))
    assert out.shape == q.shape and lse.shape == (H, sum(lq))
    assert bool(torch.isfinite(out).all())
    cq, ck = cu(lq).tolist(), cu(lk).tolist()
    for b in range(len(lq)):
        qs, ks, vs = q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]
        ref, pt = reference(qs, ks, vs, causal, True), reference(qs, ks, vs, causal, False)
        got = out[cq[b]:cq[b + 1]]
        err, pt_err = (got.float() - ref).abs().max().item() if got.numel() else 0.0, \
            (pt.float() - ref).abs().max().item() if got.numel() else 0.0
        rounding = (ref.to(dtype).float() - ref).abs().max().item() if got.numel() else 0.0
        assert err <= 2 * pt_err + 2 * rounding + 1e-5, (b, err, pt_err)


@pytest.mark.parametrize("family", FAMILIES)
def test_lse_matches_the_dense_kernel(family):
    lq = [100, 257, 31]
    q = torch.randn(sum(lq), 4, 128, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(sum(lq), 2, 128, device="cuda").to(torch.bfloat16) for _ in range(2))
    _, lse = kernels.flash_attention_varlen(q, k, v, cu(lq), cu(lq), max(lq), max(lq), causal=True, return_lse=True,
                                            config=config_for(family, 128))
    c = cu(lq).tolist()
    for b in range(len(lq)):
        dq, dk, dv = (x[c[b]:c[b + 1]].transpose(0, 1).unsqueeze(0).contiguous() for x in (q, k, v))
        _, ref = kernels.flash_attention(dq, dk, dv, causal=True, return_lse=True,
                                         backend="sm80" if family == "sm80" else "auto")
        torch.testing.assert_close(lse[:, c[b]:c[b + 1]], ref[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("what, message", [
    ("short max", "longer than max_seqlen"),
    ("bad end", "must run from 0"),
    ("decreasing", "must not decrease"),
    ("dtype", "int32"),
    ("rank", "must be 3-D"),
    ("batch", "entries"),
])
def test_bad_input_is_one_clear_error(what, message):
    lq = [10, 20]
    q = torch.randn(30, 4, 64, device="cuda").to(torch.float16)
    k = v = torch.randn(30, 4, 64, device="cuda").to(torch.float16)
    cq, ck, mq = cu(lq), cu(lq), 20
    if what == "short max":
        mq = 10
    elif what == "bad end":
        cq = torch.tensor([0, 10, 25], dtype=torch.int32, device="cuda")
    elif what == "decreasing":
        cq = torch.tensor([0, 20, 10, 30], dtype=torch.int32, device="cuda")
        ck = torch.tensor([0, 10, 20, 30], dtype=torch.int32, device="cuda")
    elif what == "dtype":
        cq = cq.long()
    elif what == "rank":
        q = q.unsqueeze(0)
    elif what == "batch":
        ck = torch.tensor([0, 30], dtype=torch.int32, device="cuda")
    with pytest.raises((ValueError, TypeError), match=message):
        kernels.flash_attention_varlen(q, k, v, cq, ck, mq, 20)
