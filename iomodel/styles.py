"""Kernel styles: how code of one kind runs any diagram, whatever the algorithm.

An execution plan belongs to a style of code, not to an algorithm. Two styles cover the kernels this
project writes and the ones its users would write:

* ``mma_sync``: synchronous warps (Ampere style): each warp loads, multiplies (``mma.sync`` m16n8k16),
  runs its elementwise work and waits at a barrier; a ``cp.async`` ring hides part of the loads.
  Register-level units are warps (32 threads); a warp's row tile is a multiple of 16.
* ``wgmma``: warp-specialized (Hopper style): a producer warpgroup brings operands in with TMA,
  consumer warpgroups (128 threads) multiply with ``wgmma`` (m64nNk16) from SMEM and overlap their
  other work with each other's products. A warpgroup's row tile is a multiple of 64.

The plans are those of this project's kernels of each style (``flash_sm80`` and ``flash_sm90`` use them
as they are), whose predictions are checked against measurements; a diagram run in a style is
predicted as if its code were written like them.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ModelError
from .names import suggest
from .plan import ExecutionPlan


@dataclass(frozen=True)
class KernelStyle:
    name: str
    description: str
    plan: ExecutionPlan
    unit_threads: int          # threads of one register-level unit (warp or warpgroup)
    row_multiple: int          # a unit's tile along the first register-level axis (the instruction's m)
    col_multiple: int          # along other register-level axes (the instruction's n granularity)
    k_multiple: int            # a streamed chunk of a contracted axis (the instruction's k)


MMA_SYNC = KernelStyle(
    name="mma_sync", description="synchronous warps, mma.sync + cp.async (sm_80 and newer)",
    plan=ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=56, min_reg_overhead=40,
                       interleave_max=1.4, step_latency_cycles_per_warp=70.0, block_warp_overlap=0.35),
    unit_threads=32, row_multiple=16, col_multiple=8, k_multiple=16)

WGMMA = KernelStyle(
    name="wgmma", description="warp-specialized warpgroups, wgmma + TMA (sm_90a)",
    plan=ExecutionPlan(overlap="warp-specialized", tensor_instruction="wgmma", reg_overhead=24,
                       extra_threads=128, extra_thread_regs=24, register_operands=True,
                       interleave_max=1.6, interleave_slope=0.4, step_latency_cycles=100.0,
                       latency_hidden_by_stages=True, step_latency_cycles_per_warp=40.0,
                       fill_steps=2.0, tensor_reads_smem=True, sync_bytes_per_buffer=16, smem_slack_bytes=1024),
    unit_threads=128, row_multiple=64, col_multiple=8, k_multiple=16)

STYLES: dict[str, KernelStyle] = {s.name: s for s in (MMA_SYNC, WGMMA)}


def get_style(name: str) -> KernelStyle:
    style = STYLES.get(name)
    if style is None:
        raise ModelError(f"unknown kernel style {name!r}{suggest(name, STYLES)}; known: {', '.join(STYLES)}")
    return style
