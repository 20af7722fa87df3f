"""``flash_attn_func``: FlashAttention's function of that name over our forward kernels.

FlashAttention's layout is (batch, seqlen, heads, head_dim); our kernels take SDPA's (batch, heads,
seqlen, head_dim) with any strides whose last is 1, so the call passes transposed views (no copy) and
returns O as the transposed view of what the kernel wrote: (B, N_q, H, d) with O's (B, H, N_q, d)
storage underneath (``.contiguous()`` makes a copy in FlashAttention's storage order, where needed).

What it does not do (each a clear error, never a silent difference): dropout (``dropout_p > 0``:
no RNG here; FlashAttention's Philox stream could not be matched bit for bit).  A sliding window,
``softcap`` and ``alibi_slopes`` run forward only (no backward yet), on either forward kernel
(``kernels.score_mods`` says how the modifiers are defined).  ``deterministic`` applies to the backward
that autograd runs.
"""
from __future__ import annotations

__all__ = ["flash_attn_func"]


def _fa_layout(name: str, t):
    """(B, N, H, d) -> a (B, H, N, d) view; the rank checked here so the error names FlashAttention's dims."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D (batch, seqlen, heads, head_dim), got shape {tuple(t.shape)}.")
    return t.transpose(1, 2)


def _check_unsupported(dropout_p, softcap) -> None:
    """The arguments checked before torch is needed: dropout (refused) and the softcap's value."""
    from .score_mods import check_softcap

    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be a number in [0, 1), got {dropout_p!r}.")
    if dropout_p > 0.0:
        raise ValueError(f"dropout_p={dropout_p} is not supported (no dropout in these kernels): pass 0.0, and "
                         "apply dropout outside attention if the model needs it.")
    check_softcap(softcap)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, return_lse=False, deterministic=False):
    """softmax(softmax_scale q k^T, masked) v in FlashAttention's layout and semantics.

    q: (B, N_q, H, d); k, v: (B, N_k, H_kv, d), H a multiple of H_kv (GQA); bf16 or fp16 CUDA tensors
    whose last dimension is contiguous.  causal: bottom-right (query i sees keys <= i + N_k - N_q);
    window_size (left, right): keys i + N_k - N_q - left .. i + N_k - N_q + right (-1: unbounded;
    causal sets right = 0).  softcap c > 0: logits c * tanh(softmax_scale q.k / c); alibi_slopes
    (float32 (H,) or (B, H)): logits minus slope * |i + N_k - N_q - j|.  Returns O (B, N_q, H, d), and with
    return_lse also the natural-log LSE (B, H, N_q) float32 of the logits (-inf for a row that sees no key,
    whose O is 0).  Differentiable in q, k and v without a window, softcap or ALiBi (``deterministic``: dQ
    summed in a fixed order).
    """
    from . import flash_attention

    _check_unsupported(dropout_p, softcap)
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool, got {type(deterministic).__name__}.")
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {type(return_lse).__name__}.")
    qt, kt, vt = (_fa_layout(n, t) for n, t in (("q", q), ("k", k), ("v", v)))
    res = flash_attention(qt, kt, vt, causal=causal, scale=softmax_scale, return_lse=return_lse,
                          deterministic=deterministic, window_size=window_size, softcap=softcap,
                          alibi_slopes=alibi_slopes)
    if return_lse:
        out, lse = res
        return out.transpose(1, 2), lse
    return res.transpose(1, 2)
