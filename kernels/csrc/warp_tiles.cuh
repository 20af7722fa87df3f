// Warp-level tile helpers of the mma.sync kernels (m16n8k16): operand fragments read with ldmatrix from
// XOR-swizzled SMEM tiles, products into fp32 accumulator tiles, and the moves between the accumulator
// layout, A fragments, SMEM and global memory.  Used by the forward (flash_fwd_sm80.cuh) and the backward
// kernels (flash_bwd_sm80.cuh, flash_bwd_dq_sm80.cuh).  Self-contained like iom_common.cuh: no CUDA or C++
// headers.
#pragma once
#include "iom_common.cuh"

namespace iom {

// Per-lane ldmatrix offsets of a tile whose rows are HEAD_DIM 16-bit values (flash_fwd_sm80.cuh says why):
// lane l addresses row (l & 15) of a 16-row block and chunk 2*kk + (l >> 4); xo[kk & 3] + (kk >> 2) * 128
// is the byte offset for k16 step kk.  The x4's registers come out in the A operand's order: (rows 0-7,
// k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15); the .trans B loads (mma_rb) use them
// too, each n8 tile's pair of registers then adjacent.
template <int ROW_BYTES>
__device__ __forceinline__ void lane_offsets(int lane, u32 (&xo)[4]) {
    const u32 lane_off = (u32)(lane & 15) * ROW_BYTES;
    const int x = (lane >> 4) ^ (lane & 7);
#pragma unroll
    for (int i = 0; i < 4; ++i) xo[i] = lane_off + (u32)(((2 * i) ^ x) << 4);
}

// The B^T operand's offsets (mma_bt_step: rows are the n side) are xo[i] + bt_delta(lane): lane l addresses
// row (l & 7) + 8 * (l >> 4) and chunk 2*kk + ((l >> 3) & 1), so the x4's registers come out (rows 0-7,
// k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 0-7), (rows 8-15, k 8-15): each n8 tile's two B registers
// adjacent, as HMMA reads them.  In the A order ptxas paired them with two register moves an n8 tile (165
// moves a chunk a warp at d = 192, a fifth of the forward's instructions:
// validation/results/profile-pipes-h100-2026-11-25).  The swizzle key is row & 7 = l & 7 in both and 2*kk
// touches bits 1-2 of the chunk only, so the two patterns differ by one offset for every kk: a register
// a lane instead of four.
// The lane's index from a fresh read of %laneid (asm volatile: never merged with an earlier one), for offsets
// a loop recomputes each time instead of holding a register through it.
__device__ __forceinline__ int lane_now() {
    int l;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}

// IOM_BT_A_ORDER (A/B runs only) builds the B^T loads in the A order again, with the moves.
template <int ROW_BYTES>
__device__ __forceinline__ u32 bt_delta(int lane) {
#ifdef IOM_BT_A_ORDER
    return 0u;
#endif
    const int row_a = lane & 15, row_b = (lane & 7) + ((lane >> 4) << 3);
    const int bit_a = ((lane >> 4) ^ lane) & 1, bit_b = ((lane >> 3) ^ lane) & 1;
    return (u32)((row_b - row_a) * ROW_BYTES + (bit_b - bit_a) * 16);
}

// One k16 step of acc[R][N/8][4] += A * B^T: A's fragments `a` (R m16 tiles) against the N rows of B at
// b_base (ldmatrix x4, non-transposed; b_base already moved by bt_delta), step kk of the KD contracted values.
template <class T, int R, int N, int ROW_BYTES>
__device__ __forceinline__ void mma_bt_step(float (&acc)[R][N / 8][4], const u32 (&a)[R][4], u32 b_base, int kk,
                                            const u32 (&xo)[4]) {
    using E = Elem<T>;
#pragma unroll
    for (int np = 0; np < N / 16; ++np) {
        u32 b0, b1, b2, b3;
        ldsm_x4(b_base + xo[kk & 3] + (u32)((kk >> 2) * 128 + np * 16 * ROW_BYTES), b0, b1, b2, b3);
#ifdef IOM_BT_A_ORDER
        const u32 t = b1;
        b1 = b2;
        b2 = t;
#endif
#pragma unroll
        for (int r = 0; r < R; ++r) {
            E::mma(acc[r][2 * np], a[r], b0, b1);
            E::mma(acc[r][2 * np + 1], a[r], b2, b3);
        }
    }
}

// acc[R][N/8][4] += A (R m16 tiles at a_base, rows of ROW_BYTES) * B^T where B's rows (the n side) are
// at b_base; both contract over KD (HEAD_DIM) values.  A and B non-transposed (ldmatrix x4, A at the
// lane_offsets offsets xo, B at xo + bt, bt = bt_delta(lane)).
template <class T, int R, int N, int KD, int ROW_BYTES>
__device__ __forceinline__ void mma_abt(float (&acc)[R][N / 8][4], u32 a_base, u32 b_base, const u32 (&xo)[4],
                                        u32 bt) {
#pragma unroll
    for (int kk = 0; kk < KD / 16; ++kk) {
        u32 a[R][4];
#pragma unroll
        for (int r = 0; r < R; ++r)
            ldsm_x4(a_base + xo[kk & 3] + (u32)((kk >> 2) * 128 + r * 16 * ROW_BYTES), a[r][0], a[r][1], a[r][2], a[r][3]);
        mma_bt_step<T, R, N, ROW_BYTES>(acc, a, b_base + bt, kk, xo);
    }
}

// The A fragments of R m16 tiles over KD columns (as mma_abt reads them), read once to stay in registers
// across products (decoding: one Q tile against every chunk of keys).
template <int R, int KD, int ROW_BYTES>
__device__ __forceinline__ void load_a(u32 (&a)[R][KD / 16][4], u32 a_base, const u32 (&xo)[4]) {
#pragma unroll
    for (int kk = 0; kk < KD / 16; ++kk)
#pragma unroll
        for (int r = 0; r < R; ++r)
            ldsm_x4(a_base + xo[kk & 3] + (u32)((kk >> 2) * 128 + r * 16 * ROW_BYTES), a[r][kk][0], a[r][kk][1],
                    a[r][kk][2], a[r][kk][3]);
}

// mma_abt with A from registers (load_a); bt = bt_delta(lane).
template <class T, int R, int N, int KD, int ROW_BYTES>
__device__ __forceinline__ void mma_rbt(float (&acc)[R][N / 8][4], const u32 (&a)[R][KD / 16][4], u32 b_base,
                                        const u32 (&xo)[4], u32 bt) {
#pragma unroll
    for (int kk = 0; kk < KD / 16; ++kk) {
        u32 ak[R][4];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int e = 0; e < 4; ++e) ak[r][e] = a[r][kk][e];
        mma_bt_step<T, R, N, ROW_BYTES>(acc, ak, b_base + bt, kk, xo);
    }
}

