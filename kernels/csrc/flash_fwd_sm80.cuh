// FlashAttention forward, Ampere-style (mma.sync m16n8k16 + ldmatrix + cp.async).
// Runs on sm_80 and newer (Hopper runs it on the legacy tensor-core path).
//
// One block computes BLOCK_M query rows of one (batch, head) against all
// visible keys, streaming K/V in chunks of BLOCK_N rows through a ring of
// STAGES (K chunk, V chunk) slots in shared memory.
//
// Shared memory (dynamic, no static):  (BLOCK_M + 2*STAGES*BLOCK_N) * HEAD_DIM_S * sizeof(T), HEAD_DIM_S the
// head dim rounded up to 64 (rows of whole 128-byte swizzle groups)
//   [ Q tile | K slot 0 | V slot 0 | K slot 1 | V slot 1 | ... ]
// each tile row-major (HEAD_DIM contiguous), 16-byte chunks XOR-swizzled
// (chunk ^= row & 7) instead of padded.
//
// Registers per thread (MT = BLOCK_M / WARPS / 16 m16 tiles per warp):
//   O accumulator  MT * HEAD_DIM/8 * 4 fp32,  S/P tile  MT * BLOCK_N/8 * 4 fp32,
//   running max / sum  4*MT fp32, plus one Q A-fragment (4*MT regs) and one
//   K or V B-fragment (4 regs) in flight.
//
// Grid: x = query tile (fastest), y = head, z = batch.  Consecutive blocks
// share (batch, head) and therefore stream the same K/V: the blocks resident
// at one time read each K/V chunk from DRAM once and hit L2 afterwards.
// A causal dense launch (not varlen, not a window) takes a sectioned grid instead: x = head within a
// section of the B * H (batch, head) pairs, y = query tile from the last (the longest) down, z = section.
// Blocks start in launch order (x fastest), so within a section every head's longest tile starts before
// any head's next one and the shortest fill the end, while the blocks resident together stream the K/V
// of one section's heads (kernels/flash_sm80.py `causal_section_heads`: about a wave of blocks).
// Before, the heads' tiles went one head after another, so the last heads' longest tiles started near the
// grid's end and left SMs idle behind them.
// The other causal variants walk a head's query tiles last-first (blockIdx.x = 0 the last tile).
//
// IS_VARLEN (packed variable-length batches, FlashAttention's varlen layout): sequence b's rows are rows
// cu_q[b] .. cu_q[b+1] of q and o, (total_q, H, d), and cu_k[b] .. of k and v; the grid's x covers the
// longest sequence and the tiles past a shorter one's rows return at once; N_q and N_k are per sequence
// (the causal diagonal too, bottom-right in each); the LSE is (H, total_q).  The arguments N_q and N_k
// are then total_q and total_k; the batch strides are unused.
//
// IS_LOCAL (a sliding window, FlashAttention's window_size): query i sees keys j with
// i + diag - win_left <= j <= i + diag + win_right (diag = N_k - N_q, bottom-right).  The upper bound
// is IS_CAUSAL's diagonal moved by win_right (the launcher sets IS_CAUSAL whenever the window has
// one); win_left >= 2^30 stands for no lower bound.  A tile streams only the chunks of its band: from
// the chunk holding its first row's first key; chunks across either edge are masked.  (The window's
// terms are all under IS_LOCAL, so the other variants compile to the code they had without it.)
//
// MODS (FlashAttention's softcap and alibi_slopes; warp_tiles.cuh `score_mods`): bit 1 softcap, the scores
// s -> tanh(s * softcap_mul) with the launcher passing cap as `scale` (so the logits are cap *
// tanh(scale q.k / cap)); bit 2 ALiBi, the logits minus slope * |i + N_k - N_q - j|, the slope of
// (batch b, head h) at alibi[b * alibi_sb + h] (alibi_sb 0: one slope per head).  Applied to every
// chunk before its masks; MODS = 0 reads neither argument.
//
// SPLIT (the tail split; a dense grid without a mask, a window or score modifiers, whose tiles all stream the
// same chunks): the grid's last partial wave would leave most SMs idle, so its tiles run as `split_pieces`
// pieces each, a piece a share of the key chunks.  The grid is 1-D: blocks [0, split_whole) are tiles 0 ..
// split_whole - 1 in the 3-D grid's order (query tile fastest, then head, then batch), each block after them
// one piece of a tile from split_whole on (a tile's pieces adjacent).  A piece writes its fp32 O (normalised by
// its own sum) and its LSE to opart / lpart (merge_rows.cuh's layout, rows = the split tiles x BLOCK_M) and
// flash_fwd_merge_kernel, launched after, merges each row's pieces into O and the LSE (kernels/flash_sm80.py
// picks the pieces with iomodel.perf.tail_pieces, as the model does).
#pragma once
#include "iom_common.cuh"
#include "warp_tiles.cuh"
#include "merge_rows.cuh"

