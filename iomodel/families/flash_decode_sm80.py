"""flash_decode_sm80: decode attention over a KV cache, split over the keys, mma.sync + cp.async (sm_80+).

Kernels: kernels/csrc/flash_decode_sm80.cuh, launched by kernels/flash_decode_sm80.py.
* ``flash_decode_kernel``: the g = H / H_kv query heads of a KV head and the N_q query rows of a sequence
  are packed into `rows` rows (16 when g N_q <= 16, else 32: one or two m16 tiles), ``row_blocks`` =
  ceil(g N_q / rows) blocks of them; grid (parts, H_kv row_blocks, B). A CTA loads its Q rows once, then
  streams its part of the keys, ceil(ceil(N_k / block_n) / parts) chunks of `block_n`, through a ring of
  `stages` (K, V) slots; each warp takes block_n / warps keys of every chunk with its own online softmax
  (S = Q K^T and O += P V, mma.sync m16n8k16); after the stream the warps' (max, sum, O) are merged through
  SMEM (fp32, in the ring). One part: O (input dtype) and the LSE are written there. More: each CTA
  writes an fp32 partial O and its LSE per row.
* ``flash_decode_combine_kernel`` (parts > 1 only): a warp per output row (b, h, i), 4 warps a block, reads
  every part's LSE and partial O and writes O (input dtype) and the LSE.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..limits import GRID_YZ_MAX
from ..styles import MMA_SYNC
from .base import Family, TileConfig

MMA = 16                    # mma.sync m16n8k16: row tiles and a warp's keys come in 16s
MAX_ROWS = 32               # packed query rows a CTA holds at most (two m16 tiles)
HEAD_DIMS = (64, 128)
BLOCK_N = (64, 128)
WARPS = (2, 4, 8)
STAGES = (2, 3, 4)
MERGE_PAD = 4               # the merge's fp32 rows are padded by 4 floats (bank conflicts)
COMBINE_ROWS = 4            # output rows (warps) a block of the combine kernel


def rows_tile(packed_rows: int) -> int:
    """The kernel's `rows`: 16 when the g N_q packed rows fit one m16 tile, else 32."""
    return MMA if packed_rows <= MMA else MAX_ROWS


def row_blocks(packed_rows: int) -> int:
    return math.ceil(packed_rows / rows_tile(packed_rows))


