"""FlashAttention-2 backward with mma.sync (family ``flash_bwd_sm80``, ``csrc/flash_bwd_sm80.cuh``):
argument checks, workspace and the three launches.  One module per (config, dtype, causal, mode), built
for the device's own architecture.

Atomic mode (the default): the dot kernel (D = rowsum(dO * O), base-2 LSE, zeroed fp32 dQ accumulator),
the main kernel (dK, dV in registers, dQ added with fp32 atomics into an accumulator kept in the order
the warps hold it, so that each warp's add covers contiguous memory), the conversion of dQ.  Deterministic
mode: the main kernel without dQ, then a kernel that owns query tiles and sums dQ in key order; the same
inputs give the same bits run after run.
"""
from __future__ import annotations

import ctypes
import functools
import math

from iomodel.families.flash_bwd_sm80 import dq_block_k

from . import bwd_rows, compile, driver, plans, runtime
from .checks import backward_inputs, check_smem, with_aligned_rows
from .dispatch import prepare

__all__ = ["FAMILY", "DETERMINISTIC", "backward", "plan", "BackwardLaunch", "module", "kernel_names"]

FAMILY = "flash_bwd_sm80"
DETERMINISTIC = "flash_bwd_sm80_deterministic"
HEADER = "flash_bwd_sm80.cuh"


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def kernel_names(cfg, dtype: str, causal: bool, deterministic: bool) -> tuple[str, str, str]:
    """Template-ids of (dot, main, dQ) kernels of one variant."""
    t, d = f"iom::{dtype}", cfg.head_dim
    main = (f"iom::flash_bwd_kernel<{t}, {cfg.block_q}, {cfg.block_k}, {cfg.warps}, {cfg.stages}, {d}, "
            f"{_b(causal)}, {_b(not deterministic)}>")
    if deterministic:
        dq = f"iom::flash_bwd_dq_kernel<{t}, {cfg.block_q}, {dq_block_k(cfg)}, {cfg.stages}, {d}, {_b(causal)}>"
    else:
        dq = bwd_rows.convert_name(dtype, d, cfg.block_q, f"iom::DqLayout<{cfg.block_q}, {cfg.warps}, {d}>")
    return bwd_rows.dot_name(dtype, d), main, dq


def module(cfg, dtype: str, causal: bool, deterministic: bool, arch: str) -> compile.Module:
    """The compiled module of one variant for `arch`; needs no GPU."""
    return compile.build(f'#include "{HEADER}"\n', arch, names=kernel_names(cfg, dtype, causal, deterministic),
                         label=FAMILY, flags=compile.MMA_SYNC_FLAGS)


@functools.lru_cache(maxsize=None)
def _kernels(index: int, cfg, dtype: str, causal: bool, deterministic: bool) -> tuple:
    arch = compile.nvrtc_arch(driver.capability(index))
    mod = module(cfg, dtype, causal, deterministic, arch)
    dot, main, dq = kernel_names(cfg, dtype, causal, deterministic)
    return (driver.kernel(index, mod, dot, 0), driver.kernel(index, mod, main, cfg.smem_bytes()),
            driver.kernel(index, mod, dq, cfg.dq_smem_bytes() if deterministic else 0))


def backward(dout, q, k, v, out, lse, causal: bool = False, scale=None, config=None, deterministic: bool = False):
    """dQ, dK, dV of softmax(scale q k^T [+ causal mask]) v given dO = `dout`.

    q (B, H, N_q, d), k and v (B, H_kv, N_k, d) as for the forward; `out` and `lse` (B, H, N_q; float32,
    natural log) are the forward's outputs (``flash_attention(..., return_lse=True)``); `dout` has q's
    shape and dtype (copied when its rows are not contiguous).  config: a FlashBwdConfig (or a dict of its
    fields); None asks the model.  deterministic: dQ summed in a fixed order (no atomics).  Returns dq
    like q, dk and dv like k and v (contiguous).  The checks and the config are settled once a call
    signature (``kernels.plans``)."""
    sig = plans.key(FAMILY, "backward", (dout, q, k, v, out, lse), causal, config, scale, bool(deterministic))
    run = plans.lookup(sig, (("q", q), ("k", k), ("v", v)))
    if run is None:
        run = plan(dout, q, k, v, out, lse, causal, scale, config, deterministic)
        plans.store(sig, run)
    return run(dout, q, k, v, out, lse)


