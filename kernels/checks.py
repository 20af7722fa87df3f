"""Input validation for the attention kernels (raises ValueError / TypeError, one sentence each).

Works on any torch tensors (CPU tensors included, so the checks are unit testable without a GPU);
torch is imported lazily.  Configs are checked by their family (``iomodel.families``): the same
check the model and the tile search apply, raising ``ModelError`` (a ValueError).
"""
from __future__ import annotations

from typing import Any

from iomodel import families

__all__ = ["check_qkv", "check_layout", "check_base", "check_scale", "check_config", "check_smem", "dtype_name", "check_like",
           "rows_aligned", "with_aligned_rows", "check_lse", "backward_inputs"]


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch missing
        raise TypeError("q, k and v must be torch tensors, but torch is not installed.") from e
    return torch


def dtype_name(t) -> str:
    torch = _torch()
    if t.dtype == torch.bfloat16:
        return "bf16"
    if t.dtype == torch.float16:
        return "fp16"
    raise TypeError(f"dtype must be torch.bfloat16 or torch.float16, got {t.dtype}")


def _check_types(qkv) -> None:
    torch = _torch()
    for name, t in qkv:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
    for name, t in qkv:
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq_len, head_dim), got shape {tuple(t.shape)}.")
    for name, t in qkv:
        if t.dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"{name} must be bfloat16 or float16 (torch.bfloat16 or torch.float16), got {t.dtype}.")
    q, k, v = (t for _, t in qkv)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}.")


def _check_devices(qkv, require_cuda: bool) -> None:
    if require_cuda:
        for name, t in qkv:
            if not t.is_cuda:
                raise ValueError(f"{name} must be a tensor on a CUDA device, got device {t.device}.")
    q, k, v = (t for _, t in qkv)
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}.")


def _check_sizes(q, k, v, head_dims) -> dict:
    B, H, N_q, d = q.shape
    Bk, H_kv, N_k, dk = k.shape
    Bv, H_v, N_v, dv = v.shape
    if not (B == Bk == Bv):
        raise ValueError(f"batch sizes differ: q has {B}, k has {Bk}, v has {Bv}.")
    if not (d == dk == dv):
        raise ValueError(f"head dims differ: q has {d}, k has {dk}, v has {dv}.")
    if head_dims and d not in head_dims:
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
    return {"B": B, "H": H, "H_kv": H_kv, "N_q": N_q, "N_k": N_k, "d": d}


def check_layout(tensors) -> None:
    """(name, tensor) pairs of any rank: unit stride in the last dimension, the other strides multiples of
    8 elements (size-1 dimensions excepted) and a 16-byte aligned base: 16-byte aligned rows, what cp.async
    and TMA both need."""
    for name, t in tensors:
        last = t.dim() - 1
        if t.stride(last) != 1:
            raise ValueError(f"{name} must be contiguous in the last dimension (stride 1), got stride "
                             f"{t.stride(last)}; call .contiguous().")
        for ax in range(last):
            if t.stride(ax) % 8 != 0 and t.shape[ax] > 1:
                raise ValueError(f"{name}.stride({ax}) = {t.stride(ax)} must be a multiple of 8 elements "
                                 f"(16-byte aligned rows); call .contiguous().")
        check_base(name, t)


def check_base(name: str, t) -> None:
    """A tensor's first element at a 16-byte aligned address (TMA and 16-byte loads need it)."""
    if t.data_ptr() % 16 != 0:
        raise ValueError(f"{name} must start at a 16-byte aligned address; call .clone().")


def check_qkv(q: Any, k: Any, v: Any, *, require_cuda: bool = True, head_dims: tuple[int, ...] = ()) -> dict:
    """Validate q (B, H, N_q, d), k and v (B, H_kv, N_k, d); return the shape dict with keys
    B, H, H_kv, N_q, N_k, d, dtype ('bf16'/'fp16').  ``head_dims``: the head dims the calling
    kernel supports (empty: any).  Limits of a kernel's launch grid are the caller's to check."""
    qkv = (("q", q), ("k", k), ("v", v))
    _check_types(qkv)
    _check_devices(qkv, require_cuda)
    shape = _check_sizes(q, k, v, head_dims)
    check_layout(qkv)
    return {**shape, "dtype": dtype_name(q)}


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


def check_config(family: str, config: Any, shape: dict):
    """`config` (the family's config type, or a dict of its fields; head_dim may be left out of a
    dict) as the family's typed config, checked against the shape (head_dim = d) and the kernel's
    build constraints.  Raises ModelError (a ValueError) naming what is wrong."""
    return families.get(family).config(config, shape)


def check_smem(family: str, config, smem: int, limit: int) -> None:
    """The config's dynamic shared memory against the device's opt-in limit per block."""
    if smem > limit:
        raise ValueError(f"{family} config {families.get(family).label(config)} needs {smem} bytes of shared "
                         f"memory per block; this GPU allows {limit}.")


# ------------------------------------------------------------------------------------ the backward's inputs
def check_like(name: str, t, ref, shape: tuple) -> None:
    """`t` (out or dout) must be a tensor like q: same shape, dtype and device, rows of stride 1."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name} must have q's shape {shape}, got {tuple(t.shape)}")
    if t.dtype != ref.dtype or t.device != ref.device:
        raise ValueError(f"{name} must be {ref.dtype} on {ref.device} like q, got {t.dtype} on {t.device}")


def rows_aligned(t) -> bool:
    """Stride 1 along d, 16-byte aligned rows and start (what 16-byte loads and TMA need): a backward's
    `out` and `dout` that fail it are copied."""
    return (t.stride(3) == 1 and t.data_ptr() % 16 == 0
            and all(t.stride(i) % 8 == 0 or t.shape[i] == 1 for i in range(3)))


def check_lse(lse, shape: tuple, q) -> None:
    import torch

    if not isinstance(lse, torch.Tensor) or lse.dtype != torch.float32 or lse.device != q.device:
        raise ValueError(f"lse must be a float32 tensor on {q.device} (the forward's return_lse=True output)")
    if tuple(lse.shape) != shape[:3]:
        raise ValueError(f"lse must have shape {shape[:3]} (B, H, N_q), got {tuple(lse.shape)}")


def backward_inputs(dout, out, lse, q, shape: tuple):
    """The forward's `out`, `lse` and the incoming `dout` of a backward call, checked against q (`shape`:
    q's (B, H, N_q, d)), as the kernels read them: out and dout copied when their rows are not aligned,
    lse made contiguous."""
    check_like("out", out, q, shape)
    check_like("dout", dout, q, shape)
    check_lse(lse, shape, q)
    return with_aligned_rows(out), with_aligned_rows(dout), lse.contiguous()


def with_aligned_rows(t):
    """`t`, or a contiguous copy of it in fresh memory where its rows are not 16-byte aligned (``contiguous()``
    would return a contiguous tensor that starts off a 16-byte boundary as it is)."""
    import torch

    return t if rows_aligned(t) else t.clone(memory_format=torch.contiguous_format)
