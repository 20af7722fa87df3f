// Decode attention over a KV cache, split over the keys (flash-decoding), mma.sync path (sm_80 and newer).
//
// flash_decode_kernel: a CTA owns one (batch, KV head, row block, part).  Its rows are the g query heads of
// the KV head times the N_q query rows of the sequence, packed (row r = i * g + hg, in blocks of ROWS), so
// one read of K and V serves them all.  It streams its part of the sequence's keys (a share of the
// BLOCK_N-key chunks) through a STAGES-deep cp.async ring; each warp takes BLOCK_N / WARPS keys of every
// chunk and runs its own online softmax (S = Q K^T and O += P V with mma.sync m16n8k16), so the warps never
// wait on each other inside a chunk; at the end their (max, sum, O) are merged through shared memory.
// One part: O (input dtype) and the LSE are written here.  More: an fp32 partial O (normalised by the
// part's own sum) and the part's LSE; the last part of a (batch, KV head, row block) to finish merges them.
//
// The cache is contiguous (B, S, H_kv, d) or paged (num_blocks, page, H_kv, d) with a block table
// (PAGED; page a power of two).  Key j of sequence b is valid for j < L = min(seqlens[b] + n_new, capacity);
// a page index outside [0, num_pages) is read as zeros: nothing is ever read out of bounds (the Python side
// checks the values and says which is wrong).  Causal (bottom-right): query row i sees keys j <= L - N_q + i.
//
// kv_append_kernel writes n_new new keys and values at positions seqlens[b] .. + n_new of the cache.
//
// Shared memory (dynamic): [ Q: ROWS x HEAD_DIM | STAGES x (K chunk | V chunk) ], 16-bit rows with 16-byte
// chunks XOR-swizzled; the merge reuses the ring (ROWS x (HEAD_DIM + 4) fp32, then 2 x WARPS x ROWS fp32).
#pragma once
#include "iom_common.cuh"
#include "warp_tiles.cuh"

namespace iom {

// Where the rows of a cache live: contiguous (the batch stride) or paged (a block table per sequence).
template <bool PAGED>
struct CacheRows {
    const int* table;   // PAGED: this sequence's row of the block table
    i64 sb, sn;         // batch (or block) and row strides, elements
    int shift, num_pages;
    int b;
    // Element offset of row j (head and column excluded), or -1 where the page index is out of range.
    __device__ __forceinline__ i64 offset(int j) const {
        if constexpr (PAGED) {
            const int page = __ldg(table + (j >> shift));
            if ((unsigned)page >= (unsigned)num_pages) return -1;
            return (i64)page * sb + (i64)(j & ((1 << shift) - 1)) * sn;
        } else {
            return (i64)b * sb + (i64)j * sn;
        }
    }
};

// cp.async of one BLOCK_N-key chunk of K and V (rows n0..) into a ring slot; rows past L or on a bad page
// are zero-filled without a read.
template <class T, int BLOCK_N, int HEAD_DIM, int THREADS, bool PAGED>
__device__ __forceinline__ void load_chunk(u32 sK, u32 sV, const T* kg, const T* vg, const CacheRows<PAGED>& rk,
                                           const CacheRows<PAGED>& rv, int n0, int L, int tid) {
    constexpr int CPR = HEAD_DIM / 8;
    constexpr int RSTEP = THREADS / CPR;
    static_assert(THREADS % CPR == 0 && BLOCK_N % RSTEP == 0, "threads must cover whole rows of the chunk");
    const int r0 = tid / CPR, c = tid % CPR;
#pragma unroll
    for (int it = 0; it < BLOCK_N / RSTEP; ++it) {
        const int r = r0 + it * RSTEP, j = n0 + r;
        const u32 dst = (u32)((r * CPR + swizzle<CPR>(r, c)) * 16);
        i64 ko = -1, vo = -1;
        if (j < L) {
            ko = rk.offset(j);
            vo = rv.offset(j);
        }
        cp_async16(sK + dst, ko >= 0 ? (const void*)(kg + ko + c * 8) : (const void*)kg, ko >= 0 ? 16 : 0);
        cp_async16(sV + dst, vo >= 0 ? (const void*)(vg + vo + c * 8) : (const void*)vg, vo >= 0 ? 16 : 0);
    }
}

// The packed rows of a row block: row r of block rb is query row i = pr / g of query head hg = pr % g of
// the KV head (pr = rb * ROWS + r); rows past g * N_q are padding.
struct PackedRows {
    int group, N_q, rb, rows;
    __device__ __forceinline__ int packed(int r) const { return rb * rows + r; }
    __device__ __forceinline__ bool valid(int r) const { return packed(r) < group * N_q; }
    __device__ __forceinline__ int query(int r) const { return packed(r) / group; }
    __device__ __forceinline__ int head_in_group(int r) const { return packed(r) % group; }
};

// Scores of keys this thread holds that the row cannot see become -inf: keys past L and, causal, keys
// past L - N_q + i.  `key0`: the thread's first key of the warp's slice.
template <int MT, int NT, bool CAUSAL>
__device__ __forceinline__ void mask_scores(float (&s)[MT][NT][4], int key0, int L, const int (&row_last)[MT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int last = CAUSAL ? min(L - 1, row_last[mt][hh]) : L - 1;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                if (key0 + nt * 8 > last) s[mt][nt][2 * hh] = neg_inf();
                if (key0 + nt * 8 + 1 > last) s[mt][nt][2 * hh + 1] = neg_inf();
            }
        }
}

