"""GPU correctness of the FlashAttention backward (``flash_bwd_sm80``) and of ``flash_attention``'s autograd.

The rule is FlashAttention's own: against gradients computed in float32 from the same inputs, the error
of ours is at most twice the error of PyTorch's attention computed in the input dtype, plus the dtype's
rounding at the gradient's magnitude; dQ, dK and dV separately.  Inputs are fresh random normals."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402
from iomodel.families.flash_bwd_sm80 import SHIPPED, FlashBwdConfig  # noqa: E402
from iomodel.families.flash_bwd_sm90 import SHIPPED as SHIPPED_SM90  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def attention_ref(q, k, v, causal, upcast):
    """softmax(q k^T / sqrt(d) [bottom-right causal]) v with GQA, in float32 (upcast) or in the input dtype
    as PyTorch computes it (products in the dtype, softmax in float32 then rounded)."""
    dt = q.dtype
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(nk - nq)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s.float(), dim=-1).nan_to_num(0.0).to(s.dtype if upcast else dt)
    return p @ v


def grads(fn, q, k, v, dout):
    qs, ks, vs = (x.detach().clone().requires_grad_() for x in (q, k, v))
    out = fn(qs, ks, vs)
    return torch.autograd.grad(out, (qs, ks, vs), dout.to(out.dtype))


def make(B, H, H_kv, N_q, N_k, d, dtype, seed=None):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed) if seed is not None else g.seed()
    q, dout = (torch.randn(B, H, N_q, d, generator=g, device="cuda").to(dtype) for _ in range(2))
    k, v = (torch.randn(B, H_kv, N_k, d, generator=g, device="cuda").to(dtype) for _ in range(2))
    return q, k, v, dout


def check_rule(ours, q, k, v, dout, causal):
    ref = grads(lambda a, b, c: attention_ref(a, b, c, causal, True), q, k, v, dout)
    pt = grads(lambda a, b, c: attention_ref(a, b, c, causal, False), q, k, v, dout)
    for name, o, r, p in zip(("dq", "dk", "dv"), ours, ref, pt):
        assert o.shape == r.shape and o.dtype == q.dtype, name
        assert bool(torch.isfinite(o).all()), f"{name} has NaN/Inf"
        err, pt_err = (o.float() - r).abs().max().item(), (p.float() - r).abs().max().item()
        rounding = (r.to(q.dtype).float() + 0.3 - 0.3 - r).abs().max().item()
        assert err <= 2 * pt_err + 2 * rounding + 1e-5, f"{name}: error {err:.3g} vs PyTorch's {pt_err:.3g}"


def run_bwd(q, k, v, dout, causal, config=None, deterministic=False):
    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
    return kernels.flash_attention_backward(dout, q, k, v, out, lse, causal=causal, config=config,
                                            deterministic=deterministic)


SHAPES = [  # (B, H, H_kv, N_q, N_k)
    (2, 4, 4, 1, 1), (2, 4, 4, 17, 17), (1, 4, 4, 128, 128), (1, 3, 3, 777, 777), (1, 2, 2, 2049, 2049),
    (1, 2, 2, 4097, 4097), (1, 8, 1, 777, 777), (1, 8, 1, 2049, 2049),   # GQA 8:1
    (1, 2, 2, 128, 777), (1, 2, 2, 777, 128), (1, 2, 2, 17, 2049), (1, 4, 2, 1, 300),   # N_q != N_k
]


@pytest.mark.parametrize("d", (64, 128))
@pytest.mark.parametrize("causal", (False, True))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gradients_follow_the_rule(shape, causal, d):
    q, k, v, dout = make(*shape, d, torch.bfloat16)
    check_rule(run_bwd(q, k, v, dout, causal), q, k, v, dout, causal)


@pytest.mark.parametrize("cfg", SHIPPED, ids=lambda c: f"{c.block_q}x{c.block_k}w{c.warps}s{c.stages}d{c.head_dim}")
@pytest.mark.parametrize("dtype", ("bf16", "fp16"))
def test_every_shipped_config(cfg, dtype):
    q, k, v, dout = make(1, 4, 2, 777, 900, cfg.head_dim, DTYPES[dtype])
    for causal in (False, True):
        check_rule(run_bwd(q, k, v, dout, causal, cfg), q, k, v, dout, causal)
        check_rule(run_bwd(q, k, v, dout, causal, cfg, deterministic=True), q, k, v, dout, causal)


def _hopper() -> bool:
    return torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.parametrize("cfg", SHIPPED_SM90, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ("bf16", "fp16"))
def test_every_shipped_hopper_config(cfg, dtype):
    """flash_bwd_sm90's configs: odd lengths, N_q != N_k both ways, GQA 4:1, both modes."""
    if not _hopper():
        pytest.skip("flash_bwd_sm90 needs an sm_90 GPU")
    for shape in ((1, 4, 1, 777, 900), (2, 2, 2, 300, 65), (1, 2, 2, 1, 1)):
        q, k, v, dout = make(*shape, cfg.head_dim, DTYPES[dtype])
        for causal in (False, True):
            check_rule(run_bwd(q, k, v, dout, causal, cfg), q, k, v, dout, causal)
            check_rule(run_bwd(q, k, v, dout, causal, cfg, deterministic=True), q, k, v, dout, causal)


