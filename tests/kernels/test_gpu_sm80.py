"""GPU correctness of the flash (mma.sync) and unfused attention kernels against float32 PyTorch, and the
package's dispatch on a GPU: ``kernels.run`` by family name, ``config=None`` through the chooser."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402
from iomodel import families  # noqa: E402
from iomodel.families.flash_sm80 import FlashConfig  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 5e-3}
SHIPPED_FLASH = families.get("flash_sm80").shipped
SHIPPED_MATMUL = families.get("unfused").shipped
SHIPPED_HEAD_DIMS = (64, 128)
# d=256 has no shipped flash_sm80 config; these compile without spills on sm_80 and sm_90a
D256 = (FlashConfig(64, 64, 4, 1, 256), FlashConfig(128, 32, 8, 1, 256))
HOPPER = torch.cuda.get_device_capability() == (9, 0)


def reference(q, k, v, causal, scale):
    """float32 attention and natural-log LSE; rows with no visible key give O = 0, L = -inf."""
    return attention_reference(q, k, v, causal, scale)


def make_qkv(B, H, H_kv, N_q, N_k, d, dtype, mag=1.0, layout="bhnd", seed=None):
    # fresh inputs every run; the seed is in the generator state if a failure needs replaying
    g = torch.Generator(device="cuda")
    g.manual_seed(seed) if seed is not None else g.seed()

    def t(h, n):
        if layout == "bnhd":   # (B, N, H, d) storage viewed as (B, H, N, d): non-contiguous strides
            x = torch.randn(B, n, h, d, generator=g, device="cuda", dtype=torch.float32).transpose(1, 2)
        else:
            x = torch.randn(B, h, n, d, generator=g, device="cuda", dtype=torch.float32)
        return x

    q = (t(H, N_q) * mag).to(dtype)
    k = (t(H_kv, N_k) * mag).to(dtype)
    v = t(H_kv, N_k).to(dtype)
    return q, k, v


def rel_err(o, ref):
    return ((o.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check_flash(B, H, H_kv, N_q, N_k, d, causal, dtype, cfg, mag=1.0, layout="bhnd", scale=None):
    q, k, v = make_qkv(B, H, H_kv, N_q, N_k, d, dtype, mag, layout)
    sc = scale if scale is not None else 1.0 / math.sqrt(d)
    o, lse = kernels.flash_attention(q, k, v, causal=causal, config=cfg, scale=scale, return_lse=True)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, sc)
    assert o.shape == (B, H, N_q, d) and o.dtype == dtype
    assert lse.shape == (B, H, N_q) and lse.dtype == torch.float32
    assert not torch.isnan(o).any(), "O not fully written"
    assert not torch.isnan(lse).any(), "LSE not fully written"
    if ref.norm() > 0:
        err = rel_err(o, ref)
        assert err < TOL[dtype], f"rel err {err:.3e} ({cfg}, causal={causal}, {dtype})"
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    fin = torch.isfinite(ref_lse)
    torch.testing.assert_close(lse[fin], ref_lse[fin], rtol=1e-3, atol=1e-2)
    # rows that see no key: exactly zero output
    dead = torch.isinf(ref_lse)
    if dead.any():
        assert (o.float()[dead] == 0).all()


SHAPES = [  # (B, H, H_kv, N_q, N_k)
    (1, 2, 2, 1, 1),
    (2, 3, 3, 17, 17),
    (1, 4, 2, 1000, 1000),
    (1, 2, 1, 4097, 4097),
    (2, 8, 2, 130, 390),     # GQA, N_q < N_k
    (1, 8, 1, 333, 77),      # MQA, N_q > N_k (causal: leading rows see no key)
    (1, 2, 2, 1, 4097),
    (1, 2, 2, 200, 1),
]


def _cases():
    cases = []
    dtypes = (torch.bfloat16, torch.float16)
    for d in SHIPPED_HEAD_DIMS:
        cfgs = [c for c in SHIPPED_FLASH if c.head_dim == d]
        for i, cfg in enumerate(cfgs):
            shape = SHAPES[i % len(SHAPES)]
            cases.append((*shape, d, bool(i % 2), dtypes[(i // 2) % 2], cfg))
            if shape[3] > 300 or shape[4] > 300:
                continue
            # every config also sees a medium shape with both masks
            cases.append((1, 4, 2, 257, 513, d, not bool(i % 2), dtypes[(i // 2 + 1) % 2], cfg))
    return cases


@pytest.mark.parametrize("B,H,H_kv,N_q,N_k,d,causal,dtype,cfg", _cases(),
                         ids=lambda x: families.get("flash_sm80").label(x) if isinstance(x, FlashConfig) else str(x))
def test_flash_shipped_configs(B, H, H_kv, N_q, N_k, d, causal, dtype, cfg):
    check_flash(B, H, H_kv, N_q, N_k, d, causal, dtype, cfg)


@pytest.mark.parametrize("d", SHIPPED_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_flash_shape_matrix(shape, dtype, causal, d):
    cfg = [c for c in SHIPPED_FLASH if c.head_dim == d][1]
    check_flash(*shape, d, causal, dtype, cfg)


@pytest.mark.parametrize("mag", [10.0, 30.0])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_large_magnitude(mag, causal):
    for d in SHIPPED_HEAD_DIMS:
        cfg = [c for c in SHIPPED_FLASH if c.head_dim == d][0]
        check_flash(1, 4, 4, 1000, 1000, d, causal, torch.bfloat16, cfg, mag=mag)
        check_flash(1, 2, 1, 300, 700, d, causal, torch.float16, cfg, mag=mag)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_row_max_that_creeps_and_jumps(dtype, causal):
    """The stale row max (kernels/csrc/warp_tiles.cuh RESCALE_STALE): keys scaled up along the sequence, so a
    row's max grows chunk after chunk, mostly within the 2^8 margin (P above 1, up to 2^8 in fp16 too) and
    past it at times; float32 O and LSE as every other check."""
    B, H, N_q, N_k = 1, 4, 700, 1500
    for d in SHIPPED_HEAD_DIMS:
        cfg = [c for c in SHIPPED_FLASH if c.head_dim == d][0]
        q, k, v = make_qkv(B, H, H, N_q, N_k, d, torch.float32)
        ramp = torch.linspace(0.5, 6.0, N_k, device="cuda").view(1, 1, N_k, 1)
        q, k, v = (2 * q).to(dtype), (k * ramp).to(dtype), v.to(dtype)
        o, lse = kernels.flash_attention(q, k, v, causal=causal, config=cfg, return_lse=True)
        ref, ref_lse = reference(q, k, v, causal, 1.0 / math.sqrt(d))
        assert rel_err(o, ref) < TOL[dtype], (d, causal, dtype)
        fin = torch.isfinite(ref_lse)
        assert torch.equal(fin, torch.isfinite(lse))
        torch.testing.assert_close(lse[fin], ref_lse[fin], rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("per", [1, 3, "all", "rule"])
def test_causal_sections_give_the_same_answer(per, monkeypatch):
    """The causal grid's sections (x = head within a section, y = query tile longest first, z = section)
    cover every (batch, head, tile) once whatever their size: one head, three (B H = 2 x 3, GQA 3:1 heads
    in one section), all of them, or the launcher's rule; odd N_q != N_k, against float32 and bit for bit
    against each other."""
    import kernels.flash_sm80 as kfs

    rule = kfs.causal_section_heads
    sizes = {"all": lambda heads, group, m, slots: heads, "rule": rule}
    monkeypatch.setattr(kfs, "causal_section_heads", sizes.get(per, lambda heads, group, m, slots: per))
    cfg = [c for c in SHIPPED_FLASH if c.head_dim == 64][0]
    q, k, v = make_qkv(2, 3, 1, 777, 901, 64, torch.bfloat16, seed=5)
    plan = kfs.plan(q, k, v, True, cfg)
    heads = plan.prepared.grid[0] if per == "rule" else (6 if per == "all" else per)
    assert plan.prepared.grid == (heads, -(-777 // cfg.block_m), 6 // heads)
    o = plan(q, k, v)[0]
    ref, _ = reference(q, k, v, True, 1 / 8)
    assert rel_err(o, ref) < TOL[torch.bfloat16]
    monkeypatch.setattr(kfs, "causal_section_heads", lambda heads, group, m, slots: 1)
    assert torch.equal(o, kfs.plan(q, k, v, True, cfg)(q, k, v)[0])   # tiles are independent: same bits


def test_flash_strided_layout_and_scale():
    for d in SHIPPED_HEAD_DIMS:
        cfg = [c for c in SHIPPED_FLASH if c.head_dim == d][2]
        check_flash(2, 4, 2, 300, 520, d, True, torch.bfloat16, cfg, layout="bnhd")
        check_flash(1, 2, 2, 100, 100, d, False, torch.float16, cfg, scale=0.3)


@pytest.mark.parametrize("cfg", D256, ids=lambda c: f"{c.block_m}x{c.block_n}w{c.warps}")
def test_flash_head_dim_256(cfg):
    """d=256: no shipped flash_sm80 config, but the family builds it (an explicit config)."""
    check_flash(1, 4, 2, 300, 333, 256, False, torch.bfloat16, cfg)
    check_flash(2, 2, 2, 257, 513, 256, True, torch.float16, cfg)
    check_flash(1, 2, 1, 333, 77, 256, True, torch.bfloat16, cfg.as_dict())   # a dict works too


def test_flash_errors_on_gpu():
    q, k, v = make_qkv(1, 2, 2, 16, 16, 64, torch.bfloat16)
    with pytest.raises(ValueError, match="head_dim 128 does not match"):
        kernels.flash_attention(q, k, v, config=FlashConfig(128, 64, 4, 2, 128))
    with pytest.raises(TypeError, match="one dtype"):
        kernels.flash_attention(q, k.half(), v, config=SHIPPED_FLASH[0])
    with pytest.raises(ValueError, match="multiple of 16"):
        kernels.flash_attention(q, k, v, config={"block_m": 96, "block_n": 64, "warps": 4, "stages": 1})
    if not HOPPER:
        with pytest.raises(RuntimeError, match="sm_90"):
            kernels.flash_attention(q, k, v, backend="sm90")


@pytest.mark.parametrize("family", ["flash_sm80", "flash_sm90", "unfused"])
def test_run_by_family_name(family):
    """kernels.run: a family by its registry name, with a typed config, a dict of it, and None."""
    if family == "flash_sm90" and not HOPPER:
        pytest.skip("flash_sm90 needs an sm_90 GPU")
    cfg = families.get(family).shipped_for({"d": 128})[0]
    q, k, v = make_qkv(2, 4, 2, 300, 333, 128, torch.bfloat16)
    ref, _ = reference(q, k, v, True, 128 ** -0.5)
    for config in (cfg, cfg.as_dict(), None):
        o = kernels.run(family, q, k, v, causal=True, config=config)
        torch.cuda.synchronize()
        assert o.shape == q.shape and not torch.isnan(o).any(), (family, config)
        assert rel_err(o, ref) < TOL[torch.bfloat16], (family, config)


def test_config_none_goes_through_the_chooser(monkeypatch):
    """config=None asks iomodel.chooser.choose with the torch device name and the call's shape: over
    both flash families on an sm_90 GPU, flash_sm80 alone elsewhere or when the backend says so."""
    from iomodel import chooser
    from kernels import plans

    calls = []
    real = chooser.choose

    def spy(names, gpu, shape, *args, **kw):
        calls.append((list(names), gpu, dict(shape)))
        pick = real(names, gpu, shape, *args, **kw)
        calls[-1] += (pick.kernel,)
        return pick

    monkeypatch.setattr(chooser, "choose", spy)
    plans.clear()   # a plan kept from an earlier call of this signature would skip the choice
    q, k, v = make_qkv(1, 4, 2, 512, 1024, 128, torch.bfloat16)
    o = kernels.flash_attention(q, k, v, causal=True)
    ref, _ = reference(q, k, v, True, 128 ** -0.5)
    assert rel_err(o, ref) < 1e-2
    shape = dict(B=1, H=4, H_kv=2, N_q=512, N_k=1024, d=128, causal=True, dtype="bf16")
    names = ["flash_sm80", "flash_sm90"] if HOPPER else ["flash_sm80"]
    assert calls[0][:3] == (names, torch.cuda.get_device_name(q.device), shape)
    assert calls[0][3] in names
    calls.clear()
    kernels.flash_attention(q, k, v, causal=True, backend="sm80")
    kernels.run("flash_sm80", q, k, v, causal=True)
    assert [c[0] for c in calls] == [["flash_sm80"], ["flash_sm80"]]


@pytest.mark.parametrize("i,cfg", list(enumerate(SHIPPED_MATMUL)), ids=lambda x: str(getattr(x, "block_k", x)))
def test_unfused(i, cfg):
    shapes = [(1, 2, 2, 17, 17, 64), (2, 4, 2, 1000, 1000, 128), (1, 2, 1, 4097, 4097, 64),
              (1, 8, 1, 333, 77, 128), (1, 2, 2, 1, 300, 64), (1, 4, 2, 300, 520, 256)]
    for j, (B, H, H_kv, N_q, N_k, d) in enumerate(shapes):
        if (i + j) % 2 and N_q > 2000:
            continue
        for causal in (False, True):
            dtype = (torch.bfloat16, torch.float16)[(i + j) % 2]
            q, k, v = make_qkv(B, H, H_kv, N_q, N_k, d, dtype)
            o = kernels.attention_unfused(q, k, v, causal=causal, config=cfg)
            torch.cuda.synchronize()
            ref, ref_lse = reference(q, k, v, causal, 1 / math.sqrt(d))
            assert not torch.isnan(o).any()
            assert rel_err(o, ref) < TOL[dtype], (cfg, B, H, H_kv, N_q, N_k, d, causal)
            dead = torch.isinf(ref_lse)
            if dead.any():
                assert (o.float()[dead] == 0).all()
