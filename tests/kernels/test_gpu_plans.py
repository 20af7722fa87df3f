"""GPU tests of the forward's launch plans (``kernels.plans``) and of the Hopper kernel's self-resetting tile
counter: a plan reused on new tensors of its signature (new addresses: the TMA descriptors encoded again),
a new signature (strides, flags) getting its own plan, the base address checked on every call, repeated
dynamic-schedule launches on one stream and on two, and under CUDA-graph capture.  Each result is checked
against the float32 reference.  Skips without torch and a CUDA GPU (the sm90 ones without an sm_90 GPU)."""

import math

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402
from kernels import flash_sm80, flash_sm90, plans  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

HOPPER = torch.cuda.get_device_capability() == (9, 0)
needs_sm90 = pytest.mark.skipif(not HOPPER, reason="needs an sm_90 (Hopper) GPU")


def qkv(B, H, H_kv, N, d, seed, layout="bhnd"):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def draw(h):
        if layout == "bnhd":   # a (B, N, H, d) tensor seen as (B, H, N, d): other strides, the same shape
            return torch.randn((B, N, h, d), generator=g, device="cuda").to(torch.bfloat16).transpose(1, 2)
        return torch.randn((B, h, N, d), generator=g, device="cuda").to(torch.bfloat16)

    return draw(H), draw(H_kv), draw(H_kv)


def assert_close(o, lse, q, k, v, causal):
    ref, ref_lse = attention_reference(q, k, v, causal, 1.0 / math.sqrt(q.shape[-1]))
    rel = float(torch.linalg.vector_norm((o.float() - ref).flatten()) / torch.linalg.vector_norm(ref.flatten()))
    assert rel < 1e-2, rel
    if lse is not None:
        assert float((lse - ref_lse).abs().max()) < 1e-2


def fresh_seed():
    return int(torch.randint(0, 2**31 - 1, (1,)))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("backend", ["sm80", pytest.param("sm90", marks=needs_sm90)])
def test_plan_reused_on_new_tensors(backend, causal):
    """Calls 2 and 3 of a signature hit its plan: other tensors (other addresses), right answers."""
    plans.clear()
    seed = fresh_seed()
    for i in range(3):
        q, k, v = qkv(2, 4, 2, 333, 128, seed + i)
        o, lse = kernels.flash_attention(q, k, v, causal=causal, backend=backend, return_lse=True)
        torch.cuda.synchronize()
        assert_close(o, lse, q, k, v, causal)
    assert len(plans.cache()) == 1


@pytest.mark.parametrize("backend", ["sm80", pytest.param("sm90", marks=needs_sm90)])
def test_new_signature_new_plan(backend):
    """Other strides (a transposed view of the same shape), another flag: plans of their own."""
    plans.clear()
    seed = fresh_seed()
    for layout, causal in (("bhnd", False), ("bnhd", False), ("bnhd", True), ("bhnd", False)):
        q, k, v = qkv(1, 4, 4, 200, 64, seed, layout)
        o = kernels.flash_attention(q, k, v, causal=causal, backend=backend)
        torch.cuda.synchronize()
        assert_close(o, None, q, k, v, causal)
    assert len(plans.cache()) == 3


def test_misaligned_base_on_a_plan_hit():
    """A tensor of the plan's signature whose data starts off a 16-byte boundary: one clear error."""
    plans.clear()
    q, k, v = qkv(1, 2, 2, 64, 64, fresh_seed())
    kernels.flash_attention(q, k, v, backend="sm80")
    flat = torch.randn(2 * 64 * 64 + 1, device="cuda").to(torch.bfloat16)
    shifted = flat[1:].view(1, 2, 64, 64)   # strides of q, base 2 bytes past an aligned one
    with pytest.raises(ValueError, match="16-byte aligned"):
        kernels.flash_attention(shifted, k, v, backend="sm80")


@needs_sm90
@pytest.mark.parametrize("persistent", [True, False])
def test_dynamic_schedule_repeats_on_one_counter(persistent):
    """Causal launches claim tiles from a counter the kernel leaves at zero: five in a row on one stream (no
    zeroing between them), each with its own inputs, all right."""
    seed = fresh_seed()
    runs = []
    for i in range(5):
        q, k, v = qkv(2, 8, 2, 1000, 128, seed + i)
        runs.append((flash_sm90.attention(q, k, v, causal=True, return_lse=True, _persistent=persistent), q, k, v))
    torch.cuda.synchronize()
    for (o, lse), q, k, v in runs:
        assert_close(o, lse, q, k, v, True)