@pytest.mark.parametrize("causal", (False, True))
def test_hopper_deterministic_with_more_key_tiles_than_sms(causal):
    """More key tiles of one head than the GPU has SMs: the ordered dQ adds must not wait on CTAs that
    cannot start; bit-for-bit repeatable and within bf16 rounding of the atomic mode."""
    if not _hopper():
        pytest.skip("flash_bwd_sm90 needs an sm_90 GPU")
    from kernels import flash_bwd_sm90

    cfg = SHIPPED_SM90[0]
    n = 128 * (torch.cuda.get_device_properties(0).multi_processor_count + 20) + 5
    q, k, v, dout = make(1, 1, 1, n, n, cfg.head_dim, torch.bfloat16)
    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
    det = [flash_bwd_sm90.backward(dout, q, k, v, out, lse, causal=causal, config=cfg, deterministic=True)
           for _ in range(2)]
    atomic = flash_bwd_sm90.backward(dout, q, k, v, out, lse, causal=causal, config=cfg)
    assert all(torch.equal(a, b) for a, b in zip(*det))
    for a, b in zip(det[0], atomic):
        assert torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2 * b.float().abs().max().item())


@pytest.mark.parametrize("deterministic", (False, True))
def test_hopper_launch_sections_leave_the_gradients_as_they_were(deterministic):
    """The causal launch order (unit_of: key tiles longest first across a section of (KV head, batch)
    groups) with sections of 1, 4 (the last one ragged) and all 6 groups: the same gradients, bit for bit
    in the deterministic mode, and each within the rule."""
    if not _hopper():
        pytest.skip("flash_bwd_sm90 needs an sm_90 GPU")
    from kernels import flash_bwd_sm90

    cfg = SHIPPED_SM90[-1]
    q, k, v, dout = make(3, 4, 2, 650, 777, cfg.head_dim, torch.bfloat16)
    out, lse = kernels.flash_attention(q, k, v, causal=True, return_lse=True)
    runs = [flash_bwd_sm90.backward(dout, q, k, v, out, lse, causal=True, config=cfg, deterministic=deterministic,
                                    _sections=sec) for sec in (1, 4, 6)]
    for run in runs:
        check_rule(run, q, k, v, dout, True)
    if deterministic:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1])) and all(
            torch.equal(a, b) for a, b in zip(runs[0], runs[2]))