// The online softmax's rescale policy (warp_tiles.cuh: Rescale): a stale max, O rescaled only when a row
// of the warp passes it by 2^8; against EAGER (every chunk) 1.6 to 11% faster on the H100 from N = 4096
// (validation/results/profile-rescale-h100-2026-11-25/).  A probe may build another.
#ifndef IOM_FWD_RESCALE
#define IOM_FWD_RESCALE RESCALE_STALE
#endif

namespace iom {


// The (batch, head) of a block of the sectioned causal grid (x = head within a section, z = section), from
// reads of %ctaid and %nctaid that the compiler may not merge with earlier ones (asm volatile): the epilogue
// calls it again instead of keeping b and h, or what they gave, live through the key loop.
__device__ __forceinline__ void section_head(int H, int& b, int& h) {
    u32 x, z, nx;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(x));
    asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(z));
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(nx));
    const int bh = (int)(z * nx + x);
    h = bh % H;
    b = bh / H;
}

// The (batch, head) of a block of the other grids (y = head, z = batch), from fresh reads of %ctaid (asm
// volatile, as section_head): the epilogue's O and LSE row pointers come from them again instead of being held
// through the key loop.
__device__ __forceinline__ void grid_head(int& b, int& h) {
    u32 y, z;
    asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(y));
    asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(z));
    h = (int)y;
    b = (int)z;
}

// The tile (and piece, -1 for a whole tile) of a block of the tail split's 1-D grid (SPLIT above), from a
// read of %ctaid.x the compiler may not merge with an earlier one (asm volatile): the epilogue calls it again
// instead of keeping the tile's coordinates live through the key loop (128x128 s1 at d = 64 spilled with them).
template <int BLOCK_M>
__device__ __forceinline__ void split_tile(int N_q, int H, int whole, int pieces, int& m_block, int& h, int& b,
                                           int& t, int& piece) {
    u32 ux;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(ux));
    const int x = (int)ux;
    t = x;
    piece = -1;
    if (x >= whole) {
        t = whole + (x - whole) / pieces;
        piece = (x - whole) % pieces;
    }
    const int num_m = (N_q + BLOCK_M - 1) / BLOCK_M;
    m_block = t % num_m;
    const int hb = t / num_m;
    h = hb % H;
    b = hb / H;
}

