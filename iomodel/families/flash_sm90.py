"""flash_sm90: FlashAttention forward for Hopper (sm_90a): TMA, wgmma and warp specialization.

Kernel: kernels/csrc/flash_fwd_sm90.cuh (``sm90::flash_fwd_sm90<FwdTraits<...>>``), launched by
kernels/flash_sm90.py. A producer warpgroup loads Q, K and V with TMA into a ring of `stages` SMEM
slots; each of the `consumers` warpgroups owns 64 query rows (one wgmma row block) of the CTA's tile.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..limits import INDEX_LIMIT, blocks
from ..styles import WGMMA
from .base import SMEM_ROW, Family, TileConfig, spilling

WGMMA_M = 64                 # rows of one wgmma: each consumer warpgroup owns one row block
HEAD_DIMS = (32, 64, 96, 128, 192, 256)
ALIGN_SLACK_BYTES = 1024     # the kernel rounds the dynamic SMEM base up to 1024 B (swizzle atoms)
MBARRIER_BYTES = 8


def tile_row(head_dim: int) -> int:
    """Values in a row of the kernel's Q, K and V tiles in SMEM: whole swizzle rows of min(SMEM_ROW, d) values, so
    d = 32 takes rows of 32 (64 bytes: the TMA's and wgmma's 64-byte swizzle, FwdTraits::kRowBytes) and every other
    head dim 128-byte column blocks (smem_row; d = 96 in rows of 128).  The diagram pads its tiles so (_diagram)."""
    align = min(SMEM_ROW, head_dim)
    return -(-head_dim // align) * align


@dataclass(frozen=True)
class Sm90Config(TileConfig):
    """One compiled variant of the sm90 kernel.

    block_m    query rows per CTA = 64 * consumers
    block_n    keys per K/V chunk (multiple of 16, <= 256; registers limit it in practice)
    stages     depth of the K/V shared-memory ring
    head_dim   d (64, 128 or 256)
    consumers  consumer warpgroups; the CTA has 128 * (consumers + 1) threads
    """

    block_m: int
    block_n: int
    stages: int
    head_dim: int
    consumers: int = 2

    def problems(self) -> list[str]:
        p = []
        if self.consumers not in (1, 2, 3):
            p.append(f"consumers must be 1, 2 or 3, got {self.consumers}")
        elif self.block_m != WGMMA_M * self.consumers:
            p.append(f"block_m must be 64 * consumers = {WGMMA_M * self.consumers} (one wgmma row block per "
                     f"consumer warpgroup), got {self.block_m}")
        if self.block_n % 16 or not 16 <= self.block_n <= 256:
            p.append(f"block_n must be a multiple of 16 in [16, 256] (a wgmma n and k), got {self.block_n}")
        if self.head_dim not in HEAD_DIMS:
            p.append(f"head_dim must be one of {HEAD_DIMS}, got {self.head_dim}")
        if self.stages < 1:
            p.append(f"stages must be >= 1, got {self.stages}")
        return p

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Exact dynamic shared memory the kernel requests: 1024 (alignment slack) + the Q tile
        + stages x (K chunk + V chunk) + 8 B per mbarrier (Q full and empty, and K full, K empty,
        V full, V empty per stage). Static shared memory is 0."""
        q = self.block_m * tile_row(self.head_dim) * elem_bytes
        kv = self.stages * 2 * self.block_n * tile_row(self.head_dim) * elem_bytes
        return ALIGN_SLACK_BYTES + q + kv + MBARRIER_BYTES * (2 + 4 * self.stages)

    @property
    def name(self) -> str:
        return f"m{self.block_m}n{self.block_n}s{self.stages}d{self.head_dim}c{self.consumers}"


