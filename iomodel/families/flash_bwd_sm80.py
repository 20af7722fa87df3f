"""flash_bwd_sm80: FlashAttention-2's backward with mma.sync, ldmatrix and cp.async (sm_80 and newer).

Kernels: kernels/csrc/flash_bwd_sm80.cuh, launched by kernels/flash_bwd_sm80.py.
* ``flash_bwd_dot_kernel``: D = rowsum(dO * O) and the LSE in base 2, padded to whole query tiles;
  zeroes the fp32 dQ accumulator.
* ``flash_bwd_kernel``: a block owns `block_k` keys of one (batch, KV head); its warps split them
  (``kv_warps``: 32 keys a warp where they allow), the rest of the split going to the queries of S^T
  and the head dims of dK and dV.  The query tiles of `block_q` rows (Q, dO, LSE, D) stream through
  `stages` SMEM slots, those of each query head of a GQA group in turn.  Per tile: S^T = K Q^T,
  P^T = exp2(S^T - LSE), dP^T = V dO^T, dS^T = P^T (dP^T - D), dV += P^T dO, dK += dS^T Q (dK and dV
  in registers all along; P^T and dS^T through SMEM where the two splits differ); dQ += dS K is added
  into the fp32 accumulator with atomics (``dq_warps`` splits the tile's query rows and head dims).
* ``flash_bwd_dq_kernel`` (deterministic mode, instead of the atomics): a block owns `block_q` query
  rows (16 per warp) and streams the keys in chunks of `block_k`, recomputing S, P and dP.
* ``flash_bwd_convert_kernel``: dQ = scale * accumulator, in the input dtype.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..limits import GRID_YZ_MAX, blocks
from ..styles import MMA_SYNC
from .base import Family, TileConfig

MMA = 16                      # mma.sync m16n8k16: row tiles and k steps come in 16s
HEAD_DIMS = (64, 128)
BLOCK_Q = (32, 64, 128)       # powers of two: dS^T rows in SMEM hold block_q/8 swizzled 16-byte chunks
STAGES = (1, 2)


def kv_warps(block_k: int, warps: int) -> tuple[int, int]:
    """How the main kernel's warps split a key tile: (along the keys, along the queries of S^T and the
    head dims of dK, dV); a warp owns 32 keys where the warps allow (two m16 tiles share each fragment)."""
    along_k = max(1, min(warps, block_k // (2 * MMA)))
    return along_k, warps // along_k


def dq_warps(block_q: int, warps: int) -> tuple[int, int]:
    """How the warps split a (block_q x head_dim) dQ tile in the atomic kernel: (along the rows, along
    the head dim); a warp owns 32 rows where the warps allow (two m16 tiles share each K fragment)."""
    along_q = min(warps, block_q // (2 * MMA))
    return along_q, warps // along_q


@dataclass(frozen=True)
class FlashBwdConfig(TileConfig):
    """Template parameters of ``flash_bwd_kernel`` (besides dtype, causal and the dQ mode)."""

    block_q: int   # query rows per streamed tile
    block_k: int   # keys (and values) a block owns
    warps: int     # split over keys x queries (S^T) and keys x head dims (dK, dV): kv_warps
    stages: int    # query tiles buffered in shared memory (1 or 2)
    head_dim: int

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def dq_threads(self) -> int:
        """Threads of the deterministic dQ kernel: a warp per 16 query rows."""
        return 32 * (self.block_q // MMA)

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Dynamic shared memory of the main kernel, in bytes (exact): K and V tiles, `stages` slots of
        (Q, dO) tiles and (LSE, D) rows, the P^T and dS^T tiles (P^T unused where one warp spans the
        queries: it then stays in registers); no padding (XOR swizzle)."""
        tiles = (2 * self.block_k + 2 * self.stages * self.block_q) * self.head_dim * elem_bytes
        return tiles + 2 * self.stages * self.block_q * 4 + 2 * self.block_k * self.block_q * elem_bytes

    def dq_smem_bytes(self, elem_bytes: int = 2) -> int:
        """Dynamic shared memory of the deterministic dQ kernel: Q and dO tiles and `stages` (K, V) chunks of
        its key chunk (``dq_block_k``)."""
        return (2 * self.block_q + 2 * self.stages * dq_block_k(self)) * self.head_dim * elem_bytes

    def problems(self) -> list[str]:
        p = []
        if self.warps < 1:
            p.append("warps must be >= 1")
        elif self.block_k <= 0 or self.block_k % (2 * MMA) != 0:
            p.append(f"block_k ({self.block_k}) must be a positive multiple of 32 (warps own 32 keys, or share them)")
        if self.block_q not in BLOCK_Q:
            p.append(f"block_q ({self.block_q}) must be one of {', '.join(map(str, BLOCK_Q))}")
        if self.stages not in STAGES:
            p.append(f"stages ({self.stages}) must be 1 or 2")
        if self.head_dim not in HEAD_DIMS:
            p.append(f"head_dim ({self.head_dim}) must be one of {', '.join(map(str, HEAD_DIMS))}")
        if not p:
            along_k, along_x = kv_warps(self.block_k, self.warps)
            if self.warps % along_k or self.block_k % (MMA * along_k) or self.block_q % (MMA * along_x) \
                    or self.head_dim % (MMA * along_x):
                p.append(f"the key tile ({self.block_k} keys, {self.block_q} queries, {self.head_dim} dims) does "
                         f"not split over {self.warps} warps ({along_k} along the keys) in 16s")
            along_q, along_d = dq_warps(self.block_q, self.warps)
            if self.warps % along_q or self.head_dim % (MMA * along_d):
                p.append(f"the dQ tile ({self.block_q}x{self.head_dim}) does not split over {self.warps} warps "
                         "in 16x16 pieces")
        return p


