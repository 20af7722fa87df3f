"""FlashAttention forward for Hopper (family ``flash_sm90``, ``csrc/flash_fwd_sm90.cuh``): TMA + wgmma +
warp specialization.  Argument preparation and launch: the TMA descriptors of Q, K and V, the causal
scheduling sections, the dynamic schedule's tile counter and the persistent grid.  One module per
(config, dtype, causal, compile-time switches), built for sm_90a.
"""
from __future__ import annotations

import ctypes
import functools

from . import codegen, compile, driver, runtime
from .dispatch import prepare
from .score_mods import NO_MODS

__all__ = ["FAMILY", "ARCH", "attention", "launch", "module", "heads_per_section", "l2_section_heads", "PERSISTENT",
           "DEFAULT_DEFINES"]

FAMILY = "flash_sm90"
ARCH = "sm_90a"
TMA_BOX_COLS = 64    # a TMA box row is 64 elements = 128 bytes, one SWIZZLE_128B atom row
# Launch a persistent grid (min(#tiles, #SMs) CTAs walking the tiles) by default.
PERSISTENT = True
# Compile-time switches used by default: none.  Available: SM90_STATIC_SCHEDULE (flash_fwd_sm90.cuh,
# FwdTraits) and SM90_WATCHDOG (sm90_common.cuh, mbar_wait).
DEFAULT_DEFINES: tuple[str, ...] = ()
# Causal tile order: tiles longest first within sections of heads (TileInfo in the kernel), so that the
# CTAs running at once share their heads' K/V in the L2.  Under the dynamic schedule (d <= 128) a section
# holds the heads whose tiles make SECTION_WAVES waves of CTAs, within SECTION_HEADS query heads, and the
# sections are of one size (B H split evenly, whole GQA groups): a grid whose last section is a short
# remainder ends on its longest tiles with the other SMs idle, and sections of 8 heads or fewer lose the
# L2's sharing (validation/results/profile-small-batch-h100-2026-11-24/sections*.json, B N = 16384, N = 1024
# to 8192, d = 64 and 128, two runs: this rule within 2.1% of the best section size at every shape, the L2
# rule below 0.3% to 8% slower than it, sections of 64 heads and more slower than 32).
SECTION_WAVES = 2
SECTION_HEADS = (16, 32)
# The static schedule (d > 128): sections of heads whose K and V together take at most this share of the
# L2; below MIN_SECTION_HEADS heads per section all tiles go longest first over all heads.
L2_SECTION_SHARE = 0.4
# the largest head dim whose causal and varlen kernels take the dynamic schedule (FwdTraits::kDynamic,
# SM90_DYN_MAX in the header)
DYNAMIC_MAX_HEAD_DIM = 128
MIN_SECTION_HEADS = 8


def module(cfg, dtype: str, causal: bool, defines: tuple[str, ...] = (), varlen: bool = False,
           local: bool = False, mods: int = 0) -> compile.Module:
    """The compiled module of one variant (sm_90a); needs no GPU.  `varlen`: packed variable-length batches;
    `local`: a sliding window; `mods`: the score modifiers' bits (``kernels.score_mods``)."""
    return compile.build(codegen.sm90_unit([(cfg, dtype, causal, varlen, local, mods)]), ARCH, defines=defines,
                         label=FAMILY)


@functools.lru_cache(maxsize=None)
def _kernel(index: int, cfg, dtype: str, causal: bool, defines: tuple[str, ...], smem: int,
            varlen: bool = False, local: bool = False, mods: int = 0) -> driver.Kernel:
    return driver.kernel(index, module(cfg, dtype, causal, defines, varlen, local, mods),
                         codegen.sm90_kernel(cfg, dtype, causal, varlen, local, mods), smem)