__device__ __forceinline__ void red_shared_add(u32 addr, float x) {
    asm volatile("red.shared.add.f32 [%0], %1;" :: "r"(addr), "f"(x) : "memory");
}

__device__ __forceinline__ float lds_f32(u32 addr) {
    float x;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(addr) : "memory");
    return x;
}

__device__ __forceinline__ void sts_f32(u32 addr, float x) {
    asm volatile("st.shared.f32 [%0], %1;" :: "r"(addr), "f"(x) : "memory");
}

__device__ __forceinline__ float ldcg(const float* p) {   // L2 only: other SMs wrote it
    float x;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(x) : "l"(p));
    return x;
}

// Merge the parts of one output row (b, h, i) by a warp: O = sum_p exp(lse_p - lse) O_p, lse = logsumexp_p
// lse_p.  `row` indexes (b, h, i) rows; a part that saw no key has LSE -inf and weight 0; a row that saw
// none at all gets O = 0 and LSE -inf.
template <class T, int HEAD_DIM>
__device__ __forceinline__ void merge_row(const float* opart, const float* lpart, T* dst, float* lse, i64 row,
                                          i64 rows, int parts, int lane) {
    constexpr int V = HEAD_DIM / 32;   // values a lane
    static_assert(V == 2 || V == 4, "head dims 64 and 128");
    float M = neg_inf();
    for (int p = lane; p < parts; p += 32) M = fmaxf(M, ldcg(lpart + p * rows + row));
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, s));
    float acc[V] = {};
    float total = 0.f;
    if (M != neg_inf()) {
        for (int p = 0; p < parts; ++p) {
            const float lp = ldcg(lpart + p * rows + row);
            if (lp == neg_inf()) continue;
            const float w = ex2((lp - M) * 1.4426950408889634f);
            total += w;
            const float* src = opart + (p * rows + row) * HEAD_DIM + lane * V;
#pragma unroll
            for (int e = 0; e < V; ++e) acc[e] += w * ldcg(src + e);
        }
    }
    const float inv = total > 0.f ? 1.f / total : 0.f;
#pragma unroll
    for (int e = 0; e < V; e += 2)
        *reinterpret_cast<u32*>(dst + lane * V + e) = Elem<T>::pack(acc[e] * inv, acc[e + 1] * inv);
    if (lane == 0) lse[row] = total > 0.f ? M + logf(total) : neg_inf();
}

// The parts of one (batch, KV head, row block) arrive in any order; the last to arrive (a counter per
// group, zeroed by the launcher) merges their rows, a warp a row: no second kernel, no second launch.
template <class T, int ROWS, int WARPS, int HEAD_DIM>
__device__ __forceinline__ void merge_if_last(const float* opart, const float* lpart, int* arrived, T* o, float* lse,
                                              const PackedRows& pr, int hk, int b, int H, int N_q, int parts,
                                              i64 o_sb, i64 o_sn, i64 o_sh, u32 s_flag) {
    __threadfence();    // this CTA's partials are visible device-wide before it counts itself in
    __syncthreads();
    if (threadIdx.x == 0) {
        const int before = atomicAdd(arrived + (i64)b * gridDim.y + blockIdx.y, 1);
        sts_f32(s_flag, before == parts - 1 ? 1.f : 0.f);
    }
    __syncthreads();
    if (lds_f32(s_flag) == 0.f) return;
    __threadfence();    // the other parts' writes, counted before ours, are visible to our reads
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const i64 rows = (i64)gridDim.z * H * N_q;
    for (int r = warp; r < ROWS; r += WARPS) {
        if (!pr.valid(r)) continue;
        const int h = hk * pr.group + pr.head_in_group(r), i = pr.query(r);
        merge_row<T, HEAD_DIM>(opart, lpart, o + (i64)b * o_sb + (i64)i * o_sn + (i64)h * o_sh, lse,
                               ((i64)b * H + h) * N_q + i, rows, parts, lane);
    }
}

