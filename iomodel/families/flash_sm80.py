"""flash_sm80: FlashAttention forward with mma.sync, ldmatrix and cp.async (sm_80 and newer).

Kernel: kernels/csrc/flash_fwd_sm80.cuh (``flash_fwd_kernel``), launched by kernels/flash_sm80.py.
Each of the block's warps owns block_m / warps query rows; K and V chunks of block_n keys stream
through a ring of `stages` SMEM slots.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..limits import GRID_YZ_MAX
from ..styles import MMA_SYNC
from .base import SMEM_ROW, Family, TileConfig, smem_row, spilling

MMA_M, MMA_K = 16, 16   # mma.sync m16n8k16: rows per warp and the k of P.V come in these steps
HEAD_DIMS = (32, 64, 96, 128, 192, 256)
#: the kernel's online softmax keeps a stale row max within 2^STALE_LOG2 of the scores and rescales O only
#: when a row passes it (``STALE_LOG2`` in kernels/csrc/warp_tiles.cuh, the header's RESCALE_STALE policy)
STALE_LOG2 = 8.0


@dataclass(frozen=True)
class FlashConfig(TileConfig):
    """Template parameters of ``flash_fwd_kernel`` (besides dtype and causal)."""

    block_m: int   # query rows per block
    block_n: int   # key rows per streamed chunk
    warps: int     # warps per block; each owns block_m / warps query rows (multiple of 16)
    stages: int    # (K chunk, V chunk) slots buffered in shared memory
    head_dim: int
    q_regs: int = 0   # 1: each warp reads its Q fragments once a tile and holds them in registers (Diagram.hold)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Dynamic shared memory of one block, in bytes (exact): the Q tile and `stages` (K, V) chunks,
        XOR-swizzled, rows of `smem_row(head_dim)` values; no static shared memory."""
        return (self.block_m + 2 * self.stages * self.block_n) * smem_row(self.head_dim) * elem_bytes

    def problems(self) -> list[str]:
        p = []
        if self.warps < 1:
            p.append("warps must be >= 1")
        elif self.block_m <= 0 or self.block_m % (MMA_M * self.warps) != 0:
            p.append(f"block_m ({self.block_m}) must be a positive multiple of 16*warps ({MMA_M * self.warps})")
        if self.block_n <= 0 or self.block_n % MMA_K != 0:
            p.append(f"block_n ({self.block_n}) must be a positive multiple of {MMA_K}")
        if self.stages < 1:
            p.append(f"stages ({self.stages}) must be >= 1")
        if self.head_dim not in HEAD_DIMS:
            p.append(f"head_dim ({self.head_dim}) must be one of {', '.join(map(str, HEAD_DIMS))}")
        if self.q_regs not in (0, 1):
            p.append(f"q_regs ({self.q_regs}) must be 0 or 1")
        elif self.q_regs and self.warps >= 1 and self.block_m != MMA_M * self.warps:
            p.append(f"q_regs holds one m16 tile of Q a warp: block_m ({self.block_m}) must be 16*warps "
                     f"({MMA_M * self.warps})")
        return p


def _shipped(*rows: tuple[int, ...], head_dim: int) -> tuple[FlashConfig, ...]:
    """Configs from (block_m, block_n, warps, stages[, q_regs]) rows."""
    return tuple(FlashConfig(*row[:4], head_dim, *row[4:]) for row in rows)


