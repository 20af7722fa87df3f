// flash_bwd_sm90.cuh -- FlashAttention backward for Hopper (sm_90a): TMA + wgmma + warp specialization.
//
// Three kernels (kernels/flash_bwd_sm90.py launches them in this order):
//   1. iom::flash_bwd_dot_kernel      (flash_bwd_common.cuh) D = rowsum(dO * O), the base-2 LSE padded to
//                                     whole query tiles, the fp32 dQ accumulator zeroed.
//   2. sm90::flash_bwd_sm90<BwdTraits> a CTA owns kBlockN = 64 * kConsumers keys of one (batch, KV head).
//      Warpgroup 0 is the producer: one thread loads K and V once, then streams the query tiles (Q, dO:
//      kBlockM rows; their LSE and D rows) of every query head of the GQA group through a kStages-deep
//      SMEM ring with TMA (full / empty mbarriers per slot).  Consumer warpgroup w owns keys
//      [64 w, 64 w + 64) of the tile; per query tile it computes
//          S^T  = K_w Q^T              wgmma m64n{kBlockM}k16, A and B from SMEM (K-major)
//          dP^T = V_w dO^T             same
//          P^T  = exp2(S^T * scale*log2e - L2),  dS^T = P^T (dP^T - D)     in registers
//          dV  += P^T dO                   wgmma m64n{d}k16, A from registers, B MN-major
//      and stores dS^T (16-bit) to SMEM.  Once every consumer has (a named barrier), warpgroup w issues
//      its slice of dQ = dS K (wgmma with both operands MN-major in SMEM: the keys are the rows of both),
//      then dK += dS^T Q (A from registers), and stages the dQ slice in SMEM in its registers' order while
//      dK runs (dQ full / dQ empty mbarriers; two staging slots with 64-query tiles).  One thread of the producer
//      warpgroup, the dQ writer, adds each query tile's slices to the fp32 accumulator in global memory
//      with TMA bulk reduce-adds (cp.reduce.async.bulk ... add.f32), so the consumers never wait on the
//      reduction; with kDeterministic the adds to a query tile go in key-tile order, the last key tile
//      first (a semaphore per query tile; the CTAs are launched in that order, so none waits on a CTA that
//      has not started), and every run sums in one order.
//      dK (times the softmax scale) and dV stay in registers over all query tiles and are stored at the end.
//   3. iom::flash_bwd_convert_kernel  (flash_bwd_common.cuh) dQ = scale * accumulator, in DqSlices' order.
//
// Causal masking is bottom-right aligned (key j visible from query i iff j <= i + N_k - N_q): a CTA starts
// at the first query tile that sees any of its keys.  Query rows past N_q (zero-filled by TMA) get L2 =
// +inf, so P = 0 there without a mask; keys past N_k are masked in the last key tile.
//
// Shared memory (dynamic; FlashBwdSm90Config.smem_bytes in iomodel/families/flash_bwd_sm90.py):
//     1024 (alignment slack) + K + V (kBlockN x d each) + kStages x (Q + dO) (kBlockM x d each)
//     + 2 x dS^T (kBlockN x kBlockM, double-buffered) + kDqSlots x dQ (kBlockM x d fp32), d padded to whole
//     64-column blocks (kHeadDimS: 64 at d = 32, 128 at d = 96)
//     + kStages x (L2 + D) (kBlockM floats each) + 8 x (1 + 4 kStages + 4 kConsumers) mbarriers.
// 16-bit tiles are stored as 64-column blocks of rows x 128 bytes (TMA SWIZZLE_128B boxes), so each
// column block is a stack of 1024-byte swizzle atoms (8 rows x 128 B); dS^T is stored the same way by
// the consumers (keys as rows, 64 queries a column block).
#pragma once
#include "sm90_common.cuh"
#include "sm90_tiles.cuh"
#include "flash_bwd_common.cuh"

namespace sm90 {

template <int kBlockM_, int kBlockN_, int kStages_, int kHeadDim_, int kConsumers_, bool kBF16_, bool kCausal_,
          bool kDeterministic_>
struct BwdTraits {
    static constexpr int kBlockM = kBlockM_;      // query rows of a streamed tile
    static constexpr int kBlockN = kBlockN_;      // keys of the CTA
    static constexpr int kStages = kStages_;
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kConsumers = kConsumers_;
    static constexpr bool kBF16 = kBF16_;
    static constexpr bool kCausal = kCausal_;
    static constexpr bool kDeterministic = kDeterministic_;

    static constexpr int kThreads = 128 * (kConsumers + 1);
    // SMEM tiles hold their rows in whole 64-column blocks (TMA SWIZZLE_128B boxes): d = 32 and 96 in rows
    // of 64 and 128, the padding zero-filled by TMA (its columns past d), never read by S^T and dP^T (they
    // contract over d) nor written out by dK and dV (m64n32 / m64n96 products)
    static constexpr int kHeadDimS = (kHeadDim + 63) / 64 * 64;
    static constexpr int kDBlocks = kHeadDimS / 64;
    // dQ = dS K (kBlockM x d): the warpgroups split it into 64-row blocks, then into slices of head dims,
    // over the padded row (a slice starts on a 64-column block: at d = 96 the second warpgroup's slice is
    // columns 64 to 127, its last 32 zeros of K's padding; at d = 32 one slice of 64, half zeros); the fp32
    // accumulator's rows are kHeadDimS floats, and the conversion stores the first d
    static constexpr int kMBlocks = kBlockM / 64;
    static constexpr int kNSplit = kConsumers / kMBlocks;
    static constexpr int kSlice = kHeadDimS / kNSplit;
    // dS^T from the fp32 P^T where its registers fit (64-query tiles: 1-2% faster on the H100, and exact);
    // with 128-query tiles the fp32 P^T alive beside dP^T makes ptxas serialize the wgmmas, and the
    // deterministic mode's consumers (232 registers) spill: P^T is read back from its 16-bit copy there.
    static constexpr bool kDsFromFp32 = kBlockM <= 64 && !kDeterministic_;

