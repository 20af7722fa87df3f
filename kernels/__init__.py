"""CUDA attention kernels that check the iomodel performance model.

* ``flash_attention``: FlashAttention forward, mma.sync m16n8k16 + ldmatrix +
  cp.async (sm_80 and newer, Hopper included), online softmax in exp2.
* ``attention_unfused``: the three-kernel baseline (QK^T -> softmax -> PV through
  global memory).

Importing this package needs only numpy: torch and cupy are imported inside
the functions.  Tile configurations live in ``kernels.configs``; the offline
nvcc build and ptxas resource report in ``kernels.build``.  See docs/kernels.md.
"""
from __future__ import annotations

from .configs import (SHIPPED_FLASH, SHIPPED_MATMUL, SUPPORTED_HEAD_DIMS, FlashConfig,  # noqa: F401
                      MatmulConfig)

__all__ = ["flash_attention", "attention_unfused", "FlashConfig", "MatmulConfig", "SHIPPED_FLASH",
           "SHIPPED_MATMUL", "SUPPORTED_HEAD_DIMS", "set_debug"]


def flash_attention(q, k, v, causal=False, config=None, scale=None, return_lse=False):
    """FlashAttention forward; see ``kernels.flash_sm80.flash_attention``."""
    from .flash_sm80 import flash_attention as _impl

    return _impl(q, k, v, causal=causal, config=config, scale=scale, return_lse=return_lse)


def attention_unfused(q, k, v, causal=False, config=None, scale=None):
    """Unfused three-kernel attention; see ``kernels.unfused.attention_unfused``."""
    from .unfused import attention_unfused as _impl

    return _impl(q, k, v, causal=causal, config=config, scale=scale)


def set_debug(flag: bool) -> None:
    """NaN-poison outputs and synchronise + check errors after every launch."""
    from ._runtime import set_debug as _impl

    _impl(flag)
