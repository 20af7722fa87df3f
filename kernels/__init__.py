"""CUDA attention kernels that check the iomodel performance model.

* ``flash_attention``: FlashAttention forward, online softmax in exp2; family ``flash_sm80``
  (mma.sync + ldmatrix + cp.async, sm_80 and newer, Hopper included) or ``flash_sm90`` (wgmma + TMA,
  warp-specialized, sm_90a).  Differentiable: when an input requires grad it runs as the operator
  ``iomodel::flash_attn_fwd`` (``kernels.autograd``), whose backward is ``flash_attention_backward``'s.
* ``flash_attention_backward``: dQ, dK, dV from the forward's O and LSE: family ``flash_bwd_sm80``
  (FlashAttention-2's loop nest with mma.sync) or, on Hopper, ``flash_bwd_sm90`` (wgmma + TMA,
  warp-specialized), the model's pick by default; ``deterministic=True``: dQ summed in a fixed order.
* ``flash_attention_with_kvcache``: decoding against a KV cache (contiguous or paged, with an optional
  append of new keys), FlashAttention's function of that name; family ``flash_decode_sm80`` (split-KV
  with the query heads of a KV head packed into one tile, mma.sync, sm_80 and newer).
* ``flash_attention_varlen``: a batch of sequences of different lengths packed back to back (FlashAttention's
  varlen layout), one launch of the mma.sync forward in its varlen form.
* ``attention_unfused``: the three-kernel baseline (QK^T -> softmax -> PV through global memory).
* ``run(family, ...)``: any of them by its registry name (``iomodel.families``).

Modules, one job each: ``dispatch`` (which family and config), ``checks`` (inputs), ``flash_sm80`` /
``flash_sm90`` / ``unfused`` (arguments and launch), ``compile`` (NVRTC at run time, nvcc offline,
one cache), ``driver`` (ctypes CUDA driver), ``codegen`` (C++ text of each variant), ``reports``
(ptxas / SASS reports, ``python -m kernels.reports``), ``runtime`` (debug mode, outputs), ``plans`` (a
call signature's checks, choice and launch arguments, built once).
Configs are the families' (``iomodel.families``).  ``import kernels`` imports neither torch nor any
CUDA library: they are loaded inside the calls.  See docs/kernels.md and docs/kernels_sm90.md.
"""
from __future__ import annotations

__all__ = ["flash_attention", "flash_attn_func", "flash_attention_backward", "flash_attention_with_kvcache", "flash_attention_varlen",
           "attention_unfused", "run", "set_debug", "debug_enabled"]


def _needs_grad(*ts) -> bool:
    """Whether autograd should record the call (torch is imported only when an input asks for grad)."""
    if not any(getattr(t, "requires_grad", False) is True for t in ts):
        return False
    import torch

    return torch.is_grad_enabled()


def flash_attention(q, k, v, causal=False, config=None, scale=None, return_lse=False, backend="auto",
                    bwd_config=None, deterministic=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
    """FlashAttention forward: O (B, H, N_q, d), and with ``return_lse`` also the natural-log LSE.

    ``window_size``: (left, right), FlashAttention's sliding window (-1: unbounded; ``causal`` sets
    right = 0): query i sees keys i + N_k - N_q - left .. i + N_k - N_q + right.  ``softcap`` c > 0: the
    logits are c * tanh(scale q.k / c); ``alibi_slopes`` (float32, (H,) or (B, H)): the logits of query i
    and key j lose slope * |i + N_k - N_q - j| (``kernels.score_mods``).  A window and the score modifiers
    are forward only (no backward yet); both kernels have them (docs/kernels.md).

    Differentiable in q, k and v: when one of them requires grad (and grad mode is on), O carries the
    backward of ``flash_attention_backward`` with ``bwd_config`` (None: the model's pick) and
    ``deterministic``; the LSE returned then is not differentiable.

    ``backend``: ``"sm80"`` (the mma.sync kernel, family flash_sm80), ``"sm90"`` (wgmma + TMA, family
    flash_sm90; Hopper only) or ``"auto"``: a config picks its own family (a FlashConfig, or a dict
    without ``consumers`` -> flash_sm80; an Sm90Config, or a dict with ``consumers`` -> flash_sm90); with
    ``config=None`` the model (``iomodel.chooser.choose``) picks the family and config over
    flash_sm80 and, on an sm_90 GPU, flash_sm90.
    """
    from .window import window

    win = window(window_size, causal)
    causal = win.causal
    mods = _score_mods(q, k, v, softcap, alibi_slopes)
    if win.local or mods is not None:
        if _needs_grad(q, k, v):
            what = f"window_size={tuple(window_size)}" if win.local else (
                "softcap" if mods.softcap > 0 else "alibi_slopes")
            raise ValueError(f"{what} has no backward yet: call it on tensors that do not require grad (or under "
                             "torch.no_grad()).")
    elif _needs_grad(q, k, v):
        from . import autograd

        out, lse = autograd.flash_attention(q, k, v, causal, scale, config, backend, bwd_config, deterministic)
        return (out, lse) if return_lse else out
    from . import dispatch

    # the family, config, checks and arguments of a call signature are settled once (kernels.plans)
    run = dispatch.forward_launch(q, k, v, causal, config, scale, backend, win if win.local else None, mods)
    out, lse = run(q, k, v, return_lse)
    return (out, lse) if return_lse else out


def _score_mods(q, k, v, softcap, alibi_slopes):
    """The call's checked score modifiers (``kernels.score_mods``), None without any (the common call checks
    two values and imports nothing)."""
    if (softcap == 0.0 and not isinstance(softcap, bool)) and alibi_slopes is None:
        return None
    from .checks import check_qkv
    from .score_mods import score_mods

    shape = check_qkv(q, k, v)
    return score_mods(softcap, alibi_slopes, q, shape["B"], shape["H"])


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, return_lse=False, deterministic=False):
    """FlashAttention's ``flash_attn_func``: q (B, N_q, H, d), k and v (B, N_k, H_kv, d); see
    ``kernels.fa_interface.flash_attn_func``."""
    from .fa_interface import flash_attn_func as run

    return run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, return_lse,
               deterministic)