// A piece's epilogue (SPLIT): each row's O normalised by the piece's own sum, in fp32, and its LSE; rows past
// N_q too (the merge skips them).  `row0`: the thread's first row in the tile; `op` / `lp`: the tile's rows of
// this piece in the partials.
template <int MT, int DT, int HEAD_DIM>
__device__ __forceinline__ void split_partials(float* op, float* lp, const float (&acc_o)[MT][DT][4],
                                               const float (&row_max)[MT][2], const float (&row_sum)[MT][2],
                                               int row0, int col_lane, float scale) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const float l = quad_sum(row_sum[mt][hh]);
            const float inv = (l > 0.f) ? 1.f / l : 0.f;
            const int r = row0 + mt * 16 + hh * 8;
            float* orow = op + (i64)r * HEAD_DIM + col_lane;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
                *reinterpret_cast<float2*>(orow + dt * 8) =
                    make_float2(acc_o[mt][dt][2 * hh] * inv, acc_o[mt][dt][2 * hh + 1] * inv);
            if ((lane & 3) == 0) lp[r] = row_lse(row_max[mt][hh], l, scale);
        }
    }
}

template <class T, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int HEAD_DIM, bool IS_CAUSAL,
          bool IS_VARLEN = false, bool IS_LOCAL = false, int MODS = 0, bool SPLIT = false, bool Q_REGS = false>
