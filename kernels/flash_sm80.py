"""FlashAttention forward with the mma.sync kernel (family ``flash_sm80``, ``csrc/flash_fwd_sm80.cuh``):
argument preparation and launch.  One module per (config, dtype, causal), built for the device's own
architecture."""
from __future__ import annotations

import ctypes
import functools
import math

from iomodel.families.flash_sm80 import FAMILY as MODEL, FlashConfig
from iomodel.limits import GRID_YZ_MAX

from . import codegen, compile, driver, plans, runtime
from .dispatch import prepare
from .score_mods import NO_MODS, mods_key
from .window import UNBOUNDED

__all__ = ["FAMILY", "attention", "plan", "Launch", "module", "kernel", "causal_section_heads", "tail_split",
           "SPLIT_SPILLING"]

FAMILY = "flash_sm80"
HEADER = "flash_fwd_sm80.cuh"


#: the kernel's (win_left, win_right) when it has no window (its IS_LOCAL variant alone reads them)
NO_WINDOW = (UNBOUNDED, 0)


def module(cfg, dtype: str, causal: bool, arch: str, varlen: bool = False, local: bool = False,
           mods: int = 0, split: bool = False, defines: tuple[str, ...] = ()) -> compile.Module:
    """The compiled module of one variant for `arch` (``sm_80``, ``sm_90``, ...); needs no GPU.  `varlen`:
    the packed variable-length form (``kernels.varlen``); `local`: the sliding-window form; `mods`: the
    score modifiers' bits (``kernels.score_mods``); `split`: the tail split's grid, with its merge kernel;
    `defines`: compile-time switches of an A/B build (the probes' ``validation.probe_record.sm80_build``)."""
    names = (codegen.flash_sm80_kernel(cfg, dtype, causal, varlen, local, mods, split),)
    if split:
        names += (codegen.flash_sm80_merge_kernel(cfg, dtype),)
    return compile.build(f'#include "{HEADER}"\n', arch, names=names, defines=tuple(defines), label=FAMILY,
                         flags=compile.MMA_SYNC_FLAGS)


@functools.lru_cache(maxsize=None)
def kernel(index: int, cfg, dtype: str, causal: bool, smem: int, varlen: bool = False,
           local: bool = False, mods: int = 0, split: bool = False) -> driver.Kernel:
    """The loaded kernel of one variant on device `index`."""
    arch = compile.nvrtc_arch(driver.capability(index))
    return driver.kernel(index, module(cfg, dtype, causal, arch, varlen, local, mods, split),
                         codegen.flash_sm80_kernel(cfg, dtype, causal, varlen, local, mods, split), smem)


@functools.lru_cache(maxsize=None)
def merge_kernel(index: int, cfg, dtype: str) -> driver.Kernel:
    """The tail split's merge kernel of a config on device `index` (in the split variant's module)."""
    arch = compile.nvrtc_arch(driver.capability(index))
    return driver.kernel(index, module(cfg, dtype, False, arch, split=True),
                         codegen.flash_sm80_merge_kernel(cfg, dtype), 0)


#: Configs whose tail-split variant spills (sm_80, nvcc 13.0: 20 bytes; tests/kernels/test_build_variants.py): their
#: launches keep the plain grid, a whole last wave (the model, which splits every config alike, is that much
#: optimistic there).
SPLIT_SPILLING = (FlashConfig(256, 64, 4, 3, 32),)
#: the merge kernel's threads (a warp a row)
MERGE_THREADS = 256


def tail_split(blocks: int, slots: int, steps: int) -> int:
    """The pieces each tile of the grid's last partial wave runs as (1: no split): ``iomodel.perf.tail_pieces``
    over the family's plan, `blocks` tiles of `steps` key chunks each, `slots` resident at a time, as the model
    counts them."""
    from iomodel.perf import tail_pieces   # (sympy's import with it: only where a launch plan is made)

    plan = MODEL.plan
    return tail_pieces(blocks, slots, steps, plan.tail_overhead_steps, plan.tail_pieces_max)[0]


