// Unfused attention baseline: three kernels through global memory.
//   (1) S = scale * Q K^T        matmul_kernel<..., B_KMAJOR=true,  OUT_F32=true>
//   (2) P = softmax(mask(S))     softmax_rows_kernel<T>
//   (3) O = P V                  matmul_kernel<..., B_KMAJOR=false, OUT_F32=false>
//
// matmul_kernel: C[m, n] = alpha * sum_k A[m, k] * B(k, n), batched over
// blockIdx.z = batch * H + head (B operand of head h is kv head h / group).
//   A: M x K, row-major (k contiguous), row stride a_sm.
//   B_KMAJOR:  B stored N x K (k contiguous; the K matrix of Q K^T).
//   !B_KMAJOR: B stored K x N (n contiguous; the V matrix), read with ldmatrix.trans.
// Shared memory (dynamic, no static): STAGES * (BLOCK_M + BLOCK_N) * BLOCK_K * sizeof(T),
// per stage [A tile BLOCK_M x BLOCK_K | B tile], 16-byte chunks XOR-swizzled.
// Grid: x = n tile (fastest), y = m tile, z = batch * H + head.
// Warps: WARPS_N = 2 (1 if WARPS == 1) along n, WARPS / WARPS_N along m.
// Requirements (the Python launcher guarantees them): K is a multiple of 8;
// B_KMAJOR=false needs N a multiple of 8; row strides of A and B are multiples
// of 8 elements; C's row stride and N-pairs are 8-byte (f32) / 4-byte aligned.
//
// softmax_rows_kernel: one warp per row of S (float32, row stride lds, a
// multiple of 4), 4 warps per block, no shared memory (warp shuffles only).
// Row i (query) of a head sees keys j < limit, limit = N_k, or with causal
// min(N_k, i + N_k - N_q + 1) (bottom-right aligned).  Writes P (row stride
// ldp, a multiple of 8) with zeros at j >= limit, including the padding
// columns N_k <= j < ldp, so that step (3) can run over K = ldp.
// A row with no visible key gets P = 0, hence O = 0.
#pragma once
#include "iom_common.cuh"

