"""FlashAttention forward for Hopper (family ``flash_sm90``, ``csrc/flash_fwd_sm90.cuh``): TMA + wgmma +
warp specialization.  Argument preparation and launch: the TMA descriptors of Q, K and V, the causal
scheduling sections, the dynamic schedule's tile counter and the persistent grid.  One module per
(config, dtype, causal, compile-time switches), built for sm_90a.
"""
from __future__ import annotations

import ctypes
import functools

from . import codegen, compile, driver, plans, runtime
from .dispatch import prepare
from .score_mods import NO_MODS, mods_key

__all__ = ["FAMILY", "ARCH", "attention", "plan", "Launch", "launch", "module", "heads_per_section", "l2_section_heads",
           "schedule_defines", "tail_split", "PERSISTENT", "DEFAULT_DEFINES", "STATIC_SCHEDULE", "NO_SPLIT",
           "WIDE_DYNAMIC"]

FAMILY = "flash_sm90"
ARCH = "sm_90a"
TMA_BOX_COLS = 64    # a TMA box row is 64 elements = 128 bytes, one SWIZZLE_128B atom row
# Launch a persistent grid (min(#tiles, #SMs) CTAs walking the tiles) by default.
PERSISTENT = True
# Compile-time switches used by default: none.  Available: SM90_STATIC_SCHEDULE (flash_fwd_sm90.cuh,
# FwdTraits), SM90_WATCHDOG (sm90_common.cuh, mbar_wait), and for A/B runs SM90_DYNAMIC_FULL (the claims
# without a mask too) and SM90_UNROTATED (the non-causal fixed list without its rotation, tile_of_round).
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
# ... and no more heads than their K and V fit in this share of the L2: at long sequences a section of 16 heads
# holds more K and V than the L2 (128 MB at d = 128 N = 16384), and the CTAs re-read them from DRAM (ncu on the
# H200: 4x FlashAttention-4's DRAM bytes, L2 hit rate 79% against its 96%; at the 700 W cap the kernel ran at a
# 7 to 8% lower SM clock than FlashAttention-4 though it took 4% fewer cycles at one clock).  Sections whose K and V
# take 34 MB (4 heads there, 2 at N = 32768, 8 at d = 64 N = 16384 or d = 128 N = 8192) ran 1.6 to 4.3% faster at
# N >= 16384 and 1% at N = 8192; half or twice that many heads 0.8 to 2.6% slower than the best
# (validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/, sections.json, ncu/, power-causal.json).
L2_DYNAMIC_SHARE = 2 / 3
# The static schedule (d > 128): sections of heads whose K and V together take at most this share of the
# L2; below MIN_SECTION_HEADS heads per section all tiles go longest first over all heads.
L2_SECTION_SHARE = 0.4
# the largest head dim whose causal and varlen kernels take the dynamic schedule (FwdTraits::kDynamic,
# SM90_DYN_MAX in the header)
DYNAMIC_MAX_HEAD_DIM = 128
# The static walk's switch, and the sliding windows that take it: a window with a right bound (the causal
# flag) whose band the sequence's start cuts for at most this share of the query rows has tiles of one
# length but for those, and the static walk ran such windows 3.5 to 8.5% faster than the dynamic schedule's
# claims (validation/results/profile-window-h100-2026-11-25/: (4096, 0) at N = 32768 6.4-8.5% over three
# configs; cut for 6 to 50% of the rows at d 64 and 128, N 8192 and 32768: 0.4 to 8.5% faster; the one
# loss, 1.9%, a (512, 0) window at N = 4096 with 64-key chunks).  Plain causal attention (every row cut)
# keeps the dynamic schedule, which balances its unequal tiles.
STATIC_SCHEDULE = "SM90_STATIC_SCHEDULE"
DYNAMIC_FULL = "SM90_DYNAMIC_FULL"   # A/B runs: the claims without a mask too (they need the counter)
NO_SPLIT = "SM90_NO_SPLIT"   # A/B runs: the plain kernel built without the tail split (FwdTraits::kSplit)
WINDOW_STATIC_CUT_SHARE = 0.5
# Above DYNAMIC_MAX_HEAD_DIM a plain causal kernel takes the static walk where l2_section_heads gives one section of
# every head (its snake order then balances one longest-first list), and otherwise the dynamic schedule with
# heads_per_section's sections (this switch, raising the header's bound): cut into sections, the static walk's rounds
# straddle them and idle.  H200, validation/results/profile-sm90-tail-split-h200-2026-11-28/ (wide-dynamic.json,
# wide-verify.json): where the L2 rule cut sections (d = 192 N = 1024 to 4096, d = 256 N = 2048) the static walk took
# 7 to 30% longer than the dynamic schedule and ran at 0.83x to 0.995x cuDNN's speed, the dynamic one at 1.06x to
# 1.13x; at the one-section shapes (d = 192 / 256 N >= 8192) the dynamic schedule was within 0.4% (d = 192) and 2.4
# to 3.6% slower (d = 256) than the static walk, which keeps them.
WIDE_DYNAMIC = "SM90_DYN_MAX=256"
# ... but for the configs whose build with it spills (nvcc 13.0, sm_90a: 12 bytes; tests/kernels/test_build_sm90.py)
WIDE_DYNAMIC_SPILLING = ("m128n64s2d256c2",)
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
                      m_blocks: int, sms: int, dynamic: bool | None = None) -> int:
    """Query heads per causal scheduling section (B * H: one section); `m_blocks` query tiles a head and
    `sms` CTAs a wave size the dynamic schedule's sections, the static schedule's are l2_section_heads'.
    `dynamic`: whether the launch takes the dynamic schedule (None: the head dim's default, d <= DYNAMIC_MAX_HEAD_DIM)."""
    if not (d <= DYNAMIC_MAX_HEAD_DIM if dynamic is None else dynamic):
        return l2_section_heads(B, H, H_kv, N_k, d, elem_bytes, l2_bytes)
    group, heads = H // H_kv, B * H   # two waves of tiles within SECTION_HEADS, sections of one size, whole groups
    lo, hi = SECTION_HEADS
    target = min(hi, max(lo, -(-SECTION_WAVES * sms // max(m_blocks, 1))))
    exact = [p for p in range(lo, hi + 1) if heads % p == 0 and p % group == 0]
    if exact:
        per = min(exact, key=lambda p: abs(p - target))
    else:
        per = _even_split(heads, max(1, round(heads / target)), group)   # else the nearest even split
    # the L2's cap: the query heads whose K and V fit its share, whole groups (one group at least)
    cap = max(1, int(L2_DYNAMIC_SHARE * l2_bytes // max(2 * N_k * d * elem_bytes, 1))) * group
    if per <= cap:
        return per
    fits = [p for p in range(group, cap + 1, group) if heads % p == 0]   # sections of one size, if not too small
    if fits and 2 * fits[-1] >= cap:
        return fits[-1]
    return _even_split(heads, -(-heads // cap), group)   # else the fewest sections under the cap, split evenly


def _even_split(heads: int, sections: int, group: int) -> int:
    """The heads of each of `sections` sections of `heads` split as evenly as whole groups of `group` allow."""
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


def tail_split(tiles: int, sms: int, chunks: int, pieces: int | None = None) -> tuple[int, int]:
    """(whole, pieces) of a persistent grid of `tiles` equal tiles of `chunks` key chunks on `sms` SMs: tiles
    0 .. whole - 1 run whole, each of the others (its last round's) as `pieces` pieces (split_item in the kernel).
    The count is the model's (``iomodel.perf.tail_pieces`` over the family's plan), so kernel and model agree;
    `pieces` given (A/B runs) splits the same last round into that many (1: none)."""
    rem = tiles % sms
    if pieces is None:
        from iomodel.families import get   # (sympy's import with it: only where a launch plan is made)
        from iomodel.perf import tail_pieces

        plan = get(FAMILY).plan
        pieces = tail_pieces(tiles, sms, chunks, plan.tail_overhead_steps, plan.tail_pieces_max)[0]
    pieces = max(1, min(int(pieces), chunks))
    return (tiles - rem, pieces) if rem and pieces > 1 else (tiles, 1)


def _tma_dims(t):
    """(dims innermost first, strides in bytes) of a (B, H, N, d) tensor, size-1 dims given a legal stride."""
    B, H, N, d = t.shape
    es = t.element_size()
    s_n = t.stride(2) * es if N > 1 else d * es
    s_h = t.stride(1) * es if H > 1 else N * s_n
    s_b = t.stride(0) * es if B > 1 else H * s_h
    return [d, N, H, B], [s_n, s_h, s_b]


def _tensor_map_slots(dtype: str, cfg, q, k, v) -> list:
    """TMA descriptors of Q (boxes of block_m rows) and K, V (boxes of block_n rows), addresses unset."""
    slots = []
    for t, rows in ((q, cfg.block_m), (k, cfg.block_n), (v, cfg.block_n)):
        dims, strides_bytes = _tma_dims(t)
        slots.append(driver.TensorMapSlot(dtype, dims, strides_bytes, [TMA_BOX_COLS, rows, 1, 1]))
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


def _section_heads(shape: dict, elem_bytes: int, l2_bytes: int, sections: int | None, block_m: int,
                   sms: int, static: bool) -> int:
    B, H = shape["B"], shape["H"]
    if sections is None and not shape["causal"]:
        sections = B * H
    elif sections is None and static:
        sections = l2_section_heads(B, H, shape["H_kv"], shape["N_k"], shape["d"], elem_bytes, l2_bytes)
    elif sections is None:
        sections = heads_per_section(B, H, shape["H_kv"], shape["N_k"], shape["d"], elem_bytes, l2_bytes,
                                     -(-shape["N_q"] // block_m), sms, dynamic=True)
    return max(1, min(int(sections), B * H))


def schedule_defines(s: dict, window=None, varlen: bool = False, l2_bytes: int | None = None,
                     elem_bytes: int = 2, cfg=None) -> tuple[str, ...]:
    """The compile-time switches of a launch: DEFAULT_DEFINES, with the static walk for a window of equal
    tiles (WINDOW_STATIC_CUT_SHARE), and the dynamic schedule for a plain causal kernel above
    DYNAMIC_MAX_HEAD_DIM whose static walk would cut its tiles into sections (WIDE_DYNAMIC; given the L2's
    `l2_bytes` and a `cfg` not in WIDE_DYNAMIC_SPILLING); `window` a ``kernels.window.Window`` or None."""
    if (s["causal"] and window is None and not varlen and s["d"] > DYNAMIC_MAX_HEAD_DIM and l2_bytes
            and (cfg is None or cfg.name not in WIDE_DYNAMIC_SPILLING)
            and l2_section_heads(s["B"], s["H"], s["H_kv"], s["N_k"], s["d"], elem_bytes, l2_bytes) < s["B"] * s["H"]):
        return (*DEFAULT_DEFINES, WIDE_DYNAMIC)
    if window is None or varlen or not s["causal"] or s["d"] > DYNAMIC_MAX_HEAD_DIM:
        return DEFAULT_DEFINES
    # bottom-right aligned: row i's band starts at key i + N_k - N_q - left, cut by key 0 below this row
    cut = window.left - (s["N_k"] - s["N_q"]) if window.left >= 0 else s["N_q"]
    if max(cut, 0) <= WINDOW_STATIC_CUT_SHARE * s["N_q"]:
        return (*DEFAULT_DEFINES, STATIC_SCHEDULE)
    return DEFAULT_DEFINES


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
    Private knobs (A/B runs): ``_defines`` compile-time switches (default DEFAULT_DEFINES),
    ``_persistent`` (default PERSISTENT), ``_sections`` query heads per causal scheduling section
    (default :func:`heads_per_section`), ``_pieces`` the tail split's pieces (default :func:`tail_split`'s).
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
        defines = tuple(schedule_defines(s, window, varlen is not None, props.L2_cache_size, q.element_size(), cfg)
                        if _defines is None else _defines)
        static = STATIC_SCHEDULE in defines or (s["d"] > DYNAMIC_MAX_HEAD_DIM and WIDE_DYNAMIC not in defines)
        mods = mods if mods is not None else NO_MODS
        kern = _kernel(dev, cfg, s["dtype"], s["causal"], defines, smem, varlen is not None, window is not None,
                       mods.bits)
        num_tiles = -(-N_q // cfg.block_m) * H * B
        persistent = PERSISTENT if _persistent is None else bool(_persistent)
        # causal and varlen kernels (d <= DYNAMIC_MAX_HEAD_DIM, not built for the static walk) hand out tiles
        # from a counter
        dynamic = (s["causal"] or varlen is not None or DYNAMIC_FULL in defines) and not static
        splits = codegen.sm90_splits(s["causal"], varlen is not None, window is not None, mods.bits)
        sms = props.multi_processor_count
        whole, pieces = (tail_split(num_tiles, sms, -(-s["N_k"] // cfg.block_n), _pieces)
                         if splits and persistent and not dynamic and NO_SPLIT not in defines else (num_tiles, 1))
        items = whole + (num_tiles - whole) * pieces
        grid = (min(items, sms) if persistent else num_tiles, 1, 1)
        self.shape, self.device, self.pieces, self.dynamic = s, dev, pieces, dynamic
        # the split tiles' partial rows (a slot of d / 2 + 4 floats a consumer thread a piece) and arrival
        # counters (one a consumer warp a split tile), the counters zeroed once and left at zero by the kernel
        self.part_floats = (items - whole) * (cfg.head_dim // 2 + 4) * 128 * cfg.consumers
        self.split_counts = (num_tiles - whole) * 4 * cfg.consumers
        self.counters = _tile_counters(dev) if dynamic or pieces > 1 else None
        self.maps = _tensor_map_slots(s["dtype"], cfg, q, k, v)
        self.out, self.lse, self.counter, self.cu_q, self.cu_k = (ctypes.c_void_p() for _ in range(5))
        i32 = ctypes.c_int
        total_q = varlen[2] if varlen is not None else 0
        args = [*(m.map for m in self.maps), self.out, self.lse, i32(B), i32(H), i32(s["H_kv"]), i32(N_q),
                i32(s["N_k"]), ctypes.c_float(mods.softmax_scale(scale) * runtime.LOG2E),
                i32(_section_heads(s, q.element_size(), props.L2_cache_size, _sections, cfg.block_m,
                                   props.multi_processor_count, static)), self.counter, self.cu_q, self.cu_k, i32(total_q)]
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


def launch(q, k, v, out, lse, s: dict, cfg, dev: int, smem: int, scale: float, varlen=None,
           _defines=None, _persistent=None, _sections=None, window=None, mods=None) -> None:
    """One launch on checked inputs, without a plan kept (:class:`Launch`'s arguments)."""
    run = Launch(q, k, v, s, cfg, dev, smem, scale, varlen, _defines, _persistent, _sections, window, mods)
    cu_q, cu_k = (varlen[0], varlen[1]) if varlen is not None else (None, None)
    run.launch_into(q, k, v, out, lse, cu_q, cu_k)