#: Shipped configurations: (block_m, block_n, warps, stages) per head dim. All compile for sm_80 and
#: sm_90a without spills (tests/kernels/test_build_sm80.py) and fit sm_80's 163 KB opt-in SMEM per block.
SHIPPED: tuple[FlashConfig, ...] = _shipped(
    (128, 128, 4, 1), (128, 128, 4, 2), (128, 64, 4, 1), (128, 64, 4, 2), (128, 64, 4, 3),
    (128, 32, 4, 2), (64, 64, 4, 1), (64, 64, 4, 2), (64, 128, 4, 2), (128, 64, 8, 2),
    (128, 128, 8, 2),
    head_dim=64,
) + _shipped(
    (128, 64, 8, 1), (128, 64, 4, 2), (128, 32, 4, 1), (128, 32, 4, 2), (128, 32, 4, 3),
    (64, 64, 4, 1), (64, 64, 4, 2), (64, 64, 4, 3), (64, 128, 4, 1), (128, 64, 8, 2),
    (128, 128, 8, 1),
    head_dim=128,
) + _shipped(
    (128, 128, 4, 1), (128, 128, 4, 2), (128, 64, 4, 2), (128, 128, 8, 2), (256, 64, 4, 3),
    head_dim=32,   # 64x64 w4 s2 left on 2026-11-25: never the model's pick, and its 106 to 111 registers sit 15
) + _shipped(      # to 21% under the estimate once the overhead took the B^T order's fragments in flight (REG_OVERHEAD)
    (128, 64, 4, 1), (128, 64, 4, 2), (128, 32, 4, 2), (64, 64, 4, 2), (128, 64, 8, 2), (128, 128, 8, 1),
    (256, 64, 8, 2),
    head_dim=96,
) + _shipped(
    (128, 64, 8, 2), (128, 48, 8, 2), (128, 32, 8, 2), (64, 32, 4, 2), (64, 48, 4, 1), (64, 32, 4, 1),
    (128, 64, 8, 2, 1), (64, 48, 4, 1, 1),   # Q held in registers: 48 a thread (profile-pipes-h100-2026-11-25)
    (64, 96, 4, 1, 1), (64, 80, 4, 1, 1),    # two blocks an SM, chunks as wide as they allow (profile-sm80-tiles-h200-2026-11-28)
    head_dim=192,
) + _shipped(
    (128, 96, 8, 1), (128, 64, 8, 1), (64, 64, 4, 1), (64, 48, 4, 1), (128, 48, 8, 2),
    head_dim=256,
)   # d = 256's 64x32 s2 left on 2026-11-25: its slowest config (validation/results/profile-sm80-configs-h100-
#     2026-11-25/configs.json), and with the stale max 246 registers against the model's 208


#: the smallest block_m of the shipped configs: a causal grid's y holds a head's query tiles (an explicit
#: config of smaller tiles is checked at its launch, kernels/flash_sm80.py)
MIN_BLOCK_M = min(c.block_m for c in SHIPPED)


