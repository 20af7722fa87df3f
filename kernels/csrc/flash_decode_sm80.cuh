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
#include "merge_rows.cuh"

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

// cp.async of BLOCK_N-key chunks of K and V into ring slots; rows past L or on a bad page are zero-filled
// without a read.  A thread copies one 16-byte column chunk of every RSTEP-th row: its rows' SMEM offsets
// differ by constants (the swizzle sees row & 7 only) and, where the chunk's rows lie in one contiguous
// run (a contiguous cache, or a page that holds the whole chunk), its sources by a fixed stride, so a
// row costs a 64-bit add and a compare (the loads are the kernel's only work at small caches: the integer
// arithmetic of a general row address, per row, took more issue slots than the matrix products).
template <class T, int BLOCK_N, int HEAD_DIM, int THREADS, bool PAGED>
struct ChunkLoader {
    static constexpr int CPR = HEAD_DIM / 8;
    static constexpr int RSTEP = THREADS / CPR;
    static constexpr int ROWS_T = BLOCK_N / RSTEP;   // rows of a chunk a thread copies
    static_assert(THREADS % CPR == 0 && BLOCK_N % RSTEP == 0 && RSTEP % 8 == 0, "threads must cover whole rows");
    const T* kg;   // the cache at this head and this thread's column chunk
    const T* vg;
    CacheRows<PAGED> rk, rv;
    u32 s_off;     // the thread's first row's chunk in a tile
    int r0, lane;

    __device__ __forceinline__ ChunkLoader(const T* kc, const T* vc, const CacheRows<PAGED>& k_rows,
                                           const CacheRows<PAGED>& v_rows, i64 k_sh, i64 v_sh, int hk, int tid)
        : rk(k_rows), rv(v_rows) {
        r0 = tid / CPR;
        lane = tid & 31;
        const int c = tid % CPR;
        kg = kc + (i64)hk * k_sh + c * 8;
        vg = vc + (i64)hk * v_sh + c * 8;
        s_off = (u32)((r0 * CPR + swizzle<CPR>(r0, c)) * 16);
    }

    // rows n0.. of one run starting at kb / vb (element pointers of row n0), the run's stride sn
    __device__ __forceinline__ void strided(u32 sK, u32 sV, const T* kb, const T* vb, int n0, int L) const {
        const i64 k_step = (i64)RSTEP * rk.sn, v_step = (i64)RSTEP * rv.sn;
        const T* kp = kb + (i64)r0 * rk.sn;
        const T* vp = vb + (i64)r0 * rv.sn;
#pragma unroll
        for (int it = 0; it < ROWS_T; ++it) {
            const bool ok = n0 + r0 + it * RSTEP < L;
            const u32 dst = s_off + (u32)(it * RSTEP * CPR * 16);
            cp_async16(sK + dst, ok ? (const void*)kp : (const void*)kg, ok ? 16 : 0);
            cp_async16(sV + dst, ok ? (const void*)vp : (const void*)vg, ok ? 16 : 0);
            kp += k_step;
            vp += v_step;
        }
    }

    // The block table a window of 32 entries at a time in a warp's lanes (lane i holds entry 32 w + i of
    // window w), the next window read as the current one is entered: a chunk's pages come from shuffles,
    // and each table load is issued a window ahead of its use.  Read where a chunk's copies are issued,
    // the table's load held them up every chunk, and read one chunk ahead it still did
    // (validation/results/profile-paged-h100-2026-11-24).
    struct PageWindow {
        int w = -2, cur = -1, next = -1;   // the window's index, this lane's entry of it and of the next
    };
    static constexpr int MAX_WINDOW_GAP = 5;   // windows serve pages of BLOCK_N / 32 rows and larger

    __device__ __forceinline__ int table_entry(int i, int L) const {   // -1 past the sequence's pages
        return i < ((L + (1 << rk.shift) - 1) >> rk.shift) ? __ldg(rk.table + i) : -1;
    }

