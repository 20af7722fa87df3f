"""Decode attention over a KV cache, split over the keys (family ``flash_decode_sm80``,
``csrc/flash_decode_sm80.cuh``): the launches behind ``kernels.flash_attention_with_kvcache``.

One module per (config's template parameters, rows, dtype, causal, paged), built for the device's own
architecture (mma.sync: sm_80 and newer).  ``config.parts`` is a launch parameter: the grid's x.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import math

from iomodel.families.flash_decode_sm80 import row_blocks, rows_tile   # the row tile: the family's rule

from . import compile, driver, runtime
from .kvcache_checks import KVCall

__all__ = ["FAMILY", "HEADER", "rows_tile", "row_blocks", "kernel_names", "module", "DecodeLaunch", "offline_unit"]

FAMILY = "flash_decode_sm80"
HEADER = "flash_decode_sm80.cuh"


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def kernel_names(cfg, rows: int, dtype: str, causal: bool, paged: bool) -> tuple[str, str]:
    """Template-ids of (main, append)."""
    main = (f"iom::flash_decode_kernel<iom::{dtype}, {rows}, {cfg.block_n}, {cfg.warps}, {cfg.stages}, "
            f"{cfg.head_dim}, {_b(causal)}, {_b(paged)}>")
    return main, f"iom::kv_append_kernel<iom::{dtype}, {cfg.head_dim}, {_b(paged)}>"


def module(cfg, rows: int, dtype: str, causal: bool, paged: bool, arch: str) -> compile.Module:
    """The compiled module of one variant for `arch`; needs no GPU."""
    return compile.build(f'#include "{HEADER}"\n', arch, names=kernel_names(cfg, rows, dtype, causal, paged),
                         label=FAMILY, flags=compile.MMA_SYNC_FLAGS)


@functools.lru_cache(maxsize=None)
def _kernels(index: int, cfg, rows: int, dtype: str, causal: bool, paged: bool, smem: int):
    """The loaded (main, append) kernels of a config whose `parts` is 1 (parts is the grid's x, not a
    template parameter: one build serves every split)."""
    arch = compile.nvrtc_arch(driver.capability(index))
    mod = module(cfg, rows, dtype, causal, paged, arch)
    main, append = kernel_names(cfg, rows, dtype, causal, paged)
    return driver.kernel(index, mod, main, smem), driver.kernel(index, mod, append, 0)


def _strides(t) -> list:
    return driver.strides(t, 3)


class DecodeLaunch:
    """The launches of one call signature (shapes, strides, dtype, config), built once; a call allocates
    the outputs and sets the data pointers.  At small caches the GPU work is a few tens of microseconds,
    so the host's share of a decode step is kept to two allocations and one launch."""

    def __init__(self, call: KVCall, q, k_cache, v_cache, k, v, cfg, causal: bool, index: int):
        packed = (call.H // call.H_kv) * call.N_q
        rows = rows_tile(packed)
        self.call, self.parts, self.index = call, cfg.parts, index
        smem = cfg.smem_bytes(rows)
        main, append = _kernels(index, dataclasses.replace(cfg, parts=1), rows, call.dtype, causal, call.paged,
                                smem)
        i32, i64, f32 = ctypes.c_int, ctypes.c_longlong, ctypes.c_float
        B, N_q, H, d = call.B, call.N_q, call.H, call.d
        out_strides = [i64(N_q * H * d), i64(H * d), i64(d)]   # out: contiguous (B, N_q, H, d)
        t_sb = [i64(call.table.stride(0) if call.paged else 0)]
        cache = [*_strides(k_cache), *_strides(v_cache)]
        paging = [i32(call.capacity), i32(call.page_size.bit_length() - 1 if call.paged else 0), i32(call.num_pages)]
        self.n_rows = B * H * N_q
        grid = (cfg.parts, call.H_kv * row_blocks(packed), B)
        self.groups = grid[1] * B          # arrival counters: one a (batch, KV head, row block)
        self._streams, self._captured = {}, []
        self.main = driver.Prepared(
            main, grid, (cfg.warps * 32, 1, 1), smem, 10,
            [*_strides(q), *cache, *out_strides, *t_sb, i32(H), i32(H // call.H_kv), i32(N_q), i32(call.n_new),
             *paging, f32(call.scale * runtime.LOG2E), f32(call.scale)])
        self.append = None
        if call.n_new:
            chunks = call.n_new * call.H_kv * d // 8
            self.append = driver.Prepared(append, (math.ceil(chunks / 128), B, 1), (128, 1, 1), 0, 6,
                                          [*_strides(k), *_strides(v), *cache, *t_sb, i32(call.n_new),
                                           i32(call.H_kv), *paging])

    def _counters(self, stream, device) -> int:
        """The parts' arrival counters (int32, one a group) for a call on `stream`: kept per stream and left
        at zero by each call's last parts, so a call does not zero them; under CUDA-graph capture fresh
        zeroed ones (the graph replays the zeroing; the kept ones would be the eager calls')."""
        import torch

        if torch.cuda.is_current_stream_capturing():
            t = torch.zeros(self.groups, dtype=torch.int32, device=device)
            self._captured.append(t)   # alive as long as the plan: the graph holds the address
            return t.data_ptr()
        t = self._streams.get(stream.cuda_stream)
        if t is None:
            t = self._streams[stream.cuda_stream] = torch.zeros(self.groups, dtype=torch.int32, device=device)
        return t.data_ptr()

    def __call__(self, q, k_cache, v_cache, seqlens, table, k=None, v=None, want_lse: bool = False):
        """Append (when k, v are given), then attention: out (B, N_q, H, d), and the LSE (B, H, N_q) float32
        when asked (else it stays in the workspace)."""
        import torch

        c, n = self.call, self.n_rows
        stream = driver.current_stream(self.index)
        t_ptr = table.data_ptr() if table is not None else 0
        if self.append is not None:
            self.append((k.data_ptr(), v.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), seqlens.data_ptr(),
                         t_ptr), stream)
        out = runtime.empty((c.B, c.N_q, c.H, c.d), q.dtype, q.device)
        # one fp32 workspace: [the parts' O | the parts' LSEs | the LSE] (the partial rows 16-byte aligned)
        split = self.parts > 1
        ws = runtime.empty((n * (1 + split * self.parts * (c.d + 1)),), torch.float32, q.device)
        opart = ws.data_ptr() if split else 0
        lpart = opart + 4 * self.parts * n * c.d if split else 0
        lse = ws.data_ptr() + 4 * split * self.parts * n * (c.d + 1)
        arrived = self._counters(stream, q.device) if split else 0
        self.main((q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), out.data_ptr(), lse, opart, lpart, arrived,
                   seqlens.data_ptr(), t_ptr), stream)
        at = split * self.parts * n * (c.d + 1)
        return out, (ws[at:at + n].view(c.B, c.H, c.N_q) if want_lse else None)


def offline_unit(variants) -> str:
    """The header plus explicit instantiations of (cfg, rows, dtype, causal, paged) variants, for nvcc."""
    lines = [f'#include "{HEADER}"']
    params = {
        "main": "const iom::{T}*, const iom::{T}*, const iom::{T}*, iom::{T}*, float*, float*, float*, int*, "
                "const int*, const int*, " + ", ".join(["long long"] * 13) + ", int, int, int, int, int, int, int, float, "
                "float",
        "append": "const iom::{T}*, const iom::{T}*, iom::{T}*, iom::{T}*, const int*, const int*, "
                  + ", ".join(["long long"] * 13) + ", int, int, int, int, int",
    }
    seen = set()
    for cfg, rows, dtype, causal, paged in variants:
        for kind, name in zip(("main", "append"), kernel_names(cfg, rows, dtype, causal, paged)):
            if name not in seen:
                seen.add(name)
                lines.append(f"template __global__ void {name}({params[kind].format(T=dtype)});")
    return "\n".join(lines) + "\n"