@pytest.mark.parametrize("deterministic", (False, True))
@pytest.mark.parametrize("d", (32, 64, 96, 128))
def test_hopper_tail_pieces_leave_the_gradients_as_they_were(d, deterministic):
    """The tail split (span_of, combine_pieces) forced onto every unit of a grid smaller than a wave, in
    2, 3 and 8 pieces (GQA: a piece's span crosses query heads; odd N_q != N_k: the query and key tails):
    each run within the rule, dK and dV within fp32 rounding of the unsplit run's, and in the
    deterministic mode every split run the same bits on a second call; after a call the arrival counters
    are back at zero, so a second call of the same launch is right too."""
    if not _hopper():
        pytest.skip("flash_bwd_sm90 needs an sm_90 GPU")
    from kernels import flash_bwd_sm90

    cfg = next(c for c in SHIPPED_SM90 if c.head_dim == d)
    q, k, v, dout = make(2, 6, 3, 777, 650, d, torch.bfloat16)
    out, lse = kernels.flash_attention(q, k, v, causal=False, return_lse=True)
    call = lambda p: flash_bwd_sm90.backward(dout, q, k, v, out, lse, causal=False, config=cfg,  # noqa: E731
                                             deterministic=deterministic, _pieces=p)
    whole = call(1)
    for pieces in (2, 3, 8):
        first, again = call(pieces), call(pieces)
        for run in (first, again):
            check_rule(run, q, k, v, dout, False)
            for a, b in zip(run[1:], whole[1:]):
                assert torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-2 * b.float().abs().max().item())
        if deterministic:
            assert all(torch.equal(a, b) for a, b in zip(first, again)), pieces


@pytest.mark.parametrize("d", (32, 96))
def test_hopper_head_dims_32_and_96_through_autograd(d):
    """d = 32 and 96 (rows padded to 64-column blocks, the dQ accumulator too): kernels.flash_attention's
    autograd on an sm_90 GPU runs flash_bwd_sm90 within the rule, causal and not, GQA, odd lengths; off
    sm_90 the backward names the GPU in one line."""
    from kernels import dispatch

    q, k, v, dout = make(2, 4, 2, 333, 517, d, torch.bfloat16)
    if not _hopper():
        with pytest.raises(ValueError, match=f"head dim {d} has no backward on this GPU"):
            dispatch.backward_family(q, k, v, False, None, False)
        return
    for causal in (False, True):
        assert dispatch.backward_family(q, k, v, causal, None, False)[0] == "flash_bwd_sm90"
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        out = kernels.flash_attention(*leaves, causal=causal)
        grads = torch.autograd.grad(out, leaves, dout)
        check_rule(grads, q, k, v, dout, causal)


def test_hopper_picks_its_own_backward():
    """With config=None an sm_90 GPU runs the model's pick over both backward families: the wgmma one."""
    if not _hopper():
        pytest.skip("flash_bwd_sm90 needs an sm_90 GPU")
    from kernels import dispatch

    q, k, v, _ = make(1, 4, 4, 4096, 4096, 128, torch.bfloat16)
    for det in (False, True):
        assert dispatch.backward_family(q, k, v, True, None, det)[0] == "flash_bwd_sm90"


@pytest.mark.parametrize("causal", (False, True))
def test_deterministic_mode_repeats_bit_for_bit(causal):
    q, k, v, dout = make(1, 8, 2, 1500, 1500, 128, torch.bfloat16)
    first = run_bwd(q, k, v, dout, causal, deterministic=True)
    for _ in range(3):
        again = run_bwd(q, k, v, dout, causal, deterministic=True)
        assert all(torch.equal(a, b) for a, b in zip(first, again))
    check_rule(first, q, k, v, dout, causal)


def test_autograd_matches_the_explicit_backward_and_takes_strided_inputs():
    B, N, H, d = 2, 300, 4, 64
    base = torch.randn(B, N, 3, H, d, device="cuda", dtype=torch.bfloat16)
    q, k, v = (base[:, :, i].transpose(1, 2).detach().requires_grad_() for i in range(3))  # strided views
    out = kernels.flash_attention(q, k, v, causal=True)
    dout = torch.randn_like(out).transpose(2, 3).contiguous().transpose(2, 3)   # non-contiguous grad
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    check_rule((dq, dk, dv), q.detach(), k.detach(), v.detach(), dout, True)