    // make the window of the chunk at key n0 current (chunks go forward; warp-uniform)
    __device__ __forceinline__ void enter(PageWindow& win, int n0, int L) const {
        const int w = (n0 >> rk.shift) >> 5;
        if (w != win.w) {
            win.cur = w == win.w + 1 ? win.next : table_entry(32 * w + lane, L);
            win.next = table_entry(32 * (w + 1) + lane, L);
            win.w = w;
        }
    }

    // any rows, each row's page shuffled from the window (pages smaller than the chunk, or a bad page)
    __device__ __forceinline__ void windowed(u32 sK, u32 sV, int n0, int L, int entries) const {
        const int in_page = (1 << rk.shift) - 1;
#pragma unroll
        for (int it = 0; it < ROWS_T; ++it) {
            const int j = n0 + r0 + it * RSTEP;
            const int page = __shfl_sync(0xffffffffu, entries, (j >> rk.shift) & 31);
            const bool ok = j < L && (unsigned)page < (unsigned)rk.num_pages;   // else zeros, no read
            const i64 row = (i64)(j & in_page);
            const u32 dst = s_off + (u32)(it * RSTEP * CPR * 16);
            cp_async16(sK + dst, kg + (ok ? (i64)page * rk.sb + row * rk.sn : 0), ok ? 16 : 0);
            cp_async16(sV + dst, vg + (ok ? (i64)page * rv.sb + row * rv.sn : 0), ok ? 16 : 0);
        }
    }

    // any rows, each row's page read from the table (pages of fewer than BLOCK_N / 32 rows)
    __device__ __forceinline__ void gathered(u32 sK, u32 sV, int n0, int L) const {
#pragma unroll
        for (int it = 0; it < ROWS_T; ++it) {
            const int j = n0 + r0 + it * RSTEP;
            const u32 dst = s_off + (u32)(it * RSTEP * CPR * 16);
            const i64 ko = j < L ? rk.offset(j) : -1, vo = j < L ? rv.offset(j) : -1;
            cp_async16(sK + dst, ko >= 0 ? (const void*)(kg + ko) : (const void*)kg, ko >= 0 ? 16 : 0);
            cp_async16(sV + dst, vo >= 0 ? (const void*)(vg + vo) : (const void*)vg, vo >= 0 ? 16 : 0);
        }
    }

    // the chunk at key n0 (n0 < L; called by every thread of the CTA); `win` the table's window (paged)
    __device__ __forceinline__ void load(u32 sK, u32 sV, int n0, int L, PageWindow& win) const {
        if constexpr (PAGED) {
            if (LOG2_BLOCK_N - rk.shift > MAX_WINDOW_GAP) {
                gathered(sK, sV, n0, L);
                return;
            }
            enter(win, n0, L);
            const int page = __shfl_sync(0xffffffffu, win.cur, (n0 >> rk.shift) & 31);
            if (rk.shift < LOG2_BLOCK_N || (unsigned)page >= (unsigned)rk.num_pages) {
                windowed(sK, sV, n0, L, win.cur);
                return;
            }
            // the chunk lies in one page (page sizes and chunks are powers of two)
            const i64 row = (i64)(n0 & ((1 << rk.shift) - 1));
            strided(sK, sV, kg + (i64)page * rk.sb + row * rk.sn, vg + (i64)page * rv.sb + row * rv.sn, n0, L);
        } else {
            strided(sK, sV, kg + rk.offset(n0), vg + rv.offset(n0), n0, L);
        }
    }

    static constexpr int LOG2_BLOCK_N = BLOCK_N == 128 ? 7 : BLOCK_N == 64 ? 6 : BLOCK_N == 32 ? 5 : 4;
};

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

__device__ __forceinline__ float lds_f32(u32 addr) {
    float x;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(addr) : "memory");
    return x;
}