def _shipped(*rows: tuple[int, int, int, int], head_dim: int) -> tuple[FlashBwdConfig, ...]:
    return tuple(FlashBwdConfig(bq, bk, w, s, head_dim) for bq, bk, w, s in rows)


#: Shipped configurations: (block_q, block_k, warps, stages) per head dim; tests/kernels/test_build_bwd.py
#: builds them for sm_80 and sm_90a and reads ptxas's registers and spills.
SHIPPED: tuple[FlashBwdConfig, ...] = _shipped(
    (32, 128, 4, 2), (32, 128, 4, 1), (64, 64, 4, 2), (128, 128, 8, 2), (32, 64, 4, 2),
    head_dim=64,
) + _shipped(
    (64, 64, 4, 2), (64, 128, 8, 2), (64, 128, 8, 1), (32, 128, 8, 2), (32, 64, 4, 2),
    head_dim=128,
)


def _launch_problem(shape) -> str:
    """Grids are (key or query tiles, heads, batch): heads and batch are gridDim.y and gridDim.z."""
    if max(shape["B"], shape["H"]) > GRID_YZ_MAX:
        return f"batch ({shape['B']}) and heads ({shape['H']}) must each be at most {GRID_YZ_MAX} (grid y and z)"
    return ""


def dq_block_k(cfg: FlashBwdConfig) -> int:
    """Key chunk of the deterministic dQ kernel (kernels/flash_bwd_sm80.py launches it so): the config's,
    at most 64 at head dim 128, where S, dP and dQ of a warp's 16 rows all live in registers."""
    return cfg.block_k if cfg.head_dim <= 64 else min(cfg.block_k, 64)


def _padded_rows(shape) -> int:
    """Query rows a head, padded to whole query tiles: the shape does not name the tile, so the largest
    block_q bounds every config's padding (at most 127 rows a head over the exact figure)."""
    tile = max(BLOCK_Q)
    return shape["B"] * shape["H"] * blocks(shape["N_q"], tile) * tile


def _workspace_bytes(shape) -> float:
    """fp32 rows the launch allocates: D and the base-2 LSE, and the dQ accumulator (atomic mode)."""
    return float(4 * _padded_rows(shape) * (shape["d"] + 2))


