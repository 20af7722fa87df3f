"""FlashAttention forward for Hopper (family ``flash_sm90``, ``csrc/flash_fwd_sm90.cuh``): TMA + wgmma +
warp specialization.  Argument preparation and launch: the TMA descriptors of Q, K and V, the schedule
(``kernels.sm90_schedule``: sections, grid, tail split), the dynamic schedule's tile counter.  One module per
(config, dtype, causal, compile-time switches), built for sm_90a.
"""
from __future__ import annotations

import ctypes
import functools

from iomodel.families.flash_sm90 import tile_row

from . import codegen, compile, driver, plans, runtime
from .dispatch import prepare
from .score_mods import NO_MODS, mods_key
from .sm90_schedule import (CLUSTER, DEFAULT_DEFINES, DYNAMIC_FULL, DYNAMIC_MAX_HEAD_DIM, NO_SPLIT,  # noqa: F401
                            PERSISTENT, STATIC_SCHEDULE, WIDE_DYNAMIC, WIDE_DYNAMIC_SPILLING, heads_per_section,
                            l2_section_heads, lpt_order, schedule, schedule_defines, tail_split)

# (the schedule's names re-exported: the launcher's A/B knobs and the probes name them here)
__all__ = ["FAMILY", "ARCH", "attention", "plan", "Launch", "launch", "module", "heads_per_section", "l2_section_heads",
           "schedule_defines", "tail_split", "PERSISTENT", "DEFAULT_DEFINES", "STATIC_SCHEDULE", "NO_SPLIT",
           "WIDE_DYNAMIC", "WIDE_DYNAMIC_SPILLING", "DYNAMIC_MAX_HEAD_DIM", "DYNAMIC_FULL", "CLUSTER"]

FAMILY = "flash_sm90"
ARCH = "sm_90a"
TMA_BOX_COLS = 64    # a TMA box row is at most 64 elements = 128 bytes, one SWIZZLE_128B atom row
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


def _order_table(s: dict, cfg, ctas: int, sections: int, device, window=None):
    """The lpt walk's tile table on the device (sm90_schedule.lpt_order), kept by the plan; one a shape and window
    (the table depends on the sizes alone), so that signatures differing in strides, or calls past a full plan
    cache, share it and the host pass."""
    shape = tuple(s[k] for k in ("B", "H", "N_q", "N_k", "d"))
    return _shape_table(shape, cfg.block_m, cfg.block_n, ctas, sections, str(device), window)


@functools.lru_cache(maxsize=16)
def _shape_table(shape: tuple, block_m: int, block_n: int, ctas: int, sections: int, device: str, window=None):
    import torch

    s = dict(zip(("B", "H", "N_q", "N_k", "d"), shape))
    return torch.tensor(lpt_order(s, block_m, block_n, ctas, sections, window), dtype=torch.int32, device=device)


def _tma_dims(t):
    """(dims innermost first, strides in bytes) of a (B, H, N, d) tensor, size-1 dims given a legal stride."""
    B, H, N, d = t.shape
    es = t.element_size()
    s_n = t.stride(2) * es if N > 1 else d * es
    s_h = t.stride(1) * es if H > 1 else N * s_n
    s_b = t.stride(0) * es if B > 1 else H * s_h
    return [d, N, H, B], [s_n, s_h, s_b]