def attention(q, k, v, causal: bool = False, config=None, scale=None, return_lse: bool = False, window=None,
              mods=None):
    """softmax(scale * q k^T [+ causal mask]) v with the mma.sync FlashAttention kernel.

    q: (B, H, N_q, d); k, v: (B, H_kv, N_k, d); bf16 or fp16 CUDA tensors with stride 1 in the last
    dim (other strides arbitrary multiples of 8).  H % H_kv == 0 (query head h reads kv head
    h // (H // H_kv)).  causal: query i sees keys j <= i + N_k - N_q (bottom-right aligned); a row
    that sees no key gets O = 0 and L = -inf.  config: a FlashConfig or a dict of its fields; None
    asks the model (``iomodel.chooser``).  Returns O (B, H, N_q, d) in the input dtype, and with
    return_lse=True also L (B, H, N_q) float32, the natural-log log-sum-exp of the scaled scores.
    window: a ``kernels.window.Window`` (FlashAttention's window_size with causal folded in; it replaces
    `causal`): query i sees keys i + N_k - N_q - left .. i + N_k - N_q + right.  mods: a
    ``kernels.score_mods.ScoreMods`` (softcap, ALiBi slopes) or None.  The checks and the launch's
    arguments are built once a call signature (``kernels.plans``).
    """
    window = window if window is not None and window.local else None
    sig = plans.key(FAMILY, (q, k, v), causal, config, scale, window, mods_key(mods))
    run = plans.lookup(sig, (("q", q), ("k", k), ("v", v)))
    if run is None:
        run = plan(q, k, v, causal, config, scale, window, mods)
        plans.store(sig, run)
    o, lse = run(q, k, v, return_lse)
    return (o, lse) if return_lse else o


#: A causal section holds the heads whose query tiles make about this many waves of the GPU's resident
#: blocks: its tiles start longest first across its heads, so the short ones fill each section's end.
#: H100, B N = 16384, d 64 and 128, N 1024 to 16384 (validation/results/profile-sm80-fwd-h100-2026-11-25/
#: sections.json): the order before (one head's tiles after another's) 4.0 to 8.2% slower than one wave,
#: two waves within 0.4% of it from N = 4096 and 1.6 to 5.3% slower at N = 1024, all heads in one section
#: 2.0 to 12% slower (every head's K/V wanted from the L2 at once).
SECTION_WAVES = 1