template <class T, int ROWS, int BLOCK_N, int WARPS, int STAGES, int HEAD_DIM, bool CAUSAL, bool PAGED>
__global__ void __launch_bounds__(WARPS * 32, 1)
flash_decode_kernel(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
                    T* __restrict__ o, float* __restrict__ lse, float* __restrict__ opart, float* __restrict__ lpart,
                    int* __restrict__ arrived, const int* __restrict__ seqlens, const int* __restrict__ table,
                    i64 q_sb, i64 q_sn, i64 q_sh, i64 k_sb, i64 k_sn, i64 k_sh, i64 v_sb, i64 v_sn, i64 v_sh,
                    i64 o_sb, i64 o_sn, i64 o_sh, i64 t_sb,
                    int H, int group, int N_q, int n_new, int capacity, int page_shift, int num_pages,
                    float scale_log2, float scale) {
    constexpr int THREADS = WARPS * 32;
    constexpr int MT = ROWS / 16;            // m16 row tiles
    constexpr int KW = BLOCK_N / WARPS;      // keys of a chunk a warp owns
    constexpr int NT = KW / 8;               // n8 tiles of a warp's S
    constexpr int DT = HEAD_DIM / 8;
    constexpr int CPR = HEAD_DIM / 8;
    constexpr int ROW_BYTES = HEAD_DIM * 2;
    constexpr u32 CHUNK_BYTES = (u32)BLOCK_N * ROW_BYTES;
    constexpr u32 SLOT_BYTES = 2 * CHUNK_BYTES;
    constexpr int OSTRIDE = HEAD_DIM + 4;    // merge rows, fp32, padded against bank conflicts
    static_assert(sizeof(T) == 2, "16-bit inputs only");
    static_assert(ROWS % 16 == 0 && KW % 16 == 0, "rows and a warp's keys come in 16s");
    static_assert(HEAD_DIM % 64 == 0, "HEAD_DIM must be a multiple of 64");
    static_assert(STAGES >= 2, "STAGES >= 2");
    static_assert((ROWS * OSTRIDE + 2 * WARPS * ROWS) * 4 <= STAGES * SLOT_BYTES, "the merge fits in the ring");

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int part = blockIdx.x, parts = gridDim.x, b = blockIdx.z;
    const int row_blocks = gridDim.y / (H / group);
    const int hk = blockIdx.y / row_blocks;
    const PackedRows pr{group, N_q, (int)blockIdx.y % row_blocks, ROWS};
    const int L = min(seqlens[b] + n_new, capacity);

    // this part's chunks
    const int n_chunks = (max(L, 0) + BLOCK_N - 1) / BLOCK_N;
    const int per_part = (n_chunks + parts - 1) / parts;
    const int c0 = part * per_part, c1 = min(n_chunks, c0 + per_part);

    const u32 sQ = smem_addr(dyn_smem());
    const u32 sRing = sQ + ROWS * ROW_BYTES;
    const CacheRows<PAGED> rk{table + (i64)b * t_sb, k_sb, k_sn, page_shift, num_pages, b};
    const CacheRows<PAGED> rv{table + (i64)b * t_sb, v_sb, v_sn, page_shift, num_pages, b};
    const T* kg = kc + (i64)hk * k_sh;
    const T* vg = vc + (i64)hk * v_sh;

    // ---- prologue: the Q rows, then the first chunks
    for (int idx = tid; idx < ROWS * CPR; idx += THREADS) {
        const int r = idx / CPR, c = idx % CPR;
        const bool ok = pr.valid(r);
        const T* src = ok ? q + (i64)b * q_sb + (i64)pr.query(r) * q_sn + (i64)(hk * group + pr.head_in_group(r)) * q_sh + c * 8
                          : q;
        cp_async16(sQ + (u32)((r * CPR + swizzle<CPR>(r, c)) * 16), src, ok ? 16 : 0);
    }
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (c0 + s < c1)
            load_chunk<T, BLOCK_N, HEAD_DIM, THREADS, PAGED>(sRing + s * SLOT_BYTES, sRing + s * SLOT_BYTES + CHUNK_BYTES,
                                                            kg, vg, rk, rv, (c0 + s) * BLOCK_N, L, tid);
        cp_async_commit();
    }

    u32 xo[4];
    lane_offsets<ROW_BYTES>(lane, xo);
    float acc[MT][DT][4];
    float row_max[MT][2], row_sum[MT][2];
    int row_last[MT][2];   // causal: the last key each of this thread's rows sees
    zero(acc);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            row_max[mt][hh] = neg_inf();
            row_sum[mt][hh] = 0.f;
            const int r = mt * 16 + (lane >> 2) + hh * 8;
            row_last[mt][hh] = L - N_q + (pr.valid(r) ? pr.query(r) : N_q - 1);
        }
    const int key_lane = warp * KW + 2 * (lane & 3);   // this thread's first key of a chunk
    const int mask_from = CAUSAL ? L - N_q + 1 : L;     // chunks reaching this key need masking

    for (int j = c0; j < c1; ++j) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();   // chunk j is everyone's; every warp is done with chunk j - 1
        const int next = j + STAGES - 1;
        if (next < c1) {
            const u32 slot = sRing + ((next - c0) % STAGES) * SLOT_BYTES;
            load_chunk<T, BLOCK_N, HEAD_DIM, THREADS, PAGED>(slot, slot + CHUNK_BYTES, kg, vg, rk, rv, next * BLOCK_N, L, tid);
        }
        cp_async_commit();

        const u32 sK = sRing + ((j - c0) % STAGES) * SLOT_BYTES + (u32)(warp * KW) * ROW_BYTES;
        float s[MT][NT][4];
        zero(s);
        mma_abt<T, MT, KW, HEAD_DIM, ROW_BYTES>(s, sQ, sK, xo);
        if (j * BLOCK_N + warp * KW + KW > mask_from)
            mask_scores<MT, NT, CAUSAL>(s, j * BLOCK_N + key_lane, L, row_last);
        u32 pa[MT][NT / 2][4];
        online_softmax<T, MT, NT, DT>(s, row_max, row_sum, acc, pa, scale_log2);
        mma_rb<T, MT, KW, HEAD_DIM, ROW_BYTES>(acc, pa, sK + CHUNK_BYTES, 0, xo);
    }
    cp_async_wait<0>();
    __syncthreads();   // the ring is free: the merge uses it

    // ---- merge the warps: O = sum_w 2^(m_w - M) O_w / sum_w 2^(m_w - M) l_w, per row
    const u32 sO = sRing, sM = sRing + ROWS * OSTRIDE * 4, sL = sM + WARPS * ROWS * 4;
    for (int idx = tid; idx < ROWS * OSTRIDE; idx += THREADS) sts_f32(sO + idx * 4, 0.f);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            float l = row_sum[mt][hh];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            row_sum[mt][hh] = l;
            const int r = mt * 16 + (lane >> 2) + hh * 8;
            if ((lane & 3) == 0) {
                sts_f32(sM + (warp * ROWS + r) * 4, row_max[mt][hh]);
                sts_f32(sL + (warp * ROWS + r) * 4, l);
            }
        }
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int r = mt * 16 + (lane >> 2) + hh * 8;
            float M = neg_inf();