#: Shipped variants: compiled without spills (tests/kernels/test_build_sm90.py) and checked and timed
#: on the GPU by the validation sweep, which ranks several per head dim.
SHIPPED: tuple[Sm90Config, ...] = (
    Sm90Config(128, 128, 2, 64, 2),
    Sm90Config(192, 128, 2, 64, 3),
    Sm90Config(128, 176, 2, 64, 2),
    Sm90Config(128, 64, 2, 64, 2),
    Sm90Config(128, 96, 3, 64, 2),
    Sm90Config(128, 128, 3, 64, 2),
    Sm90Config(128, 192, 2, 64, 2),
    Sm90Config(192, 64, 3, 64, 3),
    Sm90Config(192, 96, 2, 64, 3),
    Sm90Config(128, 128, 2, 128, 2),
    Sm90Config(128, 176, 2, 128, 2),
    Sm90Config(128, 128, 3, 128, 2),
    Sm90Config(128, 64, 2, 128, 2),
    Sm90Config(128, 96, 2, 128, 2),
    Sm90Config(128, 160, 2, 128, 2),
    Sm90Config(128, 96, 3, 128, 2),
    Sm90Config(128, 64, 4, 128, 2),
    Sm90Config(128, 80, 2, 256, 2),
    Sm90Config(128, 64, 2, 256, 2),
    # head dims 32, 96 and 192 (rows padded to 64 in SMEM: d = 32 and 96)
    Sm90Config(192, 128, 3, 32, 3),
    Sm90Config(192, 144, 4, 32, 3),
    Sm90Config(128, 256, 2, 32, 2),
    Sm90Config(128, 128, 2, 32, 2),
    Sm90Config(192, 112, 3, 96, 3),
    Sm90Config(192, 96, 2, 96, 3),
    Sm90Config(128, 128, 3, 96, 2),
    Sm90Config(128, 192, 2, 96, 2),
    Sm90Config(128, 176, 2, 96, 2),
    Sm90Config(192, 80, 4, 96, 3),
    Sm90Config(128, 112, 2, 192, 2),
    Sm90Config(128, 96, 2, 192, 2),
    Sm90Config(128, 80, 2, 192, 2),
    Sm90Config(128, 64, 3, 192, 2),
    Sm90Config(128, 128, 1, 192, 2),
)


#: Variants whose ptxas report spills (tests/kernels/test_build_variants.py), not
#: offered: the configs at the register limit (two consumer warpgroups at 168 registers by ptxas's count,
#: three at 128) have no room for a window's bounds together with a softcap's or ALiBi's values (the
#: lists below are ptxas's, variant by variant).  The chunk-loop changes of 2026-11-28 took the list from 49
#: variants to 31.  Against the shipped build, with one change undone by its A/B switch (validation/results/
#: profile-sm90-rescale-h200-2026-11-28/spill_switches.py): alpha first and the early O rescale undone, 13 more
#: spill (d = 32, 64 and 256) and 2 fewer (192x128 d = 64 causal softcap ALiBi, 192x144 d = 32 window softcap
#: ALiBi); K and V loaded together, 2 more (128x176 d = 128 and 128x192 d = 96 causal softcap ALiBi); each
#: step's descriptor built whole, 1 more (128x112 d = 192 window softcap ALiBi) and 2 fewer (128x80 d = 256 window
#: softcap ALiBi, causal and not).  The window kernels' stale max (2026-11-29) took three more off: the causal
#: window builds of 128x256 d = 32, 192x128 d = 64 and 192x112 d = 96; the lpt walk's table in the causal window
#: kernels (kTable, later on 2026-11-29) two more: 128x128 s1 d = 192 and 128x80 d = 256 causal window softcap ALiBi.
SPILLING = (
    spilling(Sm90Config(128, 80, 2, 256, 2), "window softcap alibi")
    + spilling(Sm90Config(128, 160, 2, 128, 2), "causal window alibi", "causal window softcap alibi",
               "window softcap alibi")
    + spilling(Sm90Config(128, 176, 2, 128, 2), "causal window softcap", "causal window alibi",
               "causal window softcap alibi", "window alibi", "window softcap alibi")
    + spilling(Sm90Config(128, 176, 2, 96, 2), "causal window softcap alibi")
    + spilling(Sm90Config(128, 192, 2, 96, 2), "causal window alibi", "causal window softcap alibi")
    + spilling(Sm90Config(128, 256, 2, 32, 2), "causal window softcap", "causal window alibi",
               "causal window softcap alibi")
    + spilling(Sm90Config(192, 96, 2, 96, 3), "causal window alibi")
    + spilling(Sm90Config(192, 128, 2, 64, 3), "causal window softcap", "causal window alibi",
               "causal window softcap alibi", "causal softcap alibi")
    + spilling(Sm90Config(192, 112, 3, 96, 3), "causal window softcap", "causal window alibi",
               "causal window softcap alibi")
    + spilling(Sm90Config(192, 144, 4, 32, 3), "causal window alibi", "causal window softcap alibi",
               "window softcap alibi")
)


def _launch_problem(shape) -> str:
    """The kernel numbers its tiles (B * H * query blocks of at least 64 rows) and rows with 32-bit
    ints, with 256 rows of headroom for the last block's loads."""
    tiles = shape["B"] * shape["H"] * blocks(shape["N_q"], WGMMA_M)
    if tiles >= INDEX_LIMIT or max(shape["N_q"], shape["N_k"]) >= INDEX_LIMIT - 256:
        return f"{tiles} tiles of {WGMMA_M} rows (or N_q, N_k near 2^31) pass the kernel's 32-bit indices"
    return ""


