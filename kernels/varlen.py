"""``flash_attention_varlen``: attention over a batch of sequences of different lengths packed back to back
(FlashAttention's varlen layout), with the forward kernels in their varlen form: ``flash_sm80``
(``csrc/flash_fwd_sm80.cuh`` with IS_VARLEN) and, on Hopper, ``flash_sm90`` (``csrc/flash_fwd_sm90.cuh``
with kVarlen; TMA reads the packed tensors in place); the model picks as for ``flash_attention``.  One
launch for the whole batch, no padding.

q (total_q, H, d), k and v (total_k, H_kv, d); sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] of
q and cu_seqlens_k[b] .. of k and v.  The grid covers max_seqlen_q rows for every sequence; the tiles past
a shorter sequence's rows return at once.
"""
from __future__ import annotations

import ctypes
import math

from . import driver, runtime
from .checks import check_config, check_scale, check_smem
from .kvcache_checks import half_tensor, tensor_of_rank

__all__ = ["flash_attention_varlen", "check_varlen", "check_cu_seqlens_values"]


def _lengths(name: str, cu, batch: int | None, device):
    import torch

    tensor_of_rank(name, cu, 1, "(batch + 1,) cumulative sequence lengths")
    if cu.dtype != torch.int32 or cu.device != device:
        raise TypeError(f"{name} must be int32 on {device}, got {cu.dtype} on {cu.device}.")
    if cu.shape[0] < 2 or (batch is not None and cu.shape[0] != batch + 1):
        raise ValueError(f"{name} must have batch + 1 >= 2 entries"
                         + (f" ({batch + 1}, like cu_seqlens_q)" if batch is not None else "")
                         + f", got {cu.shape[0]}.")
    return cu.contiguous()


def _max_len(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise ValueError(f"{name} must be an int >= 0, got {x!r}.")
    return x


def check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, head_dims) -> dict:
    """Shapes, dtypes, devices and strides of a call (no values read): the model's shape of it (N_q and
    N_k the longest sequences) and the checked cu_seqlens."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        tensor_of_rank(name, t, 3, "(total_tokens, heads, head_dim)")
        half_tensor(name, t, q.dtype, q.device)
    total_q, H, d = q.shape
    total_k, H_kv, dk = k.shape
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}.")
    if dk != d:
        raise ValueError(f"head dims differ: q has {d}, k has {dk}.")
    if head_dims and d not in head_dims:
        raise ValueError(f"head dim {d} is not supported; supported head dims: {list(head_dims)}.")
    if H == 0 or H_kv == 0 or H % H_kv:
        raise ValueError(f"q's heads ({H}) must be a non-zero multiple of k's ({H_kv}).")
    cq = _lengths("cu_seqlens_q", cu_seqlens_q, None, q.device)
    ck = _lengths("cu_seqlens_k", cu_seqlens_k, cq.shape[0] - 1, q.device)
    shape = {"B": cq.shape[0] - 1, "H": H, "H_kv": H_kv, "N_q": max(1, _max_len("max_seqlen_q", max_seqlen_q)),
             "N_k": max(1, _max_len("max_seqlen_k", max_seqlen_k)), "d": d,
             "dtype": "bf16" if str(q.dtype).endswith("bfloat16") else "fp16"}
    return {"shape": shape, "cu_q": cq, "cu_k": ck, "total_q": total_q, "total_k": total_k}


def check_cu_seqlens_values(cu_q, cu_k, total_q: int, total_k: int, max_q: int, max_k: int) -> None:
    """Each cu_seqlens starts at 0, never decreases and ends at its tensor's rows; no sequence is longer
    than its max_seqlen (the grid covers max_seqlen rows: a longer one would lose rows).  One copy to
    the host for all of it."""
    import torch

    facts = []
    for cu, total, longest in ((cu_q, total_q, max_q), (cu_k, total_k, max_k)):
        lens = cu[1:] - cu[:-1]
        facts += [cu[0], cu[-1], lens.min(), lens.max()]
    first_q, last_q, min_q, top_q, first_k, last_k, min_k, top_k = torch.stack(facts).tolist()
    for name, first, last, low, top, total, longest in (
            ("cu_seqlens_q", first_q, last_q, min_q, top_q, total_q, max_q),
            ("cu_seqlens_k", first_k, last_k, min_k, top_k, total_k, max_k)):
        if first != 0 or last != total:
            raise ValueError(f"{name} must run from 0 to the tensor's {total} rows, got {first} .. {last}.")
        if low < 0:
            raise ValueError(f"{name} must not decrease (a sequence of negative length).")
        if top > longest:
            raise ValueError(f"{name} holds a sequence of {top} tokens, longer than max_seqlen "
                             f"{'q' if name.endswith('q') else 'k'} = {longest}.")


def _family_config(shape: dict, config, index: int) -> tuple[str, object]:
    """(family, config): ``flash_attention``'s choice (``dispatch.forward_family``) for the longest
    sequences; a given config checked here, as no runner's ``prepare`` sees this call."""
    from . import dispatch

    family, cfg = dispatch.forward_family(shape, config, index)
    if config is not None:
        if not dispatch.runs_here(family, driver.capability(index)):
            raise RuntimeError(f"the {family} kernel needs an sm_90 (Hopper) GPU")
        cfg = check_config(family, config, shape)
    return family, cfg


def flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                           softmax_scale=None, return_lse=False, validate=True, config=None):
    """softmax(scale q k^T [+ causal mask]) v for each packed sequence.

    q (total_q, H, d), k and v (total_k, H_kv, d): bf16 or fp16, unit stride in the last dimension, rows
    16-byte aligned (no copies); H a multiple of H_kv.  cu_seqlens_q, cu_seqlens_k: int32 (B + 1,) on q's
    device, from 0 to total_q (total_k); max_seqlen_q, max_seqlen_k: ints at least the longest sequence.
    causal: bottom-right in each sequence (query i of N_q sees keys j <= i + N_k - N_q).  Sequences of
    length 0 are allowed; a query row that sees no key gets O = 0 and LSE = -inf.  validate: check the
    cu_seqlens values first (one device-to-host copy; False skips it, and the kernel still reads and
    writes nothing outside the tensors' rows).  config: a FlashConfig (or a dict of its fields); None:
    the model's pick for the longest sequences.  Returns O (total_q, H, d), and with return_lse the
    natural-log LSE (H, total_q) float32.
    """
    import torch

    from iomodel import families

    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}.")
    from .dispatch import FLASH_BACKENDS

    head_dims = tuple(sorted({d for n in FLASH_BACKENDS.values() for d in families.get(n).head_dims}))
    call = check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, head_dims)
    s = {**call["shape"], "causal": causal}
    if validate:
        check_cu_seqlens_values(call["cu_q"], call["cu_k"], call["total_q"], call["total_k"], max_seqlen_q,
                                max_seqlen_k)
    index = driver.device_index(q.device)
    family, cfg = _family_config(s, config, index)
    smem = cfg.smem_bytes(q.element_size())
    check_smem(family, cfg, smem, driver.max_smem_optin(index))
    scale = check_scale(softmax_scale, s["d"])
    out = runtime.empty(tuple(q.shape), q.dtype, q.device)
    lse = runtime.empty((s["H"], call["total_q"]), torch.float32, q.device)
    if call["total_q"] and max_seqlen_q:
        launch = _launch_sm90 if family == "flash_sm90" else _launch_sm80
        launch(q, k, v, out, lse, call, s, cfg, smem, scale, index)
    return (out, lse) if return_lse else out


def _launch_sm90(q, k, v, out, lse, call, s, cfg, smem, scale, index) -> None:
    """The Hopper kernel on (1, H, total, d) views of the packed tensors (TMA reads them in place)."""
    from .flash_sm90 import heads_per_section, launch

    q4, k4, v4 = (t.permute(1, 0, 2).unsqueeze(0) for t in (q, k, v))
    # causal tiles go longest first within sections of heads (kernels.flash_sm90.heads_per_section): sized
    # by the mean sequence (the longest would make one section of everything, and every tile a DRAM read)
    sections = None
    if s["causal"]:
        mean_k = max(1, call["total_k"] // s["B"])
        mean_q = max(1, call["total_q"] // s["B"])
        props = driver.device_props(index)
        sections = heads_per_section(s["B"], s["H"], s["H_kv"], mean_k, s["d"], q.element_size(),
                                     props.L2_cache_size, -(-mean_q // cfg.block_m), props.multi_processor_count)
    launch(q4, k4, v4, out, lse, s, cfg, index, smem, scale, varlen=(call["cu_q"], call["cu_k"], call["total_q"]),
           _sections=sections)


def _launch_sm80(q, k, v, out, lse, call, s, cfg, smem, scale, index) -> None:
    from .flash_sm80 import NO_WINDOW, kernel
    from .score_mods import NO_MODS

    kern = kernel(index, cfg, s["dtype"], s["causal"], smem, varlen=True)
    i32, i64, f32 = ctypes.c_int, ctypes.c_longlong, ctypes.c_float

    def strides(t):   # (batch, head, row) as the kernel takes them; the batch stride is unused
        return [i64(0), i64(t.stride(1)), i64(t.stride(0))]

    args = [driver.ptr(q), driver.ptr(k), driver.ptr(v), driver.ptr(out), driver.ptr(lse),
            *strides(q), *strides(k), *strides(v), *strides(out),
            i32(s["H"]), i32(s["H"] // s["H_kv"]), i32(call["total_q"]), i32(call["total_k"]),
            f32(scale * runtime.LOG2E), f32(scale), driver.ptr(call["cu_q"]), driver.ptr(call["cu_k"]),
            i32(NO_WINDOW[0]), i32(NO_WINDOW[1]), *NO_MODS.kernel_args(scale),
            i32(0), i32(1), driver.ptr(None), driver.ptr(None)]   # no tail split (SPLIT's arguments)
    grid = (math.ceil(s["N_q"] / cfg.block_m), s["H"], s["B"])
    driver.launch(kern, grid, (cfg.threads, 1, 1), args, smem)
