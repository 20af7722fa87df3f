"""flash_bwd_sm90: FlashAttention backward for Hopper (sm_90a): TMA, wgmma and warp specialization.

Kernels: kernels/csrc/flash_bwd_sm90.cuh, launched by kernels/flash_bwd_sm90.py.
* ``flash_bwd_dot_kernel`` (shared with flash_bwd_sm80, csrc/flash_bwd_common.cuh): D = rowsum(dO * O),
  the LSE in base 2 padded to whole query tiles, the fp32 dQ accumulator zeroed.
* the main kernel: a CTA owns `block_n` keys of one (batch, KV head), 64 for each of its `consumers`
  warpgroups; a producer warp brings K and V in once and the query tiles (Q, dO: `block_m` rows; LSE, D)
  through a ring of `stages` SMEM slots with TMA.  Per query tile a consumer warpgroup computes
  S^T = K Q^T and dP^T = V dO^T (wgmma, both operands in SMEM), P^T = exp2(S^T - LSE) and
  dS^T = P^T (dP^T - D) in registers, dV += P^T dO and dK += dS^T Q (wgmma, A from registers), stores
  dS^T to SMEM and, once every warpgroup has, its slice of dQ = dS K (wgmma, both operands in SMEM,
  transposed), staged in SMEM; a dQ writer thread of the producer warpgroup adds the slices to the fp32
  accumulator in global memory with TMA bulk reduce-adds (``cp.reduce.async.bulk``), in key-tile order
  in the deterministic mode.
* ``flash_bwd_convert_kernel``: dQ = scale * accumulator, in the input dtype.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..limits import GRID_YZ_MAX, INDEX_LIMIT, blocks
from ..styles import WGMMA
from .base import Family, TileConfig
from .flash_bwd_sm80 import BACKWARD_PLAN

WGMMA_M = 64                  # keys of one consumer warpgroup (a wgmma row block)
HEAD_DIMS = (32, 64, 96, 128)
SMEM_ROW = 64                 # SMEM tiles hold rows of whole 64-column blocks (TMA SWIZZLE_128B boxes)


def padded_cols(d: int) -> int:
    """A row of d values padded to whole 64-column blocks (the kernel's kHeadDimS: 64 at d = 32, 128 at 96)."""
    return -(-d // SMEM_ROW) * SMEM_ROW
CONSUMERS = (2,)
STAGES = (1, 2)
ALIGN_SLACK_BYTES = 1024      # the kernel rounds the dynamic SMEM base up to 1024 B (swizzle atoms)
MBARRIER_BYTES = 8
MAX_DQ_SLOTS = 2              # the kernel reserves the dQ slots' mbarriers for two in every config
ACC_REGS_MAX = 192            # S^T, dP^T, dK, dV accumulators a consumer thread can hold at 240 registers


@dataclass(frozen=True)
class FlashBwdSm90Config(TileConfig):
    """One compiled variant of the Hopper backward kernel.

    block_m    query rows per streamed tile (Q, dO, LSE, D), a multiple of 64
    block_n    keys per CTA = 64 * consumers
    stages     depth of the (Q, dO) SMEM ring
    head_dim   d (32, 64, 96 or 128; SMEM rows and the dQ accumulator padded to 64-column blocks)
    consumers  consumer warpgroups; the CTA has 128 * (consumers + 1) threads
    """

    block_m: int
    block_n: int
    stages: int
    head_dim: int
    consumers: int = 2

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    @property
    def dq_cols(self) -> int:
        """Columns of the dQ accumulator's rows: the head dim padded to whole 64-column blocks, as the SMEM
        tiles (``padded_cols``; the padding's columns add zeros)."""
        return padded_cols(self.head_dim)

    @property
    def dq_slice(self) -> int:
        """Columns of the dQ slice one warpgroup computes: the warpgroups split the (block_m x dq_cols) tile
        into 64-row blocks, then the columns."""
        return self.dq_cols * (self.block_m // WGMMA_M) // self.consumers

    @property
    def dq_slots(self) -> int:
        """SMEM slots the consumers stage dQ slices in (each a block_m x d fp32 tile): two with 64-query
        tiles, so that a consumer stages a tile's slices while the writer's bulk adds still read the last
        one's (they wait on the L2); with larger query tiles a second slot passes an H100's 227 KB (the
        kernel's kDqSlots, the same rule)."""
        return 2 if self.block_m == WGMMA_M else 1

    def acc_regs(self) -> int:
        """fp32 accumulator registers a consumer thread holds at once: S^T and dP^T (64 keys x block_m)
        and dK, dV (64 keys x d), over 128 threads."""
        return WGMMA_M * (2 * self.block_m + 2 * self.head_dim) // 128

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Exact dynamic shared memory the kernel requests: 1024 (alignment slack), K and V, `stages`
        slots of (Q, dO) tiles, two dS^T buffers, `dq_slots` fp32 dQ tiles, `stages` slots of (LSE, D) rows
        and 8 B per mbarrier (K/V full; Q full, Q empty, dO full, dO empty per stage; dQ full, dQ empty per
        consumer warpgroup and dQ slot, room for two slots in every config); rows of d padded to whole
        64-column blocks (`dq_cols`)."""
        d, m, n, e = self.dq_cols, self.block_m, self.block_n, elem_bytes
        tiles = 2 * n * d * e + self.stages * 2 * m * d * e + 2 * n * m * e + self.dq_slots * m * d * 4
        bars = 1 + 4 * self.stages + 2 * self.consumers * MAX_DQ_SLOTS
        return ALIGN_SLACK_BYTES + tiles + self.stages * 2 * m * 4 + MBARRIER_BYTES * bars

    def problems(self) -> list[str]:
        p = []
        if self.consumers not in CONSUMERS:
            p.append(f"consumers must be one of {CONSUMERS}, got {self.consumers}")
        elif self.block_n != WGMMA_M * self.consumers:
            p.append(f"block_n must be 64 * consumers = {WGMMA_M * self.consumers} (64 keys a consumer "
                     f"warpgroup), got {self.block_n}")
        if self.head_dim not in HEAD_DIMS:
            p.append(f"head_dim must be one of {HEAD_DIMS}, got {self.head_dim}")
        if self.stages not in STAGES:
            p.append(f"stages must be one of {STAGES}, got {self.stages}")
        if self.block_m % WGMMA_M or not WGMMA_M <= self.block_m <= 256:
            p.append(f"block_m must be 64, 128, 192 or 256 (a wgmma n of S^T), got {self.block_m}")
        if p:
            return p
        if self.consumers % (self.block_m // WGMMA_M) or self.dq_slice % 64:
            p.append(f"the dQ tile ({self.block_m}x{self.dq_cols}) does not split over {self.consumers} "
                     "warpgroups in 64-row blocks of whole 64-column slices")
        if self.acc_regs() > ACC_REGS_MAX:
            p.append(f"S^T, dP^T, dK and dV take {self.acc_regs()} accumulator registers a thread "
                     f"(block_m + head_dim <= {ACC_REGS_MAX}): they would spill")
        return p

    @property
    def name(self) -> str:
        return f"m{self.block_m}n{self.block_n}s{self.stages}d{self.head_dim}c{self.consumers}"


#: Shipped variants: compiled without spills (tests/kernels/test_build_bwd_sm90.py), checked and timed
#: on the GPU by the validation sweep.  One slot (stages=1) builds and runs too, but the producer then
#: loads each query tile only after the last one is done: 18-29% slower on the H100 in the eight shapes
#: profiled (docs/kernels_bwd_sm90.md), so it is not shipped.
SHIPPED: tuple[FlashBwdSm90Config, ...] = (
    FlashBwdSm90Config(128, 128, 2, 32, 2),
    FlashBwdSm90Config(128, 128, 2, 64, 2),
    FlashBwdSm90Config(64, 128, 2, 96, 2),
    FlashBwdSm90Config(64, 128, 2, 128, 2),
)


def _derived(configs) -> dict:
    """The symbols the kernel derives from a config: ``dqs``, its dQ staging slots."""
    import numpy as np

    return {"dqs": np.array([float(c.dq_slots) for c in configs])}


def _launch_problem(shape) -> str:
    """Like the forward's: the kernel numbers its query tiles (B * H * tiles of at least 64 rows) and rows
    with 32-bit ints, and its grid is (key tiles, KV heads, batch)."""
    tiles = shape["B"] * shape["H"] * blocks(shape["N_q"], WGMMA_M)
    if tiles >= INDEX_LIMIT or max(shape["N_q"], shape["N_k"]) >= INDEX_LIMIT - 256:
        return f"{tiles} query tiles of {WGMMA_M} rows (or N_q, N_k near 2^31) pass the kernel's 32-bit indices"
    if max(shape["B"], shape["H"]) > GRID_YZ_MAX:
        return f"batch ({shape['B']}) and heads ({shape['H']}) must each be at most {GRID_YZ_MAX} (grid y and z)"
    return ""


def _padded_rows(shape) -> int:
    """Query rows a head, padded to whole query tiles: the shape does not name the tile, so the largest
    block_m bounds every config's padding."""
    tile = 4 * WGMMA_M
    return shape["B"] * shape["H"] * blocks(shape["N_q"], tile) * tile


#: the most SMs of the GPUs this family runs on (the hardware files' sm_90 parts: 132), which bounds the
#: units of a grid's last partial wave
HOPPER_SMS_MAX = 132


def _tail_bytes(shape) -> float:
    """At most what the tail split allocates (kernels.flash_bwd_sm90.piece_floats a piece): fewer units
    than SMs in the last wave, TAIL_PIECES_MAX pieces each, d x 128 fp32 a consumer warpgroup, two of them
    (both shipped configs), and a counter a unit."""
    if shape.get("causal"):
        return 0.0
    units = blocks(shape["N_k"], WGMMA_M * 2) * shape["B"] * shape.get("H_kv", shape["H"])
    tail = min(units, HOPPER_SMS_MAX)
    return float(tail * (TAIL_PIECES_MAX * 4 * shape["d"] * 128 * 2 + 4))


def _workspace_bytes(shape) -> float:
    """fp32 rows the launch allocates: D and the base-2 LSE, and the dQ accumulator (both modes: the
    bulk reduce-adds land there); the tail split's partial sums."""
    return float(4 * _padded_rows(shape) * (padded_cols(shape["d"]) + 2)) + _tail_bytes(shape)


def _deterministic_workspace_bytes(shape) -> float:
    """As the atomic mode's, and an int32 semaphore per query tile of each head (the smallest block_m
    bounds their count)."""
    return _workspace_bytes(shape) + 4.0 * shape["B"] * shape["H"] * blocks(shape["N_q"], WGMMA_M)


def _diagram(causal: bool, gqa: bool):
    """The library's backward with this kernel's tiles: the library's `block_n` is the streamed query tile
    (Br, block_m here) and its `block_m` the key tile a CTA owns (Bc, block_n here), split over consumer
    warpgroups of 128 threads, 64 keys each.  dS^T goes through SMEM, double-buffered (dQ's wgmma reads it
    there, from every warpgroup's keys, while the next tile's is written); P^T stays in registers (dV's
    wgmma takes A from registers); each dQ slice is staged in SMEM for the writer's bulk reduce-add, in
    `dqs` slots (the config's dq_slots: _derived).  Both modes draw the same program (the deterministic one
    orders the adds: its plan)."""
    from diagrams import library

    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    prog = library.attention_backward(block_n="Br", block_m="Bc", warps="cw", stages="st", unit_threads=128,
                                      causal=causal, **kw)
    dot, main, convert = prog.kernels   # the rows kernels have no register-level units: sm80's
    main = main.stage("dS", "smem", buffers=2).stage("dQacc", "smem", buffers="dqs", row_align=SMEM_ROW)
    for x in ("Q", "dO", "K", "V"):      # rows of whole 64-column blocks (d = 32 and 96 padded)
        main = main.stage(x, "smem", row_align=SMEM_ROW)
    return dataclasses.replace(prog, kernels=(dot, main, convert))


#: The wgmma style's plan with three changes, fitted on an H100 run of the first version of the kernel
#: (bf16, B N = 16384, H d = 2048, d 64 and 128, N 1024 to 16384, causal and not:
#: validation/results/h100-sxm-2026-11-24-run4.json) and checked on a run of the committed kernel
#: (run5.json: median error 2.9%, at most 8.6%):
#: * interleave_max 1.0: the consumer warpgroups meet at a named barrier every query tile (a warpgroup's
#:   dQ slice needs every warpgroup's dS^T), so they run in step and neither's exponentials or
#:   elementwise work hide under the other's products;
#: * 50 cycles a warp per query tile (the style's 40): that barrier, the two mbarrier waits, the dQ
#:   slice's staging for the writer (80 until 2026-11-25; refitted on h100-sxm-2026-11-25-bwd-run4.json and
#:   -run5.json, the kernel whose dQ slice is staged while dK's product runs, in two slots at d = 128, with the
#:   LSE loaded before the products: median error 2.1%, at most 6.1%, mean +0.4% over their 40 atomic rows;
#:   80 left it at +4.5%);
#: * 6000 cycles a CTA: its prologue (K and V, the first query tile: nothing to overlap them with) and
#:   epilogue (dK and dV stored from registers), with one CTA an SM and no persistent schedule.
#: Its SMEM beside the drawn tiles (dS^T twice, the dQ slices in `dqs` slots): not the style's full and empty
#: mbarrier per staged buffer (LSE and D ride on Q's and dO's, K and V share one, dS^T's buffers use a named
#: barrier) but the kernel's own 17 (K/V full; Q and dO full and empty per slot; dQ full and empty per
#: consumer warpgroup and dQ slot, at two (Q, dO) slots, two consumers and room for two dQ slots) and the
#: 1024 bytes of alignment slack: with them the model's
#: SMEM is the shipped configs' `smem_bytes()` to the byte (tests/iomodel/test_backward_sm90_family.py).
#: The tail split (``iomodel.perf.tail_pieces``; the kernel's span_of and combine_pieces): without a mask
#: every CTA streams the same query tiles, and the last wave of a grid of CTAs that does not divide by the
#: SMs would leave the rest idle (2048 CTAs over 132 SMs: the 16th wave half full, 3.1% of the SMs' time
#: at d = 128 in docs/kernels_bwd_sm90.md).  Its units run as up to TAIL_PIECES_MAX pieces, each piece
#: writing its dK and dV partial sums (d x 128 floats a consumer warpgroup) for the last to add up.  A
#: piece costs about 10.5 us more than its query tiles (K and V loaded again, the partial sums written and
#: read, a launch gap), five 64-row tiles at d = 128: what the CTA timelines of the split lost against its
#: ideal on the H100 at N = 4096 and 16384 (validation/results/profile-bwd-sm90-h100-2026-11-24/
#: tail-split-ab.json: spans 2308 -> 2287 us and 9021 -> 8822 us).
TAIL_PIECES_MAX = 8
TAIL_OVERHEAD_STEPS = 5.0
KERNEL_MBARRIERS = 1 + 4 * 2 + 2 * 2 * MAX_DQ_SLOTS
BACKWARD_PLAN_SM90 = dataclasses.replace(WGMMA.plan, interleave_max=1.0, step_latency_cycles_per_warp=50.0,
                                         block_latency_cycles=6000.0, sync_bytes_per_buffer=0,
                                         smem_slack_bytes=ALIGN_SLACK_BYTES + MBARRIER_BYTES * KERNEL_MBARRIERS,
                                         tail_pieces_max=TAIL_PIECES_MAX, tail_overhead_steps=TAIL_OVERHEAD_STEPS)

#: The deterministic mode orders each query tile's reduce-adds by key tile, the last first: the dQ writer
#: waits on the semaphore until the CTAs of the later key tiles (launched earlier) have added their slices
#: (bulk reduce done, release, the poll's acquire).  Charged per warp of each step like the barrier term;
#: 100 cycles was fitted on run5.json (median error 6.2%, at most 14%) and is the roughest figure of the
#: model: the waits depend on how far the CTAs of a head drift apart, which a per-step term does not see.
ORDER_WAIT_CYCLES_PER_WARP = 100.0
DETERMINISTIC_PLAN = dataclasses.replace(
    BACKWARD_PLAN_SM90,
    step_latency_cycles_per_warp=BACKWARD_PLAN_SM90.step_latency_cycles_per_warp + ORDER_WAIT_CYCLES_PER_WARP)

#: the rows kernels (dot, convert) are flash_bwd_sm80's (plain synchronous warps, no producer): its plan
_DOT_PLAN = {"attention-backward-dot": BACKWARD_PLAN, "attention-backward-convert": BACKWARD_PLAN}

_COMMON = dict(
    problem="attention-backward",   # FLOPs: iomodel.problems (10 B H N_q N_k d, the live part when causal)
    config_type=FlashBwdSm90Config,
    symbols={"block_m": "Br", "block_n": "Bc", "stages": "st", "consumers": "cw"},
    label_format="{block_m}x{block_n} c{consumers} s{stages}",
    space={"block_m": (64, 128, 192, 256), "block_n": (128,), "stages": STAGES, "consumers": CONSUMERS},
    shipped=SHIPPED,
    bound={"head_dim": "d"},
    head_dims=HEAD_DIMS,
    launch_problem=_launch_problem,
    kernel_plans=_DOT_PLAN,
    derived_symbols=_derived,
)

FAMILY = Family(
    name="flash_bwd_sm90",
    description="FlashAttention backward, wgmma + TMA, warp-specialized, dQ added with TMA bulk reduce-adds",
    plan=BACKWARD_PLAN_SM90,   # the wgmma style's (iomodel.styles), fitted: requires wgmma, so sm_90 only
    build=_diagram, workspace_bytes=_workspace_bytes, **_COMMON)

DETERMINISTIC = Family(
    name="flash_bwd_sm90_deterministic",
    description="FlashAttention backward, wgmma + TMA, dQ reduce-adds ordered by key tile (no separate dQ kernel)",
    plan=DETERMINISTIC_PLAN, build=_diagram, workspace_bytes=_deterministic_workspace_bytes, **_COMMON)

FAMILIES = (FAMILY, DETERMINISTIC)   # the registry lists both (iomodel.families)