__device__ __forceinline__ void sts_f32(u32 addr, float x) {
    asm volatile("st.shared.f32 [%0], %1;" :: "r"(addr), "f"(x) : "memory");
}

// The parts of one (batch, KV head, row block) arrive in any order; the last to arrive (a counter per
// group, which it leaves at zero for the next call on the stream) merges their rows, a warp a row: no
// second kernel, no second launch.
template <class T, int ROWS, int WARPS, int HEAD_DIM>
__device__ __forceinline__ void merge_if_last(const float* opart, const float* lpart, int* arrived, T* o, float* lse,
                                              const PackedRows& pr, int hk, int b, int H, int N_q, int parts,
                                              i64 o_sb, i64 o_sn, i64 o_sh, u32 s_flag) {
    __threadfence();    // this CTA's partials are visible device-wide before it counts itself in
    __syncthreads();
    if (threadIdx.x == 0) {
        int* counter = arrived + (i64)b * gridDim.y + blockIdx.y;
        const int before = atomicAdd(counter, 1);
        if (before == parts - 1) *counter = 0;   // every part has counted: zero again for the next call
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
        const i64 row = ((i64)b * H + h) * N_q + i;
        merge_row<T, HEAD_DIM>(opart, lpart, o + (i64)b * o_sb + (i64)i * o_sn + (i64)h * o_sh, lse + row, row,
                               rows, parts, lane);
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
    const ChunkLoader<T, BLOCK_N, HEAD_DIM, THREADS, PAGED> loader(kc, vc, rk, rv, k_sh, v_sh, hk, tid);

    // ---- prologue: the Q rows, then the first chunks
    for (int idx = tid; idx < ROWS * CPR; idx += THREADS) {
        const int r = idx / CPR, c = idx % CPR;
        const bool ok = pr.valid(r);
        const T* src = ok ? q + (i64)b * q_sb + (i64)pr.query(r) * q_sn + (i64)(hk * group + pr.head_in_group(r)) * q_sh + c * 8
                          : q;
        cp_async16(sQ + (u32)((r * CPR + swizzle<CPR>(r, c)) * 16), src, ok ? 16 : 0);
    }
    cp_async_commit();
    typename ChunkLoader<T, BLOCK_N, HEAD_DIM, THREADS, PAGED>::PageWindow window;   // the block table's
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (c0 + s < c1)
            loader.load(sRing + s * SLOT_BYTES, sRing + s * SLOT_BYTES + CHUNK_BYTES, (c0 + s) * BLOCK_N, L, window);
        cp_async_commit();
    }

    u32 xo[4];
    lane_offsets<ROW_BYTES>(lane, xo);
    const u32 bt = bt_delta<ROW_BYTES>(lane);   // B^T operands' offsets: xo + bt (warp_tiles.cuh)
    // one m16 tile of rows: its Q fragments stay in registers (32 at d = 128) instead of being read again
    // from SMEM for every chunk; two tiles would not leave the registers for it
    constexpr bool Q_IN_REGS = MT == 1;
    u32 qa[MT][Q_IN_REGS ? HEAD_DIM / 16 : 1][4];
    if constexpr (Q_IN_REGS) {
        cp_async_wait<STAGES - 1>();   // the Q group (the oldest) has landed; the chunks may still fly
        __syncthreads();
        load_a<MT, HEAD_DIM, ROW_BYTES>(qa, sQ, xo);
    }
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
            loader.load(slot, slot + CHUNK_BYTES, next * BLOCK_N, L, window);
        }
        cp_async_commit();

        const u32 sK = sRing + ((j - c0) % STAGES) * SLOT_BYTES + (u32)(warp * KW) * ROW_BYTES;
        float s[MT][NT][4];
        zero(s);
        if constexpr (Q_IN_REGS)
            mma_rbt<T, MT, KW, HEAD_DIM, ROW_BYTES>(s, qa, sK, xo, bt);
        else
            mma_abt<T, MT, KW, HEAD_DIM, ROW_BYTES>(s, sQ, sK, xo, bt);
        if (j * BLOCK_N + warp * KW + KW > mask_from)
            mask_scores<MT, NT, CAUSAL>(s, j * BLOCK_N + key_lane, L, row_last);
        u32 pa[MT][NT / 2][4];
        online_softmax<T, MT, NT, DT, RESCALE_LAZY>(s, row_max, row_sum, acc, pa, scale_log2);
        mma_rb<T, MT, KW, HEAD_DIM, ROW_BYTES>(acc, pa, sK + CHUNK_BYTES, 0, xo);
    }
    cp_async_wait<0>();
    __syncthreads();   // the ring is free: the merge uses it

    // ---- merge the warps: O = sum_w 2^(m_w - M) O_w / sum_w 2^(m_w - M) l_w, per row.  Each warp stores its
    // weighted rows in a region of its own and one barrier later the rows are summed as they are written
    // (where the ring holds WARPS regions; else the warps add into one region in turn: shared-memory float
    // atomics are CAS loops here)
    constexpr u32 REGION = ROWS * OSTRIDE * 4;
    constexpr bool ONE_PASS = (WARPS * ROWS * OSTRIDE + 2 * WARPS * ROWS) * 4 <= STAGES * SLOT_BYTES;
    constexpr int REGIONS = ONE_PASS ? WARPS : 1;
    const u32 sO = sRing, sM = sRing + REGIONS * REGION, sL = sM + WARPS * ROWS * 4;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const float l = quad_sum(row_sum[mt][hh]);
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
            row_sum[mt][hh] = (total > 0.f && mine != neg_inf()) ? ex2((mine - M) * scale_log2) / total : 0.f;
            if (warp == 0 && (lane & 3) == 0 && pr.valid(r)) {
                const float lse_row = row_lse(M, total, scale);
                const int h = hk * group + pr.head_in_group(r), i = pr.query(r);
                const i64 at = ((i64)b * H + h) * N_q + i;
                if (parts == 1) lse[at] = lse_row;
                else lpart[(i64)part * gridDim.z * H * N_q + at] = lse_row;
            }
        }
    auto store_weighted = [&](u32 region, bool add) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int r = mt * 16 + (lane >> 2) + hh * 8;
                const float f = row_sum[mt][hh];   // this warp's weight of the row