@dataclass(frozen=True)
class DecodeConfig(TileConfig):
    """The template parameters of ``flash_decode_kernel`` (besides dtype, rows, causal and paging) and
    `parts`, a launch parameter (the grid's x): how many CTAs split the keys of one sequence."""

    block_n: int    # keys per streamed chunk
    warps: int      # each takes block_n / warps keys of every chunk
    stages: int     # (K chunk, V chunk) slots of the cp.async ring
    parts: int      # CTAs splitting the key axis of one sequence; > 1 adds the combine kernel
    head_dim: int

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def smem_bytes(self, rows: int, elem_bytes: int = 2) -> int:
        """Dynamic shared memory of the main kernel (exact): the Q rows and the ring of K and V chunks,
        rows*head_dim*2 + stages*2*block_n*head_dim*2 in 16-bit; the warps' merge reuses the ring."""
        return (rows + 2 * self.stages * self.block_n) * self.head_dim * elem_bytes

    def merge_bytes(self, rows: int = MAX_ROWS) -> int:
        """SMEM of the warps' merge (in the ring): O rows in fp32, padded, then each warp's max and sum."""
        return (rows * (self.head_dim + MERGE_PAD) + 2 * self.warps * rows) * 4

    def problems(self) -> list[str]:
        p = []
        if self.block_n not in BLOCK_N:
            p.append(f"block_n ({self.block_n}) must be one of {', '.join(map(str, BLOCK_N))}")
        if self.warps not in WARPS:
            p.append(f"warps ({self.warps}) must be one of {', '.join(map(str, WARPS))}")
        elif self.block_n % self.warps or (self.block_n // self.warps) % MMA:
            p.append(f"block_n / warps ({self.block_n}/{self.warps}) must be a multiple of {MMA} (a warp's keys "
                     "are whole k16 steps of P V)")
        if self.stages not in STAGES:
            p.append(f"stages ({self.stages}) must be one of {', '.join(map(str, STAGES))}")
        if self.parts < 1:
            p.append(f"parts ({self.parts}) must be >= 1")
        if self.head_dim not in HEAD_DIMS:
            p.append(f"head_dim ({self.head_dim}) must be one of {', '.join(map(str, HEAD_DIMS))}")
        if not p and self.merge_bytes() > self.smem_bytes(0):
            p.append(f"the warps' merge ({self.merge_bytes()} B at {MAX_ROWS} rows) does not fit the ring")
        return p


#: parts: powers of two and three times them. The model sees the grid through the SMs it covers (the SMs
#: with work share the HBM bandwidth: min(blocks, SMs) / SMs) and its waves, with B H_kv row_blocks CTAs a
#: part. Powers of two alone lose up to 9% where that count has a factor 3 (B = 3, H_kv = 2: 6 x 22 CTAs
#: fill 132 SMs, 6 x 16 leave 36 idle); with 3 x 2^k too, a dense grid of parts (1..160, the SM multiples
#: 33, 66 and 132 among them) gains under 3% on any decode shape tried (`test_parts_grid_loses_little`).
#: SM multiples would fit one chip (132 SMs: H100, H200; an A100 has 108) and split a power-of-two chunk
#: count unevenly; powers of two divide it (no part with less work than the rest).
PARTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def _shipped(*rows: tuple[int, int, int], head_dims=HEAD_DIMS) -> tuple[DecodeConfig, ...]:
    return tuple(DecodeConfig(bn, w, s, p, d) for d in head_dims for bn, w, s in rows for p in PARTS)


#: Shipped configurations: (block_n, warps, stages) for each head dim, each with every `parts` of PARTS (a
#: launch parameter: one compiled kernel serves them all, so the chooser ranks them all). The four-deep ring
#: (64, 4, 4) keeps a third more bytes in flight a CTA: with fewer parts (a grid smaller than the chip)
#: that is what draws the bandwidth (profile-decode-h100-2026-11-24: 256 MiB in 93.7 us at one part).
SHIPPED: tuple[DecodeConfig, ...] = _shipped((64, 4, 3), (64, 4, 4), (128, 4, 2))


def _launch_problem(shape) -> str:
    """The main grid is (parts, H_kv row_blocks, B): H_kv row_blocks and B are gridDim.y and gridDim.z."""
    rb = row_blocks(shape["H"] // shape["H_kv"] * shape["N_q"])
    if shape["B"] > GRID_YZ_MAX or shape["H_kv"] * rb > GRID_YZ_MAX:
        return (f"batch ({shape['B']}) and KV heads x row blocks ({shape['H_kv']} x {rb}) must each be at most "
                f"{GRID_YZ_MAX} (grid z and y)")
    return ""


def _workspace_bytes(shape) -> float:
    """The fp32 partial O and LSE the launch allocates when parts > 1, parts B H N_q (d + 1) floats; the
    shape does not name parts, so at the most the search tries."""
    return float(4 * max(PARTS) * shape["B"] * shape["H"] * shape["N_q"] * (shape["d"] + 1))


def _diagram(causal: bool, gqa: bool):
    """`library.flash_decode` with the row tile `R` the launch picks (`_launch_symbols`). Causal (bottom-right:
    query i of N_q sees keys <= N_k - N_q + i) hides at most N_q - 1 keys at the end of a row's keys; the
    kernel skips no chunk for it (every CTA streams its whole share) and masks scores only in the chunks
    that reach those keys, so the causal diagram is the plain one (the compare-and-select is not counted)."""
    from diagrams import library

    return library.flash_decode(parts="sp", block_n="Bc", warps="w", stages="st", rows="R", combine_rows=COMBINE_ROWS)


def _launch_symbols(shape) -> dict:
    """The rows template parameter the launch picks for the shape's g N_q packed rows, and the page size
    of a paged cache (``page_size`` in the shape; 0: contiguous), which the plan's gather reads."""
    return {"R": rows_tile(shape["H"] // shape["H_kv"] * shape["N_q"]), "pg": int(shape.get("page_size") or 0)}


#: The mma_sync style's plan with one barrier a chunk: the style's 70 cycles a warp per stream step were
#: fitted on flash_sm80, whose warps meet twice a chunk; these warps meet once (their keys are their own).
#: Unmeasured for this kernel: the model of a decode is its HBM term, which this does not move.
#: A paged cache gathers each chunk's Bc rows from pages of `pg` rows (`paged_rows`); each page a CTA's
#: stream enters holds its loads for 0.41 HBM latencies (`page_wait`): 0.215 us a page, what one CTA an SM
#: streaming pages of 16 took at 1 GiB and 512 MiB (444 us for 2048 pages a CTA, 226 us for 1024; pages
#: of 256 near the contiguous cache), validation/results/profile-paged-h100-2026-11-24/table-prefetch-ab.json.
DECODE_PLAN = dataclasses.replace(MMA_SYNC.plan, step_latency_cycles_per_warp=35.0, paged_rows=("Bc", "pg"),
                                  page_wait=0.41)

FAMILY = Family(
    name="flash_decode_sm80",
    description="decode attention over a KV cache: split-KV, packed GQA rows, warps split each chunk's keys, "
                "mma.sync + cp.async",
    problem="attention",      # the forward's shape (B, H, H_kv, N_q, N_k, d) and FLOPs, 4 B H N_q N_k d
    config_type=DecodeConfig,
    symbols={"block_n": "Bc", "warps": "w", "stages": "st", "parts": "sp"},
    plan=DECODE_PLAN,
    build=_diagram,
    label_format="{block_n} w{warps} s{stages} p{parts}",
    space={"block_n": BLOCK_N, "warps": WARPS, "stages": STAGES, "parts": PARTS},
    shipped=SHIPPED,
    bound={"head_dim": "d"},
    head_dims=HEAD_DIMS,
    workspace_bytes=_workspace_bytes,
    launch_problem=_launch_problem,
    launch_symbols=_launch_symbols,
)