def heads_per_section(B: int, H: int, H_kv: int, N_k: int, d: int, elem_bytes: int, l2_bytes: int,
                      m_blocks: int, sms: int) -> int:
    """Query heads per causal scheduling section (B * H: one section); `m_blocks` query tiles a head and
    `sms` CTAs a wave size the dynamic schedule's sections, the static schedule's are l2_section_heads'."""
    if d > DYNAMIC_MAX_HEAD_DIM:
        return l2_section_heads(B, H, H_kv, N_k, d, elem_bytes, l2_bytes)
    group, heads = H // H_kv, B * H   # two waves of tiles within SECTION_HEADS, sections of one size, whole groups
    lo, hi = SECTION_HEADS
    target = min(hi, max(lo, -(-SECTION_WAVES * sms // max(m_blocks, 1))))
    exact = [p for p in range(lo, hi + 1) if heads % p == 0 and p % group == 0]
    if exact:
        return min(exact, key=lambda p: abs(p - target))
    sections = max(1, round(heads / target))   # else the nearest even split
    per = -(-heads // sections)
    return min(heads, -(-per // group) * group)


def l2_section_heads(B: int, H: int, H_kv: int, N_k: int, d: int, elem_bytes: int, l2_bytes: int) -> int:
    """The L2 rule (the static schedule's, and every head dim's before 2026-11-24): the query heads whose K
    and V take at most L2_SECTION_SHARE of the L2; one section of all below MIN_SECTION_HEADS."""
    group, heads = H // H_kv, B * H
    kv_heads = int(L2_SECTION_SHARE * l2_bytes // max(2 * N_k * d * elem_bytes, 1))
    if kv_heads * group < MIN_SECTION_HEADS:
        return heads
    return max(1, min(heads, kv_heads * group))


def _tma_dims(t):
    """(dims innermost first, strides in bytes) of a (B, H, N, d) tensor, size-1 dims given a legal stride."""
    B, H, N, d = t.shape
    es = t.element_size()
    s_n = t.stride(2) * es if N > 1 else d * es
    s_h = t.stride(1) * es if H > 1 else N * s_n
    s_b = t.stride(0) * es if B > 1 else H * s_h
    return [d, N, H, B], [s_n, s_h, s_b]


def _tensor_maps(index: int, dtype: str, cfg, q, k, v) -> list:
    """TMA descriptors of Q (boxes of block_m rows) and K, V (boxes of block_n rows)."""
    maps = []
    for t, rows in ((q, cfg.block_m), (k, cfg.block_n), (v, cfg.block_n)):
        dims, strides_bytes = _tma_dims(t)
        maps.append(driver.tensor_map(index, dtype, t.data_ptr(), dims, strides_bytes, [TMA_BOX_COLS, rows, 1, 1]))
    return maps


_counters: dict[tuple[int, int], object] = {}


def _tile_counter(index: int, stream):
    """The dynamic schedule's tile counter for (device, stream), zeroed on that stream (one per
    stream, so kernels running at once on different streams never share one)."""
    import torch

    key = (index, stream.cuda_stream)
    c = _counters.get(key)
    if c is None:
        c = _counters[key] = torch.zeros(1, dtype=torch.int32, device=f"cuda:{index}")
    c.zero_()
    return c


def _outputs(q, shape: dict, return_lse: bool, out):
    """O (the caller's `out` when given: contiguous, of O's shape, dtype and device) and LSE or None."""
    import torch

    o_shape = (shape["B"], shape["H"], shape["N_q"], shape["d"])
    if out is None:
        out = runtime.empty(o_shape, q.dtype, q.device)
    elif tuple(out.shape) != o_shape or out.dtype != q.dtype or not out.is_contiguous() or out.device != q.device:
        raise ValueError(f"out must be a contiguous {q.dtype} tensor of shape {o_shape} on {q.device}")
    lse = runtime.empty(o_shape[:3], torch.float32, q.device) if return_lse else None
    return out, lse


def _section_heads(shape: dict, elem_bytes: int, l2_bytes: int, sections: int | None, block_m: int,
                   sms: int) -> int:
    B, H = shape["B"], shape["H"]
    if sections is None:
        sections = (heads_per_section(B, H, shape["H_kv"], shape["N_k"], shape["d"], elem_bytes, l2_bytes,
                                      -(-shape["N_q"] // block_m), sms) if shape["causal"] else B * H)
    return max(1, min(int(sections), B * H))


def attention(q, k, v, causal: bool = False, config=None, scale=None, return_lse: bool = False, out=None,
              _defines: tuple[str, ...] | None = None, _persistent=None, _sections: int | None = None, window=None,
              mods=None):
    """softmax(q k^T * scale [+ causal mask]) v on an sm_90 GPU.

    q: (B, H, N_q, d), k and v: (B, H_kv, N_k, d); bf16 or fp16; last dim contiguous, other strides
    multiples of 16 bytes (any layout, e.g. a (B, N, H, d) tensor transposed, is read in place through
    the TMA descriptor: no copy).  H % H_kv == 0.  causal: bottom-right aligned; a query row that sees
    no key gets O = 0 and LSE = -inf.  Returns O (B, H, N_q, d) in the input dtype, and with return_lse
    the natural-log LSE (B, H, N_q) float32.  ``out`` may be a preallocated contiguous output tensor.
    ``config``: an Sm90Config (or a dict of its fields); None asks the model (``iomodel.chooser``).
    ``window``: a ``kernels.window.Window``; ``mods``: a ``kernels.score_mods.ScoreMods`` (softcap, ALiBi).
    Private knobs (A/B runs): ``_defines`` compile-time switches (default DEFAULT_DEFINES),
    ``_persistent`` (default PERSISTENT), ``_sections`` query heads per causal scheduling section
    (default :func:`heads_per_section`).
    """
    call = prepare(FAMILY, q, k, v, causal, config, scale, window, mods)
    out, lse = _outputs(q, call.shape, return_lse, out)
    launch(q, k, v, out, lse, call.shape, call.config, call.device, call.smem, call.scale, _defines=_defines,
           _persistent=_persistent, _sections=_sections, window=window if window is not None and window.local else None,
           mods=mods)
    return (out, lse) if return_lse else out


def launch(q, k, v, out, lse, s: dict, cfg, dev: int, smem: int, scale: float, varlen=None,
           _defines=None, _persistent=None, _sections=None, window=None, mods=None) -> None:
    """One launch on checked inputs: q, k, v as (B, H, N, d) views (varlen: (1, H, total, d) views of the
    packed tensors, with ``varlen = (cu_seqlens_q, cu_seqlens_k, total_q)`` and s's N_q, N_k the longest
    sequences), O and LSE in the layout the variant writes; `mods` a ``kernels.score_mods.ScoreMods`` or None."""
    B, H, N_q = s["B"], s["H"], s["N_q"]
    defines = tuple(DEFAULT_DEFINES if _defines is None else _defines)
    mods = mods if mods is not None else NO_MODS
    kern = _kernel(dev, cfg, s["dtype"], s["causal"], defines, smem, varlen is not None, window is not None, mods.bits)
    props = driver.device_props(dev)
    num_tiles = -(-N_q // cfg.block_m) * H * B
    persistent = PERSISTENT if _persistent is None else bool(_persistent)
    grid = (min(num_tiles, props.multi_processor_count) if persistent else num_tiles, 1, 1)
    stream = driver.current_stream(dev)
    # causal and varlen kernels (d <= DYNAMIC_MAX_HEAD_DIM) hand out tiles from a counter, zeroed here in
    # stream order
    dynamic = (s["causal"] or varlen is not None) and s["d"] <= DYNAMIC_MAX_HEAD_DIM
    counter = _tile_counter(dev, stream) if dynamic else None
    i32 = ctypes.c_int
    cu_q, cu_k, total_q = varlen if varlen is not None else (None, None, 0)
    args = [*_tensor_maps(dev, s["dtype"], cfg, q, k, v), driver.ptr(out), driver.ptr(lse), i32(B), i32(H),
            i32(s["H_kv"]), i32(N_q), i32(s["N_k"]),
            ctypes.c_float(mods.softmax_scale(scale) * runtime.LOG2E),
            i32(_section_heads(s, q.element_size(), props.L2_cache_size, _sections, cfg.block_m,
                               props.multi_processor_count)), driver.ptr(counter),
            driver.ptr(cu_q), driver.ptr(cu_k), i32(total_q)]
    if window is not None:   # a sliding window (kernels.window.Window): the local variant's bounds
        args += [i32(x) for x in window.kernel_args()]
    if mods.bits:   # the score modifiers' variant: softcap_mul, the ALiBi slopes and their batch stride
        args += mods.kernel_args(scale)
    driver.launch(kern, grid, (cfg.threads, 1, 1), args, smem, stream)
