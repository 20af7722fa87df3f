"""Input validation for the attention kernels (raises ValueError / TypeError).

Works on any torch tensors (CPU tensors included, so the checks are unit
testable without a GPU); torch is imported lazily.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .configs import SUPPORTED_HEAD_DIMS, FlashConfig, MatmulConfig

__all__ = ["check_qkv", "check_flash_config", "check_matmul_config", "check_scale", "dtype_name"]


def dtype_name(t) -> str:
    import torch

    if t.dtype == torch.bfloat16:
        return "bf16"
    if t.dtype == torch.float16:
        return "fp16"
    raise TypeError(f"dtype must be torch.bfloat16 or torch.float16, got {t.dtype}")


def check_qkv(q: Any, k: Any, v: Any, *, require_cuda: bool = True,
              head_dims: tuple[int, ...] = SUPPORTED_HEAD_DIMS) -> dict:
    """Validate q (B, H, N_q, d), k and v (B, H_kv, N_k, d); return the shape dict.

    The returned dict has keys B, H, H_kv, N_q, N_k, d, dtype ('bf16'/'fp16').
    ``head_dims``: the head dims the calling kernel supports.  Rows must be
    16-byte aligned (what cp.async and TMA both need); limits of a kernel's
    launch grid are the caller's to check.
    """
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch missing
        raise TypeError("q, k and v must be torch tensors, but torch is not installed.") from e

    qkv = (("q", q), ("k", k), ("v", v))
    for name, t in qkv:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
    for name, t in qkv:
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq_len, head_dim), got shape {tuple(t.shape)}.")
    for name, t in qkv:
        if t.dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"{name} must be bfloat16 or float16 (torch.bfloat16 or torch.float16), got {t.dtype}.")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}.")
    if require_cuda:
        for name, t in qkv:
            if not t.is_cuda:
                raise ValueError(f"{name} must be a tensor on a CUDA device, got device {t.device}.")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}.")

    B, H, N_q, d = q.shape
    Bk, H_kv, N_k, dk = k.shape
    Bv, H_v, N_v, dv = v.shape
    if not (B == Bk == Bv):
        raise ValueError(f"batch sizes differ: q has {B}, k has {Bk}, v has {Bv}.")
    if not (d == dk == dv):
        raise ValueError(f"head dims differ: q has {d}, k has {dk}, v has {dv}.")
    if d not in head_dims:
        raise ValueError(f"head dim {d} is not supported; supported head dims: {list(head_dims)}.")
    if H_kv != H_v or N_k != N_v:
        raise ValueError(f"k and v must have the same (heads, seq_len), got {(H_kv, N_k)} and {(H_v, N_v)}.")
    if H_kv == 0 or H % H_kv != 0:
        raise ValueError(f"query heads must be a multiple of key/value heads: H={H} is not a multiple of "
                         f"kv heads H_kv={H_kv}.")
    if B == 0 or H == 0:
        raise ValueError(f"batch and heads must be non-zero, got B={B}, H={H}.")
    if N_q == 0 or N_k == 0:
        raise ValueError(f"sequence lengths must be non-zero, got N_q={N_q}, N_k={N_k}.")
    for name, t in qkv:
        if t.stride(3) != 1:
            raise ValueError(f"{name} must be contiguous in the last dimension (stride 1), got stride "
                             f"{t.stride(3)}; call .contiguous().")
        for ax in range(3):
            if t.stride(ax) % 8 != 0 and t.shape[ax] > 1:
                raise ValueError(f"{name}.stride({ax}) = {t.stride(ax)} must be a multiple of 8 elements "
                                 f"(16-byte aligned rows); call .contiguous().")
        if t.data_ptr() % 16 != 0:
            raise ValueError(f"{name} must start at a 16-byte aligned address; call .clone().")
    return {"B": B, "H": H, "H_kv": H_kv, "N_q": N_q, "N_k": N_k, "d": d, "dtype": dtype_name(q)}


def check_scale(scale: Any, d: int) -> float:
    """The softmax scale as a float: 1/sqrt(d) for None, else a positive finite number."""
    if scale is None:
        return 1.0 / float(d) ** 0.5
    try:
        s = float(scale)
    except (TypeError, ValueError) as e:
        raise TypeError(f"scale must be a positive number, got {scale!r}.") from e
    if not (s > 0.0) or s == float("inf"):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}.")
    return s


def _config(config: Any, cls: type):
    """`config` as a `cls` instance (a dict is converted); TypeError / ValueError if it is neither."""
    if isinstance(config, dict):
        try:
            config = cls.from_dict(config)
        except (KeyError, TypeError, ValueError) as e:
            keys = ", ".join(f.name for f in dataclasses.fields(cls))
            raise ValueError(f"config dict must have integer keys {keys}: {e}") from e
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__} or a dict, got {type(config).__name__}.")
    return config


def _check_problems(config: Any, what: str) -> None:
    problems = config.problems()
    if problems:
        raise ValueError(f"invalid {what} config {config}: " + "; ".join(problems) + ".")


def check_flash_config(config: Any, d: int) -> FlashConfig:
    """Accept a FlashConfig or a dict with its fields; check it against head dim d."""
    config = _config(config, FlashConfig)
    if config.head_dim != d:
        raise ValueError(f"config.head_dim ({config.head_dim}) does not match the inputs' head dim ({d}).")
    _check_problems(config, "flash")
    return config


def check_matmul_config(config: Any) -> MatmulConfig:
    """Accept a MatmulConfig or a dict with its fields."""
    config = _config(config, MatmulConfig)
    _check_problems(config, "matmul")
    return config