    static constexpr u32 kBytesKV = kBlockN * kHeadDimS * 2;
    static constexpr u32 kBytesQ = kBlockM * kHeadDimS * 2;     // one Q (= one dO) tile
    static constexpr u32 kBytesDS = kBlockN * kBlockM * 2;
    static constexpr u32 kBytesDQ = kBlockM * kHeadDimS * 4;
    // dQ staging slots (each holds every consumer's slice of one query tile): with two, a consumer stages a
    // tile's slice while the writer's bulk adds still read the last one's (they wait on the L2: 200 cycles a
    // tile at d = 128 with one slot, validation/results/profile-bwd-sm90-h100-2026-11-25/dq2-trace.json).
    // Two where they fit in 227 KB of SMEM: with 64-query tiles (FlashBwdSm90Config.dq_slots).
    static constexpr int kDqSlots = kBlockM == 64 ? 2 : 1;
    static constexpr u32 kBytesRow = kBlockM * 4;               // the L2 (= the D) rows of a tile
    static constexpr u32 kOffK = 0;
    static constexpr u32 kOffV = kBytesKV;
    static constexpr u32 kOffQ = 2 * kBytesKV;
    static constexpr u32 kOffDO = kOffQ + kStages * kBytesQ;
    static constexpr u32 kOffDS = kOffDO + kStages * kBytesQ;
    static constexpr u32 kOffDQ = kOffDS + 2 * kBytesDS;
    static constexpr u32 kOffL = kOffDQ + kDqSlots * kBytesDQ;
    static constexpr u32 kOffD = kOffL + kStages * kBytesRow;
    static constexpr u32 kOffBar = kOffD + kStages * kBytesRow;
    // K/V full; Q full, Q empty, dO full, dO empty per slot; dQ full, dQ empty per consumer warpgroup and dQ
    // slot (room for two slots whatever kDqSlots: one count of barriers for every config)
    static constexpr u32 kNumBars = 1 + 4 * kStages + 2 * kConsumers * 2;
    static constexpr u32 kSmemBytes = 1024 + kOffBar + 8 * kNumBars;
    // Register split after setmaxnreg: the CTA launches with (65536 / kThreads) rounded down to 8 registers
    // a thread (168 at 384 threads), and setmaxnreg only moves them between warpgroups.  The deterministic
    // dQ writer (its semaphore loop) spills at 24, so that mode gives the producer warpgroup 32.
    static constexpr u32 kLaunchRegs = (65536 / kThreads) / 8 * 8;
    static constexpr u32 kProducerRegs = kDeterministic ? 32 : 24;
    static constexpr u32 kConsumerRegs = kDeterministic ? 232 : 240;

    static_assert(kBlockN == 64 * kConsumers, "each consumer warpgroup owns 64 keys");
    static_assert(kBlockM % 64 == 0 && kBlockM <= 256, "block_m: whole wgmma row blocks, a TMA box");
    static_assert(kConsumers % kMBlocks == 0 && kSlice % 64 == 0, "dQ slices of whole 64-column blocks");
    static_assert(kHeadDim == 32 || kHeadDim == 64 || kHeadDim == 96 || kHeadDim == 128, "head_dim");
    static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= kLaunchRegs * kThreads, "registers");
};

// The order of a query tile's fp32 dQ accumulator (for iom::flash_bwd_convert_kernel): warp W of the
// consumers (warpgroup W / 4) holds a 16-row strip of its warpgroup's (64 x SLICE) slice; the quad qd
// of lane l (the accumulator registers 4 qd .. 4 qd + 3: rows r, r + 8, columns c, c + 1) sits at
// ((W * QUADS + qd) * 32 + l) * 4, so a warp's 16-byte SMEM stores of a quad are contiguous.
template <int BLOCK_M, int CONSUMERS, int HEAD_DIM>
struct DqSlices {
    static constexpr int NS = CONSUMERS / (BLOCK_M / 64);
    static constexpr int SLICE = HEAD_DIM / NS;
    static constexpr int QUADS = SLICE / 8;
    static __device__ __forceinline__ void where(int warp, int qd, int lane, int& row, int& col) {
        const int wg = warp / 4;
        row = (wg / NS) * 64 + (warp % 4) * 16 + (lane >> 2);
        col = (wg % NS) * SLICE + qd * 8 + 2 * (lane & 3);
    }
};