#pragma unroll
            for (int w = 0; w < WARPS; ++w) M = fmaxf(M, lds_f32(sM + (w * ROWS + r) * 4));
            float total = 0.f;
            if (M != neg_inf()) {
#pragma unroll
                for (int w = 0; w < WARPS; ++w) {
                    const float mw = lds_f32(sM + (w * ROWS + r) * 4);
                    if (mw != neg_inf()) total += lds_f32(sL + (w * ROWS + r) * 4) * ex2((mw - M) * scale_log2);
                }
            }
            const float mine = row_max[mt][hh];
            const float f = (total > 0.f && mine != neg_inf()) ? ex2((mine - M) * scale_log2) / total : 0.f;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                const u32 at = sO + (u32)(r * OSTRIDE + dt * 8 + 2 * (lane & 3)) * 4;
                red_shared_add(at, acc[mt][dt][2 * hh] * f);
                red_shared_add(at + 4, acc[mt][dt][2 * hh + 1] * f);
            }
            if (warp == 0 && (lane & 3) == 0 && pr.valid(r)) {
                const float row_lse = total > 0.f ? M * scale + logf(total) : neg_inf();
                const int h = hk * group + pr.head_in_group(r), i = pr.query(r);
                const i64 at = ((i64)b * H + h) * N_q + i;
                if (parts == 1) lse[at] = row_lse;
                else lpart[(i64)part * gridDim.z * H * N_q + at] = row_lse;
            }
        }
    __syncthreads();

    // ---- write the rows: O in the input dtype (one part) or the fp32 partial
    constexpr int C4 = HEAD_DIM / 4;
    for (int idx = tid; idx < ROWS * C4; idx += THREADS) {
        const int r = idx / C4, c = (idx % C4) * 4;
        if (!pr.valid(r)) continue;
        const u32 at = sO + (u32)(r * OSTRIDE + c) * 4;
        const float x0 = lds_f32(at), x1 = lds_f32(at + 4), x2 = lds_f32(at + 8), x3 = lds_f32(at + 12);
        const int h = hk * group + pr.head_in_group(r), i = pr.query(r);
        if (parts == 1) {
            T* dst = o + (i64)b * o_sb + (i64)i * o_sn + (i64)h * o_sh + c;
            *reinterpret_cast<u32*>(dst) = Elem<T>::pack(x0, x1);
            *reinterpret_cast<u32*>(dst + 2) = Elem<T>::pack(x2, x3);
        } else {
            const i64 row = (i64)part * gridDim.z * H * N_q + ((i64)b * H + h) * N_q + i;
            *reinterpret_cast<f32x4*>(opart + row * HEAD_DIM + c) = f32x4{x0, x1, x2, x3};
        }
    }
    if (parts > 1) merge_if_last<T, ROWS, WARPS, HEAD_DIM>(opart, lpart, arrived, o, lse, pr, hk, b, H, N_q, parts,
                                                           o_sb, o_sn, o_sh, sM);
}

