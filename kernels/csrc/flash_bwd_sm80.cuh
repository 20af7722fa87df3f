// FlashAttention-2 backward, Ampere-style (mma.sync m16n8k16 + ldmatrix + cp.async), sm_80 and newer.
//
// Four kernels (kernels/flash_bwd_sm80.py launches them in this order):
//   1. flash_bwd_dot_kernel      D = rowsum(dO * O), L2 = LSE * log2(e) (+inf for a row that sees no key
//                                and for the padding rows), both padded to N_qp = whole query tiles; zeroes
//                                the fp32 dQ accumulator (atomic mode).
//   2. flash_bwd_kernel          a block owns BLOCK_K keys of one (batch, KV head); its warps own
//                                BLOCK_K / WARPS of them each.  Query tiles of BLOCK_Q rows stream through
//                                STAGES SMEM slots (with GQA: every query head of the group in turn):
//                                  S^T = K Q^T, P^T = exp2(S^T * scale*log2e - L2), dV += P^T dO,
//                                  dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q
//                                dK and dV stay in registers; dS^T goes to SMEM and, with WITH_DQ,
//                                dQ += dS K is added into the fp32 accumulator with atomics.
//   3. flash_bwd_convert_kernel  dQ = scale * accumulator in the input dtype (atomic mode), or
//      flash_bwd_dq_kernel       (deterministic mode, flash_bwd_dq_sm80.cuh, included at the end of this
//                                file) a block owns BLOCK_Q query rows, a warp 16 of them,
//                                and streams K/V chunks: S, P, dP, dS recomputed, dQ += dS K in registers.
//
// The softmax scale is folded into the exponent (exp2) and applied to dK and dQ at the end.
// Causal masking is bottom-right aligned: key j is visible from query i iff j <= i + N_k - N_q.
// Shared-memory tiles are row-major with the 16-byte chunks XOR-swizzled (see iom_common.cuh).
#pragma once
#include "iom_common.cuh"
#include "warp_tiles.cuh"
#include "flash_bwd_common.cuh"

