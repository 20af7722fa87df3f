"""Unfused attention baseline: three kernels through global memory.

(1) S = scale * Q K^T  (tiled mma.sync matmul, S in float32, (B, H, N_q, lds))
(2) P = softmax(mask(S)) (one warp per row, no shared memory, P in the input dtype, (B, H, N_q, ldp))
(3) O = P V            (the same matmul template, B operand through ldmatrix.trans)

lds = N_k rounded up to a multiple of 4 and ldp = N_k rounded up to a multiple
of 8 keep every row 16-byte aligned; P's padding columns are written as zeros.
"""
from __future__ import annotations

import math

from . import _runtime
from .checks import check_matmul_config, check_qkv, check_scale
from .configs import SHIPPED_MATMUL, SOFTMAX_SMEM_BYTES, SOFTMAX_WARPS, MatmulConfig

__all__ = ["attention_unfused", "DEFAULT_MATMUL", "unfused_kernels", "precompile_unfused"]

HEADER = "unfused.cuh"
#: configuration used when config=None
DEFAULT_MATMUL: MatmulConfig = SHIPPED_MATMUL[0]


def _names(cfg: MatmulConfig, dtype: str) -> tuple[str, str, str]:
    return (f"iom::matmul_kernel<{cfg.template_args(dtype, True, True)}>",
            f"iom::matmul_kernel<{cfg.template_args(dtype, False, False)}>",
            f"iom::softmax_rows_kernel<iom::{dtype}>")


def unfused_kernels(cfg: MatmulConfig, dtype: str, device):
    """(scores kernel, softmax kernel, PV kernel), compiled in one cached module."""
    names = _names(cfg, dtype)
    smem = cfg.smem_bytes(2)
    qk = _runtime.get_function(HEADER, names[0], names, device, smem)
    pv = _runtime.get_function(HEADER, names[1], names, device, smem)
    sm = _runtime.get_function(HEADER, names[2], names, device, SOFTMAX_SMEM_BYTES)
    return qk, sm, pv


def precompile_unfused(variants, device, workers: int | None = None) -> int:
    return _runtime.precompile([lambda c=c, d=d: unfused_kernels(c, d, device) for c, d in variants], workers)


def attention_unfused(q, k, v, causal: bool = False, config=None, scale=None):
    """Reference-style attention in three kernels (see module docstring).

    Same inputs and masking convention as ``flash_attention``; returns O only.
    config: a MatmulConfig (or dict) for both matmuls; None uses DEFAULT_MATMUL.
    Memory: allocates S (4*B*H*N_q*lds bytes) and P (2*B*H*N_q*ldp bytes).
    """
    import numpy as np
    import torch

    shape = check_qkv(q, k, v)
    d = shape["d"]
    sc = check_scale(scale, d)
    cfg = DEFAULT_MATMUL if config is None else check_matmul_config(config)
    smem = cfg.smem_bytes(2)
    limit = _runtime.max_dynamic_smem(q.device)
    if smem > limit:
        raise ValueError(f"config {cfg} needs {smem} bytes of shared memory per block; this GPU allows {limit}.")
    B, H, H_kv, N_q, N_k = shape["B"], shape["H"], shape["H_kv"], shape["N_q"], shape["N_k"]
    if B * H > 65535:
        raise ValueError(f"batch * heads ({B * H}) must be at most 65535 for the unfused kernels.")
    lds = (N_k + 3) // 4 * 4
    ldp = (N_k + 7) // 8 * 8
    dev = q.device
    s_buf = _runtime.empty((B, H, N_q, lds), torch.float32, dev)
    p_buf = _runtime.empty((B, H, N_q, ldp), q.dtype, dev)
    o = _runtime.empty((B, H, N_q, d), q.dtype, dev)

    qk_fn, sm_fn, pv_fn = unfused_kernels(cfg, shape["dtype"], dev)
    i64, i32, f32, ptr = np.int64, np.int32, np.float32, np.uint64
    group = H // H_kv
    block = (cfg.threads, 1, 1)

    # (1) S = scale * Q K^T : M = N_q, N = N_k, K = d
    args = (ptr(q.data_ptr()), ptr(k.data_ptr()), ptr(s_buf.data_ptr()),
            i32(N_q), i32(N_k), i32(d), i32(d),
            i64(q.stride(0)), i64(q.stride(1)), i64(q.stride(2)),
            i64(k.stride(0)), i64(k.stride(1)), i64(k.stride(2)),
            i64(s_buf.stride(0)), i64(s_buf.stride(1)), i64(s_buf.stride(2)),
            i32(H), i32(group), f32(sc))
    grid = (math.ceil(N_k / cfg.block_n), math.ceil(N_q / cfg.block_m), B * H)
    _runtime.launch(qk_fn, dev, grid, block, args, smem)

    # (2) P = softmax(mask(S)) row by row
    rows = B * H * N_q
    args = (ptr(s_buf.data_ptr()), ptr(p_buf.data_ptr()), i64(rows), i32(N_q), i32(N_k),
            i32(lds), i32(ldp), i32(1 if causal else 0))
    _runtime.launch(sm_fn, dev, (math.ceil(rows / SOFTMAX_WARPS),), (32 * SOFTMAX_WARPS, 1, 1), args,
                    SOFTMAX_SMEM_BYTES)

    # (3) O = P V : M = N_q, N = d, K = ldp (P's padding columns are zero), V rows valid: N_k
    args = (ptr(p_buf.data_ptr()), ptr(v.data_ptr()), ptr(o.data_ptr()),
            i32(N_q), i32(d), i32(ldp), i32(N_k),
            i64(p_buf.stride(0)), i64(p_buf.stride(1)), i64(p_buf.stride(2)),
            i64(v.stride(0)), i64(v.stride(1)), i64(v.stride(2)),
            i64(o.stride(0)), i64(o.stride(1)), i64(o.stride(2)),
            i32(H), i32(group), f32(1.0))
    grid = (math.ceil(d / cfg.block_n), math.ceil(N_q / cfg.block_m), B * H)
    _runtime.launch(pv_fn, dev, grid, block, args, smem)
    return o
