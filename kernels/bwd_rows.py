"""The attention backward's rows kernels (``csrc/flash_bwd_common.cuh``), shared by ``flash_bwd_sm80`` and
``flash_bwd_sm90``: their template-ids and parameter lists, the workspace and outputs of a backward call,
and the two launches (D and the base-2 LSE with the dQ accumulator zeroed; dQ converted from the
accumulator).  torch is imported inside the calls."""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

from . import driver, runtime

__all__ = ["THREADS", "PARAMS", "dot_name", "convert_name", "dot_threads_per_row", "Workspace", "workspace",
           "launch_dot", "launch_convert"]

THREADS = 256   # a 16-byte chunk (dot) or an accumulator quad (convert) a thread
PARAMS = {      # parameter lists, for explicit instantiation by nvcc (they match the header)
    "dot": "const {T}*, const {T}*, const float*, float*, float*, float*, " + "long long, " * 6 + "int, int, int",
    "convert": "const float*, {T}*, long long, long long, long long, int, int, int, float",
}


def dot_name(dtype: str, d: int, acc_d: int | None = None) -> str:
    """The D and LSE kernel of head dim `d` whose dQ accumulator rows hold `acc_d` floats (None: d)."""
    tail = "" if acc_d in (None, d) else f", {acc_d}"
    return f"iom::flash_bwd_dot_kernel<iom::{dtype}, {d}{tail}>"


def convert_name(dtype: str, d: int, tile: int, layout: str, d_out: int | None = None) -> str:
    """The conversion of a (tile x d) accumulator tile kept in `layout`'s order (a C++ class: DqLayout,
    sm90::DqSlices) into dQ's first `d_out` columns (None: d; fewer where the accumulator is padded)."""
    tail = "" if d_out in (None, d) else f", {d_out}"
    return f"iom::flash_bwd_convert_kernel<iom::{dtype}, {d}, {tile}, {layout}{tail}>"


def dot_threads_per_row(d: int, acc_d: int) -> int:
    """Threads a row takes in the D kernel: the power of two covering its 16-byte chunks (the header's)."""
    t = 1
    while t < max(d, acc_d) // 8:
        t *= 2
    return t


@dataclass
class Workspace:
    """A backward call's fp32 rows (D, base-2 LSE), the dQ accumulator (or None) and dq, dk, dv."""

    n_qp: int       # query rows a head, padded to whole query tiles
    delta: object
    lse2: object
    dq_acc: object
    dq: object
    dk: object
    dv: object


def workspace(q, shape: dict, tile: int, accumulator: bool, acc_d: int | None = None) -> Workspace:
    """The workspace and outputs of a call on `shape` (B, H, H_kv, N_q, N_k, d) with query tiles of `tile`;
    the dQ accumulator's rows hold `acc_d` floats (None: d)."""
    import torch

    B, H, H_kv, N_q, N_k, d = (shape[x] for x in ("B", "H", "H_kv", "N_q", "N_k", "d"))
    n_qp, dev = math.ceil(N_q / tile) * tile, q.device
    rows = [torch.empty((B, H, n_qp), dtype=torch.float32, device=dev) for _ in range(2)]
    acc = torch.empty((B, H, n_qp, acc_d or d), dtype=torch.float32, device=dev) if accumulator else None
    return Workspace(n_qp, rows[0], rows[1], acc, runtime.empty((B, H, N_q, d), q.dtype, dev),
                     runtime.empty((B, H_kv, N_k, d), q.dtype, dev), runtime.empty((B, H_kv, N_k, d), q.dtype, dev))


def launch_dot(kernel, out, dout, lse, ws: Workspace, shape: dict) -> None:
    """D = rowsum(dO * O) and the base-2 LSE of every padded row; the accumulator (if any) zeroed."""
    i32, ptr = ctypes.c_int, driver.ptr
    acc_d = ws.dq_acc.shape[-1] if ws.dq_acc is not None else shape["d"]
    rows = THREADS // dot_threads_per_row(shape["d"], acc_d)
    driver.launch(kernel, (math.ceil(ws.n_qp / rows), shape["H"], shape["B"]), (THREADS, 1, 1),
                  [ptr(out), ptr(dout), ptr(lse), ptr(ws.delta), ptr(ws.lse2), ptr(ws.dq_acc), *driver.strides(out),
                   *driver.strides(dout), i32(shape["H"]), i32(shape["N_q"]), i32(ws.n_qp)], 0)


def launch_convert(kernel, ws: Workspace, shape: dict, scale: float) -> None:
    """dq = scale * accumulator, a thread per accumulator quad."""
    i32 = ctypes.c_int
    quads = ws.n_qp * ws.dq_acc.shape[-1] // 4   # the accumulator's quads (its rows may be padded past d)
    driver.launch(kernel, (math.ceil(quads / THREADS), shape["H"], shape["B"]), (THREADS, 1, 1),
                  [driver.ptr(ws.dq_acc), driver.ptr(ws.dq), *driver.strides(ws.dq), i32(shape["H"]),
                   i32(shape["N_q"]), i32(ws.n_qp), ctypes.c_float(scale)], 0)
