"""unfused: attention as three kernels through global memory (the baseline FlashAttention avoids).

(1) S = scale * Q K^T and (3) O = P V with the tiled matmul (``matmul_kernel``, one MatmulConfig for
both), (2) P = softmax(mask(S)) one warp per row (``softmax_rows_kernel``): kernels/csrc/unfused.cuh,
launched by kernels/unfused.py.
"""
from __future__ import annotations

from ..errors import ModelError
from ..limits import ELEM_BYTES, GRID_YZ_MAX
from ..plan import ExecutionPlan
from .base import Family
from .matmul_sm80 import LABEL, SHIPPED, SPACE, MatmulConfig, row_blocks_problem, warp_grid


def row_pitches(n_k: int) -> tuple[int, int]:
    """Row lengths of S (float32) and P: N_k rounded up to 4 and 8 columns, so every row is 16-byte
    aligned (the launch in kernels/unfused.py allocates them)."""
    return (n_k + 3) // 4 * 4, (n_k + 7) // 8 * 8


def _workspace_bytes(shape) -> float:
    """S in float32 and P in the input dtype, rows padded (:func:`row_pitches`)."""
    rows = shape["B"] * shape["H"] * shape["N_q"]
    lds, ldp = row_pitches(shape["N_k"])
    return float(rows * (4 * lds + ELEM_BYTES[shape["dtype"]] * ldp))


def _launch_problem(shape) -> str:
    """Both matmuls run batch * heads as gridDim.z and the query blocks as gridDim.y."""
    if shape["B"] * shape["H"] > GRID_YZ_MAX:
        return f"batch * heads ({shape['B'] * shape['H']}) must be at most {GRID_YZ_MAX} (grid z)"
    return row_blocks_problem(shape["N_q"], "N_q")


def _diagram(causal: bool, gqa: bool):
    from diagrams import library

    if gqa:
        raise ModelError("the unfused kernel family has no grouped-query variant")
    return library.unfused_attention(block_m="bm", block_n="bn", block_k="bk", warps_m="wm", warps_n="wn",
                                     stages="st")


FAMILY = Family(
    name="unfused",
    description="three kernels: scores (mma.sync), row softmax, output (mma.sync)",
    problem="attention",
    config_type=MatmulConfig,
    symbols={"block_m": "bm", "block_n": "bn", "block_k": "bk", "stages": "st"},
    plan=ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=40, fragment_buffers=2,
                       interleave_max=1.4, memory_overlap=0.75, step_latency_cycles=1000.0),
    build=_diagram,
    label_format=LABEL,
    space=SPACE,
    shipped=SHIPPED,
    head_dims=(64, 128, 256),
    kernel_plans={"softmax": ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=24)},
    derived_symbols=warp_grid,
    workspace_bytes=_workspace_bytes,
    launch_problem=_launch_problem,
)