// New keys and values into the cache at positions seqlens[b] + t (t < n_new): a thread a 16-byte chunk of
// one row of K and of V; grid (ceil(n_new * H_kv * HEAD_DIM / 8 / 128), B).  Positions past the capacity
// and bad page indices are skipped (the Python side refuses them first).
template <class T, int HEAD_DIM, bool PAGED>
__global__ void __launch_bounds__(128)
kv_append_kernel(const T* __restrict__ kn, const T* __restrict__ vn, T* __restrict__ kc, T* __restrict__ vc,
                 const int* __restrict__ seqlens, const int* __restrict__ table,
                 i64 kn_sb, i64 kn_sn, i64 kn_sh, i64 vn_sb, i64 vn_sn, i64 vn_sh,
                 i64 k_sb, i64 k_sn, i64 k_sh, i64 v_sb, i64 v_sn, i64 v_sh, i64 t_sb,
                 int n_new, int H_kv, int capacity, int page_shift, int num_pages) {
    constexpr int CPR = HEAD_DIM / 8;
    const int idx = blockIdx.x * 128 + threadIdx.x, b = blockIdx.y;
    if (idx >= n_new * H_kv * CPR) return;
    const int c = idx % CPR, hk = (idx / CPR) % H_kv, t = idx / (CPR * H_kv);
    const int pos = seqlens[b] + t;
    if (pos < 0 || pos >= capacity) return;
    const CacheRows<PAGED> rk{table + (i64)b * t_sb, k_sb, k_sn, page_shift, num_pages, b};
    const CacheRows<PAGED> rv{table + (i64)b * t_sb, v_sb, v_sn, page_shift, num_pages, b};
    const i64 ko = rk.offset(pos), vo = rv.offset(pos);
    if (ko < 0 || vo < 0) return;
    *reinterpret_cast<u32x4*>(kc + ko + (i64)hk * k_sh + c * 8) =
        *reinterpret_cast<const u32x4*>(kn + (i64)b * kn_sb + (i64)t * kn_sn + (i64)hk * kn_sh + c * 8);
    *reinterpret_cast<u32x4*>(vc + vo + (i64)hk * v_sh + c * 8) =
        *reinterpret_cast<const u32x4*>(vn + (i64)b * vn_sb + (i64)t * vn_sn + (i64)hk * vn_sh + c * 8);
}

}  // namespace iom
