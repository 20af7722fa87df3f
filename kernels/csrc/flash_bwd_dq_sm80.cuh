// FlashAttention-2 backward, deterministic mode: dQ by query tiles (flash_bwd_sm80.cuh describes the
// whole backward; kernels/flash_bwd_sm80.py launches this kernel after the main one, instead of the
// atomic dQ and its conversion).
#pragma once
#include "iom_common.cuh"
#include "warp_tiles.cuh"

namespace iom {

// ------------------------------------------------------------------------------------------ 3b. dQ, deterministic
// A block owns BLOCK_Q query rows of one (batch, head), a warp 16 of them; K and V chunks of BLOCK_K keys
// stream through STAGES slots.  dQ is summed in registers in key order and written once.
template <class T, int BLOCK_Q, int BLOCK_K, int STAGES, int HEAD_DIM, bool IS_CAUSAL>
__global__ void __launch_bounds__(BLOCK_Q * 2, 1)
flash_bwd_dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                    const T* __restrict__ dout, const float* __restrict__ lse2, const float* __restrict__ delta,
                    T* __restrict__ dq,
                    i64 q_sb, i64 q_sh, i64 q_sn, i64 k_sb, i64 k_sh, i64 k_sn, i64 v_sb, i64 v_sh, i64 v_sn,
                    i64 o_sb, i64 o_sh, i64 o_sn, i64 dq_sb, i64 dq_sh, i64 dq_sn,
                    int H, int group, int N_q, int N_k, int N_qp, float scale_log2, float scale) {
    constexpr int WARPS = BLOCK_Q / 16;
    constexpr int THREADS = WARPS * 32;
    constexpr int NK = BLOCK_K / 8;
    constexpr int DT = HEAD_DIM / 8;
    constexpr int CPR = HEAD_DIM / 8;
    constexpr int ROW_BYTES = HEAD_DIM * 2;
    static_assert(BLOCK_K % 16 == 0, "BLOCK_K is a multiple of 16");
    static_assert(STAGES == 1 || STAGES == 2, "STAGES is 1 or 2");

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int h = blockIdx.y, b = blockIdx.z, hk = h / group;
    const int m0 = blockIdx.x * BLOCK_Q;
    const int diag = N_k - N_q;
    int n_blocks = (N_k + BLOCK_K - 1) / BLOCK_K;
    if (IS_CAUSAL) {
        const int last_key = min(m0 + BLOCK_Q, N_q) - 1 + diag;
        n_blocks = min(n_blocks, last_key < 0 ? 0 : last_key / BLOCK_K + 1);
    }
    T* dqg = dq + (i64)b * dq_sb + (i64)h * dq_sh;
    float acc[1][DT][4];
    zero(acc);
    const int row0 = m0 + warp * 16;
    if (n_blocks <= 0) {
        store_rows<T, 1, HEAD_DIM>(dqg, dq_sn, row0, N_q, acc, 0.f, lane);
        return;
    }

    // SMEM: [Q | dO | STAGES x (K | V)]
    const u32 sQ = smem_addr(dyn_smem());
    const u32 sO = sQ + BLOCK_Q * ROW_BYTES;
    const u32 sKV = sO + BLOCK_Q * ROW_BYTES;
    constexpr u32 SLOT_BYTES = 2u * BLOCK_K * ROW_BYTES;
    {
        using QLoader = TileLoader<BLOCK_Q, CPR, THREADS>;
        const QLoader lq(tid);
        lq.load(sQ, q + (i64)b * q_sb + (i64)h * q_sh + (i64)(m0 + lq.r0) * q_sn + lq.c8, (i64)QLoader::RSTEP * q_sn,
                N_q - m0, CPR, q);
        lq.load(sO, dout + (i64)b * o_sb + (i64)h * o_sh + (i64)(m0 + lq.r0) * o_sn + lq.c8,
                (i64)QLoader::RSTEP * o_sn, N_q - m0, CPR, dout);
    }
    using KLoader = TileLoader<BLOCK_K, CPR, THREADS>;
    const KLoader lk(tid);
    const T* k_src = k + (i64)b * k_sb + (i64)hk * k_sh + (i64)lk.r0 * k_sn + lk.c8;
    const T* v_src = v + (i64)b * v_sb + (i64)hk * v_sh + (i64)lk.r0 * v_sn + lk.c8;
    auto load_kv = [&](int j) {
        if (j >= n_blocks) return;
        const u32 slot = sKV + (j % STAGES) * SLOT_BYTES;
        lk.load(slot, k_src + (i64)j * BLOCK_K * k_sn, (i64)KLoader::RSTEP * k_sn, N_k - j * BLOCK_K, CPR, k);
        lk.load(slot + BLOCK_K * ROW_BYTES, v_src + (i64)j * BLOCK_K * v_sn, (i64)KLoader::RSTEP * v_sn,
                N_k - j * BLOCK_K, CPR, v);
    };
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        load_kv(s);
        cp_async_commit();
    }

    // this thread's two rows: L2 and D (padded arrays: no bounds)
    const i64 bh = ((i64)b * H + h) * N_qp;
    float l2[2], dd[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        l2[hh] = lse2[bh + row0 + (lane >> 2) + hh * 8];
        dd[hh] = delta[bh + row0 + (lane >> 2) + hh * 8];
    }
    u32 xo[4];
    lane_offsets<ROW_BYTES>(lane, xo);
    const u32 bt = bt_delta<ROW_BYTES>(lane);   // B^T operands' offsets: xo + bt (warp_tiles.cuh)
    const int col_lane = 2 * (lane & 3);
    const u32 q_warp = sQ + (u32)(warp * 16) * ROW_BYTES;
    const u32 o_warp = sO + (u32)(warp * 16) * ROW_BYTES;
    const int mask_from = IS_CAUSAL ? min(N_k - BLOCK_K, m0 + diag - BLOCK_K + 1) : N_k - BLOCK_K;

    for (int j = 0; j < n_blocks; ++j) {
        const u32 sK = sKV + (j % STAGES) * SLOT_BYTES;
        const u32 sV = sK + BLOCK_K * ROW_BYTES;
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        float s[1][NK][4];
        zero(s);
        mma_abt<T, 1, BLOCK_K, HEAD_DIM, ROW_BYTES>(s, q_warp, sK, xo, bt);
        const int c0 = j * BLOCK_K;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int row = row0 + (lane >> 2) + hh * 8;
#pragma unroll
            for (int nt = 0; nt < NK; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float x = s[0][nt][2 * hh + e];
                    if (c0 > mask_from) {
                        const int key = c0 + nt * 8 + col_lane + e;
                        if (key >= N_k || (IS_CAUSAL && key > row + diag)) x = neg_inf();
                    }
                    s[0][nt][2 * hh + e] = ex2(fmaf(x, scale_log2, -l2[hh]));
                }
        }
        {
            float dp[1][NK][4];
            zero(dp);
            mma_abt<T, 1, BLOCK_K, HEAD_DIM, ROW_BYTES>(dp, o_warp, sV, xo, bt);
#pragma unroll
            for (int nt = 0; nt < NK; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[0][nt][e] *= dp[0][nt][e] - dd[e >> 1];
        }
        u32 da[1][NK / 2][4];
        to_a<T, 1, NK>(s, da);
        mma_rb<T, 1, BLOCK_K, HEAD_DIM, ROW_BYTES>(acc, da, sK, 0, xo);
        __syncthreads();   // every warp is done with slot j % STAGES
        load_kv(j + STAGES);
        cp_async_commit();
    }
    cp_async_wait<0>();
    store_rows<T, 1, HEAD_DIM>(dqg, dq_sn, row0, N_q, acc, scale, lane);
}

}  // namespace iom
