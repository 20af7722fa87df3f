"""``flash_attention_with_kvcache``: attention of a few query rows against a KV cache (decoding, speculative
decoding), FlashAttention's function of that name: the checks, the model's choice of tiles and split
count, the append and the launch (``kernels.flash_decode_sm80``)."""
from __future__ import annotations

from . import driver, plans
from .checks import check_smem
from .kvcache_checks import KVCall, check_call, check_values

__all__ = ["flash_attention_with_kvcache", "decode_shape", "decode_config"]

FAMILY = "flash_decode_sm80"


def decode_shape(call: KVCall, causal: bool) -> dict:
    """The model's attention shape of a call: N_k is the cache's capacity (the lengths are on the GPU;
    reading them would cost a synchronisation), causal only where it masks anything (N_q > 1), and a
    paged cache's page size (a CTA walks its pages one after another: the model picks more parts for small
    pages)."""
    shape = {"B": call.B, "H": call.H, "H_kv": call.H_kv, "N_q": call.N_q, "N_k": call.capacity, "d": call.d,
             "causal": bool(causal) and call.N_q > 1, "dtype": call.dtype}
    if call.paged:
        shape["page_size"] = call.page_size
    return shape


def decode_config(call: KVCall, causal: bool, config, num_splits: int, index: int):
    """The config to launch: ``config`` (a DecodeConfig or a dict of its fields) or the model's pick over
    the shipped ones; ``num_splits > 0`` sets its number of parts."""
    import dataclasses

    from iomodel import families

    fam = families.get(FAMILY)
    shape = decode_shape(call, causal)
    if config is None:
        from . import dispatch

        cfg = dispatch.choose([FAMILY], shape, index).config
    else:
        cfg = fam.config(config, shape)
    if num_splits:
        cfg = fam.config(dataclasses.replace(cfg, parts=int(num_splits)), shape)
    return cfg


def _check_flags(causal, num_splits) -> None:
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}.")
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 0:
        raise ValueError(f"num_splits must be an int >= 0 (0: the model chooses), got {num_splits!r}.")


def flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=None, k=None, v=None, causal=True,
                                 softmax_scale=None, num_splits=0, return_softmax_lse=False, validate=True,
                                 config=None):
    """softmax(scale q K^T) V of q against the first cache_seqlens[b] (+ new) keys of each sequence's cache.

    q: (B, N_q, H, d); k_cache, v_cache: (B, S, H_kv, d), or paged (num_blocks, page_size, H_kv, d) with
    block_table (B, max_blocks) int32 (page_size a power of two); bf16 or fp16, d 64 or 128, H a multiple
    of H_kv (GQA: the H / H_kv query heads of a KV head share one read of it).  cache_seqlens: an int or
    (B,) int32 on q's device, the keys already in the cache.  k, v: (B, N_new, H_kv, d) written into the
    cache in place at cache_seqlens; attention then sees cache_seqlens + N_new keys.  causal: query row i
    sees keys up to L - N_q + i (bottom-right; L the sequence's keys).  num_splits: parts of the key axis
    (0: the model chooses; with more, the last part of each group to finish merges them).  validate: check the values of
    cache_seqlens and block_table first (one device-to-host copy; False skips it, and the kernels still
    never read out of bounds).  Returns out (B, N_q, H, d) and, with return_softmax_lse, the natural-log
    LSE (B, H, N_q) float32 (-inf for a row that sees no key, whose out is 0).
    """
    _check_flags(causal, num_splits)
    key = _signature(q, k_cache, v_cache, cache_seqlens, block_table, k, v, causal, softmax_scale, num_splits, config)
    plan = plans.lookup(key, (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v)))
    if plan is None:
        plan = _plan(q, k_cache, v_cache, cache_seqlens, block_table, k, v, causal, softmax_scale, num_splits, config)
        plans.store(key, plan)
    seqlens = plan.call.seqlens if isinstance(cache_seqlens, int) else cache_seqlens
    if validate:
        check_values(plan.call, seqlens, block_table)
    out, lse = plan(q, k_cache, v_cache, seqlens, block_table, k, v, want_lse=bool(return_softmax_lse))
    return (out, lse) if return_softmax_lse else out


def _signature(q, k_cache, v_cache, cache_seqlens, block_table, k, v, causal, scale, num_splits, config):
    """What a plan depends on (``kernels.plans``; None: do not cache, e.g. an unhashable config); a decode
    loop calls with one signature thousands of times."""
    import torch

    if isinstance(cache_seqlens, int):
        lens = ("int", cache_seqlens)
    elif isinstance(cache_seqlens, torch.Tensor):
        lens = (cache_seqlens,)
    else:
        return None
    return plans.key(FAMILY, (q, k_cache, v_cache, k, v, block_table), lens, causal, scale, num_splits, config)


def _plan(q, k_cache, v_cache, cache_seqlens, block_table, k, v, causal, softmax_scale, num_splits, config):
    """Every check of the call's layout, the config, and the launches built."""
    from .flash_decode_sm80 import DecodeLaunch, rows_tile

    call = check_call(q, k_cache, v_cache, cache_seqlens, block_table, k, v, softmax_scale)
    index = driver.device_index(q.device)
    cfg = decode_config(call, causal, config, num_splits, index)
    smem = cfg.smem_bytes(rows_tile(call.H // call.H_kv * call.N_q))
    check_smem(FAMILY, cfg, smem, driver.max_smem_optin(index))
    return DecodeLaunch(call, q, k_cache, v_cache, k, v, cfg, causal, index)