namespace iom {

template <class T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARPS, int STAGES, bool B_KMAJOR, bool OUT_F32>
__global__ void __launch_bounds__(WARPS * 32, 1)
matmul_kernel(const T* __restrict__ a, const T* __restrict__ bmat, void* __restrict__ c,
              int M, int N, int K, int kb_valid,
              i64 a_sb, i64 a_sh, i64 a_sm,
              i64 b_sb, i64 b_sh, i64 b_sr,
              i64 c_sb, i64 c_sh, i64 c_sm,
              int H, int group, float alpha) {
    constexpr int THREADS = WARPS * 32;
    constexpr int WARPS_N = WARPS >= 2 ? 2 : 1;
    constexpr int WARPS_M = WARPS / WARPS_N;
    constexpr int WM = BLOCK_M / WARPS_M;
    constexpr int WN = BLOCK_N / WARPS_N;
    constexpr int MT = WM / 16;
    constexpr int NT = WN / 8;
    constexpr int KS = BLOCK_K / 16;
    constexpr int CPR_A = BLOCK_K / 8;
    constexpr int CPR_B = B_KMAJOR ? BLOCK_K / 8 : BLOCK_N / 8;
    constexpr int ROWS_B = B_KMAJOR ? BLOCK_N : BLOCK_K;
    constexpr u32 A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr u32 STAGE_BYTES = (BLOCK_M + BLOCK_N) * BLOCK_K * 2;
    static_assert(sizeof(T) == 2, "16-bit inputs only");
    static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16 x 16");
    static_assert(BLOCK_K % 16 == 0, "BLOCK_K must be a multiple of 16");
    static_assert(STAGES >= 1, "STAGES >= 1");
    using E = Elem<T>;

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int wm0 = (warp / WARPS_N) * WM;
    const int wn0 = (warp % WARPS_N) * WN;
    const int n0 = blockIdx.x * BLOCK_N;
    const int m0 = blockIdx.y * BLOCK_M;
    const int bh = blockIdx.z;
    const int bb = bh / H;
    const int h = bh % H;

    const T* ag = a + (i64)bb * a_sb + (i64)h * a_sh;
    const T* bg = bmat + (i64)bb * b_sb + (i64)(h / group) * b_sh;

    const u32 s0 = smem_addr(dyn_smem());

    using LA = TileLoader<BLOCK_M, CPR_A, THREADS>;
    using LB = TileLoader<ROWS_B, CPR_B, THREADS>;
    const LA la(tid);
    const LB lb(tid);
    const T* a_src = ag + (i64)(m0 + la.r0) * a_sm + la.c8;
    const i64 a_step = (i64)LA::RSTEP * a_sm;
    const T* b_src;
    if constexpr (B_KMAJOR) b_src = bg + (i64)(n0 + lb.r0) * b_sr + lb.c8;
    else                    b_src = bg + (i64)lb.r0 * b_sr + n0 + lb.c8;
    const i64 b_step = (i64)LB::RSTEP * b_sr;

    auto load_stage = [&](int kt, int slot) {
        const int k0 = kt * BLOCK_K;
        const u32 sa = s0 + slot * STAGE_BYTES;
        la.load(sa, a_src + k0, a_step, M - m0, (K - k0) / 8, ag);
        if constexpr (B_KMAJOR)
            lb.load(sa + A_BYTES, b_src + k0, b_step, N - n0, (K - k0) / 8, bg);
        else
            lb.load(sa + A_BYTES, b_src + (i64)k0 * b_sr, b_step, kb_valid - k0, (N - n0) / 8, bg);
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;

    const int k_tiles = (K + BLOCK_K - 1) / BLOCK_K;
    const int sw = lane & 7;   // fragment rows are == lane (mod 8)

    if constexpr (STAGES > 1) {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < k_tiles) load_stage(s, s);
            cp_async_commit();
        }
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        int slot;
        if constexpr (STAGES == 1) {
            slot = 0;
            if (kt > 0) __syncthreads();
            load_stage(kt, 0);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
        } else {
            slot = kt % STAGES;
            cp_async_wait<STAGES - 2>();
            __syncthreads();
            const int kn = kt + STAGES - 1;
            if (kn < k_tiles) load_stage(kn, kn % STAGES);
            cp_async_commit();
        }
        const u32 sa = s0 + slot * STAGE_BYTES;
        const u32 sb = sa + A_BYTES;

#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            u32 af[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const int r = wm0 + mt * 16 + (lane & 15);
                const int ch = swizzle<CPR_A>(sw, 2 * ks + (lane >> 4));
                ldsm_x4(sa + (u32)((r * CPR_A + ch) * 16), af[mt][0], af[mt][1], af[mt][2], af[mt][3]);
            }
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                u32 b0, b1, b2, b3;
                if constexpr (B_KMAJOR) {
                    const int r = wn0 + np * 16 + (lane & 7) + ((lane >> 4) << 3);
                    const int ch = swizzle<CPR_B>(sw, 2 * ks + ((lane >> 3) & 1));
                    ldsm_x4(sb + (u32)((r * CPR_B + ch) * 16), b0, b1, b2, b3);
                } else {
                    const int r = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                    const int ch = swizzle<CPR_B>(sw, wn0 / 8 + 2 * np + (lane >> 4));
                    ldsm_x4_trans(sb + (u32)((r * CPR_B + ch) * 16), b0, b1, b2, b3);
                }
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    E::mma(acc[mt][2 * np], af[mt], b0, b1);
                    E::mma(acc[mt][2 * np + 1], af[mt], b2, b3);
                }
            }
        }
    }

    // epilogue: registers -> global, masked
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int row = m0 + wm0 + mt * 16 + (lane >> 2) + hh * 8;
            if (row >= M) continue;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int col = n0 + wn0 + nt * 8 + 2 * (lane & 3);
                const float x0 = acc[mt][nt][2 * hh] * alpha;
                const float x1 = acc[mt][nt][2 * hh + 1] * alpha;
                if constexpr (OUT_F32) {
                    float* crow = reinterpret_cast<float*>(c) + (i64)bb * c_sb + (i64)h * c_sh + (i64)row * c_sm;
                    if (col + 1 < N) {
                        *reinterpret_cast<float2*>(crow + col) = make_float2(x0, x1);
                    } else if (col < N) {
                        crow[col] = x0;
                    }
                } else {
                    T* crow = reinterpret_cast<T*>(c) + (i64)bb * c_sb + (i64)h * c_sh + (i64)row * c_sm;
                    const u32 pk = E::pack(x0, x1);
                    if (col + 1 < N) {
                        *reinterpret_cast<u32*>(crow + col) = pk;
                    } else if (col < N) {
                        *reinterpret_cast<unsigned short*>(crow + col) = (unsigned short)(pk & 0xffffu);
                    }
                }
            }
        }
    }
}

