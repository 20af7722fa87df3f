"""How the wgmma forward (``kernels.flash_sm90``, ``csrc/flash_fwd_sm90.cuh``) hands its tiles to the SMs: the
compile-time switches of its schedule, the causal tiles' sections of heads (longest first within each, so that the
CTAs running at once share their heads' K and V in the L2), the grid (persistent, or one CTA a tile) and the tail
split of a persistent grid's last round.  Pure arithmetic on the shape and the device's L2 and SM count; the rules'
measurements are cited beside them.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

__all__ = ["PERSISTENT", "DEFAULT_DEFINES", "STATIC_SCHEDULE", "DYNAMIC_FULL", "NO_SPLIT", "CLUSTER",
           "CLUSTER_MIN_KEYS", "CLUSTER_MIN_HEAD_DIM", "CLUSTER_SPILLING", "pairs_tiles", "WIDE_DYNAMIC",
           "WIDE_DYNAMIC_SPILLING", "WINDOW_SECTION_KV_HEADS", "tile_chunks",
           "DYNAMIC_MAX_HEAD_DIM", "Schedule", "schedule", "schedule_defines", "lpt_walk", "heads_per_section",
           "l2_section_heads", "grid_section_heads", "section_heads", "tail_split", "lpt_order", "causal_chunks"]

FAMILY = "flash_sm90"
# Launch a persistent grid (min(#tiles, #SMs) CTAs walking the tiles) by default.
PERSISTENT = True
# Compile-time switches used by default: none.  Available: SM90_STATIC_SCHEDULE (flash_fwd_sm90.cuh,
# FwdTraits), SM90_WATCHDOG (sm90_common.cuh, mbar_wait), and for A/B runs SM90_DYNAMIC_FULL (the claims
# without a mask too) and SM90_UNROTATED (the non-causal fixed list without its rotation, tile_of_round).
DEFAULT_DEFINES: tuple[str, ...] = ()
# Causal tile order: tiles longest first within sections of heads (TileInfo in the kernel), so that the
# CTAs running at once share their heads' K/V in the L2.  Under the dynamic schedule (d <= 128) a section
# holds the heads whose tiles make SECTION_WAVES waves of CTAs, within SECTION_HEADS query heads, and the
# sections are of one size (B H split evenly, whole GQA groups): a grid whose last section is a short
# remainder ends on its longest tiles with the other SMs idle, and sections of 8 heads or fewer lose the
# L2's sharing (validation/results/profile-small-batch-h100-2026-11-24/sections*.json, B N = 16384, N = 1024
# to 8192, d = 64 and 128, two runs: this rule within 2.1% of the best section size at every shape, the L2
# rule below 0.3% to 8% slower than it, sections of 64 heads and more slower than 32).
SECTION_WAVES = 2
SECTION_HEADS = (16, 32)
# ... and no more heads than their K and V fit in this share of the L2: at long sequences a section of 16 heads
# holds more K and V than the L2 (128 MB at d = 128 N = 16384), and the CTAs re-read them from DRAM (ncu on the
# H200: 4x FlashAttention-4's DRAM bytes, L2 hit rate 79% against its 96%; at the 700 W cap the kernel ran at a
# 7 to 8% lower SM clock than FlashAttention-4 though it took 4% fewer cycles at one clock).  Sections whose K and V
# take 34 MB (4 heads there, 2 at N = 32768, 8 at d = 64 N = 16384 or d = 128 N = 8192) ran 1.6 to 4.3% faster at
# N >= 16384 and 1% at N = 8192; half or twice that many heads 0.8 to 2.6% slower than the best
# (validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/, sections.json, ncu/, power-causal.json).
L2_DYNAMIC_SHARE = 2 / 3
# The static schedule (d > 128): sections of heads whose K and V together take at most this share of the
# L2; below MIN_SECTION_HEADS heads per section all tiles go longest first over all heads.
L2_SECTION_SHARE = 0.4
# the largest head dim whose causal and varlen kernels take the dynamic schedule (FwdTraits::kDynamic,
# SM90_DYN_MAX in the header)
DYNAMIC_MAX_HEAD_DIM = 128
# The static walk's switch, and the sliding windows that take it: a window with a right bound (the causal
# flag) whose band the sequence's start cuts for at most this share of the query rows has tiles of one
# length but for those, and the static walk ran such windows 3.5 to 8.5% faster than the dynamic schedule's
# claims (validation/results/profile-window-h100-2026-11-25/: (4096, 0) at N = 32768 6.4-8.5% over three
# configs; cut for 6 to 50% of the rows at d 64 and 128, N 8192 and 32768: 0.4 to 8.5% faster; the one
# loss, 1.9%, a (512, 0) window at N = 4096 with 64-key chunks).  Plain causal attention (every row cut)
# keeps the dynamic schedule, which balances its unequal tiles.  Those windows are built so, and walk the lpt walk's
# table (lpt_walk; WINDOW_SECTION_KV_HEADS says why).
STATIC_SCHEDULE = "SM90_STATIC_SCHEDULE"
# A sliding window's tiles read their band of K and V (left + block_m keys a tile), not the whole sequence, so where
# the L2 rule (sized on N_k) gives them one section of every head (fewer than MIN_SECTION_HEADS fit), a round's tiles
# would read bands of every head at once: there their sections hold this many K/V heads (their GQA groups of query
# heads).  On the static walk (H200, validation/results/profile-sm90-window-chunks-h200-2026-11-29/) that ran 0 to
# 10.5% faster than one section of all heads, but the short tiles (a head's first rows, whose band key 0 cuts) then
# land unevenly on the rounds: Nsight Compute found the d = 128 (8192, 0) window's SMs idle 14% of the launch
# (validation/results/profile-sm90-window-slope-h200-2026-11-29/).  So a window the static walk would take walks
# the lpt walk's table in these sections (lpt_walk, at every head dim): in two runs 0.3 to 8.6% faster than the
# static walk at d = 64 to 128 (walk-narrow-run*.json; (4096, 0) N = 32768 d = 128 3.7 / 3.5%, (8192, 0) 6.8 /
# 8.6%) and faster than the claims in the same sections at every shape there; -0.5 to +4.7% at d = 192 and 256
# (walk-wide-run*.json; two heads a section 0 to 3.3% faster than the table's one section of all heads; the claims
# in two-head sections 0.9 to 3.9% slower but at d = 256 (2048, 0) N = 16384 B2: 1.2% faster in one run of two).
WINDOW_SECTION_KV_HEADS = 2
DYNAMIC_FULL = "SM90_DYNAMIC_FULL"   # A/B runs: the claims without a mask too (they need the counter)
NO_SPLIT = "SM90_NO_SPLIT"   # A/B runs: the plain kernel built without the tail split (FwdTraits::kSplit)
# The plain kernel (no mask, window, modifier or varlen batch: the fixed walk) as clusters of two CTAs on adjacent
# tiles of one head, K and V multicast (a chunk read from the L2 once a pair; FwdTraits::kCluster), where each tile
# streams at least CLUSTER_MIN_KEYS keys and a head's query tiles pair (an even number).  On the H200, in two runs
# (validation/results/profile-sm90-cluster-scope-h200-2026-11-29/sweep-run*.json): the pair held a 1 to 6% higher
# clock at the 700 W cap than the plain kernel and ran 1.3 to 4.6% faster at d = 96 and 192, N = 4096 and 16384, and
# 0.2 to 2.2% faster sustained at N = 16384 from d = 64 up; at N = 4096, d <= 128, it moved within a run's spread
# (-1.9 to +1.2%); at N = 1024 (8 chunks a tile) it was 0.3 to 3.2% slower.  Its barriers at the cluster scope had
# made it 15 to 27% slower (scope-run1.json there).
CLUSTER = "SM90_CLUSTER"
CLUSTER_MIN_KEYS = 4096
# ... and a head dim of at least this: on an H100 (2026-12-06, validation/results/acceptance-h100-2026-12-06/,
# probe_cluster.py, two runs) the pair ran d = 32 1.6 to 5.7% slower than the plain kernel (N = 4096 and 16384); Nsight
# Compute had found the paired launch's warps stalled on barriers 1.7 cycles an instruction (FlashAttention-4's 0.28;
# the plain build not profiled).  A pair waits on its slower CTA, and at d = 32 the K and V reads it halves are a small
# share of a tile's time (the model's L2 term at N = 4096: 0.23 of it at the pick, 0.36 at d = 64, 0.42 at d = 96,
# 0.62 to 0.66 from d = 128 up).
CLUSTER_MIN_HEAD_DIM = 64
# ... but for the configs whose cluster build spills (nvcc 13.0, sm_90a: 4 to 80 bytes; with two consumer warpgroups
# the pair's producer keeps 40 registers and leaves each consumer 232, not 240; tests/kernels/test_build_sm90.py).
# (d = 256's 128x64 spilled too before the stale max, FwdTraits::kStaleLog2, took alpha and O's multiplies off most
# chunks.)
CLUSTER_SPILLING = ("m128n256s2d32c2", "m128n80s2d256c2")
WINDOW_STATIC_CUT_SHARE = 0.5
# Above DYNAMIC_MAX_HEAD_DIM the causal kernels' dynamic build (this switch raises the header's bound): an A/B knob
# since the lpt walk below (before it the launcher took it where l2_section_heads cut sections: H200,
# validation/results/profile-sm90-tail-split-h200-2026-11-28/, the static walk 7 to 30% slower there) ...
WIDE_DYNAMIC = "SM90_DYN_MAX=256"
# ... whose build spills for these configs (nvcc 13.0, sm_90a: 12 bytes; tests/kernels/test_build_sm90.py)
WIDE_DYNAMIC_SPILLING = ("m128n64s2d256c2",)
MIN_SECTION_HEADS = 8
# A plain causal launch above DYNAMIC_MAX_HEAD_DIM (no window, not varlen) takes the lpt walk: a persistent grid
# whose CTAs walk a tile table made on the host (lpt_order; the kernel's table_tile), the tiles in sections of the
# largest power of 2 of (GQA groups of) heads whose K and V fit GRID_L2_SHARE of the L2, longest first within each,
# each handed to the CTA that frees first.  Its two predecessors each lost one half: the static walk's one section of
# every head read 3.5x the DRAM bytes at long sequences (913 against 262 MB at d = 256 N = 8192 B2 H8, ncu) and at the
# 700 W cap ran at a 3 to 6% lower SM clock though it took 4% fewer cycles at a locked clock; a grid of one CTA a tile
# in these sections read few bytes but its CTAs start cold (validation/results/profile-sm90-power-h200-2026-11-28/).
# The lpt walk keeps the persistent CTAs' overlap of one tile's start with the last one's end and the sections' L2
# reuse: on the H200 (validation/results/profile-sm90-lpt-h200-2026-11-29/, interleaved) 0.1 to 5.4% faster than the
# launcher's earlier choice (the grid, or the dynamic schedule at short sequences) at d = 192 / 256, N = 1024 to 16384,
# and 27.6% at d = 256 N = 1024 B2 (fewer tiles than SMs), as fast at d = 256 N = 16384 (0.1% slower); half or twice
# the heads a section as fast or slower (by up to 7%).
GRID_L2_SHARE = 0.5
# A tile's cost in the table's pass: its key chunks and this many more (its Q load and epilogue).  0, 2, 4 and 8
# within 1.5% of each other but at d = 256 N = 2048 B8 (0: 2% faster than 2) and N = 8192 (2: 2% faster than 0 and 8);
# lpt-tune.json there.
LPT_TILE_OVERHEAD_CHUNKS = 2
# the largest head dim whose causal tiles put the short one first (SM90_OWN_MAX in the header, tile_row0)
OWN_CHUNKS_MAX_HEAD_DIM = 192


def heads_per_section(B: int, H: int, H_kv: int, N_k: int, d: int, elem_bytes: int, l2_bytes: int,
                      m_blocks: int, sms: int, dynamic: bool | None = None) -> int:
    """Query heads per causal scheduling section (B * H: one section); `m_blocks` query tiles a head and
    `sms` CTAs a wave size the dynamic schedule's sections, the static schedule's are l2_section_heads'.
    `dynamic`: whether the launch takes the dynamic schedule (None: the head dim's default,
    d <= DYNAMIC_MAX_HEAD_DIM)."""
    if not (d <= DYNAMIC_MAX_HEAD_DIM if dynamic is None else dynamic):
        return l2_section_heads(B, H, H_kv, N_k, d, elem_bytes, l2_bytes)
    group, heads = H // H_kv, B * H   # two waves of tiles within SECTION_HEADS, sections of one size, whole groups
    lo, hi = SECTION_HEADS
    target = min(hi, max(lo, -(-SECTION_WAVES * sms // max(m_blocks, 1))))
    exact = [p for p in range(lo, hi + 1) if heads % p == 0 and p % group == 0]
    if exact:
        per = min(exact, key=lambda p: abs(p - target))
    else:
        per = _even_split(heads, max(1, round(heads / target)), group)   # else the nearest even split
    # the L2's cap: the query heads whose K and V fit its share, whole groups (one group at least)
    cap = max(1, int(L2_DYNAMIC_SHARE * l2_bytes // max(2 * N_k * d * elem_bytes, 1))) * group
    if per <= cap:
        return per
    fits = [p for p in range(group, cap + 1, group) if heads % p == 0]   # sections of one size, if not too small
    if fits and 2 * fits[-1] >= cap:
        return fits[-1]
    return _even_split(heads, -(-heads // cap), group)   # else the fewest sections under the cap, split evenly


def _even_split(heads: int, sections: int, group: int) -> int:
    """The heads of each of `sections` sections of `heads` split as evenly as whole groups of `group` allow."""
    per = -(-heads // sections)
    return min(heads, -(-per // group) * group)


def l2_section_heads(B: int, H: int, H_kv: int, N_k: int, d: int, elem_bytes: int, l2_bytes: int) -> int:
    """The L2 rule (the static schedule's, and every head dim's before 2026-11-24): the query heads whose K
    and V take at most L2_SECTION_SHARE of the L2; one section of all below MIN_SECTION_HEADS."""
    group, heads = H // H_kv, B * H
    kv_heads = int(L2_SECTION_SHARE * l2_bytes // max(2 * N_k * d * elem_bytes, 1))
    if kv_heads * group < MIN_SECTION_HEADS:
        return heads
    return max(1, min(heads, kv_heads * group))


def tail_split(tiles: int, sms: int, chunks: int, pieces: int | None = None) -> tuple[int, int]:
    """(whole, pieces) of a persistent grid of `tiles` equal tiles of `chunks` key chunks on `sms` SMs: tiles
    0 .. whole - 1 run whole, each of the others (its last round's) as `pieces` pieces (split_item in the kernel).
    The count is the model's (``iomodel.perf.tail_pieces`` over the family's plan), so kernel and model agree;
    `pieces` given (A/B runs) splits the same last round into that many (1: none)."""
    rem = tiles % sms
    if pieces is None:
        from iomodel.families import get   # (sympy's import with it: only where a launch plan is made)
        from iomodel.perf import tail_pieces

        plan = get(FAMILY).plan
        pieces = tail_pieces(tiles, sms, chunks, plan.tail_overhead_steps, plan.tail_pieces_max)[0]
    pieces = max(1, min(int(pieces), chunks))
    return (tiles - rem, pieces) if rem and pieces > 1 else (tiles, 1)


def section_heads(shape: dict, elem_bytes: int, l2_bytes: int, sections: int | None, block_m: int,
                  sms: int, static: bool, window: bool = False) -> int:
    """The causal sections' query heads of a launch (`sections` if given): the fixed walks' L2 rule (a `window`
    WINDOW_SECTION_KV_HEADS' groups where that rule gives one section of all heads), the dynamic schedule's
    heads_per_section, one section of all heads without a mask."""
    B, H = shape["B"], shape["H"]
    if sections is None and not shape["causal"]:
        sections = B * H
    elif sections is None and static:
        sections = l2_section_heads(B, H, shape["H_kv"], shape["N_k"], shape["d"], elem_bytes, l2_bytes)
        if window and sections >= B * H:
            sections = WINDOW_SECTION_KV_HEADS * (H // shape["H_kv"])
    elif sections is None:
        sections = heads_per_section(B, H, shape["H_kv"], shape["N_k"], shape["d"], elem_bytes, l2_bytes,
                                     -(-shape["N_q"] // block_m), sms, dynamic=True)
    return max(1, min(int(sections), B * H))


def grid_section_heads(B: int, H: int, H_kv: int, N_k: int, d: int, elem_bytes: int, l2_bytes: int) -> int:
    """Query heads per section of the one-CTA-a-tile grid: the largest power of 2 of GQA groups whose K and V
    take at most GRID_L2_SHARE of the L2 (one group at least)."""
    group = H // H_kv
    fit = int(GRID_L2_SHARE * l2_bytes // max(2 * N_k * d * elem_bytes, 1))
    kv_heads = 1 << (fit.bit_length() - 1) if fit >= 1 else 1
    return min(B * H, kv_heads * group)


def lpt_walk(s: dict, window=None, varlen: bool = False) -> bool:
    """Whether a launch is one the lpt walk schedules (not varlen): plain causal above DYNAMIC_MAX_HEAD_DIM (the
    causal kernels there walk a fixed list; below it they claim tiles), and a causal window wherever it would
    otherwise walk the fixed rounds (above DYNAMIC_MAX_HEAD_DIM, and below it where schedule_defines builds
    STATIC_SCHEDULE): see WINDOW_SECTION_KV_HEADS."""
    if not s["causal"] or varlen:
        return False
    if s["d"] > DYNAMIC_MAX_HEAD_DIM:
        return True
    return window is not None and STATIC_SCHEDULE in schedule_defines(s, window, varlen)


def causal_chunks(N_q: int, N_k: int, block_m: int, block_n: int, d: int) -> list[int]:
    """The key chunks of each query tile of a bottom-right causal head, by m_block (the kernel's TileInfo; up to
    OWN_CHUNKS_MAX_HEAD_DIM the short tile is m_block 0, the others' rows shifted up by whole warpgroups)."""
    full = -(-N_k // block_n)
    r = N_q % block_m
    shift = (block_m - r) // 64 * 64 if r and d <= OWN_CHUNKS_MAX_HEAD_DIM else 0
    out = []
    for m in range(-(-N_q // block_m)):
        last = min(m * block_m - shift + block_m - 1 + N_k - N_q, N_k - 1)
        out.append(0 if last < 0 else min(last // block_n + 1, full))
    return out


def tile_chunks(s: dict, block_m: int, block_n: int, window=None) -> list[int]:
    """The key chunks of each query tile of a causal head, by m_block: ``causal_chunks``, or with a causal `window`
    (a ``kernels.window.Window``) its band's (the kernel's TileInfo and j0: rows unshifted, a tile whose rows see
    no key none)."""
    if window is None:
        return causal_chunks(s["N_q"], s["N_k"], block_m, block_n, s["d"])
    N_q, N_k = s["N_q"], s["N_k"]
    left, right = window.kernel_args()
    full = -(-N_k // block_n)
    out = []
    for m in range(-(-N_q // block_m)):
        last = min(m * block_m + block_m - 1 + N_k - N_q + right, N_k - 1)
        end = 0 if last < 0 else min(last // block_n + 1, full)
        out.append(max(end - max(m * block_m + N_k - N_q - left, 0) // block_n, 0))
    return out


def lpt_order(s: dict, block_m: int, block_n: int, ctas: int, sections: int, window=None) -> list[int]:
    """The fixed walk's tile table of a causal launch (a causal `window`'s too) on `ctas` persistent CTAs (the
    kernel's table_tile): tiles in the kernel's order (sections of `sections` heads, longest first within each),
    each handed to the CTA that frees first (a tile costs its chunks, ``tile_chunks``, and LPT_TILE_OVERHEAD_CHUNKS;
    ties to the lower CTA), written round-major, one column a CTA, every column ended by -2."""
    chunks = tile_chunks(s, block_m, block_n, window)
    num_m, heads = len(chunks), s["B"] * s["H"]
    free = [(0, c) for c in range(ctas)]
    lists: list[list[int]] = [[] for _ in range(ctas)]
    for t in range(num_m * heads):
        base = (t // (sections * num_m)) * sections                # the first head of t's section (TileInfo)
        m_block = num_m - 1 - (t - base * num_m) // min(sections, heads - base)
        busy, c = heapq.heappop(free)
        lists[c].append(t)
        heapq.heappush(free, (busy + chunks[m_block] + LPT_TILE_OVERHEAD_CHUNKS, c))
    rounds = max(len(x) for x in lists) + 1
    table = [-1] * (rounds * ctas)
    for c, tiles in enumerate(lists):
        for k, t in enumerate(tiles):
            table[k * ctas + c] = t
        table[len(tiles) * ctas + c] = -2
    return table


def pairs_tiles(s: dict, config, window=None, varlen: bool = False, modified: bool = False) -> bool:
    """Whether a launch of `config` (an Sm90Config) runs as clusters of two CTAs (CLUSTER): the plain kernel (no
    mask, window, score modifier or varlen batch) at a head dim of at least CLUSTER_MIN_HEAD_DIM, tiles that stream
    at least CLUSTER_MIN_KEYS keys, an even number of them a head, a config whose cluster build does not spill."""
    plain = not s["causal"] and window is None and not varlen and not modified
    return (plain and s["N_k"] >= CLUSTER_MIN_KEYS and s["d"] >= CLUSTER_MIN_HEAD_DIM
            and -(-s["N_q"] // config.block_m) % 2 == 0 and config.name not in CLUSTER_SPILLING)


def schedule_defines(s: dict, window=None, varlen: bool = False, config=None, modified: bool = False
                     ) -> tuple[str, ...]:
    """The compile-time switches of a launch: DEFAULT_DEFINES, with the static walk for a window of equal
    tiles (WINDOW_STATIC_CUT_SHARE), with CLUSTER where pairs_tiles says so for `config` (None: not asked);
    `window` a ``kernels.window.Window`` or None, `modified`: score modifiers."""
    if config is not None and pairs_tiles(s, config, window, varlen, modified):
        return (*DEFAULT_DEFINES, CLUSTER)
    if window is None or varlen or not s["causal"] or s["d"] > DYNAMIC_MAX_HEAD_DIM:
        return DEFAULT_DEFINES
    # bottom-right aligned: row i's band starts at key i + N_k - N_q - left, cut by key 0 below this row
    cut = window.left - (s["N_k"] - s["N_q"]) if window.left >= 0 else s["N_q"]
    if max(cut, 0) <= WINDOW_STATIC_CUT_SHARE * s["N_q"]:
        return (*DEFAULT_DEFINES, STATIC_SCHEDULE)
    return DEFAULT_DEFINES


@dataclass(frozen=True)
class Schedule:
    """A launch's schedule: its compile-time `defines`, whether its tiles follow the fixed walk (`static`, else
    the dynamic schedule's claims where the kernel has them), whether the grid is `persistent` (else one CTA a
    tile) and the causal `sections`' query heads; `lpt`: the persistent fixed walk takes lpt_order's table."""
    defines: tuple[str, ...]
    static: bool
    persistent: bool
    sections: int
    lpt: bool = False


def schedule(s: dict, block_m: int, sms: int, l2_bytes: int, elem_bytes: int, window=None, varlen: bool = False,
             defines=None, persistent=None, sections=None, config=None, modified: bool = False) -> Schedule:
    """The schedule of a launch of shape `s` on a device of `sms` SMs and an L2 of `l2_bytes`: the lpt walk where
    lpt_walk says so and no knob is given.  `defines`, `persistent` and `sections` given (A/B runs) override the
    rules: above DYNAMIC_MAX_HEAD_DIM `persistent=False` is a grid of one CTA a tile, `defines=()` with
    `persistent=True` the static walk, `defines=(WIDE_DYNAMIC,)` the dynamic schedule; `persistent="lpt"` the lpt
    walk of any plain causal launch (at d <= DYNAMIC_MAX_HEAD_DIM built for the fixed walk, STATIC_SCHEDULE: within
    a run's spread of the claims there, validation/results/profile-sm90-lpt-small-h200-2026-11-29/).  The lpt walk
    and the grid take grid_section_heads' sections where `sections` is not given (a window section_heads')."""
    wide = lpt_walk(s, window, varlen)
    if persistent == "lpt" and not (s["causal"] and not varlen):
        raise ValueError("the lpt walk is for causal launches (a causal window's too; not varlen)")
    lpt = persistent == "lpt" or (wide and persistent is None and defines is None)
    if lpt:
        persistent = True
        if defines is None and s["d"] <= DYNAMIC_MAX_HEAD_DIM:
            defines = (*DEFAULT_DEFINES, STATIC_SCHEDULE)
    if defines is None:   # the clusters' walk is the persistent one
        defines = schedule_defines(s, window, varlen, config if persistent in (None, True) else None, modified)
    defines = tuple(defines)
    static = STATIC_SCHEDULE in defines or (s["d"] > DYNAMIC_MAX_HEAD_DIM and WIDE_DYNAMIC not in defines)
    if lpt and not static:
        raise ValueError("the lpt walk takes the fixed walk's build (no WIDE_DYNAMIC; STATIC_SCHEDULE at d <= 128)")
    if sections is None and window is None and (lpt or (wide and persistent is False)):
        sections = grid_section_heads(s["B"], s["H"], s["H_kv"], s["N_k"], s["d"], elem_bytes, l2_bytes)
    persistent = PERSISTENT if persistent is None else bool(persistent)
    return Schedule(defines, static, persistent,
                    section_heads(s, elem_bytes, l2_bytes, sections, block_m, sms, static, window is not None), lpt)