def _launch_problem(shape) -> str:
    """The grid is (query blocks, heads, batch): heads and batch are gridDim.y and gridDim.z; a causal
    dense grid is (heads a section, query blocks, sections): its query blocks are gridDim.y."""
    if max(shape["B"], shape["H"]) > GRID_YZ_MAX:
        return f"batch ({shape['B']}) and heads ({shape['H']}) must each be at most {GRID_YZ_MAX} (grid y and z)"
    if shape.get("causal") and -(-shape["N_q"] // MIN_BLOCK_M) > GRID_YZ_MAX:
        return (f"causal attention takes at most {GRID_YZ_MAX * MIN_BLOCK_M} query rows (grid y holds the query "
                f"tiles), got {shape['N_q']}")
    return ""


def _diagram(causal: bool, gqa: bool, stale_max: float = STALE_LOG2):
    from diagrams import library

    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    d = library.flash_attention(block_m="Br", block_n="Bc", warps="w", stages="st", causal=causal,
                                smem_row_align=SMEM_ROW, stale_max=stale_max, **kw)
    return d.hold("Q", "qr")   # where a config's q_regs is 1 (qr: its value)


def _eager_diagram(causal: bool, gqa: bool):
    return _diagram(causal, gqa, stale_max=0.0)


#: Variants whose ptxas report spills on sm_80 (tests/kernels/test_build_variants.py; the plain and causal
#: ones tests/kernels/test_build_sm80.py), not offered: the configs at 255 registers (128-row tiles of four
#: warps: a 32 x 128 score tile per warp at d = 64, the 32 x 128 output at d = 128; 64 rows a warp at d = 32;
#: d = 256's output tiles) have no room for some of a window's bounds, a softcap's tanh and ALiBi's distances.
#: Which ones moved with the 16-byte O stores, with the stale max and again with the K fragments' B^T order
#: (2026-11-25, warp_tiles.cuh bt_delta: ptxas gives the kernels more registers), which also made two causal
#: variants spill (128x128 s1 at d = 64, 8 bytes; 128x96 w8 s1 at d = 256, 4): their s2 / 64-row neighbours
#: take those shapes.
SPILLING = (
    spilling(FlashConfig(128, 128, 4, 1, 64), "causal", "softcap", "causal softcap", "causal alibi",
             "causal softcap alibi", "window alibi", "window softcap alibi", "causal window", "causal window softcap",
             "causal window alibi", "causal window softcap alibi")
    + spilling(FlashConfig(128, 128, 4, 2, 64), "window", "window alibi", "window softcap alibi", "causal window",
               "causal window alibi", "causal window softcap alibi")
    + spilling(FlashConfig(128, 64, 4, 2, 128), "alibi", "softcap alibi", "causal alibi", "causal softcap alibi",
               "window", "window softcap", "causal window", "causal window softcap")
    + spilling(FlashConfig(256, 64, 4, 3, 32), "window softcap", "window alibi", "causal window softcap",
               "causal window alibi")
    + spilling(FlashConfig(128, 96, 8, 1, 256), "causal")
    + spilling(FlashConfig(64, 96, 4, 1, 192, 1), "window", "window softcap")
    + spilling(FlashConfig(64, 64, 4, 1, 256), "causal softcap", "window alibi", "window softcap alibi",
               "causal window alibi", "causal window softcap alibi")
)


def _window(diagram, left: bool, right: bool):
    """A sliding window (IS_LOCAL): the band on (query, key); the kernel streams the chunks of a tile's band."""
    from diagrams import library

    return library.window_band(diagram, left, right)


#: Registers a thread holds beyond its tiles (the style's 56): with K's fragments in the B^T order (2026-11-25,
#: kernels/csrc/warp_tiles.cuh bt_delta) ptxas gives the shipped configs up to 32 registers more on sm_80, 14 at
#: the median (128x64 w4 at d = 64: 192-200 -> 216-224; validation/results/profile-pipes-h100-2026-11-25/
#: bt-registers.json), which left the style's estimate past the 15% tests/kernels/test_model_vs_ptxas.py holds it
#: to; no flat overhead held d = 32's 64x64 w4 s2 within it too, and it left the shipped configs)
REG_OVERHEAD = 72


#: The tail split (``iomodel.perf.tail_pieces``; the kernel's SPLIT grid and flash_fwd_merge_kernel): without a
#: mask every tile streams the same key chunks, and a grid whose tiles do not fill whole waves of the resident
#: blocks leaves the SMs idle behind its last one (d = 64 N = 32768 B1 H32: 8192 tiles over 264 slots, 31.03
#: waves, the last holding 8).  The last wave's tiles run as up to TAIL_PIECES_MAX pieces, each a share of the
#: key chunks, writing its fp32 O and LSE for the merge kernel.  A piece costs TAIL_OVERHEAD_STEPS chunks more
#: than its own: its Q and first chunks with nothing to overlap, its partial rows written and read back, the
#: merge's launch.  Four, from those parts, had the model split d = 256 N = 8192's 64-row tiles in 5, which ran
#: 0.7% slower than their plain grid, while 32 pieces at d = 64 N = 32768 ran 1.9% faster (H100,
#: validation/results/profile-sm80-tail-h100-2026-11-25/tail.json); eight keeps the one and not the other.
#: Not with score modifiers (the kernel's SPLIT variant has none: ``iomodel.api.family_model``).
TAIL_PIECES_MAX = 32
TAIL_OVERHEAD_STEPS = 8.0

FAMILY = Family(
    name="flash_sm80",
    description="FlashAttention forward, mma.sync + cp.async, synchronous warps",
    problem="attention",
    config_type=FlashConfig,
    symbols={"block_m": "Br", "block_n": "Bc", "warps": "w", "stages": "st", "q_regs": "qr"},
    plan=replace(MMA_SYNC.plan, tail_pieces_max=TAIL_PIECES_MAX,   # the mma_sync style is this kernel's code
                 tail_overhead_steps=TAIL_OVERHEAD_STEPS,           # (iomodel.styles), with its tail split
                 reg_overhead=REG_OVERHEAD),
    build=_diagram,
    label_format="{block_m}x{block_n} w{warps} s{stages}",
    space={"block_m": (16, 32, 64, 96, 128, 192, 256), "block_n": (16, 32, 48, 64, 96, 128, 160, 192, 256),
           "warps": (1, 2, 4, 8, 16), "stages": (1, 2, 3, 4), "q_regs": (0, 1)},
    label_flags={"q_regs": "qregs"},
    shipped=SHIPPED,
    bound={"head_dim": "d"},
    head_dims=HEAD_DIMS,
    launch_problem=_launch_problem,
    window_band=_window,
    spilling_variants=SPILLING,
    score_mods=("softcap", "alibi"),   # SOFTCAP and ALIBI: tanh on the scores, a per-head distance bias
)

#: FlashAttention-2's forward as the model sees it (iomodel.peers): this kernel's schedule with the eager
#: online softmax (every row takes its new max and O is rescaled every chunk), registered by the peers'
#: module, not a kernel of ours
EAGER_PEER = replace(FAMILY, name="flash_sm80_eager", build=_eager_diagram, plan=MMA_SYNC.plan,   # no tail split
                     description="FlashAttention-2's forward: flash_sm80's schedule, O rescaled every chunk")