// ------------------------------------------------------------------------------ PTX of this kernel only
// 1-D bulk copy global -> shared, completion on mbarrier `bar` (16-byte aligned, a multiple of 16 bytes).
__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(reinterpret_cast<u64>(src)), "r"(bytes), "r"(bar) : "memory");
}
// Add `bytes` of fp32 from shared memory into global memory (TMA bulk reduction), in a bulk group.
__device__ __forceinline__ void bulk_reduce_add(float* dst, u32 src, u32 bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                 ::"l"(reinterpret_cast<u64>(dst)), "r"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// The bulk groups have read their shared memory (it may be written again).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// The bulk groups are complete (their writes to global memory done).
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// This thread's generic-proxy writes to shared memory become visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async;" ::: "memory"); }
__device__ __forceinline__ int ld_acquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(reinterpret_cast<u64>(p)) : "memory");
    return v;
}
__device__ __forceinline__ void red_release_add(int* p, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(reinterpret_cast<u64>(p)), "r"(v) : "memory");
}
// A named barrier over `count` threads that returns whether any of them passed `v` true.
__device__ __forceinline__ bool named_bar_or(u32 id, u32 count, bool v) {
    u32 r;
    asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n"
                 " selp.u32 %0, 1, 0, q;\n}" : "=r"(r) : "r"(u32(v)), "r"(id), "r"(count) : "memory");
    return r != 0;
}
__device__ __forceinline__ void st_shared_u32(u32 addr, u32 v) {
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_v4(u32 addr, float a, float b, float c, float d) {
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
__device__ __forceinline__ void ld_shared_v2(u32 addr, float& a, float& b) {
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(a), "=f"(b) : "r"(addr) : "memory");
}

// The work unit of a CTA: key tile n of the (KV head, batch) group g.  The grid is 1-D and CTAs start in
// launch order, so the order of the units is the schedule.  The groups are taken in sections of `sec`;
// inside a section the units go key tile by key tile across its groups.  Causal: key tile 0 sees every
// query tile and the last the fewest, so the longest units start first and the short ones fill the tail
// (with sec = 1, one group's units after another's, a late group's long units end after the others).
// The section keeps the Q, dO and dQ rows the CTAs running together stream few enough to stay in L2.
// Deterministic mode: the key tiles from the last down, as a CTA's dQ adds wait for those of the later
// key tiles (write_dq), which must then have been launched already, or CTAs that hold every SM could wait
// on CTAs that never start.
struct BwdUnit {
    int n, h_kv, b;
};
template <class T>
__host__ __device__ __forceinline__ BwdUnit unit_of(int id, int num_n, int H_kv, int groups, int sec) {
    const int base = (id / (sec * num_n)) * sec;                   // first group of id's section
    const int width = groups - base < sec ? groups - base : sec;    // groups in that section
    const int r = id - base * num_n;
    const int step = r / width;
    const int g = base + (r - step * width);
    return {T::kDeterministic ? num_n - 1 - step : step, g % H_kv, g / H_kv};
}

// The tail split: with `pieces` > 1 the units from `whole` on (the last wave's, when every unit costs the
// same) run as `pieces` CTAs each, piece p streaming the p-th share of the unit's query tiles, so that the
// last wave's units fill every SM instead of half of them.  Their dK and dV are partial sums, combined
// by the unit's last piece to finish (combine_pieces).  A CTA's query tiles are the (query head hi, tile m)
// pairs of its share, head by head: from (hi0, m0) to (hi1, m1), m1 excluded; a whole unit has them all.
struct BwdSpan {
    int hi0, m0, hi1, m1;
    int slot;    // the piece's index among all pieces (-1: a whole unit)
};
__host__ __device__ __forceinline__ BwdSpan span_of(int id, int whole, int pieces, int group, int m_first,
                                                    int num_m) {
    const int len = num_m - m_first;
    if (id < whole || pieces <= 1 || len <= 0) return {0, m_first, group - 1, num_m, -1};
    const int slot = id - whole, piece = slot % pieces, total = group * len;
    const int t0 = piece * total / pieces, t1 = (piece + 1) * total / pieces;
    return {t0 / len, m_first + t0 % len, (t1 - 1) / len, m_first + (t1 - 1) % len + 1, slot};
}
// The unit of CTA `id` under the tail split: the pieces of a unit are consecutive CTAs.
__host__ __device__ __forceinline__ int unit_id(int id, int whole, int pieces) {
    return id < whole || pieces <= 1 ? id : whole + (id - whole) / pieces;
}

// The first query tile that sees any key of key tile n (bottom-right causal); 0 without masking.
template <class T>
__device__ __forceinline__ int first_m_block(int n0, int offset) {
    if constexpr (!T::kCausal) return 0;
    const int q = n0 - offset;          // the first query row that sees key n0
    return q <= 0 ? 0 : q / T::kBlockM;
}

// ------------------------------------------------------------------------------ producer
template <class T>
__device__ __forceinline__ void produce(const TmaDesc& tmQ, const TmaDesc& tmK, const TmaDesc& tmV,
                                        const TmaDesc& tmdO, const float* lse2, const float* delta, u32 smem0,
                                        BwdUnit u, int H, int group, int n_qp, BwdSpan sp, int m_first,
                                        int num_m) {
    const u32 sBar = smem0 + T::kOffBar;
    constexpr int S = T::kStages;
    const int n_block = u.n, h_kv = u.h_kv, b = u.b;
    tma_prefetch_desc(&tmQ);
    tma_prefetch_desc(&tmdO);
    mbar_arrive_expect_tx(sBar, 2 * T::kBytesKV);
#pragma unroll
    for (int db = 0; db < T::kDBlocks; ++db) {
        tma_load_4d(smem0 + T::kOffK + db * (T::kBlockN * 128), &tmK, sBar, db * 64, n_block * T::kBlockN, h_kv, b);
        tma_load_4d(smem0 + T::kOffV + db * (T::kBlockN * 128), &tmV, sBar, db * 64, n_block * T::kBlockN, h_kv, b);
    }
    int stage = 0;
    u32 phase = 0;
    for (int hi = sp.hi0; hi <= sp.hi1; ++hi) {
        const int h = h_kv * group + hi;
        const size_t row0 = (size_t(b) * H + h) * n_qp;
        for (int m = hi == sp.hi0 ? sp.m0 : m_first, m_end = hi == sp.hi1 ? sp.m1 : num_m; m < m_end; ++m) {
            const u32 fullQ = sBar + 8u * (1 + stage), emptyQ = sBar + 8u * (1 + S + stage);
            const u32 fullDO = sBar + 8u * (1 + 2 * S + stage), emptyDO = sBar + 8u * (1 + 3 * S + stage);
            mbar_wait(emptyQ, phase ^ 1);
            mbar_arrive_expect_tx(fullQ, T::kBytesQ + T::kBytesRow);
#pragma unroll
            for (int db = 0; db < T::kDBlocks; ++db)
                tma_load_4d(smem0 + T::kOffQ + stage * T::kBytesQ + db * (T::kBlockM * 128), &tmQ, fullQ, db * 64,
                            m * T::kBlockM, h, b);
            bulk_load(smem0 + T::kOffL + stage * T::kBytesRow, lse2 + row0 + m * T::kBlockM, T::kBytesRow, fullQ);
            mbar_wait(emptyDO, phase ^ 1);
            mbar_arrive_expect_tx(fullDO, T::kBytesQ + T::kBytesRow);
#pragma unroll
            for (int db = 0; db < T::kDBlocks; ++db)
                tma_load_4d(smem0 + T::kOffDO + stage * T::kBytesQ + db * (T::kBlockM * 128), &tmdO, fullDO,
                            db * 64, m * T::kBlockM, h, b);
            bulk_load(smem0 + T::kOffD + stage * T::kBytesRow, delta + row0 + m * T::kBlockM, T::kBytesRow, fullDO);
            next_stage<S>(stage, phase);
        }
    }
}

// ------------------------------------------------------------------------------ consumer pieces
// Accumulator layout of a warpgroup's m64nN tile (a warp owns 16 rows): register 4i + e holds
// row = 16 warp + lane/4 + 8 (e >> 1), column = 8i + 2 (lane % 4) + (e & 1).

// The values of a tile's row vector (the base-2 LSE or D, kBlockM floats in SMEM) at this thread's query
// columns: the pair 8i + 2 (lane % 4), + 1 at r[2i], r[2i + 1].
template <class T>
__device__ __forceinline__ void load_cols(float (&r)[T::kBlockM / 4], u32 sRow, int lane) {
#pragma unroll
    for (int i = 0; i < T::kBlockM / 8; ++i) ld_shared_v2(sRow + (8 * i + 2 * (lane & 3)) * 4, r[2 * i], r[2 * i + 1]);
}

// P^T = exp2(S^T * scale_log2 - L2[q]) in place; masked scores (key past N_k, or causal: key > q + offset)
// give 0.  `key` is this thread's first key row, `q0` the tile's first query, `l2` its columns' L2.
template <class T, bool kMask>
__device__ __forceinline__ void probabilities(float (&s)[T::kBlockM / 2], const float (&l2)[T::kBlockM / 4], int lane,
                                              int key, int q0, int N_k, int offset, float scale_log2) {
#pragma unroll
    for (int i = 0; i < T::kBlockM / 8; ++i) {
        const float l0 = l2[2 * i], l1 = l2[2 * i + 1];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float x = __fmaf_rn(s[4 * i + e], scale_log2, -((e & 1) ? l1 : l0));
            if constexpr (kMask) {
                const int k = key + 8 * (e >> 1);
                const int q = q0 + 8 * i + 2 * (lane & 3) + (e & 1);
                if (k >= N_k || (T::kCausal && k > q + offset)) x = __int_as_float(0xff800000);
            }
            s[4 * i + e] = ex2(x);
        }
    }
}

