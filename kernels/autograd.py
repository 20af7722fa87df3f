"""FlashAttention as a differentiable PyTorch operator.

Two custom operators (``torch.library.custom_op``), so that ``torch.compile`` sees each as one opaque
node with a known output shape (its fake implementation) instead of breaking the graph at our ctypes
launches:

* ``iomodel::flash_attn_fwd(q, k, v, causal, scale, backend, fwd_config, bwd_config, deterministic)
  -> (out, lse)`` (the last two only ride along to the backward)
* ``iomodel::flash_attn_bwd(dout, q, k, v, out, lse, causal, scale, bwd_config, deterministic)
  -> (dq, dk, dv)``

The operators are registered when this module is imported (kernels.flash_attention imports it when an
input requires grad), so a compiled region never traces their registration.  The forward's autograd
formula saves q, k, v, out and the LSE (one float per row) and calls the
backward operator; nothing of size N_q x N_k is kept.  Configs cross the operator boundary as lists of
their integer fields (a custom operator takes no Python objects): [] asks the model, inside the operator.
Eager calls (not under torch.compile) run the same forward and backward as a ``torch.autograd.Function``
instead, whose dispatch costs far less host time than a custom operator's.
"""
# no `from __future__ import annotations`: torch.library reads the operators' annotations as types
import functools

import torch

__all__ = ["flash_attention", "config_fields"]


def _typed(family: str, config, d: int):
    """A config of `family` (typed, or a mapping of its fields) as the typed config, or None."""
    if config is None:
        return None
    from iomodel import families

    return families.get(family).config(config, {"d": d})


def config_fields(config) -> list[int]:
    """A typed config (or None) as the operators' int list (its fields in order; [] for None)."""
    return [] if config is None else [int(x) for x in config.as_dict().values()]


def _config(fields, family: str):
    """The typed config of an int list (None for [])."""
    if not fields:
        return None
    from iomodel import families

    return families.get(family).config_type(*fields)


def _forward(q, k, v, causal: bool, scale: float, backend: str, fwd_config):
    """(O, LSE) of the operator's forward: with a config, backend names its family (sm80 | sm90); without,
    the model picks (once a call signature: ``dispatch.forward_launch``)."""
    from . import dispatch

    if fwd_config:
        family = dispatch.FLASH_BACKENDS[backend]
        cfg = _config(fwd_config, family)
        return dispatch.runner(family).attention(q, k, v, causal=causal, config=cfg, scale=scale, return_lse=True)
    return dispatch.forward_launch(q, k, v, causal, None, scale, backend)(q, k, v, True)


def _backward(dout, q, k, v, out, lse, causal: bool, scale: float, bwd_family: str, bwd_config, deterministic: bool):
    """(dQ, dK, dV) of the operator's backward: with a config, bwd_family names its family; without ("" and
    []), the model picks (once a call signature: ``dispatch.backward_launch``)."""
    from . import dispatch

    if bwd_config:
        run = dispatch.runner(bwd_family, backward=True)
        return run.backward(dout, q, k, v, out, lse, causal=causal, scale=scale, config=_config(bwd_config, bwd_family),
                            deterministic=deterministic)
    return dispatch.backward_launch(dout, q, k, v, out, lse, causal, scale, None, deterministic)(dout, q, k, v, out,
                                                                                                 lse)


