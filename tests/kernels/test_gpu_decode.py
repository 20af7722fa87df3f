"""GPU correctness of ``kernels.flash_attention_with_kvcache`` (family ``flash_decode_sm80``).

Against float32 attention on the gathered cache: random cache lengths per sequence (1, lengths not a
multiple of the page), shuffled block tables, the append of new keys, N_q > 1 with the bottom-right causal
mask, GQA, several split counts; the error must be at most twice PyTorch's own in the input dtype plus the
dtype's rounding.  Bad values of cache_seqlens or block_table: one clear error."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU-only machines
    pytest.skip("no CUDA device", allow_module_level=True)

import kernels  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def gathered(cache, table, b, L):
    """The first L rows (S, H_kv, d) of sequence b's cache, contiguous or through its pages."""
    if table is None:
        return cache[b, :L]
    page = cache.shape[1]
    pages = [cache[int(table[b, j])] for j in range(math.ceil(L / page))]
    return torch.cat(pages)[:L] if pages else cache[:0, 0]


def reference(q, kc, vc, table, lens, causal, upcast):
    """out (B, N_q, H, d) in float32 (upcast) or as PyTorch computes it in the input dtype."""
    B, N_q, H, d = q.shape
    out = torch.zeros(B, N_q, H, d, device=q.device, dtype=torch.float32 if upcast else q.dtype)
    for b in range(B):
        L = int(lens[b])
        k, v = gathered(kc, table, b, L), gathered(vc, table, b, L)   # (L, H_kv, d)
        if L == 0:
            continue
        g = H // k.shape[1]
        qb = q[b].transpose(0, 1)                                     # (H, N_q, d)
        kb, vb = (x.transpose(0, 1).repeat_interleave(g, dim=0) for x in (k, v))
        if upcast:
            qb, kb, vb = qb.float(), kb.float(), vb.float()
        s = (qb * (1.0 / math.sqrt(d))) @ kb.transpose(-1, -2)
        if causal:
            keep = torch.ones(N_q, L, dtype=torch.bool, device=q.device).tril(L - N_q)
            s = s.masked_fill(~keep, float("-inf"))
        p = torch.softmax(s.float(), dim=-1).nan_to_num(0.0).to(s.dtype)
        out[b] = (p @ vb).transpose(0, 1)
    return out


def make_cache(B, H_kv, d, capacity, page, dtype, g):
    """(k_cache, v_cache, block_table): paged with shuffled pages when `page`, else contiguous."""
    if not page:
        return (torch.randn(B, capacity, H_kv, d, generator=g, device="cuda").to(dtype) for _ in range(2)), None
    per_seq = math.ceil(capacity / page)
    n_blocks = B * per_seq + 3
    caches = (torch.randn(n_blocks, page, H_kv, d, generator=g, device="cuda").to(dtype) for _ in range(2))
    perm = torch.randperm(n_blocks, generator=g, device="cuda")[:B * per_seq]
    return caches, perm.reshape(B, per_seq).to(torch.int32).contiguous()


def check(out, q, kc, vc, table, lens, causal):
    ref = reference(q, kc, vc, table, lens, causal, True)
    pt = reference(q, kc, vc, table, lens, causal, False)
    assert out.shape == ref.shape and out.dtype == q.dtype
    assert bool(torch.isfinite(out).all())
    err, pt_err = (out.float() - ref).abs().max().item(), (pt.float() - ref).abs().max().item()
    rounding = (ref.to(q.dtype).float() - ref).abs().max().item()
    assert err <= 2 * pt_err + 2 * rounding + 1e-5, f"error {err:.3g} vs PyTorch's {pt_err:.3g}"


CASES = [  # (B, H, H_kv, N_q, capacity, page, n_new, causal, num_splits)
    (3, 8, 8, 1, 300, 0, 0, False, 1), (3, 8, 2, 1, 1000, 0, 0, True, 0), (2, 32, 8, 1, 5000, 0, 0, True, 7),
    (4, 16, 1, 1, 777, 16, 0, True, 3), (2, 8, 2, 4, 2000, 64, 4, True, 0), (2, 16, 1, 16, 600, 256, 16, True, 2),
    (2, 4, 4, 3, 513, 32, 3, False, 5), (5, 32, 2, 2, 4100, 128, 2, True, 0),  # 16 x 2 = 32 packed rows
    (1, 16, 1, 4, 300, 0, 1, True, 4),   # 64 packed rows: two row blocks
    # the block table's windows (32 entries a warp): pages of 1 (read row by row), 2, 4 and 8, and
    # sequences whose parts cross windows
    (2, 8, 2, 1, 3000, 1, 0, True, 3), (2, 8, 8, 2, 1500, 2, 1, True, 0), (3, 4, 2, 1, 2500, 4, 0, False, 2),
    (2, 8, 4, 1, 2100, 8, 2, True, 1), (2, 16, 4, 1, 9000, 256, 0, True, 1),
]