// The j-th pair of P^T values a thread holds (accumulators 2j, 2j + 1), from the fp32 registers or from
// their 16-bit copy.
template <bool BF16, int N>
__device__ __forceinline__ float2 p_pair(const float (&p)[N], int j) { return make_float2(p[2 * j], p[2 * j + 1]); }
template <bool BF16, int N>
__device__ __forceinline__ float2 p_pair(const u32 (&p16)[N], int j) { return unpack2<BF16>(p16[j]); }

// dS^T = P^T (dP^T - D[q]) in place of dP^T, P^T from its fp32 registers (kDsFromFp32) or read back from
// its 16-bit copy (as FlashAttention-2 does), which frees the fp32 P^T as soon as it is packed.
template <class T, class PTile>
__device__ __forceinline__ void score_grads(float (&dp)[T::kBlockM / 2], const PTile& p,
                                            const float (&dr)[T::kBlockM / 4]) {
#pragma unroll
    for (int i = 0; i < T::kBlockM / 8; ++i) {
        const float d0 = dr[2 * i], d1 = dr[2 * i + 1];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const float2 pv = p_pair<T::kBF16>(p, 2 * i + half);
            dp[4 * i + 2 * half] = pv.x * (dp[4 * i + 2 * half] - d0);
            dp[4 * i + 2 * half + 1] = pv.y * (dp[4 * i + 2 * half + 1] - d1);
        }
    }
}

// 16-bit pairs in the A-fragment order of the next wgmma (a k16 step = 4 registers = 8 accumulators).
template <class T>
__device__ __forceinline__ void pack_tile(u32 (&a)[T::kBlockM / 4], const float (&s)[T::kBlockM / 2]) {
#pragma unroll
    for (int j = 0; j < T::kBlockM / 4; ++j) a[j] = pack2<T::kBF16>(s[2 * j], s[2 * j + 1]);
}

