"""Tile configurations of the shipped CUDA kernels (pure Python, no torch/cupy).

``FlashConfig`` parameterises the mma.sync FlashAttention forward kernel
(``kernels/csrc/flash_fwd_sm80.cuh``); ``MatmulConfig`` parameterises the tiled
matmul of the unfused baseline (``kernels/csrc/unfused.cuh``).

Shared memory (dynamic; the kernels declare no static shared memory):

* flash:  ``(block_m + 2 * stages * block_n) * head_dim * elem_bytes``
  (Q tile + ``stages`` x (K chunk + V chunk), XOR-swizzled, no padding)
* matmul: ``stages * (block_m + block_n) * block_k * elem_bytes``
* softmax (unfused step 2): 0 bytes (one warp per row, warp shuffles only)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "FlashConfig",
    "MatmulConfig",
    "SHIPPED_FLASH",
    "SHIPPED_MATMUL",
    "SUPPORTED_HEAD_DIMS",
    "SOFTMAX_WARPS",
    "SOFTMAX_SMEM_BYTES",
    "flash_configs_for",
]

#: head dims the flash kernel is shipped (and tested) for
SUPPORTED_HEAD_DIMS: tuple[int, ...] = (64, 128)
#: warps (= rows) per block of the unfused softmax kernel; it uses no shared memory
SOFTMAX_WARPS = 4
SOFTMAX_SMEM_BYTES = 0


class _TileConfig:
    """What the tile configurations share: 32-thread warps and a dict form of the fields."""

    warps: int

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        return cls(**{f.name: int(d[f.name]) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class FlashConfig(_TileConfig):
    """Template parameters of ``flash_fwd_kernel`` (besides dtype and causal)."""

    block_m: int   # query rows per block
    block_n: int   # key rows per streamed chunk
    warps: int     # warps per block; each owns block_m / warps query rows (multiple of 16)
    stages: int    # (K chunk, V chunk) slots buffered in shared memory
    head_dim: int

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Dynamic shared memory of one block, in bytes (exact)."""
        return (self.block_m + 2 * self.stages * self.block_n) * self.head_dim * elem_bytes

    def problems(self) -> list[str]:
        """Reasons this configuration cannot be instantiated (empty if valid)."""
        p = []
        if self.warps < 1:
            p.append("warps must be >= 1")
        elif self.block_m <= 0 or self.block_m % (16 * self.warps) != 0:
            p.append(f"block_m ({self.block_m}) must be a positive multiple of 16*warps ({16 * self.warps})")
        if self.block_n <= 0 or self.block_n % 16 != 0:
            p.append(f"block_n ({self.block_n}) must be a positive multiple of 16")
        if self.stages < 1:
            p.append(f"stages ({self.stages}) must be >= 1")
        if self.head_dim not in (64, 128, 256):
            p.append(f"head_dim ({self.head_dim}) must be 64, 128 or 256")
        elif self.warps >= 1 and (32 * self.warps) % (self.head_dim // 8) != 0:
            p.append("32*warps must be a multiple of head_dim/8")
        return p

    def template_args(self, dtype: str, causal: bool) -> str:
        """C++ template argument list, e.g. ``iom::bf16, 128, 64, 4, 2, 128, false``."""
        return (f"iom::{_ctype(dtype)}, {self.block_m}, {self.block_n}, {self.warps}, "
                f"{self.stages}, {self.head_dim}, {'true' if causal else 'false'}")

    def short(self) -> str:
        return f"m{self.block_m}n{self.block_n}w{self.warps}s{self.stages}d{self.head_dim}"


@dataclass(frozen=True)
class MatmulConfig(_TileConfig):
    """Template parameters of ``matmul_kernel`` (besides dtype and operand layout)."""

    block_m: int
    block_n: int
    block_k: int
    warps: int
    stages: int

    @property
    def warps_n(self) -> int:
        return 2 if self.warps >= 2 else 1

    @property
    def warps_m(self) -> int:
        return self.warps // self.warps_n

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Dynamic shared memory of one block, in bytes (exact)."""
        return self.stages * (self.block_m + self.block_n) * self.block_k * elem_bytes

    def problems(self) -> list[str]:
        p = []
        if self.warps not in (1, 2, 4, 8):
            p.append(f"warps ({self.warps}) must be 1, 2, 4 or 8")
            return p
        if self.block_m <= 0 or self.block_m % (16 * self.warps_m) != 0:
            p.append(f"block_m ({self.block_m}) must be a positive multiple of {16 * self.warps_m}")
        if self.block_n <= 0 or self.block_n % (16 * self.warps_n) != 0:
            p.append(f"block_n ({self.block_n}) must be a positive multiple of {16 * self.warps_n}")
        if self.block_k not in (16, 32, 64, 128):
            p.append(f"block_k ({self.block_k}) must be 16, 32, 64 or 128")
        if self.stages < 1:
            p.append(f"stages ({self.stages}) must be >= 1")
        for rows, cpr in ((self.block_m, self.block_k // 8), (self.block_n, self.block_k // 8),
                          (self.block_k, self.block_n // 8)):
            if cpr and self.threads % cpr != 0:
                p.append("32*warps must be a multiple of the 16-byte chunks per tile row")
                break
        return p

    def template_args(self, dtype: str, b_kmajor: bool, out_f32: bool) -> str:
        return (f"iom::{_ctype(dtype)}, {self.block_m}, {self.block_n}, {self.block_k}, {self.warps}, "
                f"{self.stages}, {'true' if b_kmajor else 'false'}, {'true' if out_f32 else 'false'}")

    def short(self) -> str:
        return f"m{self.block_m}n{self.block_n}k{self.block_k}w{self.warps}s{self.stages}"


def _ctype(dtype: str) -> str:
    if dtype in ("bf16", "bfloat16"):
        return "bf16"
    if dtype in ("fp16", "float16", "half"):
        return "fp16"
    raise ValueError(f"dtype must be 'bf16' or 'fp16', got {dtype!r}")


def _flash(*rows: tuple[int, int, int, int], head_dim: int) -> tuple[FlashConfig, ...]:
    return tuple(FlashConfig(bm, bn, w, s, head_dim) for bm, bn, w, s in rows)


#: Shipped flash configurations: (block_m, block_n, warps, stages) per head dim.
#: All compile for sm_80 and sm_90a without spills (tests/test_kernels_build.py),
#: and all fit sm_80's 163 KB (166912 B) opt-in shared memory per block.
SHIPPED_FLASH: tuple[FlashConfig, ...] = _flash(
    (128, 128, 4, 1), (128, 128, 4, 2), (128, 64, 4, 1), (128, 64, 4, 2), (128, 64, 4, 3),
    (128, 32, 4, 2), (64, 64, 4, 1), (64, 64, 4, 2), (64, 128, 4, 2), (128, 64, 8, 2),
    (128, 128, 8, 2),
    head_dim=64,
) + _flash(
    (128, 64, 8, 1), (128, 64, 4, 2), (128, 32, 4, 1), (128, 32, 4, 2), (128, 32, 4, 3),
    (64, 64, 4, 1), (64, 64, 4, 2), (64, 64, 4, 3), (64, 128, 4, 1), (128, 64, 8, 2),
    (128, 128, 8, 1),
    head_dim=128,
)

#: Shipped matmul configurations of the unfused baseline.
SHIPPED_MATMUL: tuple[MatmulConfig, ...] = (
    MatmulConfig(128, 128, 32, 4, 3),
    MatmulConfig(128, 128, 64, 8, 3),
    MatmulConfig(128, 64, 32, 4, 3),
    MatmulConfig(64, 64, 64, 4, 2),
)


def flash_configs_for(head_dim: int) -> tuple[FlashConfig, ...]:
    return tuple(c for c in SHIPPED_FLASH if c.head_dim == head_dim)