def test_torch_compile_treats_it_as_one_op():
    import torch._dynamo as dynamo

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 3 * 64, dtype=torch.bfloat16, device="cuda")

        def forward(self, x):
            q, k, v = self.proj(x).view(x.shape[0], x.shape[1], 3, 1, 64).unbind(2)
            o = kernels.flash_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
            return o.float().square().mean()

    m = Attn()
    x = torch.randn(2, 256, 64, device="cuda", dtype=torch.bfloat16)
    explained = dynamo.explain(m)(x)
    assert explained.graph_break_count == 0, explained.break_reasons
    loss = torch.compile(m)(x)
    loss.backward()
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in m.parameters())


def test_training_two_layers_tracks_sdpa():
    """50 optimizer steps of a two-layer attention model: loss with our op vs with SDPA, same init/data."""
    from torch.nn import functional as F

    def model(attn, seed=0):
        torch.manual_seed(seed)
        layers = [torch.nn.Linear(64, 3 * 128, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        params = [p for lay in layers for p in lay.parameters()]
        opt = torch.optim.SGD(params, lr=0.05)
        data = torch.Generator(device="cuda").manual_seed(1)
        losses = []
        for _ in range(50):
            x = torch.randn(2, 512, 64, device="cuda", dtype=torch.bfloat16, generator=data)
            h = x
            for lay in layers:
                q, k, v = lay(h).view(2, 512, 3, 2, 64).unbind(2)
                h = attn(*(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2).reshape(2, 512, 128)[..., :64]
            loss = h.float().square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    ours = model(lambda q, k, v: kernels.flash_attention(q, k, v, causal=True))
    ref = model(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    for a, b in zip(ours, ref):
        assert abs(a - b) <= 0.02 * abs(b) + 1e-4, (ours, ref)


@pytest.mark.parametrize("bad, message", [
    (lambda q, k, v, o, l, g: (g[..., :32], q, k, v, o, l), "dout must have"),
    (lambda q, k, v, o, l, g: (g.float(), q, k, v, o, l), "dout must be"),
    (lambda q, k, v, o, l, g: (g, q, k, v, o, l[..., :5]), "lse must have"),
    (lambda q, k, v, o, l, g: (g, q, k, v, o, l.half()), "lse must be a float32"),
])
def test_bad_input_is_one_clear_error(bad, message):
    q, k, v, dout = make(1, 2, 2, 64, 64, 64, torch.bfloat16, seed=3)
    out, lse = kernels.flash_attention(q, k, v, return_lse=True)
    with pytest.raises((ValueError, TypeError), match=message):
        kernels.flash_attention_backward(*bad(q, k, v, out, lse, dout))


def test_unsupported_head_dim_is_named():
    q, k, v, dout = make(1, 2, 2, 64, 64, 256, torch.bfloat16, seed=4)
    out = torch.randn_like(q)
    lse = torch.zeros(1, 2, 64, device="cuda")
    with pytest.raises(ValueError, match="256"):
        kernels.flash_attention_backward(dout, q, k, v, out, lse)


def test_explicit_config_of_another_head_dim_is_refused():
    q, k, v, dout = make(1, 2, 2, 64, 64, 64, torch.bfloat16, seed=5)
    out, lse = kernels.flash_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="head_dim"):
        kernels.flash_attention_backward(dout, q, k, v, out, lse, config=FlashBwdConfig(64, 64, 4, 2, 128))


@pytest.mark.slow
@pytest.mark.parametrize("tool", ("memcheck", "racecheck"))
def test_compute_sanitizer_is_clean(tool, sanitized):
    from validation.sanitize import expected_calls

    out = sanitized(tool, "validation.sanitize")
    calls = expected_calls(torch.cuda.get_device_capability())   # sm90's configs (and tail pieces) on sm_90
    assert f"calls {calls}" in out, out[-3000:]
