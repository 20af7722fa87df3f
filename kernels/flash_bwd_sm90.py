"""FlashAttention backward for Hopper (family ``flash_bwd_sm90``, ``csrc/flash_bwd_sm90.cuh``): TMA + wgmma +
warp specialization.  Argument checks, workspace, the TMA descriptors and the three launches (the rows
kernel shared with flash_bwd_sm80, the main kernel, the dQ conversion).  One module per (config, dtype,
causal, mode), built for sm_90a.

Atomic mode: each consumer warpgroup adds its dQ slice of every query tile into the fp32 accumulator
with a TMA bulk reduce-add, in whatever order the CTAs reach it.  Deterministic mode: the same kernel,
the adds to each query tile ordered by key tile through a semaphore per tile, so the same inputs give the
same bits run after run.
"""
from __future__ import annotations

import ctypes
import functools

from iomodel import families
from iomodel.perf import tail_pieces

from . import bwd_rows, compile, driver, plans, runtime
from .checks import backward_inputs, with_aligned_rows
from .dispatch import prepare
from .flash_sm90 import TMA_BOX_COLS, _tma_dims

__all__ = ["FAMILY", "DETERMINISTIC", "ARCH", "backward", "plan", "BackwardLaunch", "module", "kernel_names", "unit", "tail_split",
           "piece_floats", "grid_size"]

FAMILY = "flash_bwd_sm90"
DETERMINISTIC = "flash_bwd_sm90_deterministic"
ARCH = "sm_90a"
HEADER = "flash_bwd_sm90.cuh"
# Compile-time switches used by default: none.  Available: SM90_WATCHDOG (sm90_common.cuh, mbar_wait).
DEFAULT_DEFINES: tuple[str, ...] = ()