// acc[R][DN/8][4] += A * B where A is in registers (R m16 tiles, K/16 k16 steps of packed fragments) and
// B is a row-major [K][HEAD_DIM] SMEM tile (ldmatrix .trans); DN head dims from column d0 on.
template <class T, int R, int K, int DN, int ROW_BYTES>
__device__ __forceinline__ void mma_rb(float (&acc)[R][DN / 8][4], const u32 (&a)[R][K / 16][4], u32 b_base,
                                       int d0, const u32 (&xo)[4]) {
    using E = Elem<T>;
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
        for (int dp = 0; dp < DN / 16; ++dp) {
            const int g = d0 / 16 + dp;
            u32 b0, b1, b2, b3;
            ldsm_x4_trans(b_base + xo[g & 3] + (u32)((g >> 2) * 128 + kk * 16 * ROW_BYTES), b0, b1, b2, b3);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                E::mma(acc[r][2 * dp], a[r][kk], b0, b1);
                E::mma(acc[r][2 * dp + 1], a[r][kk], b2, b3);
            }
        }
    }
}

// Online-softmax rescale policies.  EAGER: every row takes its new max every step and O is rescaled.
// LAZY: O is rescaled only when some row of the warp has a new max (a warp-uniform branch).  STALE: a row
// keeps the max it has (stale) while its scores stay within STALE_LOG2 of it in the exponent, so P may
// reach 2^STALE_LOG2 (exact in fp32 sums and a 16-bit P's relative precision); only when some row of the
// warp goes past it do all its rows take their new max and O is rescaled.  The division by the row sum
// at the end cancels the stale max either way.
enum Rescale { RESCALE_EAGER = 0, RESCALE_LAZY = 1, RESCALE_STALE = 2 };
constexpr float STALE_LOG2 = 8.f;

// A row's partial sum summed over the 4 lanes of the quad that hold the row (the m16n8 accumulator layout).
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// A row's natural-log LSE from its max (raw-score units) and its summed exponentials (the sum against that max); -inf for a row
// that saw no key.
__device__ __forceinline__ float row_lse(float row_max, float l, float scale) {
    return (l > 0.f) ? row_max * scale + logf(l) : neg_inf();
}

