"""GPU correctness of the flash (mma.sync) and unfused attention kernels against float32 PyTorch."""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
pytest.importorskip("cupy")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402
from kernels import _runtime  # noqa: E402
from validation.reference import attention_reference  # noqa: E402
from kernels.configs import SHIPPED_FLASH, SHIPPED_MATMUL, FlashConfig  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 5e-3}


@pytest.fixture(autouse=True, scope="module")
def _debug_mode():
    """NaN-poisoned outputs + synchronise/check after every launch."""
    _runtime.set_debug(True)
    yield
    _runtime.set_debug(False)


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
    for d in kernels.SUPPORTED_HEAD_DIMS:
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
                         ids=lambda x: x.short() if isinstance(x, FlashConfig) else str(x))
def test_flash_shipped_configs(B, H, H_kv, N_q, N_k, d, causal, dtype, cfg):
    check_flash(B, H, H_kv, N_q, N_k, d, causal, dtype, cfg)


@pytest.mark.parametrize("d", kernels.SUPPORTED_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_flash_shape_matrix(shape, dtype, causal, d):
    cfg = [c for c in SHIPPED_FLASH if c.head_dim == d][1]
    check_flash(*shape, d, causal, dtype, cfg)


@pytest.mark.parametrize("mag", [10.0, 30.0])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_large_magnitude(mag, causal):
    for d in kernels.SUPPORTED_HEAD_DIMS:
        cfg = [c for c in SHIPPED_FLASH if c.head_dim == d][0]
        check_flash(1, 4, 4, 1000, 1000, d, causal, torch.bfloat16, cfg, mag=mag)
        check_flash(1, 2, 1, 300, 700, d, causal, torch.float16, cfg, mag=mag)


def test_flash_strided_layout_and_scale():
    for d in kernels.SUPPORTED_HEAD_DIMS:
        cfg = [c for c in SHIPPED_FLASH if c.head_dim == d][2]
        check_flash(2, 4, 2, 300, 520, d, True, torch.bfloat16, cfg, layout="bnhd")
        check_flash(1, 2, 2, 100, 100, d, False, torch.float16, cfg, scale=0.3)


def test_flash_default_config_from_model():
    pytest.importorskip("iomodel.api")
    q, k, v = make_qkv(1, 4, 4, 512, 512, 128, torch.bfloat16)
    o = kernels.flash_attention(q, k, v, causal=True)
    ref, _ = reference(q, k, v, True, 1 / math.sqrt(128))
    assert rel_err(o, ref) < 1e-2


def test_flash_errors_on_gpu():
    q, k, v = make_qkv(1, 2, 2, 16, 16, 64, torch.bfloat16)
    with pytest.raises(ValueError, match="head_dim"):
        kernels.flash_attention(q, k, v, config=FlashConfig(128, 64, 4, 2, 128))
    with pytest.raises(TypeError, match="one dtype"):
        kernels.flash_attention(q, k.half(), v, config=SHIPPED_FLASH[0])


@pytest.mark.parametrize("i,cfg", list(enumerate(SHIPPED_MATMUL)), ids=lambda x: getattr(x, "short", lambda: str(x))())
def test_unfused(i, cfg):
    shapes = [(1, 2, 2, 17, 17, 64), (2, 4, 2, 1000, 1000, 128), (1, 2, 1, 4097, 4097, 64),
              (1, 8, 1, 333, 77, 128), (1, 2, 2, 1, 300, 64)]
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
