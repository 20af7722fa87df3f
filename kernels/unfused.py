"""Unfused attention baseline (family ``unfused``, ``csrc/unfused.cuh``): three kernels through global
memory, argument preparation and launch.

(1) S = scale * Q K^T  (tiled mma.sync matmul, S in float32, (B, H, N_q, lds))
(2) P = softmax(mask(S)) (one warp per row, no shared memory, P in the input dtype, (B, H, N_q, ldp))
(3) O = P V            (the same matmul template, B operand through ldmatrix.trans)

lds = N_k rounded up to a multiple of 4 and ldp = N_k rounded up to a multiple of 8 keep every row
16-byte aligned; P's padding columns are written as zeros.  The three kernels of a (matmul config,
dtype) are one module.
"""
from __future__ import annotations

import ctypes
import functools
import math

from iomodel.families import softmax as _softmax
from iomodel.families.unfused import row_pitches

from . import codegen, compile, driver, runtime
from .dispatch import prepare

__all__ = ["FAMILY", "attention", "module"]

FAMILY = "unfused"
HEADER = "unfused.cuh"


def module(cfg, dtype: str, arch: str) -> compile.Module:
    """The compiled module of one (matmul config, dtype) for `arch`; needs no GPU."""
    return compile.build(f'#include "{HEADER}"\n', arch, names=codegen.unfused_kernels(cfg, dtype), label=FAMILY,
                         flags=compile.MMA_SYNC_FLAGS)


@functools.lru_cache(maxsize=None)
def _kernels(index: int, cfg, dtype: str, smem: int) -> tuple[driver.Kernel, driver.Kernel, driver.Kernel]:
    """(scores, softmax, PV) kernels of one module on device `index`."""
    mod = module(cfg, dtype, compile.nvrtc_arch(driver.capability(index)))
    qk, sm, pv = codegen.unfused_kernels(cfg, dtype)
    return (driver.kernel(index, mod, qk, smem), driver.kernel(index, mod, sm, _softmax.SMEM_BYTES),
            driver.kernel(index, mod, pv, smem))


def _matmul_args(a, b, c, m: int, n: int, k: int, k_valid: int, heads: int, group: int, alpha: float) -> list:
    """matmul_kernel's arguments: pointers, sizes (M, N, K, rows of B that hold data), the (batch,
    head, row) strides of A, B and C, heads, query heads per kv head, and the output scale."""
    i32 = ctypes.c_int
    return [driver.ptr(a), driver.ptr(b), driver.ptr(c), i32(m), i32(n), i32(k), i32(k_valid),
            *driver.strides(a), *driver.strides(b), *driver.strides(c), i32(heads), i32(group), ctypes.c_float(alpha)]


def attention(q, k, v, causal: bool = False, config=None, scale=None):
    """Reference-style attention in three kernels (see the module docstring).

    Same inputs and masking convention as the flash kernels; returns O only.  config: a MatmulConfig
    (or a dict of its fields) for both matmuls; None: the family's first shipped config.  Memory:
    allocates S (4*B*H*N_q*lds bytes) and P (2*B*H*N_q*ldp bytes).
    """
    import torch

    call = prepare(FAMILY, q, k, v, causal, config, scale)
    s, cfg = call.shape, call.config
    B, H, H_kv, N_q, N_k, d = (s[x] for x in ("B", "H", "H_kv", "N_q", "N_k", "d"))
    lds, ldp = row_pitches(N_k)
    s_buf = runtime.empty((B, H, N_q, lds), torch.float32, q.device)
    p_buf = runtime.empty((B, H, N_q, ldp), q.dtype, q.device)
    o = runtime.empty((B, H, N_q, d), q.dtype, q.device)
    qk, sm, pv = _kernels(call.device, cfg, s["dtype"], call.smem)
    block, group = (cfg.threads, 1, 1), H // H_kv
    stream = driver.current_stream(call.device)   # one lookup for the three launches

    # (1) S = scale * Q K^T : M = N_q, N = N_k, K = d
    driver.launch(qk, (math.ceil(N_k / cfg.block_n), math.ceil(N_q / cfg.block_m), B * H), block,
                  _matmul_args(q, k, s_buf, N_q, N_k, d, d, H, group, call.scale), call.smem, stream)
    # (2) P = softmax(mask(S)) row by row
    rows = B * H * N_q
    i32 = ctypes.c_int
    driver.launch(sm, (math.ceil(rows / _softmax.ROWS_PER_BLOCK), 1, 1), (32 * _softmax.ROWS_PER_BLOCK, 1, 1),
                  [driver.ptr(s_buf), driver.ptr(p_buf), ctypes.c_longlong(rows), i32(N_q), i32(N_k), i32(lds),
                   i32(ldp), i32(1 if s["causal"] else 0)], _softmax.SMEM_BYTES, stream)
    # (3) O = P V : M = N_q, N = d, K = ldp (P's padding columns are zero), V rows valid: N_k
    driver.launch(pv, (math.ceil(d / cfg.block_n), math.ceil(N_q / cfg.block_m), B * H), block,
                  _matmul_args(p_buf, v, o, N_q, d, ldp, N_k, H, group, 1.0), call.smem, stream)
    return o