@needs_sm90
def test_dynamic_schedule_on_two_streams():
    """Two streams at once, each with its own counter."""
    seed = fresh_seed()
    side = torch.cuda.Stream()
    inputs = [qkv(4, 8, 8, 2048, 64, seed + i) for i in range(4)]
    outs = []
    torch.cuda.synchronize()
    for i, (q, k, v) in enumerate(inputs):
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            outs.append(flash_sm90.attention(q, k, v, causal=True))
    torch.cuda.synchronize()
    for o, (q, k, v) in zip(outs, inputs):
        assert_close(o, None, q, k, v, True)


@needs_sm90
def test_dynamic_schedule_in_a_cuda_graph():
    """A causal call captured in a graph, replayed twice on new inputs copied in, between eager calls."""
    seed = fresh_seed()
    q, k, v = qkv(2, 4, 4, 700, 128, seed)
    flash_sm90.attention(q, k, v, causal=True)   # plan and module built outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = flash_sm90.attention(q, k, v, causal=True)
    for i in (1, 2):
        nq, nk, nv = qkv(2, 4, 4, 700, 128, seed + i)
        q.copy_(nq), k.copy_(nk), v.copy_(nv)
        graph.replay()
        eager = flash_sm90.attention(nq, nk, nv, causal=True)
        torch.cuda.synchronize()
        assert_close(o, None, nq, nk, nv, True)
        assert_close(eager, None, nq, nk, nv, True)


def test_sm80_plan_allocates_fresh_outputs():
    """Two calls of one plan return different tensors (a plan keeps no output between calls)."""
    plans.clear()
    q, k, v = qkv(1, 2, 2, 128, 64, fresh_seed())
    a = flash_sm80.attention(q, k, v)
    b = flash_sm80.attention(q, k, v)
    assert a.data_ptr() != b.data_ptr()
    torch.cuda.synchronize()
    assert torch.equal(a, b)


@needs_sm90
def test_out_off_a_16_byte_boundary():
    """flash_sm90's out= (rows stored 16 bytes at a time): a contiguous one off a 16-byte boundary is refused."""
    q, k, v = qkv(1, 2, 2, 64, 64, fresh_seed())
    flat = torch.empty(2 * 64 * 64 + 1, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="16-byte aligned"):
        flash_sm90.attention(q, k, v, out=flat[1:].view(1, 2, 64, 64))


def float_grads(q, k, v, dout, causal):
    """dq, dk, dv of float32 attention (GQA, bottom-right causal) by autograd."""
    qs, ks, vs = (x.detach().float().requires_grad_() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    kk, vv = ks.repeat_interleave(g, dim=1), vs.repeat_interleave(g, dim=1)
    s = qs @ kk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n_q, n_k = q.shape[2], k.shape[2]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q), float("-inf"))
    out = torch.softmax(s, dim=-1) @ vv
    return torch.autograd.grad(out, (qs, ks, vs), dout.float())


def assert_grads_close(ours, ref):
    for name, o, r in zip(("dq", "dk", "dv"), ours, ref):
        rel = float(torch.linalg.vector_norm((o.float() - r).flatten()) / torch.linalg.vector_norm(r.flatten()))
        assert rel < 2e-2, (name, rel)


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_plan_reused_on_new_tensors(causal, deterministic):
    """Backward calls 2 and 3 of a signature hit its plan (the model's family: flash_bwd_sm90 on Hopper):
    other tensors, right gradients; a dO of the plan's strides off a 16-byte boundary is copied, not refused."""
    plans.clear()
    seed = fresh_seed()
    for i in range(3):
        q, k, v = qkv(2, 4, 2, 333, 128, seed + i)
        dout = torch.randn_like(q)
        if i == 2:   # the same strides, a base 2 bytes past an aligned one
            flat = torch.empty(dout.numel() + 1, device="cuda", dtype=dout.dtype)
            dout = flat[1:].view_as(dout).copy_(dout)
        out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
        grads = kernels.flash_attention_backward(dout, q, k, v, out, lse, causal=causal, deterministic=deterministic)
        torch.cuda.synchronize()
        assert_grads_close(grads, float_grads(q, k, v, dout, causal))
    assert len([s for s in plans.cache() if s[0] == "flash_attention_backward"]) == 1


def test_backward_plan_per_family_entry():
    """The family entries keep their own plans: the mma.sync backward's called twice, right both times."""
    from kernels import flash_bwd_sm80

    plans.clear()
    seed = fresh_seed()
    for i in range(2):
        q, k, v = qkv(1, 4, 4, 300, 64, seed + i)
        dout = torch.randn_like(q)
        out, lse = kernels.flash_attention(q, k, v, causal=True, return_lse=True)
        grads = flash_bwd_sm80.backward(dout, q, k, v, out, lse, causal=True)
        torch.cuda.synchronize()
        assert_grads_close(grads, float_grads(q, k, v, dout, True))
    assert len([s for s in plans.cache() if s[0] == "flash_bwd_sm80"]) == 1