def flash_attention_backward(dout, q, k, v, out, lse, causal=False, scale=None, config=None, deterministic=False):
    """(dq, dk, dv) of FlashAttention given dO (``dout``), the forward's ``out`` and ``lse``
    (``flash_attention(..., return_lse=True)``); see ``kernels.flash_bwd_sm80.backward``.  ``config``: a
    FlashBwdConfig (flash_bwd_sm80) or a FlashBwdSm90Config (flash_bwd_sm90, Hopper), or a dict of either's
    fields (with ``consumers``: the Hopper one's); None: the model picks the family and config (the Hopper
    kernel can only be picked on an sm_90 GPU)."""
    from . import dispatch

    # the family, config and checks of a call signature are settled once (kernels.plans)
    return dispatch.backward_launch(dout, q, k, v, out, lse, causal, scale, config, deterministic)(dout, q, k, v, out,
                                                                                                 lse)


def flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=None, k=None, v=None, causal=True,
                                 softmax_scale=None, num_splits=0, return_softmax_lse=False, validate=True,
                                 config=None):
    """Attention of q (B, N_q, H, d) against a KV cache; see ``kernels.kvcache.flash_attention_with_kvcache``."""
    from .kvcache import flash_attention_with_kvcache as run

    return run(q, k_cache, v_cache, cache_seqlens, block_table, k, v, causal, softmax_scale, num_splits,
               return_softmax_lse, validate, config)


def flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                           softmax_scale=None, return_lse=False, validate=True, config=None):
    """Attention of packed variable-length sequences, q (total_q, H, d); see
    ``kernels.varlen.flash_attention_varlen``."""
    from .varlen import flash_attention_varlen as run

    return run(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale, return_lse,
               validate, config)


def attention_unfused(q, k, v, causal=False, config=None, scale=None):
    """Unfused three-kernel attention (``kernels.unfused``); config: a MatmulConfig for both matmuls,
    None: the family's first shipped one."""
    from . import unfused

    return unfused.attention(q, k, v, causal=causal, config=config, scale=scale)


def run(family: str, q, k, v, causal=False, config=None, scale=None, window_size=(-1, -1), softcap=0.0,
        alibi_slopes=None):
    """O of the kernel family named `family` ("flash_sm80", "flash_sm90" or "unfused"); config: the
    family's config (or a dict of its fields), None: the model's pick (unfused: its first shipped).
    `window_size`, `softcap`, `alibi_slopes`: as ``flash_attention``'s (the flash families only)."""
    from . import dispatch
    from .window import window

    win = window(window_size, causal)
    mods = _score_mods(q, k, v, softcap, alibi_slopes)
    attention = dispatch.runner(family).attention
    if not win.local and mods is None:
        return attention(q, k, v, causal=win.causal, config=config, scale=scale)
    if family not in dispatch.FLASH_BACKENDS.values():
        raise ValueError(f"the {family} kernel has no window, softcap or ALiBi")
    return attention(q, k, v, causal=win.causal, config=config, scale=scale, window=win if win.local else None,
                     mods=mods)


def set_debug(flag: bool) -> None:
    """NaN-poison outputs and synchronise + check errors after every launch."""
    from .runtime import set_debug as _impl

    _impl(flag)


def debug_enabled() -> bool:
    from .runtime import debug_enabled as _impl

    return _impl()