template <class T>
__global__ void __launch_bounds__(128)
softmax_rows_kernel(const float* __restrict__ s, T* __restrict__ p, i64 rows, int N_q, int N_k,
                    int lds, int ldp, int causal) {
    using E = Elem<T>;
    constexpr float LOG2E = 1.4426950408889634f;
    const int lane = threadIdx.x & 31;
    const i64 row = (i64)blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int i = (int)(row % N_q);
    int limit = N_k;
    if (causal) limit = min(N_k, i + (N_k - N_q) + 1);
    const float* srow = s + row * lds;
    T* prow = p + row * ldp;

    // pass 1: per-lane running max and sum, 4 columns per lane per step
    float m = neg_inf(), l = 0.f;
    for (int j0 = 4 * lane; j0 < limit; j0 += 128) {
        const float4 x = *reinterpret_cast<const float4*>(srow + j0);
        const float v0 = x.x;
        const float v1 = (j0 + 1 < limit) ? x.y : neg_inf();
        const float v2 = (j0 + 2 < limit) ? x.z : neg_inf();
        const float v3 = (j0 + 3 < limit) ? x.w : neg_inf();
        const float mn = fmaxf(m, fmaxf(fmaxf(v0, v1), fmaxf(v2, v3)));
        const float ms = mn * LOG2E;
        l = l * ex2(m * LOG2E - ms) + ex2(fmaf(v0, LOG2E, -ms)) + ex2(fmaf(v1, LOG2E, -ms)) +
            ex2(fmaf(v2, LOG2E, -ms)) + ex2(fmaf(v3, LOG2E, -ms));
        m = mn;
    }
    float mall = m;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mall = fmaxf(mall, __shfl_xor_sync(0xffffffffu, mall, off));
    const float ms = (mall == neg_inf()) ? 0.f : mall * LOG2E;
    float lall = l * ex2(m * LOG2E - ms);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) lall += __shfl_xor_sync(0xffffffffu, lall, off);
    const float inv = (lall > 0.f) ? 1.f / lall : 0.f;

    // pass 2: write P (zeros past the visible keys and in the padding)
    for (int j0 = 4 * lane; j0 < ldp; j0 += 128) {
        float y0 = 0.f, y1 = 0.f, y2 = 0.f, y3 = 0.f;
        if (j0 < limit) {
            const float4 x = *reinterpret_cast<const float4*>(srow + j0);
            y0 = ex2(fmaf(x.x, LOG2E, -ms)) * inv;
            y1 = (j0 + 1 < limit) ? ex2(fmaf(x.y, LOG2E, -ms)) * inv : 0.f;
            y2 = (j0 + 2 < limit) ? ex2(fmaf(x.z, LOG2E, -ms)) * inv : 0.f;
            y3 = (j0 + 3 < limit) ? ex2(fmaf(x.w, LOG2E, -ms)) * inv : 0.f;
        }
        uint2 pk;
        pk.x = E::pack(y0, y1);
        pk.y = E::pack(y2, y3);
        *reinterpret_cast<uint2*>(prow + j0) = pk;
    }
}

}  // namespace iom
