// merge_rows.cuh -- the merge of attention computed in parts along the keys: each part's fp32 O (normalised by
// its own sum) and LSE, combined row by row.  Used by the decode kernel's split (flash_decode_sm80.cuh, the last
// part merges) and by the mma.sync forward's tail split (flash_fwd_sm80.cuh, flash_fwd_merge_kernel).
//
// Partial layout: part p's row r at opart[(p * rows + r) * HEAD_DIM ...] and lpart[p * rows + r].
#pragma once
#include "iom_common.cuh"

namespace iom {

// Merge the parts of one output row by a warp: O = sum_p exp(lse_p - lse) O_p, lse = logsumexp_p lse_p,
// written to dst (HEAD_DIM values) and *lse.  A part that saw no key has LSE -inf and weight 0; a row that saw
// none at all gets O = 0 and LSE -inf.  Lane l holds the LSEs of parts l, l + 32, ...: the weights come
// from one load and a shuffle each, and the partial rows' loads are independent of each other (unrolled; the
// first eight parts' issued with the LSEs), so the merge costs a few L2 round trips, not one a part.  Loads
// go through L2 (__ldcg): other SMs wrote.
template <class T, int HEAD_DIM>
__device__ __forceinline__ void merge_row(const float* opart, const float* lpart, T* dst, float* lse, i64 row,
                                          i64 rows, int parts, int lane) {
    constexpr int V = HEAD_DIM / 32;   // values a lane
    constexpr int PRE = 8;
    constexpr float LOG2E = 1.4426950408889634f;
    static_assert(HEAD_DIM % 32 == 0 && V >= 1 && V <= 8, "head dims 32 to 256, multiples of 32");
    const float first = lane < parts ? __ldcg(lpart + lane * rows + row) : neg_inf();
    // the first PRE parts' rows are loaded with the LSEs, before the weights are known: one L2 round trip
    float pre[PRE][V];
#pragma unroll
    for (int j = 0; j < PRE; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e)
            pre[j][e] = j < parts ? __ldcg(opart + ((i64)j * rows + row) * HEAD_DIM + lane * V + e) : 0.f;
    float M = first;
    for (int p = lane + 32; p < parts; p += 32) M = fmaxf(M, __ldcg(lpart + p * rows + row));
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, s));
    float acc[V] = {};
    float total = 0.f;
    if (M != neg_inf()) {
        for (int p0 = 0; p0 < parts; p0 += 32) {
            const int mine = p0 + lane;
            const float lp = p0 == 0 ? first : (mine < parts ? __ldcg(lpart + mine * rows + row) : neg_inf());
            const float w_mine = ex2((lp - M) * LOG2E);   // 0 for a part that saw nothing (and past the parts)
            total += w_mine;
            const int n = min(32, parts - p0);
            int j = 0;
            if (p0 == 0) {
#pragma unroll
                for (int jj = 0; jj < PRE; ++jj) {
                    const float w = __shfl_sync(0xffffffffu, w_mine, jj);
                    if (jj < n) {
#pragma unroll
                        for (int e = 0; e < V; ++e) acc[e] += w * pre[jj][e];
                    }
                }
                j = min(n, PRE);
            }
#pragma unroll 8
            for (; j < n; ++j) {
                const float w = __shfl_sync(0xffffffffu, w_mine, j);
                const float* src = opart + ((p0 + j) * rows + row) * HEAD_DIM + lane * V;
#pragma unroll
                for (int e = 0; e < V; ++e) acc[e] += w * __ldcg(src + e);
            }
        }
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) total += __shfl_xor_sync(0xffffffffu, total, s);
    }
    const float inv = total > 0.f ? 1.f / total : 0.f;
    if constexpr (V % 2 == 0) {
#pragma unroll
        for (int e = 0; e < V; e += 2)
            *reinterpret_cast<u32*>(dst + lane * V + e) = Elem<T>::pack(acc[e] * inv, acc[e + 1] * inv);
    } else {   // d = 32 and 96: an odd count a lane, 2-byte stores
#pragma unroll
        for (int e = 0; e < V; ++e)
            *reinterpret_cast<unsigned short*>(dst + lane * V + e) =
                (unsigned short)(Elem<T>::pack(acc[e] * inv, 0.f) & 0xffffu);
    }
    if (lane == 0) *lse = total > 0.f ? M + logf(total) : neg_inf();
}

}  // namespace iom