// A row's max over its running max and its scores (mt, hh), reduced over the 4 lanes that hold the row.
template <int MT, int NT>
__device__ __forceinline__ float chunk_row_max(const float (&s)[MT][NT][4], int mt, int hh, float running) {
    float mx = running;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
}

// A row's exponentials against max `mx` (unscaled), packed as A fragments of P V; returns their sum.
template <class T, int MT, int NT>
__device__ __forceinline__ float exp_row(const float (&s)[MT][NT][4], int mt, int hh, float mx,
                                        u32 (&pa)[MT][NT / 2][4], float scale_log2) {
    const float m_scaled = (mx == neg_inf()) ? 0.f : mx * scale_log2;
    float rs = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const float p0 = ex2(fmaf(s[mt][nt][2 * hh], scale_log2, -m_scaled));
        const float p1 = ex2(fmaf(s[mt][nt][2 * hh + 1], scale_log2, -m_scaled));
        rs += p0 + p1;
        pa[mt][nt >> 1][(nt & 1) * 2 + hh] = Elem<T>::pack(p0, p1);
    }
    return rs;
}

// One row (mt, hh) of an online-softmax step taking the new max `mx`: P packed, the running sum rescaled
// and extended.  Returns the factor the row's O accumulator must be scaled by.
template <class T, int MT, int NT>
__device__ __forceinline__ float softmax_row_to(const float (&s)[MT][NT][4], int mt, int hh, float mx,
                                                float (&row_max)[MT][2], float (&row_sum)[MT][2],
                                                u32 (&pa)[MT][NT / 2][4], float scale_log2) {
    const float m_scaled = (mx == neg_inf()) ? 0.f : mx * scale_log2;
    const float corr = ex2(row_max[mt][hh] * scale_log2 - m_scaled);
    row_max[mt][hh] = mx;
    row_sum[mt][hh] = row_sum[mt][hh] * corr + exp_row<T, MT, NT>(s, mt, hh, mx, pa, scale_log2);
    return corr;
}

template <class T, int MT, int NT>
__device__ __forceinline__ float softmax_row(const float (&s)[MT][NT][4], int mt, int hh, float (&row_max)[MT][2],
                                             float (&row_sum)[MT][2], u32 (&pa)[MT][NT / 2][4], float scale_log2) {
    return softmax_row_to<T, MT, NT>(s, mt, hh, chunk_row_max<MT, NT>(s, mt, hh, row_max[mt][hh]), row_max, row_sum,
                                     pa, scale_log2);
}

template <int MT, int DT>
__device__ __forceinline__ void rescale_rows(float (&acc)[MT][DT][4], const float (&corr)[MT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][dt][e] *= corr[mt][e >> 1];
}

// One online-softmax step over a warp's S tiles (exp2, the scale folded into the exponent): the running max
// and sum of each of its rows, the O accumulator rescaled as the policy says (Rescale above), P packed as
// the A fragments of P V.  A row whose max is still -inf (nothing seen) keeps max -inf and contributes
// zeros.  LAZY suits decoding (few keys a step, the max settles early).
template <class T, int MT, int NT, int DT, int POLICY = RESCALE_EAGER>
__device__ __forceinline__ void online_softmax(float (&s)[MT][NT][4], float (&row_max)[MT][2], float (&row_sum)[MT][2],
                                             float (&acc)[MT][DT][4], u32 (&pa)[MT][NT / 2][4], float scale_log2) {
    if constexpr (POLICY == RESCALE_LAZY) {
        float corr[MT][2];
        bool moved = false;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const float before = row_max[mt][hh];
                corr[mt][hh] = softmax_row<T, MT, NT>(s, mt, hh, row_max, row_sum, pa, scale_log2);
                moved |= row_max[mt][hh] != before;
            }
        if (__any_sync(0xffffffffu, moved)) rescale_rows<MT, DT>(acc, corr);
        return;
    }
    if constexpr (POLICY == RESCALE_STALE) {
        // Each row's new max is held past the vote for the rare rescale up to two m-tiles a warp; with more
        // the rescale takes them again, which keeps the common path's registers those of the stale max
        // alone (held, 256x64 at d = 32 spilled on sm_80; taken again, 128x128 s1 causal at d = 64 on sm_90a).
        constexpr bool HOLD = MT <= 2;
        float mx[HOLD ? MT : 1][2];
        bool past = false;   // (mx - stale) * scale_log2 > STALE_LOG2; NaN (both -inf) is not past
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const float m = chunk_row_max<MT, NT>(s, mt, hh, row_max[mt][hh]);
                if constexpr (HOLD) mx[mt][hh] = m;
                past |= (m - row_max[mt][hh]) * scale_log2 > STALE_LOG2;
            }
        if (__any_sync(0xffffffffu, past)) {
            float corr[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    if constexpr (HOLD)
                        corr[mt][hh] = softmax_row_to<T, MT, NT>(s, mt, hh, mx[mt][hh], row_max, row_sum, pa, scale_log2);
                    else
                        corr[mt][hh] = softmax_row<T, MT, NT>(s, mt, hh, row_max, row_sum, pa, scale_log2);
                }
            rescale_rows<MT, DT>(acc, corr);
        } else {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh)
                    row_sum[mt][hh] += exp_row<T, MT, NT>(s, mt, hh, row_max[mt][hh], pa, scale_log2);
        }
        return;
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const float corr = softmax_row<T, MT, NT>(s, mt, hh, row_max, row_sum, pa, scale_log2);
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                acc[mt][dt][2 * hh] *= corr;
                acc[mt][dt][2 * hh + 1] *= corr;
            }
        }
}