namespace iom {

// How the warps of flash_bwd_kernel split a (BLOCK_Q x HEAD_DIM) dQ tile: WQ x WD warps, each QT m16 row
// tiles (32 rows where the warps allow: two row tiles share each K fragment) by DW head dims.
//
// The fp32 accumulator is kept in the order the warps hold it, not row-major: in each query tile's
// BLOCK_Q*HEAD_DIM floats, the accumulator quad (one m16 x n8 tile's 4 registers: rows r, r+8 x columns
// c, c+1) of lane l, tile qd of warp w sits at ((w * QUADS + qd) * 32 + l) * 4.  A warp's atomic add of a
// quad then covers 512 contiguous bytes, where row-major order would scatter it over 8 rows.
// flash_bwd_convert_kernel undoes the order.
template <int BLOCK_Q, int WARPS, int HEAD_DIM>
struct DqLayout {
    static constexpr int WQ = (WARPS < BLOCK_Q / 32) ? WARPS : BLOCK_Q / 32;
    static constexpr int WD = WARPS / WQ;
    static constexpr int QT = BLOCK_Q / 16 / WQ;
    static constexpr int DW = HEAD_DIM / WD;
    static constexpr int QUADS = QT * DW / 8;   // quads per lane
    // (row, column) inside the tile of a quad's first value
    static __device__ __forceinline__ void where(int warp, int qd, int lane, int& row, int& col) {
        const int wq = warp % WQ, wd = warp / WQ, qt = qd / (DW / 8), dt = qd % (DW / 8);
        row = (wq * QT + qt) * 16 + (lane >> 2);
        col = wd * DW + dt * 8 + 2 * (lane & 3);
    }
};

// How flash_bwd_kernel's warps split a tile: VK warps along the keys (32 keys each where the block
// allows: two m16 tiles share every operand fragment) by VD along the queries of S^T / dP^T and along
// the head dims of dK / dV.
template <int BLOCK_Q, int BLOCK_K, int WARPS, int HEAD_DIM>
struct KvLayout {
    static constexpr int VK = (WARPS < BLOCK_K / 32) ? WARPS : BLOCK_K / 32;
    static constexpr int VD = WARPS / VK;
    static constexpr int MT = BLOCK_K / VK / 16;     // key m16 tiles of a warp
    static constexpr int SQ = BLOCK_Q / VD;          // queries of a warp's S^T tile
    static constexpr int DV = HEAD_DIM / VD;         // head dims of a warp's dK, dV
};

// ------------------------------------------------------------------------------------------ 2. dK, dV (dQ)
template <class T, int BLOCK_Q, int BLOCK_K, int WARPS, int STAGES, int HEAD_DIM, bool IS_CAUSAL, bool WITH_DQ>
__global__ void __launch_bounds__(WARPS * 32, 1)
flash_bwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                 const T* __restrict__ dout, const float* __restrict__ lse2, const float* __restrict__ delta,
                 float* __restrict__ dq_acc, T* __restrict__ dk, T* __restrict__ dv,
                 i64 q_sb, i64 q_sh, i64 q_sn, i64 k_sb, i64 k_sh, i64 k_sn, i64 v_sb, i64 v_sh, i64 v_sn,
                 i64 o_sb, i64 o_sh, i64 o_sn, i64 dk_sb, i64 dk_sh, i64 dk_sn, i64 dv_sb, i64 dv_sh, i64 dv_sn,
                 int H, int group, int N_q, int N_k, int N_qp, float scale_log2, float scale) {
    constexpr int THREADS = WARPS * 32;
    using KV = KvLayout<BLOCK_Q, BLOCK_K, WARPS, HEAD_DIM>;
    constexpr int VK = KV::VK, MT = KV::MT, SQ = KV::SQ, DV = KV::DV;
    constexpr int NQ = SQ / 8;                      // n8 query tiles of a warp's S^T
    constexpr int CPR = HEAD_DIM / 8;
    constexpr int ROW_BYTES = HEAD_DIM * 2;
    constexpr u32 PS_BYTES = BLOCK_K * BLOCK_Q * 2; // a P^T or dS^T tile, [keys][queries] 16-bit
    // one warp across the queries: P^T and dS^T are already the A operands of dV and dK (no SMEM trip)
    constexpr bool P_IN_REGS = KV::VD == 1;
    using DQ = DqLayout<BLOCK_Q, WARPS, HEAD_DIM>;
    constexpr int WQ = DQ::WQ, QT = DQ::QT, DW = DQ::DW;   // the dQ tile's split over the warps
    static_assert(sizeof(T) == 2, "16-bit inputs only");
    static_assert(WARPS % VK == 0 && BLOCK_K % (16 * VK) == 0, "the keys split over the warps in m16 tiles");
    static_assert(SQ % 16 == 0 && DV % 16 == 0, "queries and head dims split over the warps in 16s");
    static_assert(BLOCK_Q == 32 || BLOCK_Q == 64 || BLOCK_Q == 128, "BLOCK_Q is 32, 64 or 128");
    static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM is 64 or 128");
    static_assert(WARPS % WQ == 0 && DW % 16 == 0, "the dQ tile splits over the warps in 16x16 pieces");
    static_assert(STAGES == 1 || STAGES == 2, "STAGES is 1 or 2");

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int hk = blockIdx.y, b = blockIdx.z;
    const int n0 = blockIdx.x * BLOCK_K;
    const int diag = N_k - N_q;
    const int n_qt = (N_q + BLOCK_Q - 1) / BLOCK_Q;
    // causal: the first query that sees a key of this tile is n0 - diag
    const int q_first = IS_CAUSAL ? max(0, n0 - diag) / BLOCK_Q : 0;
    const int per_head = max(0, n_qt - q_first);
    const int total = per_head * group;
    // the t-th query tile of a head's walk.  Causal: from the last tile down to the first visible one
    // (FlashAttention-2's order), so the key tiles of a head visit the same query tile at the same time
    // (Q and dO served from L2 to all of them) instead of each starting at its own diagonal.
    auto query_tile = [&](int t) { return IS_CAUSAL ? n_qt - 1 - t % per_head : q_first + t % per_head; };
    const int vk = warp % VK, vd = warp / VK;
    const int warp_k0 = vk * MT * 16;               // this warp's first key row in the tile
    const int warp_q0 = vd * SQ;                    // ... first query column of its S^T tile
    const int warp_d0 = vd * DV;                    // ... first head dim of its dK, dV

    T* dkg = dk + (i64)b * dk_sb + (i64)hk * dk_sh + warp_d0;
    T* dvg = dv + (i64)b * dv_sb + (i64)hk * dv_sh + warp_d0;
    float acc_dk[MT][DV / 8][4], acc_dv[MT][DV / 8][4];
    zero(acc_dk);
    zero(acc_dv);
    if (total == 0) {   // no query sees these keys: dK = dV = 0
        store_rows<T, MT, DV>(dkg, dk_sn, n0 + warp_k0, N_k, acc_dk, 0.f, lane);
        store_rows<T, MT, DV>(dvg, dv_sn, n0 + warp_k0, N_k, acc_dv, 0.f, lane);
        return;
    }

    // SMEM: [K | V | STAGES x (Q | dO | L2 | D) | P^T (unused when P_IN_REGS) | dS^T]
    const u32 sK = smem_addr(dyn_smem());
    const u32 sV = sK + BLOCK_K * ROW_BYTES;
    const u32 sSlots = sV + BLOCK_K * ROW_BYTES;
    constexpr u32 SLOT_BYTES = 2u * BLOCK_Q * ROW_BYTES + 2u * BLOCK_Q * 4;
    const u32 sP = sSlots + STAGES * SLOT_BYTES;
    const u32 sDS = sP + PS_BYTES;   // the P^T tile is reserved either way: one SMEM size for every config
    const float* slot_f = reinterpret_cast<const float*>(dyn_smem() + 2 * BLOCK_K * ROW_BYTES + 2 * BLOCK_Q * ROW_BYTES);

    {   // K and V of this tile: one commit group with the first query tile
        using KLoader = TileLoader<BLOCK_K, CPR, THREADS>;
        const KLoader lk(tid);
        const T* kg = k + (i64)b * k_sb + (i64)hk * k_sh + (i64)(n0 + lk.r0) * k_sn + lk.c8;
        const T* vg = v + (i64)b * v_sb + (i64)hk * v_sh + (i64)(n0 + lk.r0) * v_sn + lk.c8;
        lk.load(sK, kg, (i64)KLoader::RSTEP * k_sn, N_k - n0, CPR, k);
        lk.load(sV, vg, (i64)KLoader::RSTEP * v_sn, N_k - n0, CPR, v);
    }
    using QLoader = TileLoader<BLOCK_Q, CPR, THREADS>;
    const QLoader lq(tid);
    auto load_tile = [&](int t) {   // query tile t of the block's sequence into slot t % STAGES
        if (t >= total) return;
        const int h = hk * group + t / per_head;
        const int q0 = query_tile(t) * BLOCK_Q;
        const u32 slot = sSlots + (t % STAGES) * SLOT_BYTES;
        const T* qg = q + (i64)b * q_sb + (i64)h * q_sh + (i64)(q0 + lq.r0) * q_sn + lq.c8;
        const T* og = dout + (i64)b * o_sb + (i64)h * o_sh + (i64)(q0 + lq.r0) * o_sn + lq.c8;
        lq.load(slot, qg, (i64)QLoader::RSTEP * q_sn, N_q - q0, CPR, q);
        lq.load(slot + BLOCK_Q * ROW_BYTES, og, (i64)QLoader::RSTEP * o_sn, N_q - q0, CPR, dout);
        if (tid < BLOCK_Q / 4) {   // L2 and D rows are padded to whole tiles: no bounds
            const i64 row = ((i64)b * H + h) * N_qp + q0 + tid * 4;
            cp_async16(slot + 2 * BLOCK_Q * ROW_BYTES + tid * 16, lse2 + row, 16);
            cp_async16(slot + 2 * BLOCK_Q * ROW_BYTES + BLOCK_Q * 4 + tid * 16, delta + row, 16);
        }
    };
    // The slot of tile t is free once every warp is past its last read of Q and dO: after dK with P^T in
    // registers (tile t + STAGES is loaded there and then, over the dQ product and the next tile), after
    // the dV and dK products through SMEM (tile t + 1 is loaded at the top of tile t instead, with two
    // slots; with one, after a barrier that follows those products).
    constexpr int AHEAD = P_IN_REGS ? STAGES : 1;
#pragma unroll
    for (int i = 0; i < AHEAD; ++i) {
        load_tile(i);
        cp_async_commit();
    }

    u32 xo[4];
    lane_offsets<ROW_BYTES>(lane, xo);
    const u32 bt = bt_delta<ROW_BYTES>(lane);   // B^T operands' offsets: xo + bt (warp_tiles.cuh)
    const int col_lane = 2 * (lane & 3);
    const u32 k_warp = sK + (u32)warp_k0 * ROW_BYTES;
    const u32 v_warp = sV + (u32)warp_k0 * ROW_BYTES;
    u32 dvo[DV / 16];                               // dO / Q columns of this warp's dV / dK
    group_offsets<DV / 16, ROW_BYTES>(lane, warp_d0 / 16, dvo);
    // dQ: warp (wq, wd) owns rows wq*16*QT.. and head dims wd*DW..
    const int wq = warp % WQ, wd = warp / WQ;
    u32 kq[DW / 16];
    group_offsets<DW / 16, ROW_BYTES>(lane, wd * (DW / 16), kq);

    for (int t = 0; t < total; ++t) {
        const int h = hk * group + t / per_head;
        const int q0 = query_tile(t) * BLOCK_Q;
        const u32 slot = sSlots + (t % STAGES) * SLOT_BYTES;
        const u32 sQ = slot, sO = slot + BLOCK_Q * ROW_BYTES;
        const float* sL = slot_f + (t % STAGES) * (SLOT_BYTES / 4) + warp_q0;
        const float* sD = sL + BLOCK_Q;
        cp_async_wait<AHEAD - 1>();
        __syncthreads();   // tile t visible to all; every warp is done with tile t-1 (P^T, dS^T, its slot)
        if constexpr (!P_IN_REGS && STAGES == 2) {   // tile t+1 into the other slot, in flight all tile long
            load_tile(t + 1);
            cp_async_commit();
        }

        // ---- S^T = K Q^T, then P^T (masked: causal diagonal, key tail) --------------------------
        float s[MT][NQ][4];
        zero(s);
        mma_abt<T, MT, SQ, HEAD_DIM, ROW_BYTES>(s, k_warp, sQ + (u32)warp_q0 * ROW_BYTES, xo, bt);
        const bool mask = (n0 + BLOCK_K > N_k) || (IS_CAUSAL && q0 < n0 + BLOCK_K - 1 - diag);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int key = n0 + warp_k0 + mt * 16 + (lane >> 2) + hh * 8;
#pragma unroll
                for (int nt = 0; nt < NQ; ++nt) {
                    const f32x2 l2 = *reinterpret_cast<const f32x2*>(sL + nt * 8 + col_lane);
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float x = s[mt][nt][2 * hh + e];
                        if (mask) {
                            const int qi = q0 + warp_q0 + nt * 8 + col_lane + e;
                            if (key >= N_k || (IS_CAUSAL && qi < key - diag)) x = neg_inf();
                        }
                        s[mt][nt][2 * hh + e] = ex2(fmaf(x, scale_log2, -(e ? l2.y : l2.x)));
                    }
                }
            }
        // P^T leaves in 16 bit: the A operand of dV and, unpacked, the P of dS = P (dP - D) (the fp32
        // values would hold 32 more registers through the dP product)
        u32 pa[MT][NQ / 2][4];   // unused (and dropped) when P^T goes through SMEM
        if constexpr (P_IN_REGS) {   // dV += P^T dO straight from the registers
            to_a<T, MT, NQ>(s, pa);
            mma_rb<T, MT, BLOCK_Q, HEAD_DIM, ROW_BYTES>(acc_dv, pa, sO, 0, xo);
        } else {
            store_tile<T, MT, NQ, BLOCK_Q>(sP, warp_k0, warp_q0, s, lane);
        }

        // ---- dP^T = V dO^T; dS^T = P^T (dP^T - D) ------------------------------------------------
        zero(s);
        mma_abt<T, MT, SQ, HEAD_DIM, ROW_BYTES>(s, v_warp, sO + (u32)warp_q0 * ROW_BYTES, xo, bt);   // s = dP^T
        {
            float p[MT][NQ][4];
            if constexpr (P_IN_REGS) from_a<T, MT, NQ>(pa, p);
            else load_own<T, MT, NQ, BLOCK_Q>(sP, warp_k0, warp_q0, p, lane);
#pragma unroll
            for (int nt = 0; nt < NQ; ++nt) {
                const f32x2 dd = *reinterpret_cast<const f32x2*>(sD + nt * 8 + col_lane);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh) {
                        s[mt][nt][2 * hh] = p[mt][nt][2 * hh] * (s[mt][nt][2 * hh] - dd.x);
                        s[mt][nt][2 * hh + 1] = p[mt][nt][2 * hh + 1] * (s[mt][nt][2 * hh + 1] - dd.y);
                    }
            }
        }
        if constexpr (P_IN_REGS) {   // dK += dS^T Q from the registers; dS^T to SMEM for dQ
            u32 da[MT][NQ / 2][4];
            to_a<T, MT, NQ>(s, da);
            mma_rb<T, MT, BLOCK_Q, HEAD_DIM, ROW_BYTES>(acc_dk, da, sQ, 0, xo);
            if constexpr (WITH_DQ) store_tile<T, MT, NQ, BLOCK_Q>(sDS, warp_k0, warp_q0, s, lane);
        } else {   // dV += P^T dO, dK += dS^T Q: the warp's keys x its head dims, over every query
            store_tile<T, MT, NQ, BLOCK_Q>(sDS, warp_k0, warp_q0, s, lane);
            __syncthreads();   // P^T and dS^T complete
            mma_sb<T, MT, BLOCK_Q, DV, ROW_BYTES>(acc_dv, sP, warp_k0, sO, dvo, lane);
            mma_sb<T, MT, BLOCK_Q, DV, ROW_BYTES>(acc_dk, sDS, warp_k0, sQ, dvo, lane);
        }
        if constexpr (P_IN_REGS || STAGES == 1) {   // every warp is past its dV and dK (and dS^T is complete)
            __syncthreads();
            load_tile(t + AHEAD);
            cp_async_commit();
        }

        // ---- dQ += dS K (atomics into the fp32 accumulator) -----------------------------------------
        if constexpr (WITH_DQ) {
            // in passes of at most 32 head dims: a wider fp32 tile beside dK and dV would spill
            constexpr int PASSES = DW > 32 ? DW / 32 : 1, DP = DW / PASSES;
            float* dqg = dq_acc + (((i64)b * H + h) * N_qp + q0) * HEAD_DIM + (warp * DQ::QUADS * 32 + lane) * 4;
#pragma unroll
            for (int pass = 0; pass < PASSES; ++pass) {
                float acc_dq[QT][DP / 8][4];
                zero(acc_dq);
#pragma unroll
                for (int kk = 0; kk < BLOCK_K / 16; ++kk) {
                    u32 a[QT][4];
                    // dS rows are dS^T's columns: ldmatrix .trans of (keys kk*16.., queries) blocks; lane l
                    // addresses key row (l & 7) + 8 * (l >> 4) and query chunk ((l >> 3) & 1)
                    const int krow = kk * 16 + (lane & 7) + ((lane >> 4) << 3);
#pragma unroll
                    for (int qt = 0; qt < QT; ++qt) {
                        const int qc = (wq * QT + qt) * 2 + ((lane >> 3) & 1);
                        ldsm_x4_trans(sDS + chunk_at<BLOCK_Q / 8>(krow, qc), a[qt][0], a[qt][1], a[qt][2], a[qt][3]);
                    }
#pragma unroll
                    for (int dp = 0; dp < DP / 16; ++dp) {
                        u32 b0, b1, b2, b3;
                        ldsm_x4_trans(sK + kq[pass * (DP / 16) + dp] + (u32)(kk * 16 * ROW_BYTES), b0, b1, b2, b3);
#pragma unroll
                        for (int qt = 0; qt < QT; ++qt) {
                            Elem<T>::mma(acc_dq[qt][2 * dp], a[qt], b0, b1);
                            Elem<T>::mma(acc_dq[qt][2 * dp + 1], a[qt], b2, b3);
                        }
                    }
                }
                // DqLayout's order: quad qd of this lane at ((warp * QUADS + qd) * 32 + lane) * 4
#pragma unroll
                for (int qt = 0; qt < QT; ++qt)
#pragma unroll
                    for (int dt = 0; dt < DP / 8; ++dt) {
                        const float* a = acc_dq[qt][dt];
                        red_add4(dqg + (qt * (DW / 8) + pass * (DP / 8) + dt) * 128, a[0], a[1], a[2], a[3]);
                    }
            }
        }
    }
    cp_async_wait<0>();

    store_rows<T, MT, DV>(dkg, dk_sn, n0 + warp_k0, N_k, acc_dk, scale, lane);
    store_rows<T, MT, DV>(dvg, dv_sn, n0 + warp_k0, N_k, acc_dv, 1.f, lane);
}

}  // namespace iom

// 3b: the deterministic mode's dQ kernel
#include "flash_bwd_dq_sm80.cuh"