// This thread's dS^T pairs into the dS^T buffer: key row r (of the CTA's kBlockN), query columns in
// 64-wide blocks of 128-byte swizzled rows.  A warp's 32 stores of one pair index hit 32 distinct banks.
template <class T>
__device__ __forceinline__ void store_ds(u32 sDS, const u32 (&ds)[T::kBlockM / 4], int row, int lane) {
#pragma unroll
    for (int i = 0; i < T::kBlockM / 8; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = row + 8 * half;
            const u32 addr = sDS + (i / 8) * (T::kBlockN * 128) + r * 128 + (((i % 8) ^ (r % 8)) * 16) + 4 * (lane & 3);
            st_shared_u32(addr, ds[2 * i + half]);
        }
    }
}

// dK (times scale) or dV rows < N_k of this thread, from its accumulators, to global memory in 16-byte
// stores: the quad trades its column pairs (quad_transpose) so that lane q writes whole 8-column groups
// 4j + q (4-byte stores of the pairs as they lie took about 6 us a CTA at d = 128: 32768 store
// instructions; every lane shuffles, rows past N_k store nothing).
template <class T>
__device__ __forceinline__ void store_rows(u16* out, const float (&acc)[T::kHeadDim / 2], int key, int lane,
                                           int N_k, float mul) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int k = key + 8 * r;
        u16* dst = out + size_t(k) * T::kHeadDim + 8 * (lane & 3);
#pragma unroll
        for (int j = 0; j < T::kHeadDim / 32; ++j) {
            u32 v[4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                v[i] = pack2<T::kBF16>(acc[4 * (4 * j + i) + 2 * r] * mul, acc[4 * (4 * j + i) + 2 * r + 1] * mul);
            quad_transpose(v, lane & 3);
            if (k < N_k)
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst + 32 * j), "r"(v[0]), "r"(v[1]),
                             "r"(v[2]), "r"(v[3]) : "memory");
        }
    }
}

// The last key tile whose keys the query tile m sees (bottom-right causal), num_n - 1 without masking.
template <class T>
__device__ __forceinline__ int last_n_block(int m, int num_n, int offset) {
    if constexpr (!T::kCausal) return num_n - 1;
    const int last_key = (m + 1) * T::kBlockM - 1 + offset;
    const int n = last_key < 0 ? -1 : last_key / T::kBlockN;
    return n < num_n - 1 ? n : num_n - 1;
}

// A consumer warpgroup's dQ slice into its place in a dQ slot, in DqSlices' order (a warp's 16-byte stores
// of one quad index cover 512 contiguous bytes), then handed to the writer (dQ full).  The caller has waited
// for the slot (dQ empty: the writer's bulk adds have read what it held); the consumers never wait on the
// global reduction itself.
template <class T>
__device__ __forceinline__ void stage_dq(const float (&dq)[T::kSlice / 2], u32 sDQ, u32 full, int tid) {
    constexpr int kQuads = T::kSlice / 8;
    const int warp = tid / 32, lane = tid % 32;
#pragma unroll
    for (int qd = 0; qd < kQuads; ++qd)
        st_shared_v4(sDQ + (((warp * kQuads + qd) * 32 + lane) * 4) * 4, dq[4 * qd], dq[4 * qd + 1], dq[4 * qd + 2],
                     dq[4 * qd + 3]);
    fence_async_smem();   // the bulk reduction reads it through the async proxy
    mbar_arrive(full);
}

// The dQ writer (one thread of the producer warpgroup): per query tile, once every consumer warpgroup
// has staged its slice, adds the slices to the fp32 accumulator with TMA bulk reduce-adds
// (cp.reduce.async.bulk) and frees the SMEM once they have read it.  Deterministic mode: a query tile's
// adds go in key-tile order, the last key tile that sees it first (under a causal mask the key tiles that
// see fewest query tiles then never wait long); the semaphore counts the CTAs that have added theirs.
template <class T>
__device__ __forceinline__ void write_dq(float* dq_acc, int* sem, u32 smem0, int bh0, int n_block, int group,
                                         int n_qp, BwdSpan sp, int m_first, int num_m, int num_n, int offset) {
    constexpr u32 kBytes = 64 * T::kSlice * 4;   // one warpgroup's slice
    const u32 sFull = smem0 + T::kOffBar + 8u * (1 + 4 * T::kStages);   // dQ full (slot, warpgroup), then empty
    const u32 sEmpty = sFull + 8u * (T::kConsumers * T::kDqSlots);
    int t = 0;
    // per-head pointers and 32-bit offsets inside a head: the producer warpgroup's registers are few
    for (int hi = sp.hi0; hi <= sp.hi1; ++hi) {
        const size_t bh = size_t(bh0) + hi;
        float* head_dst = dq_acc + bh * n_qp * T::kHeadDimS;
        int* head_sem = sem + bh * num_m;
        for (int m = hi == sp.hi0 ? sp.m0 : m_first, m_end = hi == sp.hi1 ? sp.m1 : num_m; m < m_end; ++m) {
            const int slot = t % T::kDqSlots;
            const u32 parity = (t / T::kDqSlots) & 1;
            for (int wg = 0; wg < T::kConsumers; ++wg) mbar_wait(sFull + 8u * (slot * T::kConsumers + wg), parity);
            if constexpr (T::kDeterministic) {
                const int turn = last_n_block<T>(m, num_n, offset) - n_block;
                while (ld_acquire(head_sem + m) < turn) {
                }
            }
            for (int wg = 0; wg < T::kConsumers; ++wg)
                bulk_reduce_add(head_dst + m * (T::kBlockM * T::kHeadDimS) + wg * (64 * T::kSlice),
                                smem0 + T::kOffDQ + slot * T::kBytesDQ + wg * kBytes, kBytes);
            bulk_commit();
            if constexpr (T::kDeterministic) {
                bulk_wait();      // the adds are done in global memory before the next key tile's start
                fence_async();
                red_release_add(head_sem + m, 1);
            } else {
                bulk_wait_read();
            }
            for (int wg = 0; wg < T::kConsumers; ++wg) mbar_arrive(sEmpty + 8u * (slot * T::kConsumers + wg));
            ++t;
        }
    }
    bulk_wait();   // the last adds are done before the CTA's shared memory goes
}