// Score modifiers on a warp's raw S tiles (q.k, unscaled), FlashAttention's order, before any mask:
// SOFTCAP (MODS & 1): s = tanh(s * cap_mul) (cap_mul = scale / cap; the launcher then passes cap as the
// softmax scale, so the logit is cap * tanh(scale * q.k / cap)); ALIBI (MODS & 2): s -= slope * |dist|,
// slope in raw-score units (the head's slope / the softmax scale), dist = row + N_k - N_q - col, from
// `dist0`, the distance of this thread's first score (m-tile 0, row half 0, n-tile 0, column 0): rows
// step 8 (hh) and 16 (mt), columns 8 (nt) and 1.  One float per thread and chunk, then per score an add
// and an FMA with |.| (exact below 2^24).
template <int MODS, int MT, int NT>
__device__ __forceinline__ void score_mods(float (&s)[MT][NT][4], float cap_mul, float slope, float dist0) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float x = s[mt][nt][e];
                if constexpr ((MODS & 1) != 0) x = tanh_approx(x * cap_mul);
                if constexpr ((MODS & 2) != 0)
                    x = fmaf(-slope, fabsf(dist0 + (float)(mt * 16 + (e >> 1) * 8 - nt * 8 - (e & 1))), x);
                s[mt][nt][e] = x;
            }
}

template <int R, int N>
__device__ __forceinline__ void zero(float (&x)[R][N][4]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < N; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) x[r][n][e] = 0.f;
}

// Accumulator tiles (m16 x n8, fp32) -> packed A fragments of the next product (k16 steps).
template <class T, int R, int N>
__device__ __forceinline__ void to_a(const float (&x)[R][N][4], u32 (&a)[R][N / 2][4]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < N; ++n)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
                a[r][n >> 1][(n & 1) * 2 + hh] = Elem<T>::pack(x[r][n][2 * hh], x[r][n][2 * hh + 1]);
}

// Write R m16 tiles of HEAD_DIM accumulators (times `mul`) to rows row0 + ... of a global tensor.
template <class T, int R, int HEAD_DIM>
__device__ __forceinline__ void store_rows(T* g, i64 stride, int row0, int rows_valid, const float (&x)[R][HEAD_DIM / 8][4],
                                           float mul, int lane) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int row = row0 + r * 16 + (lane >> 2) + hh * 8;
            if (row < rows_valid) {
                T* dst = g + (i64)row * stride + 2 * (lane & 3);
#pragma unroll
                for (int dt = 0; dt < HEAD_DIM / 8; ++dt)
                    *reinterpret_cast<u32*>(dst + dt * 8) = Elem<T>::pack(x[r][dt][2 * hh] * mul, x[r][dt][2 * hh + 1] * mul);
            }
        }
}

