"""CUDA attention kernels that check the iomodel performance model.

* ``flash_attention``: FlashAttention forward, online softmax in exp2; backend
  ``sm80`` (mma.sync m16n8k16 + ldmatrix + cp.async, sm_80 and newer, Hopper
  included) or ``sm90`` (wgmma + TMA, warp-specialized, ``kernels.sm90``).
* ``attention_unfused``: the three-kernel baseline (QK^T -> softmax -> PV through
  global memory).

Importing this package needs only numpy: torch and cupy are imported inside
the functions.  Tile configurations live in ``kernels.configs``; the offline
nvcc build and ptxas resource report in ``kernels.build``.  See docs/kernels.md
and docs/kernels_sm90.md.
"""
from __future__ import annotations

from .configs import (SHIPPED_FLASH, SHIPPED_MATMUL, SUPPORTED_HEAD_DIMS, FlashConfig,  # noqa: F401
                      MatmulConfig)

__all__ = ["flash_attention", "attention_unfused", "FlashConfig", "MatmulConfig", "SHIPPED_FLASH",
           "SHIPPED_MATMUL", "SUPPORTED_HEAD_DIMS", "set_debug"]


def flash_attention(q, k, v, causal=False, config=None, scale=None, return_lse=False, backend="auto"):
    """FlashAttention forward.

    ``backend``: ``"sm80"`` (mma.sync, ``kernels.flash_sm80``), ``"sm90"`` (wgmma + TMA, warp-specialized,
    ``kernels.sm90``; Hopper only) or ``"auto"``: a config picks its own family (``FlashConfig`` or a dict
    with ``warps`` -> sm80, ``Sm90Config`` or a dict with ``consumers`` -> sm90); with ``config=None`` on a
    Hopper GPU the performance model ranks the best shipped configuration of each family and the faster
    predicted one runs.
    """
    if backend not in ("auto", "sm80", "sm90"):
        raise ValueError(f"backend must be 'auto', 'sm80' or 'sm90', got {backend!r}")
    if backend == "auto":
        backend = _pick_backend(q, k, causal, config)
    if backend == "sm90":
        from .sm90 import flash_attention_sm90 as _impl90
        return _impl90(q, k, v, causal=causal, config=config, scale=scale, return_lse=return_lse)
    from .flash_sm80 import flash_attention as _impl

    return _impl(q, k, v, causal=causal, config=config, scale=scale, return_lse=return_lse)


_BACKENDS: dict[tuple, str] = {}


def _pick_backend(q, k, causal, config) -> str:
    """Which family runs: the config's own, else the one the model predicts faster on this GPU."""
    if config is not None:
        fields = config if isinstance(config, dict) else getattr(config, "__dataclass_fields__", {})
        return "sm90" if "consumers" in fields else "sm80"
    import torch
    if not (isinstance(q, torch.Tensor) and q.is_cuda) or torch.cuda.get_device_capability(q.device) != (9, 0):
        return "sm80"
    gpu = torch.cuda.get_device_name(q.device)
    shape = dict(B=q.shape[0], H=q.shape[1], H_kv=k.shape[1], N_q=q.shape[2], N_k=k.shape[2], d=q.shape[3],
                 causal=bool(causal), dtype="bf16" if q.dtype == torch.bfloat16 else "fp16")
    key = (gpu, *shape.values())
    if key in _BACKENDS:
        return _BACKENDS[key]
    from iomodel.api import rank_configs
    from .sm90 import SHIPPED_SM90
    best = {}
    for family, backend, cands in (("flash_sm80", "sm80", [c.as_dict() for c in SHIPPED_FLASH if c.head_dim == shape["d"]]),
                                   ("flash_sm90", "sm90", [{"block_m": c.block_m, "block_n": c.block_n, "stages": c.stages,
                                                            "consumers": c.consumers} for c in SHIPPED_SM90
                                                           if c.head_dim == shape["d"]])):
        if cands:
            try:
                best[backend] = rank_configs(family, gpu, shape, cands)[0][1].time_s
            except ValueError:
                pass
    choice = min(best, key=best.get) if best else "sm80"
    _BACKENDS[key] = choice
    return choice


def attention_unfused(q, k, v, causal=False, config=None, scale=None):
    """Unfused three-kernel attention; see ``kernels.unfused.attention_unfused``."""
    from .unfused import attention_unfused as _impl

    return _impl(q, k, v, causal=causal, config=config, scale=scale)


def set_debug(flag: bool) -> None:
    """NaN-poison outputs and synchronise + check errors after every launch."""
    from ._runtime import set_debug as _impl

    _impl(flag)
