"""FlashAttention forward (mma.sync path) on torch tensors, built at run time with NVRTC."""
from __future__ import annotations

import math
import threading

from . import _runtime
from .checks import check_flash_config, check_qkv, check_scale
from .configs import SHIPPED_FLASH, FlashConfig

__all__ = ["flash_attention", "choose_flash_config", "flash_kernel", "precompile_flash"]

HEADER = "flash_fwd_sm80.cuh"
LOG2E = 1.4426950408889634
_CHOICES: dict[tuple, FlashConfig] = {}
_CHOICE_LOCK = threading.Lock()


def _kernel_name(cfg: FlashConfig, dtype: str, causal: bool) -> str:
    return f"iom::flash_fwd_kernel<{cfg.template_args(dtype, causal)}>"


def flash_kernel(cfg: FlashConfig, dtype: str, causal: bool, device):
    """The compiled kernel for one (config, dtype, causal) on `device` (cached)."""
    name = _kernel_name(cfg, dtype, causal)
    return _runtime.get_function(HEADER, name, (name,), device, cfg.smem_bytes(2))


def precompile_flash(variants, device, workers: int | None = None) -> int:
    """Compile several (config, dtype, causal) variants concurrently."""
    return _runtime.precompile([lambda c=c, d=d, k=k: flash_kernel(c, d, k, device) for c, d, k in variants],
                               workers)


def choose_flash_config(shape: dict, causal: bool, device) -> FlashConfig:
    """The shipped configuration the performance model ranks best for this problem.

    Calls ``iomodel.api.rank_configs(kernel="flash_sm80", ...)`` (imported here,
    lazily) and caches the choice per (GPU, shape, causal, dtype).
    """
    import torch

    try:
        from iomodel.api import rank_configs
    except ImportError as e:
        raise RuntimeError(
            "config=None asks the performance model for the best tile configuration, but "
            f"iomodel.api.rank_configs cannot be imported ({e}); pass config=FlashConfig(...) "
            "explicitly.") from e
    gpu = torch.cuda.get_device_name(device)
    key = (gpu, shape["B"], shape["H"], shape["H_kv"], shape["N_q"], shape["N_k"], shape["d"],
           bool(causal), shape["dtype"])
    cfg = _CHOICES.get(key)
    if cfg is not None:
        return cfg
    limit = _runtime.max_dynamic_smem(device)
    cands = [c for c in SHIPPED_FLASH if c.head_dim == shape["d"] and c.smem_bytes(2) <= limit]
    if not cands:
        raise ValueError(f"no shipped flash configuration for head dim {shape['d']} fits this GPU's "
                         f"{limit} bytes of shared memory per block.")
    ranked = rank_configs(
        kernel="flash_sm80", gpu=gpu,
        shape=dict(B=shape["B"], H=shape["H"], H_kv=shape["H_kv"], N_q=shape["N_q"], N_k=shape["N_k"],
                   d=shape["d"], causal=bool(causal), dtype=shape["dtype"]),
        candidates=[c.as_dict() for c in cands])
    if not ranked:
        raise RuntimeError("the performance model returned no ranking for the flash configurations.")
    cfg = check_flash_config(dict(ranked[0][0]), shape["d"])
    with _CHOICE_LOCK:
        _CHOICES[key] = cfg
    return cfg


def flash_attention(q, k, v, causal: bool = False, config=None, scale=None, return_lse: bool = False):
    """softmax(scale * q k^T [+ causal mask]) v with the mma.sync FlashAttention kernel.

    q: (B, H, N_q, d); k, v: (B, H_kv, N_k, d); bf16 or fp16 CUDA tensors with
    stride 1 in the last dim (other strides arbitrary, multiples of 8).
    H % H_kv == 0 (query head h reads kv head h // (H // H_kv)).
    causal: query i sees keys j <= i + N_k - N_q (bottom-right aligned); a row
    that sees no key gets O = 0 and L = -inf.
    Returns O (B, H, N_q, d) in the input dtype, and with return_lse=True also
    L (B, H, N_q) float32, the natural-log log-sum-exp of the scaled scores.
    """
    import numpy as np
    import torch

    shape = check_qkv(q, k, v)
    B, H, H_kv, N_q, N_k, d = shape["B"], shape["H"], shape["H_kv"], shape["N_q"], shape["N_k"], shape["d"]
    if B > 65535 or H > 65535:
        raise ValueError(f"batch ({B}) and heads ({H}) must each be at most 65535 (grid limits).")
    sc = check_scale(scale, d)
    causal = bool(causal)
    cfg = choose_flash_config(shape, causal, q.device) if config is None else check_flash_config(config, d)
    smem = cfg.smem_bytes(2)
    limit = _runtime.max_dynamic_smem(q.device)
    if smem > limit:
        raise ValueError(f"config {cfg} needs {smem} bytes of shared memory per block; this GPU allows {limit}.")

    o = _runtime.empty((B, H, N_q, d), q.dtype, q.device)
    lse = _runtime.empty((B, H, N_q), torch.float32, q.device)

    fn = flash_kernel(cfg, shape["dtype"], causal, q.device)
    i64, i32, f32, ptr = np.int64, np.int32, np.float32, np.uint64
    args = (ptr(q.data_ptr()), ptr(k.data_ptr()), ptr(v.data_ptr()), ptr(o.data_ptr()), ptr(lse.data_ptr()),
            i64(q.stride(0)), i64(q.stride(1)), i64(q.stride(2)),
            i64(k.stride(0)), i64(k.stride(1)), i64(k.stride(2)),
            i64(v.stride(0)), i64(v.stride(1)), i64(v.stride(2)),
            i64(o.stride(0)), i64(o.stride(1)), i64(o.stride(2)),
            i32(H), i32(H // H_kv), i32(N_q), i32(N_k), f32(sc * LOG2E), f32(sc))
    grid = (math.ceil(N_q / cfg.block_m), H, B)
    _runtime.launch(fn, q.device, grid, (cfg.threads, 1, 1), args, smem)
    return (o, lse) if return_lse else o