#: The kernel's stale max (FwdTraits::kStaleLog2, SM90_STALE_LOG2 in kernels/csrc/flash_fwd_sm90.cuh): a warp's rows
#: keep their maxima while no score passes them by more than 2^8 in exp2's exponent, and O is rescaled only when one
#: does, in the plain and window kernels; the plain causal and the score-modifier kernels rescale every chunk (the
#: causal diagram is drawn eager, the modifiers' redrawn so: the family's ``mods_eager``).  Drawn since 2026-11-29
#: with the plan's refit below (before it, drawing it moved d = 96's pick to a tile 4 to 8% slower:
#: validation/results/profile-sm90-lazy-rescale-h200-2026-11-29/).
STALE_LOG2 = 8.0


def _diagram(causal: bool, gqa: bool):
    import sympy as sp

    from diagrams import library
    from diagrams.core import size_expr

    # consumer warpgroups (128 threads) own `block_m / consumers` query rows each; tiles in rows of whole
    # swizzle rows of min(SMEM_ROW, d) values (tile_row)
    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    return library.flash_attention(block_m="Br", block_n="Bc", warps="cw", stages="st", causal=causal,
                                   unit_threads=128, skip_per_unit=True,
                                   smem_row_align=sp.Min(SMEM_ROW, size_expr("d")),
                                   stale_max=0.0 if causal else STALE_LOG2, **kw)


def _window(diagram, left: bool, right: bool):
    """A sliding window (kLocal): the band on (query, key); each consumer warpgroup computes the chunks of
    its own rows' band (as it does below the causal diagonal)."""
    from diagrams import library

    return library.window_band(diagram, left, right, per_unit=True)