// A piece's dK and dV partial sums (tail split): each consumer thread writes its accumulator registers to
// the piece's slot in `part` (register i of every thread side by side, so a warp's 16-byte stores are
// contiguous; only the same thread of another piece reads them, so the registers' layout never matters),
// then the unit's arrival counter is bumped; the last piece to arrive reads every piece's slot in piece
// order (its own too: the sum is the same bits whichever piece is last), resets the counter for the next
// launch and stores dK and dV.  Returns whether this CTA is that last piece.
template <class T>
__device__ __forceinline__ bool combine_pieces(float* part, int* count, int slot, int pieces,
                                               float (&dk)[T::kHeadDim / 2], float (&dv)[T::kHeadDim / 2],
                                               int ctid) {
    constexpr int kQuads = T::kHeadDim / 8;                 // float4s of dK (and of dV) a thread holds
    constexpr int kThreadsC = 128 * T::kConsumers;
    constexpr size_t kPiece = size_t(2) * kQuads * kThreadsC * 4;   // floats of one piece's slot
    float* mine = part + size_t(slot) * kPiece;
#pragma unroll
    for (int i = 0; i < kQuads; ++i) {
        st_global_v4(mine + (size_t(i) * kThreadsC + ctid) * 4, dk[4 * i], dk[4 * i + 1], dk[4 * i + 2], dk[4 * i + 3]);
        st_global_v4(mine + (size_t(kQuads + i) * kThreadsC + ctid) * 4, dv[4 * i], dv[4 * i + 1], dv[4 * i + 2],
                     dv[4 * i + 3]);
    }
    __threadfence();                                        // this thread's slot before the counter
    named_bar_sync(2, kThreadsC);                           // every consumer thread's slot before the arrival
    const int unit = slot / pieces;
    bool last = false;
    if (ctid == 0) last = atomicAdd(count + unit, 1) == pieces - 1;
    if (!named_bar_or(2, kThreadsC, last)) return false;
    if (ctid == 0) count[unit] = 0;                        // every piece has arrived: left at zero
    __threadfence();                                        // the other pieces' slots after their counts
    const float* first = part + size_t(unit) * pieces * kPiece;
    auto sum_into = [&](float (&acc)[T::kHeadDim / 2], int base) {
#pragma unroll
        for (int i = 0; i < kQuads; ++i) {
            const size_t at = (size_t(base + i) * kThreadsC + ctid) * 4;
            float4 a = ld_global_cg_v4(first + at);
            for (int p = 1; p < pieces; ++p) {
                const float4 b = ld_global_cg_v4(first + p * kPiece + at);
                a.x += b.x;
                a.y += b.y;
                a.z += b.z;
                a.w += b.w;
            }
            acc[4 * i] = a.x;
            acc[4 * i + 1] = a.y;
            acc[4 * i + 2] = a.z;
            acc[4 * i + 3] = a.w;
        }
    };
    sum_into(dk, 0);
    sum_into(dv, kQuads);
    return true;
}

// IOM_BWD90_TRACE (profiling only): thread 0 of each consumer warpgroup of CTA (0, 0, 0) writes clock64 at
// 15 points of its first 32 query tiles into `sem` (then a long long[2][32][16] buffer): points 0 to 12 in
// the loop's order but 15 (a dQ slot free) and 13 (the slice staged), which come between 11 and 12.
#ifdef IOM_BWD90_TRACE
#define IOM_TRACE(slot)                                                                                     \
    if (tid == 0 && blockIdx.x == 0 && tile_i < 32) {                                                       \
        long long t_;                                                                                       \
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t_)::"memory");                                       \
        reinterpret_cast<long long*>(sem)[(wg * 32 + tile_i) * 16 + (slot)] = t_;                           \
    }
#else
#define IOM_TRACE(slot)
#endif

// IOM_BWD90_CTA_TIMES (profiling only): each CTA writes its SM and %globaltimer at 5 points into `sem` (then
// a long long[gridDim.x][8] buffer): [0] SM, [1] start, [2] K/V in SMEM (consumers), [3] the last query tile
// done, [4] dK and dV stored, [5] the dQ writer's last adds complete, [6] key tile, [7] group.
#ifdef IOM_BWD90_CTA_TIMES
__device__ __forceinline__ long long global_ns() {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}
#define IOM_CTA_TIME(slot) reinterpret_cast<long long*>(sem)[blockIdx.x * 8 + (slot)] = global_ns()
#else
#define IOM_CTA_TIME(slot)
#endif