def groups_per_section(shape: dict, block_n: int, sms: int) -> int:
    """(KV head, batch) groups of a causal scheduling section (unit_of in the kernel): about one wave of
    CTAs, the SMs over a group's key tiles rounded, so that the CTAs running together stream the Q, dO and
    dQ rows of a few groups (read and added through the L2 once for all of them) while inside a section
    the key tiles go longest first.  Measured on the H100 (validation/results/profile-bwd-sm90-h100-
    2026-11-24/sections-ab.json): 2 to 7% faster than one group a section at N = 2048 to 8192, and all
    groups in one section (every CTA streaming its own group's rows) 25 to 41% slower.  1 without a mask:
    every unit costs the same, and one group's key tiles after another's already share its rows."""
    if not shape["causal"]:
        return 1
    num_n = -(-shape["N_k"] // block_n)
    return max(1, min(shape["B"] * shape["H_kv"], round(sms / num_n)))


def _units(shape: dict, cfg) -> int:
    """The grid's units: (key tile, KV head, batch)."""
    return -(-shape["N_k"] // cfg.block_n) * shape["B"] * shape["H_kv"]


def tail_split(shape: dict, cfg, sms: int, n_qp: int, pieces: int | None = None) -> tuple[int, int]:
    """(whole, pieces): the CTAs that run a whole unit, and the pieces each later unit (the last wave's)
    runs as (span_of and combine_pieces in the kernel).  The count is the model's (iomodel.perf.
    tail_pieces over the family's plan: one CTA an SM, a unit streaming every query tile of its group's
    heads), 1 under a causal mask, whose units differ and go longest first instead; `pieces` asks for
    another count (probes) over the same last wave."""
    units = _units(shape, cfg)
    if pieces is None:
        plan = families.get(FAMILY).plan
        steps = shape["H"] // shape["H_kv"] * (n_qp // cfg.block_m)
        pieces = 1 if shape["causal"] else tail_pieces(units, sms, steps, plan.tail_overhead_steps,
                                                       plan.tail_pieces_max)[0]
    if pieces <= 1 or units % sms == 0:
        return units, 1
    return units - units % sms, int(pieces)


def piece_floats(cfg) -> int:
    """fp32 of one tail piece's slot (combine_pieces): d floats (dK's and dV's halves) a consumer thread."""
    return cfg.head_dim * 128 * cfg.consumers


def grid_size(shape: dict, cfg, sms: int, n_qp: int, pieces: int | None = None) -> int:
    """CTAs of a launch (the profiling buffers' size): the whole units and the tail's pieces."""
    whole, p = tail_split(shape, cfg, sms, n_qp, pieces)
    return whole + (_units(shape, cfg) - whole) * p


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def kernel_names(cfg, dtype: str, causal: bool, deterministic: bool) -> tuple[str, str, str]:
    """(dot, main, convert): the rows kernels' template-ids and the main kernel's extern "C" name.  The dQ
    accumulator's rows are the padded head dim (``FlashBwdSm90Config.dq_cols``)."""
    d, acc = cfg.head_dim, cfg.dq_cols
    main = f"flash_bwd_sm90_{cfg.name}_{dtype}_{'causal' if causal else 'full'}{'_det' if deterministic else ''}"
    layout = f"sm90::DqSlices<{cfg.block_m}, {cfg.consumers}, {acc}>"
    return bwd_rows.dot_name(dtype, d, acc), main, bwd_rows.convert_name(dtype, acc, cfg.block_m, layout, d)


def _instance(cfg, dtype: str, causal: bool, deterministic: bool) -> str:
    """C++ text of the main kernel's extern "C" entry for one variant."""
    name = kernel_names(cfg, dtype, causal, deterministic)[1]
    traits = (f"sm90::BwdTraits<{cfg.block_m}, {cfg.block_n}, {cfg.stages}, {cfg.head_dim}, {cfg.consumers}, "
              f"{_b(dtype == 'bf16')}, {_b(causal)}, {_b(deterministic)}>")
    return (
        f"typedef {traits} T_{name};\n"
        f'extern "C" __global__ void __launch_bounds__(T_{name}::kThreads, 1)\n'
        f"{name}(const __grid_constant__ TmaDesc tmQ, const __grid_constant__ TmaDesc tmK,\n"
        f"    const __grid_constant__ TmaDesc tmV, const __grid_constant__ TmaDesc tmdO, const float* lse2,\n"
        f"    const float* delta, float* dq_acc, u16* dk, u16* dv, int* sem, float* part, int* count, int B,\n"
        f"    int H, int H_kv, int N_q, int N_k, int n_qp, int sec, int whole, int pieces, float scale_log2,\n"
        f"    float scale) {{\n"
        f"  sm90::flash_bwd_sm90<T_{name}>(tmQ, tmK, tmV, tmdO, lse2, delta, dq_acc, dk, dv, sem, part, count, B,\n"
        f"                                H, H_kv, N_q, N_k, n_qp, sec, whole, pieces, scale_log2, scale);\n"
        f"}}\n"
    )


def unit(variants) -> str:
    """A translation unit of (config, dtype, causal, deterministic) variants' main kernels."""
    return f'#include "{HEADER}"\n' + "".join(_instance(*v) for v in variants)


def offline_unit(variants) -> str:
    """`unit` plus explicit instantiations of the rows kernels (nvcc has no name expressions)."""
    lines, seen = [unit(variants)], set()
    for cfg, dtype, causal, det in variants:
        dot, _, convert = kernel_names(cfg, dtype, causal, det)
        for kind, name in (("dot", dot), ("convert", convert)):
            if name not in seen:
                seen.add(name)
                lines.append(f"template __global__ void {name}({bwd_rows.PARAMS[kind].format(T=f'iom::{dtype}')});")
    return "\n".join(lines) + "\n"


def module(cfg, dtype: str, causal: bool, deterministic: bool, defines: tuple[str, ...] = ()) -> compile.Module:
    """The compiled module of one variant (sm_90a); needs no GPU."""
    dot, _, convert = kernel_names(cfg, dtype, causal, deterministic)
    return compile.build(unit([(cfg, dtype, causal, deterministic)]), ARCH, names=(dot, convert), defines=defines,
                         label=FAMILY)


@functools.lru_cache(maxsize=None)
def _kernels(index: int, cfg, dtype: str, causal: bool, deterministic: bool, smem: int,
             defines: tuple[str, ...]) -> tuple:
    mod = module(cfg, dtype, causal, deterministic, defines)
    dot, main, convert = kernel_names(cfg, dtype, causal, deterministic)
    return driver.kernel(index, mod, dot, 0), driver.kernel(index, mod, main, smem), driver.kernel(index, mod, convert, 0)


def _map_slot(dtype: str, t, rows: int):
    """A TMA descriptor of a (B, H, N, d) view with boxes of `rows` rows, its address unset."""
    dims, strides_bytes = _tma_dims(t)
    return driver.TensorMapSlot(dtype, dims, strides_bytes, [TMA_BOX_COLS, rows, 1, 1])


def backward(dout, q, k, v, out, lse, causal: bool = False, scale=None, config=None, deterministic: bool = False,
             _trace=None, _defines: tuple[str, ...] | None = None, _sections: int | None = None,
             _pieces: int | None = None):
    """dQ, dK, dV of softmax(scale q k^T [+ causal mask]) v given dO = `dout`, on an sm_90 GPU.

    Arguments and results as ``kernels.flash_bwd_sm80.backward``: q (B, H, N_q, d), k and v (B, H_kv, N_k,
    d); `out` and `lse` (B, H, N_q; float32, natural log) are the forward's outputs; `dout` has q's shape
    and dtype (copied when its rows are not 16-byte aligned).  config: a FlashBwdSm90Config (or a dict of
    its fields); None asks the model.  deterministic: the dQ adds of each query tile in key-tile order.
    Returns dq like q, dk and dv like k and v (contiguous).  ``_trace``: a profiling buffer for the
    IOM_BWD90_TRACE or IOM_BWD90_CTA_TIMES switch (in ``_defines``), passed in the semaphores' place;
    ``_sections``: the (KV head, batch) groups of a scheduling section (groups_per_section by default);
    ``_pieces``: the tail split's pieces (tail_split's by default; 1: none).  The CTA timelines' buffer
    needs 16 ints a CTA of the grid (`grid_size`).  The checks, the config and the launches' sizes are
    settled once a call signature (``kernels.plans``)."""
    sig = None if _trace is not None else plans.key(FAMILY, "backward", (dout, q, k, v, out, lse), causal, config,
                                                     scale, bool(deterministic), _defines, _sections, _pieces)
    run = plans.lookup(sig, (("q", q), ("k", k), ("v", v)))
    if run is None:
        run = plan(dout, q, k, v, out, lse, causal, scale, config, deterministic, _defines, _sections, _pieces)
        plans.store(sig, run)
    return run(dout, q, k, v, out, lse, _trace)


def plan(dout, q, k, v, out, lse, causal: bool = False, scale=None, config=None, deterministic: bool = False,
         _defines=None, _sections=None, _pieces=None) -> "BackwardLaunch":
    """The checked launches of a call's signature (its arguments as :func:`backward`'s)."""
    call = prepare(DETERMINISTIC if deterministic else FAMILY, q, k, v, causal, config, scale)
    s = call.shape
    backward_inputs(dout, out, lse, q, (s["B"], s["H"], s["N_q"], s["d"]))   # the layouts' checks
    return BackwardLaunch(call, q, k, v, dout, deterministic, _defines, _sections, _pieces)


class BackwardLaunch:
    """One signature's backward, settled once: the config, kernels, scheduling sections, tail split and the
    TMA descriptors of Q, K, V and dO (encoded again only when a tensor moves); a call allocates the
    workspace and outputs and makes the three launches."""

    def __init__(self, call, q, k, v, dout, deterministic: bool, defines=None, sections=None, pieces=None):
        s, cfg, dev = call.shape, call.config, call.device
        self.call, self.deterministic = call, bool(deterministic)
        self.kernels = _kernels(dev, cfg, s["dtype"], s["causal"], self.deterministic, call.smem,
                                tuple(DEFAULT_DEFINES if defines is None else defines))
        groups, sms = s["B"] * s["H_kv"], driver.device_props(dev).multi_processor_count
        self.sec = groups_per_section(s, cfg.block_n, sms) if sections is None else max(1, min(int(sections), groups))
        n_qp = -(-s["N_q"] // cfg.block_m) * cfg.block_m   # (bwd_rows.workspace's)
        self.whole, self.pieces = tail_split(s, cfg, sms, n_qp, pieces)
        self.tail = _units(s, cfg) - self.whole
        self.maps = [_map_slot(s["dtype"], t, rows)
                     for t, rows in ((q, cfg.block_m), (k, cfg.block_n), (v, cfg.block_n), (dout, cfg.block_m))]
        self.dout_strides = tuple(dout.stride())   # the dO layout its descriptor was made for

    def __call__(self, dout, q, k, v, out, lse, trace=None):
        import torch

        call, cfg = self.call, self.call.config
        s = call.shape
        B, H, H_kv, N_q, N_k = (s[x] for x in ("B", "H", "H_kv", "N_q", "N_k"))
        # out and dout copied where their rows are not 16-byte aligned (the signature fixed their strides,
        # not their addresses); a copied dO gets a descriptor of its own
        out, dout, lse = with_aligned_rows(out), with_aligned_rows(dout), lse.contiguous()
        ws = bwd_rows.workspace(q, s, cfg.block_m, accumulator=True, acc_d=cfg.dq_cols)
        sem = (torch.zeros((B, H, ws.n_qp // cfg.block_m), dtype=torch.int32, device=q.device) if self.deterministic
               else trace)
        dot, main, convert = self.kernels
        i32, f32, ptr = ctypes.c_int, ctypes.c_float, driver.ptr

        bwd_rows.launch_dot(dot, out, dout, lse, ws, s)
        dout_map = (self.maps[3] if tuple(dout.stride()) == self.dout_strides
                    else _map_slot(s["dtype"], dout, cfg.block_m))
        maps = [slot.set(t.data_ptr()).map for slot, t in zip((*self.maps[:3], dout_map), (q, k, v, dout))]
        tail = self.tail
        # the pieces' partial dK and dV (d floats a consumer thread: d / 2 of each) and an arrival counter a
        # split unit
        part = runtime.empty((tail * self.pieces * piece_floats(cfg),), torch.float32, q.device) if tail else None
        count = torch.zeros((tail,), dtype=torch.int32, device=q.device) if tail else None
        driver.launch(main, (self.whole + tail * self.pieces, 1, 1), (cfg.threads, 1, 1),
                      [*maps, ptr(ws.lse2), ptr(ws.delta), ptr(ws.dq_acc), ptr(ws.dk), ptr(ws.dv), ptr(sem), ptr(part),
                       ptr(count), i32(B), i32(H), i32(H_kv), i32(N_q), i32(N_k), i32(ws.n_qp), i32(self.sec),
                       i32(self.whole), i32(self.pieces), f32(call.scale * runtime.LOG2E), f32(call.scale)],
                      call.smem)
        bwd_rows.launch_convert(convert, ws, s, call.scale)
        return ws.dq, ws.dk, ws.dv