def _deterministic_workspace_bytes(shape) -> float:
    """D and the base-2 LSE only: the dQ kernel writes dQ itself."""
    return float(4 * _padded_rows(shape) * 2)


def _diagram_args(causal: bool, gqa: bool) -> dict:
    """The library's backward drawn with this kernel's tiles: its `block_n` is the streamed query tile
    (Br, block_q) and its `block_m` the key tile a block owns (Bc, block_k)."""
    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    return dict(block_n="Br", block_m="Bc", warps="w", stages="st", causal=causal, **kw)


def _diagram(causal: bool, gqa: bool):
    """dS^T and P^T go through SMEM (the kernel's buffers: the warps split S^T over keys and queries, dK
    and dV over keys and head dims), so the warps split dQ's tile between them rather than each holding a
    partial of all of it (iomodel.registers)."""
    from diagrams import library

    prog = library.attention_backward(**_diagram_args(causal, gqa))
    dot, main, convert = prog.kernels
    return dataclasses.replace(prog, kernels=(dot, main.stage("dS", "smem").stage("P", "smem"), convert))


def _deterministic_diagram(causal: bool, gqa: bool):
    """dot, dK/dV and dQ kernels; the dQ kernel runs a warp per 16 query rows (``dq_threads``) and streams
    keys in chunks of ``dq_block_k`` (symbol Bq), not the config's warps and block_k."""
    from diagrams import library
    from diagrams.core import size_expr

    kw = _diagram_args(causal, gqa)
    prog = library.attention_backward_deterministic(**kw)
    dq = library.attention_backward_deterministic(**{**kw, "block_m": "Bq", "warps": size_expr("Br") / MMA})
    return dataclasses.replace(prog, kernels=(*prog.kernels[:-1], dq.kernels[-1]))


def _dq_chunks(configs: list) -> dict:
    import numpy as np

    return {"Bq": np.array([dq_block_k(c) for c in configs], dtype=np.float64)}


#: The mma_sync style's plan (iomodel.styles) with less interleaving: these kernels keep dK and dV in
#: registers all along and run at the register cap (ptxas: 238 to 255 a thread), so a warp cannot keep its
#: next fragments' loads in flight over a product and a second warp per scheduler hides little of its
#: phases.  1.1 was fitted on H100 probe runs of the shipped configs of an earlier version of the kernel;
#: the committed runs (validation/results/h100-sxm-2026-11-24-run*.json, docs/kernels_bwd.md) check it.
BACKWARD_PLAN = dataclasses.replace(MMA_SYNC.plan, interleave_max=1.1)

_COMMON = dict(
    problem="attention-backward",   # FLOPs: iomodel.problems (10 B H N_q N_k d, the live part when causal)
    config_type=FlashBwdConfig,
    symbols={"block_q": "Br", "block_k": "Bc", "warps": "w", "stages": "st"},
    plan=BACKWARD_PLAN,
    label_format="{block_q}x{block_k} w{warps} s{stages}",
    space={"block_q": BLOCK_Q, "block_k": (32, 64, 96, 128, 192, 256), "warps": (1, 2, 4, 8), "stages": STAGES},
    shipped=SHIPPED,
    bound={"head_dim": "d"},
    head_dims=HEAD_DIMS,
    launch_problem=_launch_problem,
)

FAMILY = Family(
    name="flash_bwd_sm80",
    description="FlashAttention-2 backward, mma.sync + cp.async, dQ added with fp32 atomics",
    build=_diagram, workspace_bytes=_workspace_bytes, **_COMMON)

DETERMINISTIC = Family(
    name="flash_bwd_sm80_deterministic",
    description="FlashAttention-2 backward, mma.sync + cp.async, dQ by a kernel of its own (no atomics)",
    build=_deterministic_diagram, workspace_bytes=_deterministic_workspace_bytes, derived_symbols=_dq_chunks,
    # its dQ kernel holds no dK, dV: a forward-like kernel, the style's own interleaving
    kernel_plans={"attention-backward-dq": MMA_SYNC.plan}, **_COMMON)

FAMILIES = (FAMILY, DETERMINISTIC)   # the registry lists both (iomodel.families)