// ------------------------------------------------------------------------------ the kernel
template <class T>
__device__ __forceinline__ void flash_bwd_sm90(const TmaDesc& tmQ, const TmaDesc& tmK, const TmaDesc& tmV,
                                               const TmaDesc& tmdO, const float* __restrict__ lse2,
                                               const float* __restrict__ delta, float* __restrict__ dq_acc,
                                               u16* __restrict__ dk, u16* __restrict__ dv, int* __restrict__ sem,
                                               float* __restrict__ part, int* __restrict__ count, int B, int H,
                                               int H_kv, int N_q, int N_k, int n_qp, int sec, int whole,
                                               int pieces, float scale_log2, float scale) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const u32 smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const u32 sBar = smem0 + T::kOffBar;
    constexpr int S = T::kStages;
    const int group = H / H_kv;
    const int offset = N_k - N_q;
    const int num_n = (N_k + T::kBlockN - 1) / T::kBlockN;
    const BwdUnit u = unit_of<T>(unit_id(blockIdx.x, whole, pieces), num_n, H_kv, H_kv * B, sec);
    const int n0 = u.n * T::kBlockN;
    const int num_m = n_qp / T::kBlockM;
    const int m_first = first_m_block<T>(n0, offset);
    const BwdSpan sp = span_of(blockIdx.x, whole, pieces, group, m_first, num_m);
    const int warpgroup = warp_uniform(int(threadIdx.x) / 128);

    if (threadIdx.x == 0) {
#ifdef IOM_BWD90_CTA_TIMES
        IOM_CTA_TIME(1);
        u32 smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        long long* rec = reinterpret_cast<long long*>(sem) + blockIdx.x * 8;
        rec[0] = smid;
        rec[6] = u.n;
        rec[7] = u.b * H_kv + u.h_kv;
#endif
        mbar_init(sBar, 1);
#pragma unroll
        for (int s = 0; s < S; ++s) {
            mbar_init(sBar + 8u * (1 + s), 1);
            mbar_init(sBar + 8u * (1 + S + s), 128 * T::kConsumers);
            mbar_init(sBar + 8u * (1 + 2 * S + s), 1);
            mbar_init(sBar + 8u * (1 + 3 * S + s), 128 * T::kConsumers);
        }
#pragma unroll
        for (int w = 0; w < T::kConsumers * T::kDqSlots; ++w) {   // (full, then empty, for slot w / kConsumers)
            mbar_init(sBar + 8u * (1 + 4 * S + w), 128);                                     // dQ full: a warpgroup
            mbar_init(sBar + 8u * (1 + 4 * S + T::kConsumers * T::kDqSlots + w), 1);        // dQ empty: the writer
        }
        fence_mbar_init();
    }
    __syncthreads();

    if (warpgroup == 0) {
        setmaxnreg_dec<T::kProducerRegs>();
        if (threadIdx.x == 0 && m_first < num_m)
            produce<T>(tmQ, tmK, tmV, tmdO, lse2, delta, smem0, u, H, group, n_qp, sp, m_first, num_m);
        else if (threadIdx.x == 32 && m_first < num_m) {
            write_dq<T>(dq_acc, sem, smem0, u.b * H + u.h_kv * group, u.n, group, n_qp, sp, m_first, num_m,
                        num_n, offset);
            IOM_CTA_TIME(5);
        }
        return;
    }
    setmaxnreg_inc<T::kConsumerRegs>();
    const int wg = warpgroup - 1;
    const int tid = threadIdx.x % 128;
    const int warp = tid / 32, lane = tid % 32;
    const int key_row = wg * 64 + warp * 16 + lane / 4;       // this thread's first key row in the CTA's tile
    const int key = n0 + key_row;
    const int wg_key_last = n0 + wg * 64 + 63;               // this warpgroup's last key
    const int mb = wg / T::kNSplit, ns = wg % T::kNSplit;    // its dQ slice: row block, head-dim slice
    const u32 sK = smem0 + T::kOffK, sV = smem0 + T::kOffV;

    float acc_dk[T::kHeadDim / 2], acc_dv[T::kHeadDim / 2];