def _tensor_map_slots(dtype: str, cfg, q, k, v, cluster: int = 1) -> list:
    """TMA descriptors of Q (boxes of block_m rows) and K, V (boxes of block_n rows, or of a CTA's share of them in
    a cluster of `cluster` CTAs), addresses unset."""
    slots, cols = [], min(tile_row(cfg.head_dim), TMA_BOX_COLS)   # a box row is a swizzle row: 64 or 128 bytes
    for t, rows in ((q, cfg.block_m), (k, cfg.block_n // cluster), (v, cfg.block_n // cluster)):
        dims, strides_bytes = _tma_dims(t)
        slots.append(driver.TensorMapSlot(dtype, dims, strides_bytes, [cols, rows, 1, 1], swizzle_bytes=2 * cols))
    return slots


class TileCounters:
    """The dynamic schedule's tile counters (int32), one a stream: a launch leaves its counter at zero
    (``claim_tile`` in the kernel), so a counter is zeroed once, when made, and kernels running at once on
    different streams never share one.  Under CUDA-graph capture a fresh one a capture (zeroed in the graph),
    kept alive as long as this object: a graph replayed on another stream must not share an eager stream's."""

    def __init__(self, index: int):
        self.index = index
        self._streams: dict[int, object] = {}
        self._captured: list = []

    def pointer(self, stream: int, n: int = 1) -> int:
        """At least `n` zeroed ints for a launch on `stream` (the tail split's arrival counters: one a warp of
        each split tile, which its kernel also leaves at zero)."""
        import torch

        if torch.cuda.is_current_stream_capturing():
            c = torch.zeros(n, dtype=torch.int32, device=f"cuda:{self.index}")
            self._captured.append(c)
            return c.data_ptr()
        c = self._streams.get(stream)
        if c is None or c.numel() < n:
            c = self._streams[stream] = torch.zeros(n, dtype=torch.int32, device=f"cuda:{self.index}")
        return c.data_ptr()


@functools.cache
def _tile_counters(index: int) -> TileCounters:
    """The device's tile counters."""
    return TileCounters(index)


def _outputs(q, shape: dict, return_lse: bool, out):
    """O (the caller's `out` when given: contiguous, of O's shape, dtype and device) and LSE or None."""
    import torch

    o_shape = (shape["B"], shape["H"], shape["N_q"], shape["d"])
    if out is None:
        out = runtime.empty(o_shape, q.dtype, q.device)
    elif (tuple(out.shape) != o_shape or out.dtype != q.dtype or not out.is_contiguous() or out.device != q.device
          or out.data_ptr() % 16):   # (the kernel stores O's rows 16 bytes at a time)
        raise ValueError(f"out must be a contiguous {q.dtype} tensor of shape {o_shape} on {q.device}, starting at a "
                         f"16-byte aligned address")
    lse = runtime.empty(o_shape[:3], torch.float32, q.device) if return_lse else None
    return out, lse


def attention(q, k, v, causal: bool = False, config=None, scale=None, return_lse: bool = False, out=None,
              _defines: tuple[str, ...] | None = None, _persistent=None, _sections: int | None = None, window=None,
              mods=None, _pieces: int | None = None):
    """softmax(q k^T * scale [+ causal mask]) v on an sm_90 GPU.

    q: (B, H, N_q, d), k and v: (B, H_kv, N_k, d); bf16 or fp16; last dim contiguous, other strides
    multiples of 16 bytes (any layout, e.g. a (B, N, H, d) tensor transposed, is read in place through
    the TMA descriptor: no copy).  H % H_kv == 0.  causal: bottom-right aligned; a query row that sees
    no key gets O = 0 and LSE = -inf.  Returns O (B, H, N_q, d) in the input dtype, and with return_lse
    the natural-log LSE (B, H, N_q) float32.  ``out`` may be a preallocated contiguous output tensor.
    ``config``: an Sm90Config (or a dict of its fields); None asks the model (``iomodel.chooser``).
    ``window``: a ``kernels.window.Window``; ``mods``: a ``kernels.score_mods.ScoreMods`` (softcap, ALiBi).
    Private knobs (A/B runs): ``_defines`` compile-time switches, ``_persistent`` and ``_sections`` the grid and
    the query heads per causal scheduling section (default: the rules of ``kernels.sm90_schedule.schedule``, which
    names the knobs' values: e.g. CLUSTER for the plain kernel's long tiles), ``_pieces`` the tail split's
    pieces (default :func:`tail_split`'s).
    The checks and the launch's arguments are built once a call signature (``kernels.plans``).
    """
    window = window if window is not None and window.local else None
    sig = plans.key(FAMILY, (q, k, v), causal, config, scale, window, mods_key(mods), _defines, _persistent,
                    _sections, _pieces)
    run = plans.lookup(sig, (("q", q), ("k", k), ("v", v)))
    if run is None:
        run = plan(q, k, v, causal, config, scale, window, mods, _defines, _persistent, _sections, _pieces)
        plans.store(sig, run)
    o, lse = run(q, k, v, return_lse, out)
    return (o, lse) if return_lse else o


def plan(q, k, v, causal: bool = False, config=None, scale=None, window=None, mods=None, _defines=None,
         _persistent=None, _sections=None, _pieces=None) -> "Launch":
    """The checked launch of a call's signature (its arguments as :func:`attention`'s)."""
    call = prepare(FAMILY, q, k, v, causal, config, scale, window, mods)
    return Launch(q, k, v, call.shape, call.config, call.device, call.smem, call.scale, _defines=_defines,
                  _persistent=_persistent, _sections=_sections,
                  window=window if window is not None and window.local else None, mods=mods, _pieces=_pieces)


class Launch:
    """One signature's launch, built once from checked inputs: the kernel, the grid, the arguments (the TMA
    descriptors encoded again only when a tensor moves); a call allocates the outputs and launches.

    q, k, v as (B, H, N, d) views (varlen: (1, H, total, d) views of the packed tensors, with
    ``varlen = (cu_seqlens_q, cu_seqlens_k, total_q)`` and s's N_q, N_k the longest sequences); `mods` a
    ``kernels.score_mods.ScoreMods`` or None; O and LSE in the layout the variant writes."""

    def __init__(self, q, k, v, s: dict, cfg, dev: int, smem: int, scale: float, varlen=None, _defines=None,
                 _persistent=None, _sections=None, window=None, mods=None, _pieces=None):
        B, H, N_q = s["B"], s["H"], s["N_q"]
        props = driver.device_props(dev)
        sms = props.multi_processor_count
        mods = mods if mods is not None else NO_MODS
        sch = schedule(s, cfg.block_m, sms, props.L2_cache_size, q.element_size(), window, varlen is not None,
                       _defines, _persistent, _sections, cfg, bool(mods.bits))
        defines, persistent = sch.defines, sch.persistent
        num_tiles = -(-N_q // cfg.block_m) * H * B
        # causal and varlen kernels (d <= DYNAMIC_MAX_HEAD_DIM, not built for the static walk) hand out tiles
        # from a counter
        dynamic = (s["causal"] or varlen is not None or DYNAMIC_FULL in defines) and not sch.static
        splits = codegen.sm90_splits(s["causal"], varlen is not None, window is not None, mods.bits)
        # a cluster kernel's units are pairs of tiles, walked by pairs of CTAs (FwdTraits::kCluster)
        cluster = _cluster_size(defines, splits and not dynamic, -(-N_q // cfg.block_m), cfg)
        kern = _kernel(dev, cfg, s["dtype"], s["causal"], defines, smem, varlen is not None, window is not None,
                       mods.bits)
        units, walkers = num_tiles // cluster, sms
        if cluster > 1:   # the clusters resident at once (the GPCs' SM counts bound them)
            walkers = min(sms // cluster, driver.max_active_clusters(kern, cluster * min(units, sms // cluster),
                                                                     cfg.threads, smem))
            if walkers < 1:
                raise RuntimeError(f"no cluster of {cluster} CTAs of {smem} bytes of SMEM fits this device")
        whole, pieces = (tail_split(units, walkers, -(-s["N_k"] // cfg.block_n), _pieces)
                         if splits and persistent and not dynamic and NO_SPLIT not in defines else (units, 1))
        items = whole + (units - whole) * pieces
        grid = (cluster * (min(items, walkers) if persistent else units), 1, 1)
        self.shape, self.device, self.pieces, self.dynamic, self.schedule = s, dev, pieces, dynamic, sch
        # the split tiles' partial rows (a slot of d / 2 + 4 floats a consumer thread a piece) and arrival
        # counters (one a consumer warp a split tile), the counters zeroed once and left at zero by the kernel
        self.part_floats = (items - whole) * cluster * (cfg.head_dim // 2 + 4) * 128 * cfg.consumers
        self.split_counts = (units - whole) * cluster * 4 * cfg.consumers
        self.counters = _tile_counters(dev) if dynamic or pieces > 1 else None
        self.maps = _tensor_map_slots(s["dtype"], cfg, q, k, v, cluster)
        self.order = _order_table(s, cfg, grid[0], sch.sections, q.device, window) if sch.lpt else None
        self.out, self.lse, self.counter, self.cu_q, self.cu_k = (ctypes.c_void_p() for _ in range(5))
        i32 = ctypes.c_int
        total_q = varlen[2] if varlen is not None else 0
        args = [*(m.map for m in self.maps), self.out, self.lse, i32(B), i32(H), i32(s["H_kv"]), i32(N_q),
                i32(s["N_k"]), ctypes.c_float(mods.softmax_scale(scale) * runtime.LOG2E),
                i32(sch.sections), self.counter, ctypes.c_void_p(self.order.data_ptr() if sch.lpt else None),
                self.cu_q, self.cu_k, i32(total_q)]
        if window is not None:   # a sliding window (kernels.window.Window): the local variant's bounds
            args += [i32(x) for x in window.kernel_args()]
        if mods.bits:   # the score modifiers' variant: softcap_mul, the ALiBi slopes and their batch stride
            args += mods.kernel_args(scale)
        self.part, self.count = ctypes.c_void_p(), ctypes.c_void_p()
        if splits:   # the plain variant: the tail split's whole, pieces and workspace
            args += [i32(whole), i32(pieces), self.part, self.count]
        self.prepared = driver.Prepared(kern, grid, (cfg.threads, 1, 1), smem, 0, args)

    def __call__(self, q, k, v, return_lse: bool = False, out=None):
        """(O, LSE or None) of tensors of the plan's signature: O allocated (or the caller's `out`, checked),
        the LSE allocated when asked."""
        out, lse = _outputs(q, self.shape, return_lse, out)
        self.launch_into(q, k, v, out, lse)
        return out, lse

    def launch_into(self, q, k, v, out, lse, cu_q=None, cu_k=None) -> None:
        """Launch on these tensors and outputs (`lse` None: not written; `cu_q`, `cu_k`: a varlen batch's)."""
        for slot, t in zip(self.maps, (q, k, v)):
            slot.set(t.data_ptr())
        stream = driver.current_stream_handle(self.device)
        self.out.value = out.data_ptr()
        self.lse.value = lse.data_ptr() if lse is not None else None
        self.counter.value = self.counters.pointer(stream) if self.dynamic else None
        if self.pieces > 1:   # (never with the dynamic schedule: the counter and these never share a launch)
            import torch

            part = runtime.empty((self.part_floats,), torch.float32, q.device)
            self.part.value = part.data_ptr()
            self.count.value = self.counters.pointer(stream, self.split_counts)
        self.cu_q.value = cu_q.data_ptr() if cu_q is not None else None
        self.cu_k.value = cu_k.data_ptr() if cu_k is not None else None
        self.prepared.launch(stream)


def _cluster_size(defines, plain_walk: bool, num_m: int, cfg) -> int:
    """CTAs a cluster: 2 for a build with CLUSTER (the plain kernel's fixed walk, heads of an even number of query
    tiles), else 1."""
    if CLUSTER not in defines:
        return 1
    if not plain_walk:
        raise ValueError(f"{CLUSTER} is for the plain kernel's fixed walk (no mask, window, modifier or varlen batch, "
                         f"not {DYNAMIC_FULL})")
    if num_m % 2:
        raise ValueError(f"{CLUSTER} pairs a head's query tiles: N_q needs an even number of {cfg.block_m}-row tiles, "
                         f"not {num_m}")
    return 2


def launch(q, k, v, out, lse, s: dict, cfg, dev: int, smem: int, scale: float, varlen=None,
           _defines=None, _persistent=None, _sections=None, window=None, mods=None) -> None:
    """One launch on checked inputs, without a plan kept (:class:`Launch`'s arguments)."""
    run = Launch(q, k, v, s, cfg, dev, smem, scale, varlen, _defines, _persistent, _sections, window, mods)
    cu_q, cu_k = (varlen[0], varlen[1]) if varlen is not None else (None, None)
    run.launch_into(q, k, v, out, lse, cu_q, cu_k)
