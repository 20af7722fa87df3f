"""softmax: row softmax in two passes, one warp per row (``softmax_rows_kernel``, kernels/csrc/unfused.cuh,
step 2 of the unfused attention). The kernel runs 4 warps, so 4 rows, per block and uses no SMEM."""
from __future__ import annotations

from dataclasses import dataclass

from ..plan import ExecutionPlan
from .base import Family, TileConfig

ROWS_PER_BLOCK = 4   # the kernel's launch bounds (128 threads) and row index (blockIdx.x * 4 + warp)
SMEM_BYTES = 0


@dataclass(frozen=True)
class SoftmaxConfig(TileConfig):
    rows_per_block: int = ROWS_PER_BLOCK

    @property
    def threads(self) -> int:
        return 32 * self.rows_per_block

    def problems(self) -> list[str]:
        if self.rows_per_block != ROWS_PER_BLOCK:
            return [f"the kernel runs {ROWS_PER_BLOCK} rows (warps) per block, not {self.rows_per_block}"]
        return []


def _diagram(causal: bool, gqa: bool):
    from diagrams import library

    return library.streamed_softmax(library.softmax(rows="R", cols="C"), "rb")


FAMILY = Family(
    name="softmax",
    description="row softmax in two passes, a warp per row, rows_per_block warps a block",
    problem="softmax",
    config_type=SoftmaxConfig,
    symbols={"rows_per_block": "rb"},
    plan=ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=16),
    build=_diagram,
    label_format="{rows_per_block} rows/block",
    space={"rows_per_block": (1, 2, 4, 8, 16)},
    shipped=(SoftmaxConfig(),),
)