#pragma unroll
    for (int i = 0; i < T::kHeadDim / 2; ++i) {
        acc_dk[i] = 0.f;
        acc_dv[i] = 0.f;
    }
    if (m_first < num_m) mbar_wait(sBar, 0);
    if (threadIdx.x == 128) IOM_CTA_TIME(2);
    int stage = 0, buf = 0, tile_i = 0;
    u32 phase = 0;
    for (int hi = sp.hi0; hi <= sp.hi1; ++hi) {
        for (int m = hi == sp.hi0 ? sp.m0 : m_first, m_end = hi == sp.hi1 ? sp.m1 : num_m; m < m_end; ++m) {
            const u32 sQ = smem0 + T::kOffQ + stage * T::kBytesQ, sdO = smem0 + T::kOffDO + stage * T::kBytesQ;
            const u32 sL = smem0 + T::kOffL + stage * T::kBytesRow, sD = smem0 + T::kOffD + stage * T::kBytesRow;
            const u32 sDS = smem0 + T::kOffDS + buf * T::kBytesDS;
            const u32 fullQ = sBar + 8u * (1 + stage), emptyQ = sBar + 8u * (1 + S + stage);
            const u32 fullDO = sBar + 8u * (1 + 2 * S + stage), emptyDO = sBar + 8u * (1 + 3 * S + stage);
            float s[T::kBlockM / 2], dp[T::kBlockM / 2], dq[T::kSlice / 2];
            u32 p16[T::kBlockM / 4], ds16[T::kBlockM / 4];

            IOM_TRACE(0);
            // both tiles before the first issue: a wait loop between two wgmma issues makes ptxas fence them
            mbar_wait(fullQ, phase);
            mbar_wait(fullDO, phase);
            // the LSE columns before the products are issued: loaded while S^T and dP^T read their operands,
            // the loads waited behind those reads and took the exponentials' phase from about 940 cycles a
            // tile to 690 (d = 128; validation/results/profile-bwd-sm90-h100-2026-11-25/loads-trace.json)
            float l2[T::kBlockM / 4];
            load_cols<T>(l2, sL, lane);
            IOM_TRACE(1);
            wgmma_fence();
            wgmma_tile_ss<T::kBlockM, T::kHeadDim, T::kBlockN, T::kBlockM, T::kBF16>(s, sK + wg * 64 * 128, sQ);
            wgmma_commit();
            wgmma_tile_ss<T::kBlockM, T::kHeadDim, T::kBlockN, T::kBlockM, T::kBF16>(dp, sV + wg * 64 * 128, sdO);
            wgmma_commit();
            IOM_TRACE(2);
            wgmma_wait<1>();
            fence_regs(s);
            IOM_TRACE(3);
            const bool masked = wg_key_last >= N_k || (T::kCausal && wg_key_last > m * T::kBlockM + offset);
            if (masked)
                probabilities<T, true>(s, l2, lane, key, m * T::kBlockM, N_k, offset, scale_log2);
            else
                probabilities<T, false>(s, l2, lane, key, m * T::kBlockM, N_k, offset, scale_log2);
            pack_tile<T>(p16, s);
            IOM_TRACE(4);
            wgmma_fence();
            wgmma_tile_rs<T::kHeadDim, T::kBlockM, T::kBF16>(acc_dv, p16, sdO);
            wgmma_commit();
            IOM_TRACE(5);
            wgmma_wait<1>();
            fence_regs(dp);
            IOM_TRACE(6);
            float dr[T::kBlockM / 4];   // (D's early too: spills at d = 64, no gain at d = 128: loads-*.json)
            load_cols<T>(dr, sD, lane);
            if constexpr (T::kDsFromFp32)
                score_grads<T>(dp, s, dr);
            else
                score_grads<T>(dp, p16, dr);
            pack_tile<T>(ds16, dp);
            store_ds<T>(sDS, ds16, key_row, lane);
            IOM_TRACE(7);
            // dQ's product first, then dK's: the dQ slice is staged for the writer while dK runs
            fence_async_smem();
            IOM_TRACE(8);
            named_bar_sync(1, 128 * T::kConsumers);      // every warpgroup's dS^T is in SMEM
            IOM_TRACE(9);
            wgmma_fence();
            wgmma_tile_sst<T::kSlice, T::kBlockN, T::kBF16>(
                dq, sDS + mb * (T::kBlockN * 128), sK + ns * (T::kSlice / 64) * (T::kBlockN * 128));
            wgmma_commit();
            wgmma_tile_rs<T::kHeadDim, T::kBlockM, T::kBF16>(acc_dk, ds16, sQ);
            wgmma_commit();
            IOM_TRACE(10);
            wgmma_wait<1>();                             // dV and dQ done (dK may run on)
            IOM_TRACE(11);
            fence_regs(dq);
            fence_regs(acc_dv);
            fence_regs(p16);
            mbar_arrive(emptyDO);
            {
                const int slot = tile_i % T::kDqSlots;
                const u32 at = 1 + 4 * S + slot * T::kConsumers + wg;    // dQ full; empty kConsumers * kDqSlots on
                mbar_wait(sBar + 8u * (at + T::kConsumers * T::kDqSlots), ((tile_i / T::kDqSlots) & 1) ^ 1);
                IOM_TRACE(15);
                stage_dq<T>(dq, smem0 + T::kOffDQ + slot * T::kBytesDQ + wg * (64 * T::kSlice * 4), sBar + 8u * at, tid);
            }
            IOM_TRACE(13);
            wgmma_wait<0>();
            fence_regs(acc_dk);
            fence_regs(ds16);
            mbar_arrive(emptyQ);
            IOM_TRACE(12);
            next_stage<S>(stage, phase);
            buf ^= 1;
            ++tile_i;
        }
    }
    if (threadIdx.x == 128) IOM_CTA_TIME(3);
    if (sp.slot >= 0 && !combine_pieces<T>(part, count, sp.slot, pieces, acc_dk, acc_dv, wg * 128 + tid)) return;
    const size_t kv = (size_t(u.b) * H_kv + u.h_kv) * N_k;
    store_rows<T>(dk + kv * T::kHeadDim, acc_dk, key, lane, N_k, scale);
    store_rows<T>(dv + kv * T::kHeadDim, acc_dv, key, lane, N_k, 1.f);
    if (threadIdx.x == 128) IOM_CTA_TIME(4);
}

}  // namespace sm90

// Kernel instantiation (kernels/flash_bwd_sm90.py emits it with the config's numbers):
//   extern "C" __global__ void __launch_bounds__(T::kThreads, 1)
//   NAME(const __grid_constant__ TmaDesc tmQ, ... tmK, ... tmV, ... tmdO, const float* lse2, const float* delta,
//        float* dq_acc, u16* dk, u16* dv, int* sem, float* part, int* count, int B, int H, int H_kv, int N_q,
//        int N_k, int n_qp, int sec, int whole, int pieces, float scale_log2, float scale)
// on a 1-D grid of whole + (units - whole) * pieces CTAs, units = ceil(N_k / kBlockN) * H_kv * B (unit_of: the
// order of the units; sec the (KV head, batch) groups of a section; unit_id and span_of: the tail split);
// sem: B * H * n_qp / kBlockM zeroed ints (deterministic) or null; with pieces > 1, part: (units - whole) *
// pieces slots of d x 128 kConsumers floats, count: units - whole zeroed ints (left at zero).