__global__ void __launch_bounds__(WARPS * 32, 1)
flash_fwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                 T* __restrict__ o, float* __restrict__ lse,
                 i64 q_sb, i64 q_sh, i64 q_sn,
                 i64 k_sb, i64 k_sh, i64 k_sn,
                 i64 v_sb, i64 v_sh, i64 v_sn,
                 i64 o_sb, i64 o_sh, i64 o_sn,
                 int H, int group, int N_q_arg, int N_k_arg, float scale_log2, float scale,
                 const int* __restrict__ cu_q, const int* __restrict__ cu_k, int win_left, int win_right,
                 float softcap_mul, const float* __restrict__ alibi, i64 alibi_sb,
                 int split_whole, int split_pieces, float* __restrict__ opart, float* __restrict__ lpart) {
    constexpr int THREADS = WARPS * 32;
    constexpr int ROWS_PER_WARP = BLOCK_M / WARPS;
    constexpr int MT = ROWS_PER_WARP / 16;   // m16 tiles per warp
    constexpr int NT = BLOCK_N / 8;          // n8 tiles of S
    constexpr int DT = HEAD_DIM / 8;         // n8 tiles of O
    // The epilogue's O stores: 16 bytes after a quad transpose up to d = 128 (the pairs' 4-byte stores ran 1.5
    // to 3.4% slower at N = 1024: validation/results/profile-sm80-fwd-h100-2026-11-25); at d = 192 and 256
    // the transpose's registers take the 64x32 configs to 210 and 246 (sm_80), more than the 15% the model's
    // estimate (176, 208) is held to, for an epilogue that is a smaller share of their time (with ALiBi
    // 128x128 s1 at d = 64 spills: iomodel/families/flash_sm80.py SPILLING, not offered)
    constexpr bool WIDE_STORES = HEAD_DIM <= 128;
    static_assert(DT % 4 == 0, "the epilogue's 16-byte stores take 8-column groups four at a time (d % 32 == 0)");
    constexpr int KP = BLOCK_N / 16;         // k16 steps of P V
    constexpr int CPR = HEAD_DIM / 8;        // 16-byte chunks of a row
    // SMEM rows hold whole groups of 8 chunks (the XOR swizzle's span): head dims 32 and 96 are padded to
    // 64 and 128 (the padding is neither written nor read)
    constexpr int CPR_S = (CPR + 7) / 8 * 8;
    // threads a row takes in the loaders: a power of two (a divisor of the block's threads)
    constexpr int COLS = CPR <= 4 ? 4 : CPR <= 8 ? 8 : CPR <= 16 ? 16 : 32;
    constexpr int ROW_BYTES = CPR_S * 16;
    static_assert(sizeof(T) == 2, "16-bit inputs only");
    static_assert(BLOCK_M % (16 * WARPS) == 0, "each warp owns a multiple of 16 query rows");
    static_assert(BLOCK_N % 16 == 0, "BLOCK_N must be a multiple of 16");
    static_assert(HEAD_DIM % 32 == 0 && HEAD_DIM <= 256, "HEAD_DIM must be a multiple of 32, at most 256");
    static_assert(STAGES >= 1, "STAGES >= 1");
    using E = Elem<T>;

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    constexpr bool SECTIONED = IS_CAUSAL && !IS_VARLEN && !IS_LOCAL;   // (head in section, tile rank, section)
    static_assert(!SPLIT || (!IS_CAUSAL && !IS_VARLEN && !IS_LOCAL && MODS == 0),
                  "the tail split takes tiles of one length, without score modifiers");
    int m_block, h, b;
    int tile, piece = -1;   // SPLIT: this block's tile (linear) and its piece of a tail tile (-1: a whole tile)
    if constexpr (SPLIT) {
        split_tile<BLOCK_M>(N_q_arg, H, split_whole, split_pieces, m_block, h, b, tile, piece);
    } else if constexpr (SECTIONED) {
        section_head(H, b, h);
        m_block = (int)(gridDim.y - 1 - blockIdx.y);
    } else {
        m_block = IS_CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
        h = blockIdx.y;
        b = blockIdx.z;
    }
    const int hk = h / group;
    int m0 = m_block * BLOCK_M;   // (SPLIT: set again at the epilogue)
    int N_q = N_q_arg, N_k = N_k_arg;
    i64 q_at = (i64)b * q_sb, k_at = (i64)b * k_sb, v_at = (i64)b * v_sb;
    if constexpr (IS_VARLEN) {
        const int q0 = cu_q[b], k0 = cu_k[b];
        N_q = cu_q[b + 1] - q0;
        N_k = cu_k[b + 1] - k0;
        if (m0 >= N_q) return;   // a tile past this sequence's rows
        q_at = (i64)q0 * q_sn, k_at = (i64)k0 * k_sn, v_at = (i64)k0 * v_sn;
    }
    if constexpr (SPLIT) {
        if (piece >= 0) {   // a piece is attention over its share of the key chunks: K and V from its first key
            const int chunks = (N_k + BLOCK_N - 1) / BLOCK_N;
            const int first = piece * chunks / split_pieces, end = (piece + 1) * chunks / split_pieces;
            k_at += (i64)first * BLOCK_N * k_sn;
            v_at += (i64)first * BLOCK_N * v_sn;
            N_k = min(N_k, end * BLOCK_N) - first * BLOCK_N;   // > 0: the launcher gives a piece a chunk at least
        }
    }
    // key j is visible from query i iff j <= i + diag (causal; local: the diagonal moved by win_right)
    // and, local, j >= i + lo
    const int diag = IS_LOCAL ? N_k - N_q + win_right : N_k - N_q;
    const int lo = IS_LOCAL ? N_k - N_q - win_left : 0;

    const T* qg = q + q_at + (i64)h * q_sh;
    const T* kg = k + k_at + (i64)hk * k_sh;
    const T* vg = v + v_at + (i64)hk * v_sh;
    // O's and the LSE's rows of (b, h) (varlen: of sequence b); the epilogue computes them again (below)
    auto out_rows = [&](int b_, int h_, T*& og_, float*& lg_) {
        i64 oa = (i64)b_ * o_sb, la = ((i64)b_ * H + h_) * N_q;
        if constexpr (IS_VARLEN) {
            const int q0 = cu_q[b_];
            oa = (i64)q0 * o_sn;
            la = (i64)h_ * N_q_arg + q0;
        }
        og_ = o + oa + (i64)h_ * o_sh;
        lg_ = lse + la;
    };
    T* og;
    float* lg;
    out_rows(b, h, og, lg);

    int n_blocks = (N_k + BLOCK_N - 1) / BLOCK_N;
    if (IS_CAUSAL) {
        const int last_row = min(m0 + BLOCK_M, N_q) - 1;
        const int last_key = last_row + diag;            // highest key any row here sees
        n_blocks = min(n_blocks, last_key < 0 ? 0 : last_key / BLOCK_N + 1);
    }
    int j0 = 0;   // the first chunk any row of the tile sees
    if constexpr (IS_LOCAL) j0 = m0 + lo <= 0 ? 0 : (m0 + lo) / BLOCK_N;
    if (n_blocks <= j0) {
        // No query row of this tile sees any key: O = 0, L = -inf.
        constexpr int CHUNKS = BLOCK_M * CPR;
        for (int i = tid; i < CHUNKS; i += THREADS) {
            const int r = i / CPR, c = i % CPR;
            if (m0 + r < N_q) {
                u32* dst = reinterpret_cast<u32*>(og + (i64)(m0 + r) * o_sn + c * 8);
                dst[0] = 0u; dst[1] = 0u; dst[2] = 0u; dst[3] = 0u;
            }
        }
        for (int r = tid; r < BLOCK_M; r += THREADS)
            if (m0 + r < N_q) lg[m0 + r] = neg_inf();
        return;
    }

    const u32 sQ = smem_addr(dyn_smem());
    const u32 sKV = sQ + BLOCK_M * ROW_BYTES;
    constexpr u32 SLOT_BYTES = 2u * BLOCK_N * ROW_BYTES;
    constexpr u32 V_OFFSET = (u32)BLOCK_N * ROW_BYTES;

    using Loader = TileLoader<BLOCK_N, CPR, THREADS, CPR_S, COLS>;
    const Loader ld(tid);
    const T* k_src = kg + (i64)ld.r0 * k_sn + ld.c8;
    const T* v_src = vg + (i64)ld.r0 * v_sn + ld.c8;
    int kv_left = N_k;   // keys from the stream's first chunk on
    if constexpr (IS_LOCAL) {   // the stream starts at chunk j0
        k_src += (i64)j0 * BLOCK_N * k_sn;
        v_src += (i64)j0 * BLOCK_N * v_sn;
        kv_left -= j0 * BLOCK_N;
    }
    const i64 k_step = (i64)Loader::RSTEP * k_sn;
    const i64 v_step = (i64)Loader::RSTEP * v_sn;
    // step t of the tile's stream is key chunk j0 + t (j0 = 0 but for a window), in ring slot t % STAGES
    const int n_steps = IS_LOCAL ? n_blocks - j0 : n_blocks;
    auto load_k = [&](int t, int slot) {
        ld.load(sKV + slot * SLOT_BYTES, k_src + (i64)t * BLOCK_N * k_sn, k_step, kv_left - t * BLOCK_N, CPR, k);
    };
    auto load_v = [&](int t, int slot) {
        ld.load(sKV + slot * SLOT_BYTES + V_OFFSET, v_src + (i64)t * BLOCK_N * v_sn, v_step,
                kv_left - t * BLOCK_N, CPR, v);
    };

    // ---- prologue: Q, then the first chunks --------------------------------
    {
        using QLoader = TileLoader<BLOCK_M, CPR, THREADS, CPR_S, COLS>;
        const QLoader lq(tid);
        lq.load(sQ, qg + (i64)(m0 + lq.r0) * q_sn + lq.c8, (i64)QLoader::RSTEP * q_sn, N_q - m0, CPR, q);
    }
    cp_async_commit();
    // Commit order is strictly Q, K_0, V_0, K_1, V_1, ...: K runs STAGES chunks
    // ahead of the chunk being computed, V runs STAGES-1 ahead.
    load_k(0, 0);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < n_steps) load_v(s, s);
        cp_async_commit();
        if (s + 1 < n_steps) load_k(s + 1, s + 1);
        cp_async_commit();
    }

    // ---- per-thread ldmatrix offsets ------------------------------------------
    // Every x4 ldmatrix here reads four 8x8 matrices of a 16-row block: Q as A (and V as B via .trans) with
    // lane l addressing row (l & 15) and chunk 2*kk + (l >> 4); K as B^T with row (l & 7) + 8 * (l >> 4) and
    // chunk 2*kk + ((l >> 3) & 1), so that each n8 tile's pair of registers comes out adjacent (warp_tiles.cuh
    // bt_delta).  Tile rows start at multiples of 8, so the swizzle key is row & 7 == l & 7 for all, and the
    // physical chunk is (2*kk) ^ x with x the lane's chunk bit ^ (l & 7): four per-thread byte offsets
    // xo[kk & 3] plus the immediate (kk >> 2) * 128 cover every kk, and K's are those plus one more, bt.
    u32 xo[4];
    lane_offsets<ROW_BYTES>(lane, xo);
    const u32 q_base = sQ + (u32)(warp * ROWS_PER_WARP) * ROW_BYTES;

    float acc_o[MT][DT][4];
    float row_max[MT][2];
    float row_sum[MT][2];
    zero(acc_o);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        row_max[mt][0] = row_max[mt][1] = neg_inf();
        row_sum[mt][0] = row_sum[mt][1] = 0.f;
    }

    const int col_lane = 2 * (lane & 3);
    // masking bounds, relative to this thread's first column of a chunk:
    // row r = m0 + warp*ROWS_PER_WARP + (lane>>2) + mt*16 + hh*8 sees columns
    // c < N_k (tail) and, causal, c <= r + diag.
    const int tail_lim = N_k - col_lane;
    const int causal_lim = m0 + warp * ROWS_PER_WARP + (lane >> 2) + diag + 1 - col_lane;
    // chunks starting after mask_from need masking (key tail or diagonal); local, those starting before
    // the tile's last row's first key too (the window's left edge)
    const int mask_from = IS_CAUSAL ? min(N_k - BLOCK_N, m0 + diag - BLOCK_N + 1) : N_k - BLOCK_N;
    const int mask_until = IS_LOCAL ? m0 + BLOCK_M - 1 + lo : 0;
    // ALiBi: the head's slope in raw-score units, and this thread's first score's distance to the
    // diagonal before the chunk offset (row - col + N_k - N_q)
    const float slope = (MODS & 2) ? alibi[(i64)b * alibi_sb + h] / scale : 0.f;
    const int dist_row = m0 + warp * ROWS_PER_WARP + (lane >> 2) + N_k - N_q - col_lane;

    // Q_REGS (FlashConfig.q_regs; the model's Diagram.hold): Q's A fragments read once and held in registers
    // through the key loop instead of re-read from SMEM every chunk, for a warp of one m16 tile.  At d = 192
    // (HEAD_DIM / 16 x 4 = 48 registers) the S product's ldmatrix results arrived late (12 of its 60 loads a chunk
    // were Q's), and held it ran 3.9 to 10.5% faster, causal 5.6 to 6.5% (validation/results/profile-pipes-h100-
    // 2026-11-25/qregs.json; ptxas 235 to 241 registers, bt-registers.json).  At d = 256 the 64 registers spill
    // in 9 of its 10 kernels.
    static_assert(!Q_REGS || MT == 1, "Q_REGS holds one m16 tile of Q a warp (BLOCK_M == 16 * WARPS)");
    u32 qa[MT][Q_REGS ? HEAD_DIM / 16 : 1][4];
    for (int j = 0; j < n_steps; ++j) {
        const int slot = j % STAGES;
        const u32 sK = sKV + slot * SLOT_BYTES;

        // K_j has landed (this thread's part; at most the 2*STAGES-2 newer groups
        // V_j..V_{j+STAGES-2}, K_{j+1}..K_{j+STAGES-1} stay in flight).  The barrier makes it
        // everyone's and certifies that every warp is done with chunk j-1.
        cp_async_wait<2 * STAGES - 2>();
        __syncthreads();
        // V_{j+STAGES-1} into the V half of chunk j-1's slot (free now).
        if (j + STAGES - 1 < n_steps) load_v(j + STAGES - 1, (j + STAGES - 1) % STAGES);
        cp_async_commit();

        // ---- S = Q K_j^T ----------------------------------------------------
        float s[MT][NT][4];
        zero(s);
        // K's offsets xo + bt, bt from a fresh lane read each chunk (lane_now): a register less through the loop
        const u32 bt = bt_delta<ROW_BYTES>(lane_now());
        if constexpr (Q_REGS) {
            if (j == 0) load_a<MT, HEAD_DIM, ROW_BYTES>(qa, q_base, xo);   // Q landed with K_0 (commit order)
            mma_rbt<T, MT, BLOCK_N, HEAD_DIM, ROW_BYTES>(s, qa, sK, xo, bt);
        } else {
            mma_abt<T, MT, BLOCK_N, HEAD_DIM, ROW_BYTES>(s, q_base, sK, xo, bt);
        }

        const int n0 = (IS_LOCAL ? j0 + j : j) * BLOCK_N;
        if constexpr (MODS != 0) score_mods<MODS, MT, NT>(s, softcap_mul, slope, (float)(dist_row - n0));

        // ---- masking: key tail and causal diagonal ---------------------------
        if (n0 > mask_from || (IS_LOCAL && n0 < mask_until)) {
            // per row: columns c (relative to this thread's first column) with
            // c >= lim are masked; lim folds the key tail and the causal diagonal.
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    int lim = tail_lim - n0;
                    if (IS_CAUSAL) lim = min(lim, causal_lim + mt * 16 + hh * 8 - n0);
                    // local: columns c < first are before the row's window (its first key)
                    const int first = IS_LOCAL ? causal_lim - 1 - diag + lo + mt * 16 + hh * 8 - n0 : 0;
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        if (nt * 8 >= lim || (IS_LOCAL && nt * 8 < first)) s[mt][nt][2 * hh] = neg_inf();
                        if (nt * 8 + 1 >= lim || (IS_LOCAL && nt * 8 + 1 < first)) s[mt][nt][2 * hh + 1] = neg_inf();
                    }
                }
        }

        // ---- online softmax (exp2, scale folded into the exponent) ----------
        // P leaves here already packed to 16 bit: KP x 4 registers per m-tile.
        u32 pa[MT][KP][4];
        online_softmax<T, MT, NT, DT, IOM_FWD_RESCALE>(s, row_max, row_sum, acc_o, pa, scale_log2);

        // V_j has landed (newer in flight: K_{j+1}..K_{j+STAGES-1}, V_{j+1}..V_{j+STAGES-1}).
        cp_async_wait<2 * STAGES - 2>();
        __syncthreads();   // V_j visible to all; every warp is done reading K_j
        // K_{j+STAGES} into the K half of chunk j's slot; overlaps P V_j and beyond.
        if (j + STAGES < n_steps) load_k(j + STAGES, (j + STAGES) % STAGES);
        cp_async_commit();

        // ---- O += P V_j --------------------------------------------------------
        mma_rb<T, MT, BLOCK_N, HEAD_DIM, ROW_BYTES>(acc_o, pa, sK + V_OFFSET, 0, xo);
    }

    // ---- epilogue: normalise, write O (registers -> global) and L ------------
    if constexpr (SPLIT) {
        // the block's tile and piece again (split_tile: not held through the key loop), and O's and the LSE's rows
        split_tile<BLOCK_M>(N_q_arg, H, split_whole, split_pieces, m_block, h, b, tile, piece);
        m0 = m_block * BLOCK_M;
        out_rows(b, h, og, lg);
        if (piece >= 0) {   // a piece: its fp32 O and LSE into the partials, for flash_fwd_merge_kernel
            const int tail = tile - split_whole;   // the tile among the split ones
            const i64 rows = (i64)(((int)gridDim.x - split_whole) / split_pieces) * BLOCK_M;
            split_partials<MT, DT, HEAD_DIM>(opart + ((i64)piece * rows + (i64)tail * BLOCK_M) * HEAD_DIM,
                                             lpart + (i64)piece * rows + (i64)tail * BLOCK_M, acc_o, row_max,
                                             row_sum, warp * ROWS_PER_WARP + (lane >> 2), col_lane, scale);
            return;
        }
    }
    // b and h again, from fresh reads of the block's coordinates, and O's and the LSE's rows from them: held
    // through the key loop, the sectioned grid's (from a division, which ptxas does not recompute) made 128x128
    // s2 at d = 64 spill on sm_80, and the plain grid's row pointers 128x128 s1 at d = 64 (once the K fragments
    // came in the B^T order, warp_tiles.cuh bt_delta)
    if constexpr (SECTIONED) {
        section_head(H, b, h);
        out_rows(b, h, og, lg);
    } else if constexpr (!SPLIT) {
        grid_head(b, h);
        out_rows(b, h, og, lg);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const float l = quad_sum(row_sum[mt][hh]);
            const float inv = (l > 0.f) ? 1.f / l : 0.f;
            const int row = m0 + warp * ROWS_PER_WARP + (lane >> 2) + mt * 16 + hh * 8;
            if constexpr (WIDE_STORES) {
                // O's row in 16-byte stores: the quad trades its column pairs (quad_transpose) so that lane q
                // holds 8-column group 4j + q; every lane shuffles, rows past N_q store nothing
                T* orow = og + (i64)row * o_sn + 8 * (lane & 3);
#pragma unroll
                for (int j = 0; j < DT / 4; ++j) {
                    u32 w[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        w[i] = E::pack(acc_o[mt][4 * j + i][2 * hh] * inv, acc_o[mt][4 * j + i][2 * hh + 1] * inv);
                    quad_transpose(w, lane & 3);
                    if (row < N_q)
                        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(orow + 32 * j), "r"(w[0]),
                                     "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
                }
            } else if (row < N_q) {   // each lane's column pairs as they lie, 4-byte stores
                T* orow = og + (i64)row * o_sn + col_lane;
#pragma unroll
                for (int dt = 0; dt < DT; ++dt)
                    *reinterpret_cast<u32*>(orow + dt * 8) =
                        E::pack(acc_o[mt][dt][2 * hh] * inv, acc_o[mt][dt][2 * hh + 1] * inv);
            }
            if (row < N_q && (lane & 3) == 0) lg[row] = row_lse(row_max[mt][hh], l, scale);
        }
    }
}