#: The wgmma style's plan (this kernel is its code, iomodel.styles), refitted for this kernel twice.
#: 2026-11-24: each consumer warpgroup one more unit of overlap up to three (the style's cap of 1.6 held
#: three-warpgroup tiles 7 to 18% slow at d = 64; validation/results/profile-small-batch-h100-2026-11-24/).
#: 2026-11-25: a warpgroup hides 0.6 of another's non-tensor work (was 0.4; cap 1 + 2 x 0.6), a stream step's
#: barrier costs 55 cycles a warp (was 40) and 200 hidden by the stages (was 100): the two-warpgroup tiles of
#: 128 keys ran 11 to 19% faster than modelled while those of 64 keys ran 3 to 13% slower (their per-chunk
#: waits and hand-overs twice as many a key), so the model picked 128x64 s4 at d = 128 N = 1024 causal, 10%
#: behind 128x128 s3 once the causal sections were sized by waves
#: (validation/results/profile-epilogue-sm90-h100-2026-11-25/staged-o.json).  A grid fitted on 259 rows, each
#: measured beside other configs of its shape (refit_sm90_plan.py there: the five sweeps with every config at
#: N = 4096, the N = 1024 probes, the sliding window's configs on the static walk): median error 4.8 -> 4.0%,
#: mean pick regret 0.19% and none over 5% (one was 11.8%).  python -m iomodel validate, flash_sm90 rows:
#: runs 9 to 11 of 2026-11-22 4.5/4.9/4.3 -> 4.9/6.5/4.5%, the sweeps of 2026-11-24 5.6/4.8 -> 3.6/3.6%, the
#: H200 run 4.9 -> 4.0%, the features runs 6.9/6.8 -> 8.2/8.9%; mean Spearman within the family at
#: N = 4096 0.80-0.93 -> 0.82-0.92 per run (the picks the fastest measured at every shape of those runs).
#: The tail split (``iomodel.perf.tail_pieces``; the kernel's split_item and merge_pieces): without a mask every
#: tile streams the same key chunks, and the static walk's last round of a grid that is not whole waves of SMs
#: leaves the rest idle (d = 128 N = 16384 B1 H16: 2048 tiles, 15.5 waves of 132).  That round's tiles run as up
#: to TAIL_PIECES_MAX pieces, each a share of the key chunks; the tile's last piece merges them (their fp32
#: rows read back from the L2, a pass over every piece).  A piece costs TAIL_OVERHEAD_STEPS chunks more than
#: its own: its Q and first chunks with nothing to overlap, and its rows written and (by the last) read back.
#: Five, from ncu's durations at a locked clock on the H200 (validation/results/profile-sm90-tail-split-h200-
#: 2026-11-28/): the splits it makes ran 1.0 to 1.4% faster (d = 128 N = 8192 and 16384, d = 64 N = 4096 and
#: 32768), while d = 192 / 256 N = 8192, whose pieces' rows are two to four times the bytes, ran 0.6% slower split
#: in 4 and 5 (four chunks' overhead split them, five does not).
TAIL_PIECES_MAX = 8
TAIL_OVERHEAD_STEPS = 5.0
#: One stage (d = 192's 128x128 s1, one CTA an SM): the producer loads a chunk's K or V only once the consumers
#: released the last, so a load overlaps only the other operand's product, and a quarter of the L2 time adds to the
#: compute (SINGLE_BUFFER_L2_OVERLAP, the rest hidden).  Before, the model counted it all hidden and took s1 for s2:
#: on the H200 s1 ran 1.20x 128x112 s2's time at d = 192 N = 16384 without a mask (predicted 1.00x; now 3.47 against
#: a measured 3.51 ms, validation/results/profile-sm90-cluster-scope-h200-2026-11-29/sweep-run1.json) and 1.16 to
#: 1.19x causal at N = 4096 (predicted 1.12x; now 0.515 against 0.492 / 0.497 ms, h200-sxm-2026-11-29-shapes-run*).
SINGLE_BUFFER_L2_OVERLAP = 0.75
#: 2026-11-29, on the H200 (the kernel of f10b083: stale max, tail split, clusters): every shipped config at 24
#: shapes (d = 32 to 256, N = 1024 to 32768, causal and not, (4096, 0) windows, a softcap) and the harness's rows
#: against grids of five fields with the stale max drawn and not (validation/results/profile-sm90-model-refit-h200-
#: 2026-11-29/refit_plan.py): a warpgroup hides 0.5 of another's work (was 0.6; cap 1 + 2 x 0.5), a stream step's
#: latency 150 cycles (was 200) plus 55 a consumer warp, a block's prologue and epilogue 1500 cycles
#: (BLOCK_LATENCY_CYCLES, was none: at N = 1024 causal each tile streams a few chunks, and those rows ran 10 to 21%
#: slower than modelled at d >= 96, 2 to 8% at d = 64), the stale max drawn.  Over the 238 rows on the shipped
#: kernels (the window kernels' with their stale max): median |error| 4.7 -> 3.6%, signed -2.9 -> +0.2%; mean pick
#: regret 0.64 -> 0.31%, at most 6.2 -> 1.9% (the old picks at d = 96 N = 32768 causal, 128x192 c2, ran 6% behind
#: 192x112 c3; at d = 32 with a softcap 128x256 c2 5.7% behind).  The grid's best median (2.9%: 75 cycles a step,
#: 0.45) moved the d = 128 window's pick to 128x176 s2, 4.3% behind 128x128 s3 (picks-run1.json): the model prices
#: that tile 6 to 9% fast in a window and within 2% elsewhere.
BLOCK_LATENCY_CYCLES = 1500.0
SM90_PLAN = dataclasses.replace(WGMMA.plan, interleave_max=2.0, interleave_slope=0.5, step_latency_cycles=150.0,
                                step_latency_cycles_per_warp=55.0, block_latency_cycles=BLOCK_LATENCY_CYCLES,
                                tail_pieces_max=TAIL_PIECES_MAX,
                                tail_overhead_steps=TAIL_OVERHEAD_STEPS,
                                single_buffer_l2_overlap=SINGLE_BUFFER_L2_OVERLAP)

FAMILY = Family(
    name="flash_sm90",
    description="FlashAttention forward, wgmma + TMA, warp-specialized",
    problem="attention",
    config_type=Sm90Config,
    symbols={"block_m": "Br", "block_n": "Bc", "stages": "st", "consumers": "cw"},
    plan=SM90_PLAN,
    build=_diagram,
    label_format="{block_m}x{block_n} c{consumers} s{stages}",
    space={"block_m": (64, 128, 192, 256, 384), "block_n": tuple(range(16, 257, 16)),
           "stages": (1, 2, 3, 4), "consumers": (1, 2, 3)},
    shipped=SHIPPED,
    bound={"head_dim": "d"},
    head_dims=HEAD_DIMS,
    launch_problem=_launch_problem,
    window_band=_window,
    spilling_variants=SPILLING,
    score_mods=("softcap", "alibi"),   # SOFTCAP and ALIBI: tanh on the scores, a per-head distance bias
    mods_eager=True,                   # kStaleLog2 is 0 in the score-modifier kernels (and the plain causal one)
)
