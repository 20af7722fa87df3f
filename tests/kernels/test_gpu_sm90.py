"""GPU correctness of the sm90 FlashAttention forward (family flash_sm90) against a float32 torch
reference.  Skips unless torch and an sm_90 GPU are present."""

import math

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs an sm_90 (Hopper) GPU", allow_module_level=True)

import kernels  # noqa: E402
from iomodel import families  # noqa: E402
from iomodel.families.flash_sm90 import Sm90Config  # noqa: E402
from kernels import flash_sm90  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

FAMILY = families.get("flash_sm90")


def reference(q, k, v, causal, scale):
    return attention_reference(q, k, v, causal, scale)


def check(cfg, dtype, B, H, H_kv, N_q, N_k, causal, mag=1.0, layout="bhnd", persistent=None):
    d = cfg.head_dim

    def make(h, n):
        if layout == "bnhd":  # strided view, read in place through the TMA descriptor
            return torch.randn(B, n, h, d, device="cuda", dtype=dtype).transpose(1, 2)
        return torch.randn(B, h, n, d, device="cuda", dtype=dtype)

    q, k, v = make(H, N_q) * mag, make(H_kv, N_k), make(H_kv, N_k)
    scale = 1.0 / math.sqrt(d)
    out = torch.full((B, H, N_q, d), float("nan"), device="cuda", dtype=dtype)  # poisoned
    o, lse = flash_sm90.attention(q, k, v, causal=causal, config=cfg, scale=scale, return_lse=True,
                                  out=out, _persistent=persistent)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, scale)
    assert not torch.isnan(o).any(), "output not fully written"
    rel = float(torch.linalg.vector_norm((o.float() - ref).flatten()) / torch.linalg.vector_norm(ref.flatten()))
    assert rel < (1e-2 if dtype == torch.bfloat16 else 5e-3), rel
    fin = torch.isfinite(ref_lse)
    if fin.any():
        assert float((lse[fin] - ref_lse[fin]).abs().max()) < 1e-2
    assert bool((lse[~fin] == float("-inf")).all())


BASE = {d: FAMILY.shipped_for({"d": d})[0] for d in (64, 128, 256)}


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("n", [1, 17, 1000, 4097])
@pytest.mark.parametrize("causal", [False, True])
def test_lengths(d, n, causal):
    torch.seed()  # fresh inputs every run
    check(BASE[d], torch.bfloat16, 1, 2, 2, n, n, causal)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("nq,nk", [(100, 300), (300, 100), (1, 1000), (1000, 17), (2000, 300)])
@pytest.mark.parametrize("causal", [False, True])
def test_nq_ne_nk(d, nq, nk, causal):
    torch.seed()  # fresh inputs every run
    check(BASE[d], torch.bfloat16, 2, 4, 4, nq, nk, causal)


@pytest.mark.parametrize("cfg", FAMILY.shipped, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True])
def test_every_shipped_config(cfg, dtype, causal):
    torch.seed()  # fresh inputs every run
    check(cfg, dtype, 1, 2, 2, 300, 333, causal)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("persistent", [True, False])
def test_gqa_many_tiles(d, persistent):
    torch.seed()  # fresh inputs every run
    check(BASE[d], torch.bfloat16, 4, 8, 2, 2000, 2000, True, persistent=persistent)
    check(BASE[d], torch.float16, 2, 6, 1, 513, 700, False, persistent=persistent)


@pytest.mark.parametrize("d", [64, 128])
def test_persistent_tile_walk(d):
    """Many tiles per CTA: the causal kernels' dynamic schedule (tiles without keys, N_q > N_k, in the
    middle of a walk; a second launch must find its counter zeroed again) and the fixed one."""
    torch.seed()  # fresh inputs every run
    for _ in range(2):
        check(BASE[d], torch.bfloat16, 3, 10, 5, 3000, 700, True)
    check(BASE[d], torch.float16, 2, 8, 8, 1500, 1500, False)
    check(BASE[d], torch.bfloat16, 2, 12, 4, 1111, 1500, True, persistent=False)


@pytest.mark.parametrize("d", [64, 128])
def test_large_scores_and_strides(d):
    torch.seed()  # fresh inputs every run
    check(BASE[d], torch.bfloat16, 1, 2, 2, 1000, 1000, False, mag=8.0)
    check(BASE[d], torch.float16, 1, 2, 2, 1000, 1000, True, mag=8.0)
    check(BASE[d], torch.bfloat16, 2, 4, 2, 777, 900, True, layout="bnhd")


@pytest.mark.parametrize("d", [32, 64, 96, 128, 192, 256])
@pytest.mark.parametrize("growth", [64.0, 1000.0])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n_q, n_k", [(4096, 4096), (1000, 4097)])
def test_the_stale_max_follows_rows_whose_maxima_grow_chunk_by_chunk(d, growth, dtype, n_q, n_k):
    """The plain kernel's stale max (FwdTraits::kStaleLog2, 2^8): the chunks are visited from the last key down,
    and here the scores grow towards key 0 by `growth` in exp2's exponent over the keys (about 2 a chunk: the
    maxima stay stale for chunks on end and P nears 2^8; about 30: each chunk rescales).  4096 x 4096 runs as
    clusters of two CTAs (tests/kernels/test_gpu_cluster_sm90.py), 1000 x 4097 with a masked key tail."""
    torch.seed()  # fresh inputs every run
    scale = 1.0 / math.sqrt(d)
    q = torch.randn(1, 4, n_q, d, device="cuda")
    k = torch.randn(1, 4, n_k, d, device="cuda")
    q[..., 0] = 1.0
    k[..., 0] = (growth / (scale * math.log2(math.e))) * (1.0 - torch.arange(n_k, device="cuda") / n_k)
    q, k = q.to(dtype), k.to(dtype)
    v = torch.randn(1, 4, n_k, d, device="cuda", dtype=dtype)
    o, lse = flash_sm90.attention(q, k, v, scale=scale, return_lse=True)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, False, scale)
    rel = float(torch.linalg.vector_norm((o.float() - ref).flatten()) / torch.linalg.vector_norm(ref.flatten()))
    assert rel < (1e-2 if dtype == torch.bfloat16 else 5e-3), rel
    assert float((lse - ref_lse).abs().max()) < 1e-2


