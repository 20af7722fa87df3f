"""Input checks of ``flash_attention_with_kvcache`` (FlashAttention's layout: q (B, N_q, H, d), a cache
(B, S, H_kv, d) or paged (num_blocks, page_size, H_kv, d) with a block table): one sentence each, naming
the argument (TypeError for a wrong type or dtype, ValueError for the rest).

``check_call`` looks only at shapes, dtypes, devices and strides (no GPU work); ``check_values`` looks at
the values of ``cache_seqlens`` and ``block_table`` with one device-to-host copy (``validate=False``
skips it: the kernels clamp lengths and read a bad page as zeros, so nothing is read out of bounds, but
the answer is then wrong without a word).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .checks import check_layout, check_scale

__all__ = ["KVCall", "check_call", "check_values", "tensor_of_rank", "half_tensor"]

HEAD_DIMS = (64, 128)


@dataclass
class KVCall:
    """A checked call: sizes, and the tensors the launch takes (cache_seqlens as int32 on q's device)."""

    B: int
    N_q: int
    H: int
    H_kv: int
    d: int
    dtype: str
    paged: bool
    page_size: int        # paged: rows a block; contiguous: the cache's sequence length
    num_pages: int        # paged: blocks in the cache; contiguous: 0
    capacity: int         # keys a sequence can hold
    n_new: int            # keys appended (k, v given), else 0
    scale: float
    seqlens: Any
    table: Any


def tensor_of_rank(name: str, t, dims: int, what: str):
    """`t` as a torch tensor of `dims` dimensions (`what` names them in the error)."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
    if t.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D {what}, got shape {tuple(t.shape)}.")
    return t


def half_tensor(name: str, t, dtype, device) -> None:
    """bf16 or fp16 (`dtype` when given), on the CUDA `device`, unit stride last, 16-byte aligned rows."""
    import torch

    if t.dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"{name} must be bfloat16 or float16, got {t.dtype}.")
    if dtype is not None and t.dtype != dtype:
        raise TypeError(f"{name} must be {dtype} like q, got {t.dtype}.")
    if t.device.type != "cuda" or (device is not None and t.device != device):
        raise ValueError(f"{name} must be on q's CUDA device ({device}), got {t.device}.")
    check_layout(((name, t),))


def _cache(q, k_cache, v_cache, block_table) -> tuple[int, bool, int, int, int]:
    """(H_kv, paged, page_size, num_pages, capacity) of the cache tensors."""
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        tensor_of_rank(name, t, 4, "(batch, seqlen, kv_heads, head_dim) or paged (num_blocks, page_size, kv_heads, head_dim)")
        half_tensor(name, t, q.dtype, q.device)
    if tuple(k_cache.shape) != tuple(v_cache.shape):
        raise ValueError(f"k_cache and v_cache must have one shape, got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}.")
    n0, rows, H_kv, d = k_cache.shape
    if d != q.shape[3]:
        raise ValueError(f"k_cache's head dim {d} differs from q's {q.shape[3]}.")
    if H_kv == 0 or q.shape[2] % H_kv:
        raise ValueError(f"q's heads ({q.shape[2]}) must be a multiple of the cache's KV heads ({H_kv}).")
    if block_table is None:
        if n0 != q.shape[0]:
            raise ValueError(f"k_cache's batch ({n0}) differs from q's ({q.shape[0]}); pass block_table for a paged cache.")
        return H_kv, False, rows, 0, rows
    import torch

    tensor_of_rank("block_table", block_table, 2, "(batch, max_blocks_per_seq)")
    if block_table.dtype != torch.int32 or block_table.device != q.device:
        raise TypeError(f"block_table must be int32 on {q.device}, got {block_table.dtype} on {block_table.device}.")
    if block_table.shape[0] != q.shape[0]:
        raise ValueError(f"block_table has {block_table.shape[0]} rows for a batch of {q.shape[0]}.")
    if block_table.stride(1) != 1:
        raise ValueError("block_table must be contiguous in its last dimension.")
    if rows < 1 or rows & (rows - 1):
        raise ValueError(f"page_size (k_cache.shape[1] = {rows}) must be a power of two.")
    return H_kv, True, rows, n0, rows * block_table.shape[1]


def _new_kv(k, v, q, H_kv: int) -> int:
    """Rows appended: 0 without k and v."""
    if k is None and v is None:
        return 0
    if k is None or v is None:
        raise ValueError("k and v must be given together (the keys and values to append).")
    for name, t in (("k", k), ("v", v)):
        tensor_of_rank(name, t, 4, "(batch, seqlen_new, kv_heads, head_dim)")
        half_tensor(name, t, q.dtype, q.device)
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}.")
    if k.shape[0] != q.shape[0] or k.shape[2] != H_kv or k.shape[3] != q.shape[3]:
        raise ValueError(f"k must be (batch={q.shape[0]}, seqlen_new, kv_heads={H_kv}, head_dim={q.shape[3]}), "
                         f"got {tuple(k.shape)}.")
    return k.shape[1]


def _seqlens(cache_seqlens, B: int, device):
    import torch

    if isinstance(cache_seqlens, bool) or not isinstance(cache_seqlens, (int, torch.Tensor)):
        raise TypeError(f"cache_seqlens must be an int or an int32 tensor of shape ({B},), "
                        f"got {type(cache_seqlens).__name__}.")
    if isinstance(cache_seqlens, int):
        return torch.full((B,), cache_seqlens, dtype=torch.int32, device=device)
    if cache_seqlens.dtype != torch.int32 or tuple(cache_seqlens.shape) != (B,):
        raise ValueError(f"cache_seqlens must be int32 of shape ({B},), got {cache_seqlens.dtype} "
                         f"{tuple(cache_seqlens.shape)}.")
    if cache_seqlens.device != device:
        raise ValueError(f"cache_seqlens must be on {device}, got {cache_seqlens.device}.")
    return cache_seqlens.contiguous()


def check_call(q, k_cache, v_cache, cache_seqlens, block_table, k, v, softmax_scale) -> KVCall:
    """Shapes, dtypes, devices and strides of a call; no values are read."""
    tensor_of_rank("q", q, 4, "(batch, seqlen_q, heads, head_dim)")
    half_tensor("q", q, None, None)
    B, N_q, H, d = q.shape
    if min(B, N_q, H) == 0:
        raise ValueError(f"q must have non-zero batch, seqlen_q and heads, got shape {tuple(q.shape)}.")
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim {d} is not supported; supported head dims: {list(HEAD_DIMS)}.")
    H_kv, paged, page, pages, capacity = _cache(q, k_cache, v_cache, block_table)
    n_new = _new_kv(k, v, q, H_kv)
    dtype = "bf16" if str(q.dtype).endswith("bfloat16") else "fp16"
    return KVCall(B, N_q, H, H_kv, d, dtype, paged, page, pages, capacity, n_new, check_scale(softmax_scale, d),
                  _seqlens(cache_seqlens, B, q.device), block_table)


def check_values(call: KVCall, seqlens, table) -> None:
    """cache_seqlens (plus the appended keys) within the cache and every block-table entry a sequence uses
    in range: one copy to the host for both."""
    import torch

    lens = seqlens.long()
    bad_len = (lens < 0) | (lens + call.n_new > call.capacity)
    checks = [bad_len.any()]
    if call.paged:
        used = (lens + call.n_new + call.page_size - 1) // call.page_size
        cols = torch.arange(table.shape[1], device=lens.device)
        t = table.long()
        bad = ((t < 0) | (t >= call.num_pages)) & (cols[None, :] < used[:, None])
        checks.append(bad.any())
    flags = torch.stack(checks).tolist()
    if flags[0]:
        i = int(bad_len.nonzero()[0, 0])
        raise ValueError(f"cache_seqlens[{i}] = {int(lens[i])} plus {call.n_new} new keys does not fit the cache "
                         f"of {call.capacity} keys a sequence (or is negative).")
    if call.paged and flags[1]:
        raise ValueError(f"block_table holds a block index outside [0, {call.num_pages}) in a page a sequence uses.")