#pragma unroll
                for (int dt = 0; dt < DT; ++dt) {
                    const u32 at = region + (u32)(r * OSTRIDE + dt * 8 + 2 * (lane & 3)) * 4;
                    const float x0 = acc[mt][dt][2 * hh] * f, x1 = acc[mt][dt][2 * hh + 1] * f;
                    sts_f32(at, add ? lds_f32(at) + x0 : x0);
                    sts_f32(at + 4, add ? lds_f32(at + 4) + x1 : x1);
                }
            }
    };
    if constexpr (ONE_PASS) {
        store_weighted(sO + warp * REGION, false);
        __syncthreads();
    } else {
#pragma unroll 1
        for (int w = 0; w < WARPS; ++w) {
            if (warp == w) store_weighted(sO, w > 0);
            __syncthreads();
        }
    }

    // ---- write the rows: O in the input dtype (one part) or the fp32 partial
    constexpr int C4 = HEAD_DIM / 4;
    for (int idx = tid; idx < ROWS * C4; idx += THREADS) {
        const int r = idx / C4, c = (idx % C4) * 4;
        if (!pr.valid(r)) continue;
        const u32 at = sO + (u32)(r * OSTRIDE + c) * 4;
        float x0 = 0.f, x1 = 0.f, x2 = 0.f, x3 = 0.f;
#pragma unroll
        for (int w = 0; w < REGIONS; ++w) {
            x0 += lds_f32(at + w * REGION);
            x1 += lds_f32(at + w * REGION + 4);
            x2 += lds_f32(at + w * REGION + 8);
            x3 += lds_f32(at + w * REGION + 12);
        }
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