class _Eager(torch.autograd.Function):
    """The same forward and backward as the operators, for eager calls: a custom operator's dispatch costs
    hundreds of microseconds of host time a training step (validation/results/profile-host-h100-2026-11-25/
    bwd-plans.json), which a small shape's kernels do not cover; torch.compile gets the operators."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, backend, fwd_config, bwd_family, bwd_config, deterministic):
        out, lse = _forward(q, k, v, causal, scale, backend, fwd_config)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic
        ctx.bwd_family, ctx.bwd_config = bwd_family, bwd_config
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _backward(dout, q, k, v, out, lse, ctx.causal, ctx.scale, ctx.bwd_family, ctx.bwd_config,
                               ctx.deterministic)
        return dq, dk, dv, None, None, None, None, None, None, None


def _register():
    """Register the two operators and the forward's autograd formula (once: at import)."""

    @torch.library.custom_op("iomodel::flash_attn_fwd", mutates_args=())
    def fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, backend: str,
            fwd_config: list[int], bwd_family: str, bwd_config: list[int],
            deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        # with a config, backend names its family (sm80 | sm90); without, the model picks here, inside
        # the operator, where torch.compile does not trace; the backward's config and mode ride along
        return _forward(q, k, v, causal, scale, backend, fwd_config)

    @fwd.register_fake
    def _(q, k, v, causal, scale, backend, fwd_config, bwd_family, bwd_config, deterministic):
        B, H, N, d = q.shape
        return q.new_empty((B, H, N, d)), q.new_empty((B, H, N), dtype=torch.float32)

    @torch.library.custom_op("iomodel::flash_attn_bwd", mutates_args=())
    def bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
            lse: torch.Tensor, causal: bool, scale: float, bwd_family: str, bwd_config: list[int],
            deterministic: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # with a config, bwd_family names its family; without ("" and []), the model picks the family and
        # config here, inside the operator
        return _backward(dout, q, k, v, out, lse, causal, scale, bwd_family, bwd_config, deterministic)

    @bwd.register_fake
    def _(dout, q, k, v, out, lse, causal, scale, bwd_family, bwd_config, deterministic):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def setup_context(ctx, inputs, output):
        q, k, v, causal, scale, _backend, _fwd_cfg, bwd_family, bwd_config, deterministic = inputs
        out, lse = output
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic
        ctx.bwd_family, ctx.bwd_config = bwd_family, bwd_config

    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = bwd(dout, q, k, v, out, lse, ctx.causal, ctx.scale, ctx.bwd_family, ctx.bwd_config,
                         ctx.deterministic)
        return dq, dk, dv, None, None, None, None, None, None, None

    fwd.register_autograd(backward, setup_context=setup_context)
    return fwd, bwd


FWD, BWD_OP = _register()


@functools.cache
def _backward_head_dims() -> tuple[int, ...]:
    """The head dims some backward family takes (on any GPU: the backward names the GPU's own)."""
    from .dispatch import backward_head_dims

    return backward_head_dims()


def flash_attention(q, k, v, causal: bool, scale, config, backend: str, bwd_config, deterministic: bool):
    """(O, LSE) of the FlashAttention forward through the differentiable operator (kernels.flash_attention).
    Only plain values cross into the operator; with config=None nothing here calls the model, so
    torch.compile traces this function without a break."""
    from . import dispatch
    from .checks import check_scale

    d = q.shape[-1]
    bwd_dims = _backward_head_dims()
    if d not in bwd_dims:   # the forward has it, the backward not: say so now, not at .backward()
        raise ValueError(f"head dim {d} has no backward yet (the backward takes {', '.join(map(str, bwd_dims))}): "
                         "call it on tensors that do not require grad (or under torch.no_grad()).")
    fields = []
    if config is not None:   # a config picks its family: pass its backend with its fields
        family = dispatch.flash_family(q, k, v, causal, config, backend)[0]
        backend = next(b for b, f in dispatch.FLASH_BACKENDS.items() if f == family)
        fields = config_fields(_typed(family, config, d))
    bwd_family = dispatch.backward_config_family(bwd_config) if bwd_config is not None else ""
    bwd_fields = config_fields(_typed(bwd_family, bwd_config, d)) if bwd_family else []
    args = (q, k, v, bool(causal), check_scale(scale, d), backend, fields, bwd_family, bwd_fields, bool(deterministic))
    return FWD(*args) if torch.compiler.is_compiling() else _Eager.apply(*args)