// Per-lane ldmatrix offsets of 16-column groups g0, g0+1, ... of a tile of HEAD_DIM-value rows, for a
// run-time g0 (the xo rule: XOR touches the low 3 bits of the chunk only).
template <int N, int ROW_BYTES>
__device__ __forceinline__ void group_offsets(int lane, int g0, u32 (&off)[N]) {
#pragma unroll
    for (int j = 0; j < N; ++j)
        off[j] = (u32)(lane & 15) * ROW_BYTES + (u32)(((2 * (g0 + j)) ^ ((lane >> 4) ^ (lane & 7))) << 4);
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled SMEM tile of CPR chunks a row.
template <int CPR>
__device__ __forceinline__ u32 chunk_at(int row, int chunk) {
    return (u32)(row * CPR * 16 + (swizzle<CPR>(row, chunk) << 4));
}

// acc[R][DN/8][4] += A * B: A (R m16 row tiles from row a_row0 of a swizzled [rows][K] SMEM tile of K/8
// chunks a row: P^T or dS^T), B a row-major [K][HEAD_DIM] SMEM tile read transposed at the columns of
// `boff` (group_offsets).  Contracts over all K columns of A.
template <class T, int R, int K, int DN, int ROW_BYTES>
__device__ __forceinline__ void mma_sb(float (&acc)[R][DN / 8][4], u32 a_base, int a_row0, u32 b_base,
                                       const u32 (&boff)[DN / 16], int lane) {
    using E = Elem<T>;
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        u32 a[R][4];
#pragma unroll
        for (int r = 0; r < R; ++r)
            ldsm_x4(a_base + chunk_at<K / 8>(a_row0 + r * 16 + (lane & 15), 2 * kk + (lane >> 4)),
                    a[r][0], a[r][1], a[r][2], a[r][3]);
#pragma unroll
        for (int dp = 0; dp < DN / 16; ++dp) {
            u32 b0, b1, b2, b3;
            ldsm_x4_trans(b_base + boff[dp] + (u32)(kk * 16 * ROW_BYTES), b0, b1, b2, b3);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                E::mma(acc[r][2 * dp], a[r], b0, b1);
                E::mma(acc[r][2 * dp + 1], a[r], b2, b3);
            }
        }
    }
}

// Call f(r, n, hh, addr) for each 16-bit pair this thread holds of R m16 x (N*8) accumulator tiles placed
// at (row0, col0) of a swizzled [rows][COLS] SMEM tile: rows r*16 + lane/4 (+8 for hh), columns n*8 + 2*(lane%4).
template <int R, int N, int COLS, class F>
__device__ __forceinline__ void each_own_pair(u32 base, int row0, int col0, int lane, F&& f) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int row = row0 + r * 16 + (lane >> 2) + hh * 8;
#pragma unroll
            for (int n = 0; n < N; ++n) f(r, n, hh, base + chunk_at<COLS / 8>(row, col0 / 8 + n) + (lane & 3) * 4);
        }
}

// Store accumulator tiles as 16-bit values into SMEM: the layout change between S^T / dS^T (warps split
// keys x queries) and the products that read them (keys x head dims for dK and dV, queries x head dims for dQ).
template <class T, int R, int N, int COLS>
__device__ __forceinline__ void store_tile(u32 base, int row0, int col0, const float (&x)[R][N][4], int lane) {
    each_own_pair<R, N, COLS>(base, row0, col0, lane, [&](int r, int n, int hh, u32 addr) {
        asm volatile("st.shared.b32 [%0], %1;" :: "r"(addr), "r"(Elem<T>::pack(x[r][n][2 * hh], x[r][n][2 * hh + 1]))
                     : "memory");
    });
}

// Read back what store_tile wrote from this thread, as floats.
template <class T, int R, int N, int COLS>
__device__ __forceinline__ void load_own(u32 base, int row0, int col0, float (&x)[R][N][4], int lane) {
    each_own_pair<R, N, COLS>(base, row0, col0, lane, [&](int r, int n, int hh, u32 addr) {
        u32 bits;
        asm volatile("ld.shared.b32 %0, [%1];" : "=r"(bits) : "r"(addr) : "memory");
        const f32x2 v = Elem<T>::unpack(bits);
        x[r][n][2 * hh] = v.x;
        x[r][n][2 * hh + 1] = v.y;
    });
}

// The accumulator-layout values of packed A fragments (to_a's inverse), as floats.
template <class T, int R, int N>
__device__ __forceinline__ void from_a(const u32 (&a)[R][N / 2][4], float (&x)[R][N][4]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < N; ++n)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const f32x2 v = Elem<T>::unpack(a[r][n >> 1][(n & 1) * 2 + hh]);
                x[r][n][2 * hh] = v.x;
                x[r][n][2 * hh + 1] = v.y;
            }
}

}  // namespace iom
