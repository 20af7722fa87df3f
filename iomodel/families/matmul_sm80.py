"""matmul_sm80: a tiled matmul with mma.sync, the contraction streamed through SMEM (cp.async ring).

Kernel: ``matmul_kernel`` of kernels/csrc/unfused.cuh (steps 1 and 3 of the unfused attention).
The block's warps form a grid of 2 along n (1 when there is a single warp) and warps / 2 along m.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..limits import GRID_YZ_MAX, blocks
from ..plan import ExecutionPlan
from .base import Family, TileConfig

BLOCK_K_CHOICES = (16, 32, 64, 128)
WARP_CHOICES = (1, 2, 4, 8)


@dataclass(frozen=True)
class MatmulConfig(TileConfig):
    """Template parameters of ``matmul_kernel`` (besides dtype and operand layout)."""

    block_m: int
    block_n: int
    block_k: int
    warps: int
    stages: int

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def warps_n(self) -> int:
        return 2 if self.warps >= 2 else 1

    @property
    def warps_m(self) -> int:
        return self.warps // self.warps_n

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Dynamic shared memory of one block, in bytes (exact): `stages` (A tile, B tile) pairs."""
        return self.stages * (self.block_m + self.block_n) * self.block_k * elem_bytes

    def problems(self) -> list[str]:
        if self.warps not in WARP_CHOICES:
            return [f"warps ({self.warps}) must be one of {', '.join(map(str, WARP_CHOICES))}"]
        p = []
        if self.block_m <= 0 or self.block_m % (16 * self.warps_m) != 0:
            p.append(f"block_m ({self.block_m}) must be a positive multiple of {16 * self.warps_m}")
        if self.block_n <= 0 or self.block_n % (16 * self.warps_n) != 0:
            p.append(f"block_n ({self.block_n}) must be a positive multiple of {16 * self.warps_n}")
        if self.block_k not in BLOCK_K_CHOICES:
            p.append(f"block_k ({self.block_k}) must be one of {', '.join(map(str, BLOCK_K_CHOICES))}")
        if self.stages < 1:
            p.append(f"stages ({self.stages}) must be >= 1")
        # every thread copies whole 16-byte chunks of the A, B (k-major) and B (n-major) tile rows
        for chunks_per_row in (self.block_k // 8, self.block_n // 8):
            if chunks_per_row and self.threads % chunks_per_row != 0:
                p.append("32*warps must be a multiple of the 16-byte chunks per tile row")
                break
        return p


#: Shipped configurations (the unfused attention's two matmuls use the first unless told otherwise).
SHIPPED: tuple[MatmulConfig, ...] = (
    MatmulConfig(128, 128, 32, 4, 3),
    MatmulConfig(128, 128, 64, 8, 3),
    MatmulConfig(128, 64, 32, 4, 3),
    MatmulConfig(64, 64, 64, 4, 2),
)
LABEL = "{block_m}x{block_n}x{block_k} w{warps} s{stages}"
SPACE = {"block_m": (32, 64, 128, 256), "block_n": (32, 64, 128, 256), "block_k": (16, 32, 64),
         "warps": (2, 4, 8), "stages": (1, 2, 3, 4)}


def warp_grid(configs: list) -> dict[str, np.ndarray]:
    """The kernel's warp grid as diagram symbols: 2 warps along n (1 with a single warp), the rest along m."""
    return {"wn": np.array([c.warps_n for c in configs], dtype=np.float64),
            "wm": np.array([c.warps_m for c in configs], dtype=np.float64)}


def row_blocks_problem(rows: int, what: str) -> str:
    """The grid is (column blocks, row blocks, batch): even the space's largest block_m must keep the
    row blocks within gridDim.y."""
    largest = max(SPACE["block_m"])
    if blocks(rows, largest) > GRID_YZ_MAX:
        return f"{what} ({rows}) needs more than {GRID_YZ_MAX} row blocks of {largest} (grid y)"
    return ""


def _diagram(causal: bool, gqa: bool):
    from diagrams import library

    return library.tiled_matmul(tile_a="ta", tile_c="tc", chunk_b="kb", stages="st", warps="w",
                                a="Ma", b="Kb", c="Nc")


FAMILY = Family(
    name="matmul_sm80",
    description="tiled matmul, mma.sync, contraction streamed through SMEM",
    problem="matmul",
    config_type=MatmulConfig,
    symbols={"block_m": "ta", "block_n": "tc", "block_k": "kb", "warps": "w", "stages": "st"},
    plan=ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=40, fragment_buffers=2),
    build=_diagram,
    label_format=LABEL,
    space=SPACE,
    shipped=SHIPPED,
    launch_problem=lambda shape: row_blocks_problem(shape["M"], "M"),
)