def test_default_config_and_scale():
    torch.seed()  # fresh inputs every run
    q = torch.randn(2, 4, 256, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 4, 256, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 4, 256, 128, device="cuda", dtype=torch.bfloat16)
    o = flash_sm90.attention(q, k, v, causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert float((o.float() - ref).norm() / ref.norm()) < 1e-2


def test_input_errors():
    q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        flash_sm90.attention(q.float(), q.float(), q.float())
    with pytest.raises(ValueError, match="head dim"):
        x = torch.randn(1, 2, 64, 80, device="cuda", dtype=torch.bfloat16)
        flash_sm90.attention(x, x, x)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        flash_sm90.attention(q, q[:, :1].expand(1, 3, 64, 64).contiguous(),
                             q[:, :1].expand(1, 3, 64, 64).contiguous())
    with pytest.raises(ValueError, match="contiguous in the last dim"):
        x = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.bfloat16).transpose(2, 3)
        flash_sm90.attention(x, x, x)
    with pytest.raises(ValueError, match="CUDA device"):
        flash_sm90.attention(q.cpu(), q.cpu(), q.cpu())
    with pytest.raises(ValueError, match="head_dim 128 does not match"):
        flash_sm90.attention(q, q, q, config=BASE[128])
    with pytest.raises(ValueError, match="64 \\* consumers"):
        flash_sm90.attention(q, q, q, config={"block_m": 128, "block_n": 128, "stages": 2, "consumers": 3})


def test_auto_dispatch_runs_the_family_the_chooser_picks(monkeypatch):
    """config=None on Hopper: the chooser ranks both flash families; the family it picks builds the call's
    launch plan, with its config (once: the second call of the signature reuses the plan)."""
    from iomodel import chooser
    from kernels import flash_sm80, plans

    ran = []

    def spy(mod):
        real = mod.plan

        def plan(*args, **kw):
            ran.append((mod.FAMILY, kw["config"]))
            return real(*args, **kw)
        return plan

    for mod in (flash_sm80, flash_sm90):
        monkeypatch.setattr(mod, "plan", spy(mod))
    plans.clear()
    torch.seed()
    q, k, v = (torch.randn(2, 8, 2048, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = kernels.flash_attention(q, k, v)
    kernels.flash_attention(q, k, v)
    ref, _ = reference(q, k, v, False, 128 ** -0.5)
    assert float((o.float() - ref).norm() / ref.norm()) < 1e-2
    shape = dict(B=2, H=8, H_kv=8, N_q=2048, N_k=2048, d=128, causal=False, dtype="bf16")
    pick = chooser.choose(["flash_sm80", "flash_sm90"], torch.cuda.get_device_name(), shape)
    assert ran == [(pick.kernel, pick.config)]
    with pytest.raises(ValueError, match="backend"):
        kernels.flash_attention(q, k, v, backend="sm70")


Q_HELD = ("SM90_Q_REGS_MAX=256",)   # A/B: Q's fragments in registers through a tile (FwdTraits::kQRegs)


@pytest.mark.parametrize("cfg", [Sm90Config(192, 128, 3, 32, 3), Sm90Config(128, 128, 3, 128, 2)], ids=lambda c: c.name)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("B,H,H_kv,N_q,N_k", [(2, 8, 2, 1000, 1337), (1, 4, 4, 4097, 300), (3, 6, 3, 17, 17)])
def test_the_q_held_build_matches_float32_and_the_read_build(cfg, causal, dtype, B, H, H_kv, N_q, N_k):
    """SM90_Q_REGS_MAX (Q loaded once a tile by ldmatrix from its swizzled rows, 64-byte at d = 32 and 128-byte in two
    column blocks at d = 128): against float32 with GQA, ragged tails and N_q != N_k both ways, and bit for bit
    against the build that reads Q from SMEM (the same products in the same order; both given their switches, so both
    take the schedule of a launch with `_defines`)."""
    g = torch.Generator(device="cuda").manual_seed(N_q * 31 + N_k + cfg.head_dim)
    q, k, v = (torch.randn(B, h, n, cfg.head_dim, generator=g, device="cuda").to(dtype)
               for h, n in ((H, N_q), (H_kv, N_k), (H_kv, N_k)))
    o, lse = flash_sm90.attention(q, k, v, causal=causal, config=cfg, return_lse=True, _defines=Q_HELD)
    ref, ref_lse = reference(q, k, v, causal, 1.0 / math.sqrt(cfg.head_dim))
    rel = float(torch.linalg.vector_norm((o.float() - ref).flatten()) / torch.linalg.vector_norm(ref.flatten()))
    assert rel < (1e-2 if dtype == torch.bfloat16 else 5e-3), rel
    o_read, lse_read = flash_sm90.attention(q, k, v, causal=causal, config=cfg, return_lse=True, _defines=())
    torch.testing.assert_close(o, o_read, rtol=0, atol=0)
    torch.testing.assert_close(lse, lse_read, rtol=0, atol=0, equal_nan=True)