// The tail split's merge (SPLIT above): a warp a row of the split tiles (`tiles` from tile `whole` on, BLOCK_M
// rows each), its `pieces` partial rows merged into O and the LSE where the whole tile's would be.
template <class T, int BLOCK_M, int HEAD_DIM>
__global__ void __launch_bounds__(256, 1)
flash_fwd_merge_kernel(const float* __restrict__ opart, const float* __restrict__ lpart, T* __restrict__ o,
                       float* __restrict__ lse, i64 o_sb, i64 o_sh, i64 o_sn, int H, int N_q, int whole, int tiles,
                       int pieces) {
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 rows = (i64)tiles * BLOCK_M;
    if (row >= rows) return;
    const int num_m = (N_q + BLOCK_M - 1) / BLOCK_M;
    const int t = whole + (int)(row / BLOCK_M);
    const int i = (t % num_m) * BLOCK_M + (int)(row % BLOCK_M);
    if (i >= N_q) return;
    const int hb = t / num_m, h = hb % H, b = hb / H;
    merge_row<T, HEAD_DIM>(opart, lpart, o + (i64)b * o_sb + (i64)h * o_sh + (i64)i * o_sn,
                           lse + ((i64)b * H + h) * N_q + i, row, rows, pieces, threadIdx.x & 31);
}

}  // namespace iom