@pytest.mark.parametrize("d", (64, 128))
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}H{}k{}q{}S{}p{}n{}{}s{}".format(*c[:7], "c" if c[7] else "", c[8]))
def test_matches_float32_on_the_gathered_cache(case, d):
    B, H, H_kv, N_q, capacity, page, n_new, causal, splits = case
    g = torch.Generator(device="cuda")
    g.seed()
    dtype = DTYPES["bf16" if d == 128 else "fp16"]
    (kc, vc), table = make_cache(B, H_kv, d, capacity, page, dtype, g)
    lens = torch.randint(0, capacity - n_new + 1, (B,), generator=g, device="cuda").to(torch.int32)
    lens[0] = 1 if n_new == 0 else 0                     # a sequence of one key
    q = torch.randn(B, N_q, H, d, generator=g, device="cuda").to(dtype)
    k = v = None
    if n_new:
        k, v = (torch.randn(B, n_new, H_kv, d, generator=g, device="cuda").to(dtype) for _ in range(2))
    kc0, vc0 = kc.clone(), vc.clone()
    out, lse = kernels.flash_attention_with_kvcache(q, kc, vc, lens, block_table=table, k=k, v=v, causal=causal,
                                                    num_splits=splits, return_softmax_lse=True)
    total = lens + n_new
    if n_new:   # the new rows are in the cache, nothing else changed
        for b in range(B):
            L0 = int(lens[b])
            assert torch.equal(gathered(kc, table, b, L0 + n_new)[L0:], k[b])
            assert torch.equal(gathered(vc, table, b, L0 + n_new)[L0:], v[b])
            assert torch.equal(gathered(kc, table, b, L0), gathered(kc0, table, b, L0))
            assert torch.equal(gathered(vc, table, b, L0), gathered(vc0, table, b, L0))
    check(out, q, kc, vc, table, total, causal)
    assert lse.shape == (B, H, N_q) and lse.dtype == torch.float32


@pytest.mark.parametrize("block_n, stages", [(64, 3), (128, 2)])
@pytest.mark.parametrize("page", [1, 2, 4, 8, 64])
def test_every_shipped_chunk_reads_small_pages(block_n, stages, page):
    """The shipped chunks (64 and 128 keys) on pages of 1 to 64 rows: each row's page read from the table
    (pages under block_n / 32 rows), a window entry a chunk or several, parts crossing windows."""
    from iomodel.families.flash_decode_sm80 import DecodeConfig

    g = torch.Generator(device="cuda")
    g.seed()
    B, H, H_kv, d, capacity = 3, 8, 2, 128, 2500
    (kc, vc), table = make_cache(B, H_kv, d, capacity, page, torch.bfloat16, g)
    lens = torch.randint(1, capacity + 1, (B,), generator=g, device="cuda").to(torch.int32)
    q = torch.randn(B, 1, H, d, generator=g, device="cuda").to(torch.bfloat16)
    for parts in (1, 3):
        out = kernels.flash_attention_with_kvcache(q, kc, vc, lens, block_table=table,
                                                   config=DecodeConfig(block_n, 4, stages, parts, d))
        check(out, q, kc, vc, table, lens, True)


def test_a_sequence_with_no_keys_gives_zeros():
    q = torch.randn(2, 1, 8, 128, device="cuda").to(torch.bfloat16)
    kc, vc = (torch.randn(2, 64, 8, 128, device="cuda").to(torch.bfloat16) for _ in range(2))
    lens = torch.tensor([0, 5], dtype=torch.int32, device="cuda")
    for splits in (1, 4):
        out, lse = kernels.flash_attention_with_kvcache(q, kc, vc, lens, num_splits=splits, return_softmax_lse=True)
        assert bool((out[0] == 0).all()) and bool(torch.isinf(lse[0]).all())
        check(out[1:], q[1:], kc[1:], vc[1:], None, lens[1:], True)


def _paged():
    q = torch.randn(2, 1, 8, 64, device="cuda").to(torch.float16)
    kc, vc = (torch.randn(8, 16, 2, 64, device="cuda").to(torch.float16) for _ in range(2))
    table = torch.arange(8, dtype=torch.int32, device="cuda").reshape(2, 4)
    return q, kc, vc, table


@pytest.mark.parametrize("what, message", [
    ("table", "block_table holds a block index outside"),
    ("seqlens", "does not fit the cache"),
    ("dtype", "must be torch.float16 like q"),
    ("heads", "multiple of the cache's KV heads"),
    ("rank", "must be 4-D"),
])
def test_bad_input_is_one_clear_error(what, message):
    q, kc, vc, table = _paged()
    lens = torch.tensor([10, 64], dtype=torch.int32, device="cuda")
    if what == "table":
        table[1, 3] = 8
    elif what == "seqlens":
        lens[1] = 65
    elif what == "dtype":
        kc = kc.to(torch.bfloat16)
    elif what == "heads":
        q = q[:, :, :7]
    elif what == "rank":
        q = q[0]
    with pytest.raises((ValueError, TypeError), match=message):
        kernels.flash_attention_with_kvcache(q, kc, vc, lens, block_table=table)


def test_without_validation_a_bad_page_reads_nothing_out_of_bounds():
    q, kc, vc, table = _paged()
    table[0, 0] = 1 << 20
    lens = torch.tensor([16, 64], dtype=torch.int32, device="cuda")
    out = kernels.flash_attention_with_kvcache(q, kc, vc, lens, block_table=table, validate=False)
    torch.cuda.synchronize()
    assert bool(torch.isfinite(out).all())


@pytest.mark.slow
@pytest.mark.parametrize("tool", ("memcheck", "racecheck"))
def test_compute_sanitizer_is_clean_on_decode_and_varlen(tool, sanitized):
    from validation.sanitize_inference import CALLS

    out = sanitized(tool, "validation.sanitize_inference")
    assert f"calls {CALLS}" in out, out[-3000:]