def plan(dout, q, k, v, out, lse, causal: bool = False, scale=None, config=None,
         deterministic: bool = False) -> "BackwardLaunch":
    """The checked launches of a call's signature (its arguments as :func:`backward`'s)."""
    family = DETERMINISTIC if deterministic else FAMILY
    call = prepare(family, q, k, v, causal, config, scale)
    s, cfg = call.shape, call.config
    if deterministic:   # prepare checked the main kernel's SMEM; the dQ kernel has its own
        check_smem(family, cfg, cfg.dq_smem_bytes(q.element_size()), driver.max_smem_optin(call.device))
    backward_inputs(dout, out, lse, q, (s["B"], s["H"], s["N_q"], s["d"]))   # the layouts' checks
    return BackwardLaunch(call, deterministic)


class BackwardLaunch:
    """One signature's backward, settled once (the config and its kernels); a call allocates the workspace
    and outputs and makes the launches."""

    def __init__(self, call, deterministic: bool):
        s = call.shape
        self.call, self.deterministic = call, bool(deterministic)
        self.kernels = _kernels(call.device, call.config, s["dtype"], s["causal"], self.deterministic)

    def __call__(self, dout, q, k, v, out, lse):
        call, cfg = self.call, self.call.config
        s = call.shape
        B, H, H_kv, N_q, N_k = (s[x] for x in ("B", "H", "H_kv", "N_q", "N_k"))
        # out and dout copied where their rows are not 16-byte aligned (the signature fixed their strides,
        # not their addresses)
        out, dout, lse = with_aligned_rows(out), with_aligned_rows(dout), lse.contiguous()
        ws = bwd_rows.workspace(q, s, cfg.block_q, accumulator=not self.deterministic)
        dot, main, last = self.kernels
        i32, f32, ptr, st = ctypes.c_int, ctypes.c_float, driver.ptr, driver.strides

        bwd_rows.launch_dot(dot, out, dout, lse, ws, s)
        common = [i32(H), i32(H // H_kv), i32(N_q), i32(N_k), i32(ws.n_qp), f32(call.scale * runtime.LOG2E),
                  f32(call.scale)]
        driver.launch(main, (math.ceil(N_k / cfg.block_k), H_kv, B), (cfg.threads, 1, 1),
                      [ptr(q), ptr(k), ptr(v), ptr(dout), ptr(ws.lse2), ptr(ws.delta), ptr(ws.dq_acc), ptr(ws.dk),
                       ptr(ws.dv), *st(q), *st(k), *st(v), *st(dout), *st(ws.dk), *st(ws.dv), *common], call.smem)
        if self.deterministic:
            driver.launch(last, (ws.n_qp // cfg.block_q, H, B), (cfg.dq_threads, 1, 1),
                          [ptr(q), ptr(k), ptr(v), ptr(dout), ptr(ws.lse2), ptr(ws.delta), ptr(ws.dq),
                           *st(q), *st(k), *st(v), *st(dout), *st(ws.dq), *common], cfg.dq_smem_bytes())
        else:   # the accumulator is in the warps' order (csrc DqLayout)
            bwd_rows.launch_convert(last, ws, s, call.scale)
        return ws.dq, ws.dk, ws.dv


# ---------------------------------------------------------------------------- offline builds (nvcc, ptxas)
_PARAMS = {  # parameter lists of the kernels, for explicit instantiation (they match the headers)
    **bwd_rows.PARAMS,
    "main": "const {T}*, const {T}*, const {T}*, const {T}*, const float*, const float*, float*, {T}*, {T}*, "
            + "long long, " * 18 + "int, int, int, int, int, float, float",
    "dq": "const {T}*, const {T}*, const {T}*, const {T}*, const float*, const float*, {T}*, "
          + "long long, " * 15 + "int, int, int, int, int, float, float",
}


def instantiation_unit(configs, dtypes=("bf16",), causal=(False, True), modes=(False, True)) -> str:
    """A .cu unit that explicitly instantiates every kernel of the given variants (for nvcc and ptxas)."""
    lines, seen = [f'#include "{HEADER}"', ""], set()
    for cfg in configs:
        for dtype in dtypes:
            for c in causal:
                for det in modes:
                    dot, main, last = kernel_names(cfg, dtype, c, det)
                    kinds = (("dot", dot), ("main", main), ("dq" if det else "convert", last))
                    for kind, name in kinds:
                        if name not in seen:
                            seen.add(name)
                            params = _PARAMS[kind].format(T=f"iom::{dtype}")
                            lines.append(f"template __global__ void {name}({params});")
    return "\n".join(lines) + "\n"