def causal_section_heads(heads: int, group: int, m_blocks: int, slots: int) -> int:
    """(batch, head) pairs a section of the causal grid: a divisor of `heads` (B H; a multiple of the GQA
    `group` where one is, so a section reads whole K/V heads), the nearest to SECTION_WAVES waves of
    `slots` resident blocks over `m_blocks` query tiles a head (the smaller of two as near)."""
    target = max(1, -(-SECTION_WAVES * slots // max(m_blocks, 1)))
    divisors = [p for p in range(1, heads + 1) if heads % p == 0 and heads // p <= GRID_YZ_MAX]   # sections: z
    whole = [p for p in divisors if p % group == 0] or divisors
    return min(whole, key=lambda p: (abs(p - target), p))


def _resident_slots(call, kern) -> int:
    """Blocks of the compiled kernel resident on the whole GPU at once (the driver's occupancy)."""
    return driver.device_props(call.device).multi_processor_count * driver.blocks_per_sm(
        kern, call.config.threads, call.smem)


def plan(q, k, v, causal: bool = False, config=None, scale=None, window=None, mods=None) -> "Launch":
    """The checked launch of a call's signature (its arguments as :func:`attention`'s)."""
    return Launch(q, k, v, prepare(FAMILY, q, k, v, causal, config, scale, window, mods), window, mods)


class Launch:
    """One signature's launch, built once: the kernel, the grid and every argument but the five data
    pointers; a call allocates O and the LSE (the kernel writes both) and launches."""

    def __init__(self, q, k, v, call, window=None, mods=None):
        local = window is not None and window.local
        s, cfg = call.shape, call.config
        B, H, H_kv, N_q, N_k, d = (s[x] for x in ("B", "H", "H_kv", "N_q", "N_k", "d"))
        self.o_shape, self.device = (B, H, N_q, d), call.device
        mods = mods if mods is not None else NO_MODS
        kern = kernel(call.device, cfg, s["dtype"], s["causal"], call.smem, local=local, mods=mods.bits)
        scale = mods.softmax_scale(call.scale)
        i32, i64, f32 = ctypes.c_int, ctypes.c_longlong, ctypes.c_float
        o_strides = [i64(H * N_q * d), i64(N_q * d), i64(d)]   # O: contiguous (B, H, N_q, d)
        tail = [*driver.strides(q), *driver.strides(k), *driver.strides(v), *o_strides,
                i32(H), i32(H // H_kv), i32(N_q), i32(N_k), f32(scale * runtime.LOG2E), f32(scale),
                driver.ptr(None), driver.ptr(None),   # cu_seqlens: none (a dense batch)
                *(i32(x) for x in (window.kernel_args() if local else NO_WINDOW)), *mods.kernel_args(call.scale)]
        m_blocks = math.ceil(N_q / cfg.block_m)
        grid = (m_blocks, H, B)
        self.split = None
        splittable = not s["causal"] and not local and not mods.bits and cfg not in SPLIT_SPILLING
        if splittable:   # the tail split: a last partial wave's tiles in pieces (tail_split), merged after
            slots = _resident_slots(call, kern)
            pieces = tail_split(m_blocks * H * B, slots, math.ceil(N_k / cfg.block_n))
            if pieces > 1:
                self.split = _Split(call, m_blocks * H * B, slots, pieces, o_strides)
                kern = kernel(call.device, cfg, s["dtype"], False, call.smem, split=True)
                grid = (self.split.grid, 1, 1)
        split_args = self.split.kernel_args() if self.split else [i32(0), i32(1), driver.ptr(None), driver.ptr(None)]
        if s["causal"] and not local:   # the kernel's sectioned grid: (heads a section, query tiles, sections)
            slots = _resident_slots(call, kern)
            if m_blocks > GRID_YZ_MAX:   # the shipped configs' limit is the family's launch_problem
                raise ValueError(f"causal attention with block_m {cfg.block_m} takes at most "
                                 f"{GRID_YZ_MAX * cfg.block_m} query rows (grid y holds the query tiles), got {N_q}")
            per = causal_section_heads(B * H, H // H_kv, m_blocks, slots)
            grid = (per, m_blocks, B * H // per)
        self.prepared = driver.Prepared(kern, grid, (cfg.threads, 1, 1), call.smem, 5, tail + split_args)

    def __call__(self, q, k, v, return_lse: bool = False):
        """(O, LSE) of tensors of the plan's signature (the LSE is written whether asked or not)."""
        import torch

        o = runtime.empty(self.o_shape, q.dtype, q.device)
        lse = runtime.empty(self.o_shape[:3], torch.float32, q.device)
        p = self.prepared
        for slot, t in zip(p.pointers, (q, k, v, o, lse)):
            slot.value = t.data_ptr()
        stream = driver.current_stream_handle(self.device)
        if self.split is None:
            p.launch(stream)
        else:
            self.split.launch(p, o, lse, stream)
        return o, lse


class _Split:
    """A launch's tail split: the grid's first `whole` tiles as they are, the last partial wave's `tail` tiles
    in `pieces` pieces each (the kernel's SPLIT grid), each piece's fp32 O and LSE into a workspace made a call,
    then the merge kernel (a warp a row) writing O and the LSE of the split tiles."""

    def __init__(self, call, blocks: int, slots: int, pieces: int, o_strides):
        s, cfg = call.shape, call.config
        self.tail = blocks % slots
        self.whole, self.pieces = blocks - self.tail, pieces
        self.grid = self.whole + self.tail * pieces
        self.rows = self.tail * cfg.block_m
        self.part_shape = (pieces, self.rows, s["d"])
        self.opart, self.lpart = ctypes.c_void_p(), ctypes.c_void_p()
        i32 = ctypes.c_int
        merge = merge_kernel(call.device, cfg, s["dtype"])
        warps = MERGE_THREADS // 32
        self.merge = driver.Prepared(merge, (-(-self.rows // warps), 1, 1), (MERGE_THREADS, 1, 1), 0, 4,
                                     [o_strides[0], o_strides[1], o_strides[2], i32(s["H"]), i32(s["N_q"]),
                                      i32(self.whole), i32(self.tail), i32(pieces)])

    def kernel_args(self) -> list:
        """The attention kernel's split arguments: whole, pieces and the workspace's two pointers (set a call)."""
        return [ctypes.c_int(self.whole), ctypes.c_int(self.pieces), self.opart, self.lpart]

    def launch(self, attention: "driver.Prepared", o, lse, stream: int) -> None:
        import torch

        opart = torch.empty(self.part_shape, dtype=torch.float32, device=o.device)
        lpart = torch.empty(self.part_shape[:2], dtype=torch.float32, device=o.device)
        self.opart.value, self.lpart.value = opart.data_ptr(), lpart.data_ptr()
        attention.launch(stream)
        for slot, t in zip(self.merge.pointers, (opart, lpart, o, lse)):
            slot.value = t.data_ptr()
        self.merge.launch(stream)
