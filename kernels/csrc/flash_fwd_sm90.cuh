// flash_fwd_sm90.cuh -- FlashAttention forward for Hopper (sm_90a): TMA + wgmma + warp specialization.
//
// One CTA computes a block_m x d tile of O for one (batch, head).  Warpgroup 0 is the producer:
// after `setmaxnreg.dec` a single thread issues TMA loads of the Q tile and of the K / V chunks
// into a `kStages`-deep shared-memory ring (full / empty mbarriers per stage, separate for K and
// V).  Warpgroups 1..kConsumers are consumers (`setmaxnreg.inc`), each owning 64 query rows:
//     S = Q K^T        wgmma m64n{block_n}k16, A and B from SMEM (K-major, 128-B swizzle; 64-B at d = 32)
//     online softmax   exp2 with the softmax scale folded in (log2 domain), fp32 statistics
//     O += P V         wgmma m64n{d}k16, A = P from registers, B = V from SMEM (MN-major, tnspB=1)
// Intra-warpgroup overlap (FA3): the S wgmma of chunk j+1 and the PV wgmma of chunk j are in
// flight while the softmax of chunk j+1 runs.  Across warpgroups (d <= 128) the consumers take
// turns issuing their wgmmas (a named-barrier ring, FA3's scheduler barrier), so one warpgroup's
// softmax runs under the others' matrix products.  Chunks are visited from the last (diagonal)
// one down to 0, so the few chunks that need masking (causal straddle, key tail) come first and
// the loop over the rest carries no mask code.  A warpgroup skips the chunks that hold none of
// its scores (above its own causal diagonal, or all of them when its rows lie past N_q).
//
// Shared memory (dynamic, see Sm90Config.smem_bytes in iomodel/families/flash_sm90.py), with D the head
// dim rounded up to 64 (32 at d = 32: tile_row there):
//     1024 (alignment slack) + Q (block_m*D*2) + stages * (K + V) (2*block_n*D*2)
//     + 8 * (2 + 4*stages) mbarriers.
// Every tile is stored as D/64 column blocks of rows x 128 bytes (TMA SWIZZLE_128B boxes of 64
// elements), so each column block is a stack of 1024-byte swizzle atoms (8 rows x 128 B); at d = 32 as one
// block of rows x 64 bytes (SWIZZLE_64B boxes of 32 elements, 512-byte atoms: FwdTraits::kRowBytes).
//
// Compile-time switches: SM90_STATIC_SCHEDULE (causal kernels walk a fixed tile list too),
// SM90_BOTTOM_SHORT (A/B only: a causal head's short tile last, tile_row0),
// SM90_DYN_MAX, SM90_OWN_MAX, SM90_TURN_MAX (the head dims with each scheduling feature, below),
// SM90_EARLY_ABOVE (the head dims above it rescale O before the P V product, FwdTraits::kRescaleEarly; A/B),
// SM90_ALPHA_FIRST_MAX (the head dims up to it start the row sums at l * alpha, FwdTraits::kAlphaFirst; A/B),
// SM90_ALPHA_FIRST_CAUSAL_N (so do d = 128's plain causal kernels with chunks up to that many keys; 0 = none; A/B),
// SM90_DYNAMIC_FULL (the dynamic schedule without a mask too), SM90_UNROTATED (tile_of_round) and SM90_KV_TOGETHER
// (the producer's K(n) and V(n) together) for A/B runs, SM90_CLUSTER (FwdTraits::kCluster: K and V multicast over
// clusters of two CTAs), SM90_STALE_LOG2 and SM90_STALE_LOCAL (FwdTraits::kStaleLog2) and SM90_DESC_EACH_STEP
// (sm90_tiles.cuh) likewise, SM90_ALPHA_LOCAL and SM90_VLAG_LOCAL (A/B: the window kernels with alpha first at
// d = 128, and with V one chunk behind K; kAlphaCausal, kVLag),
// SM90_PACK_LATE (A/B: P packed after O's rescale, the order before 2026-12-06),
// SM90_Q_REGS_MAX (A/B: the head dims up to it hold Q in registers for S = Q K^T, FwdTraits::kQRegs; 0 = none),
// SM90_ROW128 (A/B: d = 32's tiles in 128-byte rows half zeros, the layout before 2026-12-06; the host must agree),
// SM90_WATCHDOG (trap on a hung barrier wait).
#pragma once
#include "sm90_common.cuh"
#include "sm90_tiles.cuh"
// The largest head dims with the dynamic schedule, own-chunk skipping and wgmma turns (FwdTraits below);
// -D switches for A/B runs (kernels/flash_sm90.py's DYNAMIC_MAX_HEAD_DIM must match SM90_DYN_MAX).
#ifndef SM90_DYN_MAX
#define SM90_DYN_MAX 128
#endif
#ifndef SM90_OWN_MAX
#define SM90_OWN_MAX 192
#endif
#ifndef SM90_Q_REGS_MAX
#define SM90_Q_REGS_MAX 0
#endif
#ifndef SM90_TURN_MAX
#define SM90_TURN_MAX 192
#endif
#ifndef SM90_EARLY_ABOVE
#define SM90_EARLY_ABOVE 192
#endif
#ifndef SM90_ALPHA_FIRST_MAX
#define SM90_ALPHA_FIRST_MAX 64
#endif
#ifndef SM90_STALE_LOG2
#define SM90_STALE_LOG2 8
#endif
#ifndef SM90_STALE_LOCAL
#define SM90_STALE_LOCAL 1
#endif
#ifndef SM90_ALPHA_LOCAL
#define SM90_ALPHA_LOCAL 0
#endif
#ifndef SM90_VLAG_LOCAL
#define SM90_VLAG_LOCAL 0
#endif
#ifndef SM90_ALPHA_FIRST_CAUSAL_N
#define SM90_ALPHA_FIRST_CAUSAL_N 128
#endif

namespace sm90 {

template <int kBlockM_, int kBlockN_, int kStages_, int kHeadDim_, int kConsumers_, bool kBF16_,
          bool kCausal_, bool kVarlen_ = false, bool kLocal_ = false, int kMods_ = 0>
struct FwdTraits {
    static constexpr int kBlockM = kBlockM_;
    static constexpr int kBlockN = kBlockN_;
    static constexpr int kStages = kStages_;
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kConsumers = kConsumers_;
    static constexpr bool kBF16 = kBF16_;
    static constexpr bool kCausal = kCausal_;
    // Packed variable-length batches (FlashAttention's varlen layout): sequence b is rows cu_q[b] ..
    // cu_q[b+1] of Q and O (total_q, H, d) and cu_k[b] .. of K and V; the tiles cover the longest
    // sequence, and a tile past a shorter one's rows is empty.
    static constexpr bool kVarlen = kVarlen_;
    // A sliding window (FlashAttention's window_size): query i sees keys i + diag - win_left ..
    // i + diag + win_right (diag = N_k - N_q); the upper bound is kCausal's diagonal moved by win_right
    // (the launcher sets kCausal whenever the window has one), win_left >= 2^30 is no lower bound.  A
    // tile's chunks run from the one holding its first row's first key; each warpgroup computes those of
    // its own rows and releases the rest; chunks across the left edge are masked, last.
    static constexpr bool kLocal = kLocal_;
    // Score modifiers (FlashAttention's softcap and alibi_slopes; kernels/score_mods.py): bit 1 softcap,
    // the raw scores s -> tanh(s * softcap_mul) with the launcher passing cap * log2 e as scale_log2; bit 2
    // ALiBi, the logits minus slope * |i + N_k - N_q - j|, the slope of (b, h) at alibi[b * alibi_sb + h].
    // Applied to every chunk before its masks (apply_mods); 0 reads neither argument.
    static constexpr int kMods = kMods_;
    // Causal tiles differ in length: the producer claims them one by one from a global counter (a
    // dynamic schedule) and hands each to the consumers through a shared slot.  Otherwise every CTA
    // walks a fixed list of tiles.  (Above d = 128 a fixed list, which plain causal launches take from the
    // host's table, table_tile; kernels/sm90_schedule.py says why and cites the runs.)
    // Varlen batches too: their tiles past a short sequence's rows are skipped by the producer alone,
    // and the real ones (few and uneven) are balanced by the claims.  The launcher builds a causal sliding
    // window of tiles of one length with SM90_STATIC_SCHEDULE (kernels/flash_sm90.py, schedule_defines) and
    // walks it by the host's table (table_tile): the claims balanced it less well.
#ifdef SM90_STATIC_SCHEDULE
    static constexpr bool kDynamic = false;
#elif defined(SM90_DYNAMIC_FULL)   // A/B only: without a mask the claims lost 2.7 to 4.4% at N >= 16384
    static constexpr bool kDynamic = kHeadDim_ <= SM90_DYN_MAX;
#else
    static constexpr bool kDynamic = (kCausal || kVarlen_) && kHeadDim_ <= SM90_DYN_MAX;
#endif
    // The tail split (split_item, merge_pieces): a grid of equal tiles (no mask, window, modifier or varlen
    // batch) whose last round would leave SMs idle runs that round's tiles as pieces, each a share of the key
    // chunks, merged by the tile's last piece.  The launcher takes the count from the model (iomodel.perf.
    // tail_pieces); `pieces` = 1 is the plain walk.  SM90_NO_SPLIT (A/B only) builds the kernel without it.
#ifdef SM90_NO_SPLIT
    static constexpr bool kSplit = false;
#else
    static constexpr bool kSplit = !kDynamic && !kCausal_ && !kLocal_ && !kVarlen_ && kMods_ == 0;
#endif
    // SM90_CLUSTER: the plain kernel (no mask, window, modifier or varlen batch; the fixed walk) runs as
    // clusters of two CTAs (the instance's SM90_PLAIN_ATTRS) that walk pairs of adjacent tiles of one head: each
    // CTA loads half of every K and V chunk's rows and multicasts it to both, so the L2 serves each chunk once a
    // pair.  A stage is refilled once both CTAs' consumers released it (each warp arrives on both CTAs' empty
    // barriers).  The launcher sizes the grid in pairs (kernels/flash_sm90.py) and the K and V boxes in half chunks,
    // and builds it where kernels/sm90_schedule.py pairs_tiles says (the plain kernel's long tiles; its runs there).
#ifdef SM90_CLUSTER
    static constexpr int kCluster = (!kDynamic && !kCausal_ && !kLocal_ && !kVarlen_ && kMods_ == 0) ? 2 : 1;
#else
    static constexpr int kCluster = 1;
#endif

    // Warpgroups skip the chunks that hold none of their scores (below).  At d = 256 every warpgroup
    // runs the whole tile (this and the turns measured within noise of it there; at d = 192 up to 10%
    // faster: the same A/B).
    static constexpr bool kOwnChunks = kHeadDim_ <= SM90_OWN_MAX;
    // The consumer warpgroups take turns issuing their wgmmas (FA3's scheduler barrier): one
    // warpgroup's softmax then runs while the others' matrix products use the tensor cores.
    // Without it the warpgroups can fall into step and all wait on the tensor cores together.
    static constexpr bool kTurns = kHeadDim_ <= SM90_TURN_MAX;
    // Q held in registers through a tile (loaded once by ldmatrix, d / 4 registers a thread), S = Q K^T then reading
    // only K from SMEM: a fifth or so less SMEM read traffic a chunk at d = 64 (A/B: SM90_Q_REGS_MAX).
    static constexpr bool kQRegs = kHeadDim_ <= SM90_Q_REGS_MAX;
    // Where O is rescaled by a chunk's alpha: after its P V product is done (the chunk's end, when the next
    // issue waits on those multiplies), or, at d = 256 where O is 128 registers a thread, while the next S
    // product runs, between its issue and the P V product's (FlashAttention-3's RescaleOBeforeGemm; 1.5 to
    // 4.4% faster).  Not at d = 192, whose warpgroups take turns: the multiplies sat inside the turn (2 to 5%
    // slower; validation/results/profile-sm90-rescale-h200-2026-11-28/).
    static constexpr bool kRescaleEarly = kHeadDim_ > SM90_EARLY_ABOVE;
    // The online softmax's row sums start at l * alpha (online_softmax): alpha is then needed before the
    // tile's exponentials are summed, so ptxas issues its EX2 ahead of theirs, and O's multiplies run beside
    // them once the P V product is done, not behind the MUFU queue at the chunk's end.  At d = 128, where
    // the P V product is long and O is rescaled after it, that hoisted the wait on it into the
    // exponentials (2 to 5% slower causal at 128x176); with kRescaleEarly O's multiplies do not wait on it.
    // d = 128's plain causal kernels of chunks up to 128 keys take it: 128x128 s2 and s3 ran 0.1 to 4.5% faster in
    // one round and 1.5% / 0.8% faster on average in a second (where the unchanged 128x176 moved by -1.9 to +0.3%);
    // without a mask s3 ran 2 to 3% slower (validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/).  Not the
    // window or modifier kernels, whose spills were measured without it (iomodel/families/flash_sm90.py, SPILLING);
    // SM90_ALPHA_LOCAL=1 (A/B) gives it to d = 128's window kernels: 1.7% slower at the (4096, 0) window of
    // N = 32768 (validation/results/profile-sm90-model-refit-h200-2026-11-29/window-run2.json).
    static constexpr bool kAlphaCausal = kCausal_ && (!kLocal_ || SM90_ALPHA_LOCAL) && !kVarlen_ && kMods_ == 0 &&
                                         kHeadDim_ == 128 && kBlockN_ <= SM90_ALPHA_FIRST_CAUSAL_N;
    static constexpr bool kAlphaFirst = kHeadDim_ <= SM90_ALPHA_FIRST_MAX || kRescaleEarly || kAlphaCausal;
    // A stale max (the mma.sync forward's RESCALE_STALE): a warp keeps its rows' maxima while no row's grows by more
    // than kStaleLog2 in exp2's exponent, its P then up to 2^kStaleLog2 (exact in the fp32 sums, a 16-bit P's
    // relative precision), and skips alpha's EX2s, the row sums' and O's multiplies; 0: every chunk rescales.  The
    // plain kernel ran 0.3 to 2.6% faster with it on the H200 (d = 64 N = 4096 and 32768, d = 96, d = 128 N = 4096 and
    // d = 256; within 0.2% at d = 128 N = 16384), the causal one 0.6 to 1.7% slower at d = 64 and d = 128 N = 4096
    // (validation/results/profile-sm90-lazy-rescale-h200-2026-11-29/): every kernel but the causal, windowed and
    // score-modifier ones (varlen batches too, not measured apart; with a softcap and ALiBi d = 96's 192x112 spilled,
    // tests/kernels/test_build_variants.py).  SM90_STALE_LOG2=0 (A/B): none.  The window kernels keep one too since
    // 2026-11-29 ((4096, 0) at N = 32768: 0.5% faster at d = 64 and 128, 2.9% at d = 96, and d = 64's 192x128 no longer
    // spills; validation/results/profile-sm90-model-refit-h200-2026-11-29/window-run1.json); SM90_STALE_LOCAL=0 (A/B):
    // not them.
    static constexpr float kStaleLog2 = ((!kCausal_ && !kLocal_) || (kLocal_ && SM90_STALE_LOCAL)) && kMods_ == 0
                                            ? float(SM90_STALE_LOG2) : 0.f;
    // The producer loads V one chunk behind K (K(n), then V(n + 1)): the order the consumers take them in (S(n)
    // is issued with P(n + 1) V(n + 1)), so the next K does not queue behind the V slot the consumers free
    // last, at the end of a step (2% at d = 64 N = 32768 causal, 0.4 to 3.4% at d = 256 causal, within noise
    // elsewhere: validation/results/profile-sm90-rescale-h200-2026-11-28/).  Not with a sliding window, whose
    // producer (24 registers) then spilled; on the window kernels' stale max the picks' builds do not, but the lag ran
    // level to 1.1% slower there (SM90_VLAG_LOCAL=1, A/B; profile-sm90-model-refit-h200-2026-11-29/window-run2.json).
    // SM90_KV_TOGETHER (A/B only): K(n) and V(n) together, as before.
#ifdef SM90_KV_TOGETHER
    static constexpr bool kVLag = false;
#else
    static constexpr bool kVLag = !kLocal_ || SM90_VLAG_LOCAL;
#endif

    static constexpr int kThreads = 128 * (kConsumers + 1);
    // Column blocks of kRowBytes-byte rows (TMA boxes, the swizzle's row): 128 bytes, 64 values, but 64 at d = 32,
    // whose tiles then take half the SMEM and TMA writes (FlashAttention-4's layout there); d = 96 fills its last
    // block partly, TMA writing zeros past d (the products read only the first d columns: S contracts over d, O has
    // d columns).  iomodel/families/flash_sm90.py tile_row must agree.
#ifdef SM90_ROW128   // A/B only, with the host's boxes and SMEM for 128-byte rows (the 2026-12-06 probe's patch)
    static constexpr u32 kRowBytes = 128;
#else
    static constexpr u32 kRowBytes = kHeadDim == 32 ? 64 : 128;
#endif
    static constexpr int kRowCols = int(kRowBytes / 2);
    static constexpr int kDBlocks = (kHeadDim + kRowCols - 1) / kRowCols;
    static constexpr u32 kBytesQ = kBlockM * kDBlocks * kRowBytes;       // TMA counts a box's zeros too
    static constexpr u32 kBytesKV = kBlockN * kDBlocks * kRowBytes;      // one K chunk (= one V chunk)
    static constexpr u32 kOffK = kBytesQ;
    static constexpr u32 kOffV = kOffK + kStages * kBytesKV;
    static constexpr u32 kOffBar = kOffV + kStages * kBytesKV;
    static constexpr u32 kNumBars = 2 + 4 * kStages;  // Q full/empty + K,V full/empty per stage
    static constexpr u32 kSmemBytes = 1024 + kOffBar + 8 * kNumBars;
    // Register split after setmaxnreg (total must fit the 64K-register file at 1 CTA / SM).
    // (the clusters' producer holds its rank and the half chunk's offsets too: 12 to 24 bytes spilled at 24
    // registers, 4 at 32 with d = 192's 128x112; the consumers' increase draws only on what the producer gave back,
    // so the two together stay within the launch's 168 (2 consumers) or 128 (3) a thread: 24 + 2 x 240 =
    // 40 + 2 x 232 = 3 x 168, 24 + 3 x 160 <= 32 + 3 x 160 = 4 x 128)
    static constexpr u32 kProducerRegs = kCluster > 1 ? (kConsumers == 2 ? 40 : 32) : 24;
    static constexpr u32 kConsumerRegs = kConsumers == 2 ? (kCluster > 1 ? 232 : 240) : (kConsumers == 3 ? 160 : 232);

    static_assert(kBlockM == 64 * kConsumers, "each consumer warpgroup owns 64 query rows");
    static_assert(kBlockN % 16 == 0 && kBlockN >= 16 && kBlockN <= 256, "block_n");
    static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head_dim");
    static_assert(kBlockM <= 256 && kBlockN <= 256, "TMA box rows <= 256");
    static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= 65536, "registers");
    static_assert(kProducerRegs + kConsumerRegs * kConsumers <= (kConsumers + 1) * (65536 / kThreads / 8 * 8),
                  "setmaxnreg: the consumers' increase within what the producer gives back");
    static_assert(kCluster == 1 || kBlockN % 16 == 0, "a half chunk is whole 1024-byte swizzle atoms");
};

#ifdef SM90_CLUSTER
#define SM90_PLAIN_ATTRS __cluster_dims__(2, 1, 1)
#else
#define SM90_PLAIN_ATTRS
#endif

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float shfl_xor(float v, int m) {
    float r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(m));
    return r;
}

// Mask keys >= N_k and (causal) keys > row + (N_k - N_q).  Accumulator layout (per warp 16 rows):
// s[4i+e]: row = r0 + 8*(e>>1), col = 8i + 2*(lane%4) + (e&1).
template <class T>
__device__ __forceinline__ void apply_mask(float (&s)[T::kBlockN / 2], int col0, int row0, int N_k,
                                           int offset, int lo = 0) {
#pragma unroll
    for (int i = 0; i < T::kBlockN / 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int col = col0 + 8 * i + (e & 1);
            const int row = row0 + 8 * (e >> 1);
            bool masked = col >= N_k;
            if constexpr (T::kCausal) masked = masked || (col > row + offset);
            if constexpr (T::kLocal) masked = masked || (col < row + lo);
            if (masked) s[4 * i + e] = neg_inf();
        }
    }
}

// The score modifiers (FwdTraits::kMods) on one raw S tile: softcap tanh(s * cap_mul); ALiBi s -= slope *
// |dist| with slope in raw-score units and dist0 the distance (row - col + N_k - N_q) of this thread's
// s[0]: the accumulator layout of apply_mask, so s[4i+e] is dist0 + 8*(e>>1) - 8i - (e&1) (exact in fp32).
template <class T>
__device__ __forceinline__ void apply_mods(float (&s)[T::kBlockN / 2], float cap_mul, float slope, float dist0) {
#pragma unroll
    for (int i = 0; i < T::kBlockN / 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float x = s[4 * i + e];
            if constexpr ((T::kMods & 1) != 0) x = tanh_approx(x * cap_mul);
            if constexpr ((T::kMods & 2) != 0)
                x = __fmaf_rn(-slope, fabsf(dist0 + float(8 * (e >> 1) - 8 * i - (e & 1))), x);
            s[4 * i + e] = x;
        }
    }
}

// Online softmax on one S tile (in place: S -> unnormalised P in fp32).  m is kept in the scaled
// log2 domain (m = max(S) * scale * log2 e), so p = exp2(S * scale_log2 - m) is one FFMA + EX2.
// Sets the rescale factors alpha for O and returns whether O needs them (false: the warp's maxima kept, every
// alpha 1; FwdTraits::kStaleLog2); l is a per-thread partial row sum (quad-reduced at end).
template <class T>
__device__ __forceinline__ bool online_softmax(float (&s)[T::kBlockN / 2], float (&m)[2], float (&l)[2],
                                               float (&alpha)[2], float scale_log2) {
    float mx[2] = {fmaxf(s[0], s[1]), fmaxf(s[2], s[3])};
#pragma unroll
    for (int i = 1; i < T::kBlockN / 8; ++i) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * i + 0], s[4 * i + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], shfl_xor(mx[r], 1));
        mx[r] = fmaxf(mx[r], shfl_xor(mx[r], 2));
    }
    float mu[2], m_new[2] = {fmaxf(m[0], mx[0] * scale_log2), fmaxf(m[1], mx[1] * scale_log2)};
    bool grow = true;   // (m = -inf: m + kStaleLog2 is too, so a first finite maximum always grows)
    if constexpr (T::kStaleLog2 > 0.f)
        grow = __any_sync(0xffffffffu, m_new[0] > m[0] + T::kStaleLog2 || m_new[1] > m[1] + T::kStaleLog2);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if (grow) {
            mu[r] = (m_new[r] == neg_inf()) ? 0.f : m_new[r];  // fully masked so far: keep exp2 finite
            alpha[r] = ex2(m[r] - mu[r]);
            m[r] = m_new[r];
        } else {
            mu[r] = (m[r] == neg_inf()) ? 0.f : m[r];
            alpha[r] = 1.f;
        }
    }
    float sum[2] = {T::kAlphaFirst ? l[0] * alpha[0] : 0.f, T::kAlphaFirst ? l[1] * alpha[1] : 0.f};
#pragma unroll
    for (int i = 0; i < T::kBlockN / 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r = e >> 1;
            const float p = ex2(__fmaf_rn(s[4 * i + e], scale_log2, -mu[r]));
            s[4 * i + e] = p;
            sum[r] += p;
        }
    }
    l[0] = T::kAlphaFirst ? sum[0] : l[0] * alpha[0] + sum[0];
    l[1] = T::kAlphaFirst ? sum[1] : l[1] * alpha[1] + sum[1];
    return grow;
}

template <class T>
__device__ __forceinline__ void pack_p(u32 (&p)[T::kBlockN / 4], const float (&s)[T::kBlockN / 2]) {
#pragma unroll
    for (int j = 0; j < T::kBlockN / 4; ++j) p[j] = pack2<T::kBF16>(s[2 * j], s[2 * j + 1]);
}

template <class T>
__device__ __forceinline__ void rescale_o(float (&o)[T::kHeadDim / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < T::kHeadDim / 8; ++i) {
        o[4 * i + 0] *= alpha[0];
        o[4 * i + 1] *= alpha[0];
        o[4 * i + 2] *= alpha[1];
        o[4 * i + 3] *= alpha[1];
    }
}

// A tile's sequence: its first query and key rows in the tensors and its lengths (dense: every sequence
// is N_q x N_k at row 0 of its own batch entry; varlen: read from the cumulative lengths).
struct Seq {
    int q0, k0, n_q, n_k;
};
template <class T>
__device__ __forceinline__ Seq seq_of(int b, int N_q, int N_k, const int* cu_q, const int* cu_k) {
    if constexpr (T::kVarlen) {
        const int q0 = cu_q[b], k0 = cu_k[b];
        return {q0, k0, cu_q[b + 1] - q0, cu_k[b + 1] - k0};
    } else {
        return {0, 0, N_q, N_k};
    }
}

// A tile's first query row.  With causal masking (and own-chunk skipping) a head's tiles end at its last
// row: the short tile, N_q % block_m rows rounded up to whole warpgroups, is m_block 0, whose rows see the
// fewest keys, instead of the last one, whose single busy warpgroup walked every chunk of keys alone while
// the others waited for the next tile (at N = 1024 and 192-row tiles: one warpgroup over 8 chunks where 3
// share 2).  The rows before 0 belong to warpgroups that compute nothing; TMA fills their Q rows with zeros
// (dense) or reads rows of the previous sequence (varlen), which no one uses.  Not with a sliding window:
// its tiles see bands of about one length wherever the short one lies, and the shift spilled the window
// variants' producer (24 registers).
template <class T>
__device__ __forceinline__ int tile_row0(int m_block, int n_q) {
#ifndef SM90_BOTTOM_SHORT
    if constexpr (T::kCausal && !T::kLocal && T::kOwnChunks) {
        const int r = n_q % T::kBlockM;
        return m_block * T::kBlockM - (r == 0 ? 0 : (T::kBlockM - r) / 64 * 64);
    }
#endif
    return m_block * T::kBlockM;
}

// Tile t (of B * H * ceil(N_q / block_m)) -> (m_block, h, b).  Without masking all tiles cost the
// same and the tiles of one head are adjacent (the CTAs running together share K/V in L2).  With
// causal masking tiles are ordered longest first (largest m_block first) within sections of `sec`
// heads: longest first keeps the tail of the schedule short, and the CTAs running together read
// the K/V of one section, which the host sizes to fit in L2.  sec = B * H: all tiles longest first.
// Window: the first key chunk any of the rows from `row` on sees (the lower bound rises with the row).
template <class T>
__device__ __forceinline__ int first_chunk(int row, int n_q, int n_k, int win_left) {
    const int first = row + n_k - n_q - win_left;
    return first <= 0 ? 0 : first / T::kBlockN;
}

template <class T>
struct TileInfo {
    int m_block, h, b, n_blocks;
    int q0, k0;   // the sequence's first rows (varlen; 0 otherwise)
    bool past;    // varlen: the tile lies past its sequence's rows (nothing to compute or write)
    int lo = 0;   // a tail piece's first chunk (its chunks: lo .. n_blocks - 1); 0 for a whole tile
    int slot = -1;   // a tail piece's index among all pieces (merge_pieces); -1 for a whole tile
    __device__ __forceinline__ TileInfo() : m_block(-1), h(0), b(0), n_blocks(0), q0(0), k0(0), past(false) {}
    __device__ __forceinline__ TileInfo(int t, int num_m, int H, int B, int N_q_all, int N_k_all, int sec,
                                        const int* cu_q, const int* cu_k, int win_left = 0, int win_right = 0) {
        int hb;
        if constexpr (T::kCausal) {
            const int base = (t / (sec * num_m)) * sec;                 // first head of t's section
            const int width = H * B - base < sec ? H * B - base : sec;  // heads in that section
            const int r = t - base * num_m;
            const int mi = r / width;
            hb = base + (r - mi * width);
            m_block = num_m - 1 - mi;
        } else {
            hb = t / num_m;
            m_block = t - hb * num_m;
        }
        h = hb % H;
        b = hb / H;
        const Seq sq = seq_of<T>(b, N_q_all, N_k_all, cu_q, cu_k);
        const int N_q = sq.n_q, N_k = sq.n_k;
        q0 = sq.q0;
        k0 = sq.k0;
        const int r0 = tile_row0<T>(m_block, N_q);
        n_blocks = (N_k + T::kBlockN - 1) / T::kBlockN;
        if constexpr (T::kCausal) {
            int last = r0 + T::kBlockM - 1 + (N_k - N_q) + (T::kLocal ? win_right : 0);
            last = last < N_k - 1 ? last : N_k - 1;
            const int nb = last < 0 ? 0 : last / T::kBlockN + 1;
            n_blocks = nb < n_blocks ? nb : n_blocks;
        }
        past = T::kVarlen && r0 >= N_q;
        if (past) n_blocks = 0;
        // a window whose tile sees no key: no chunk (the consumers write O = 0, LSE = -inf)
        if (T::kLocal && first_chunk<T>(m_block * T::kBlockM, N_q, N_k, win_left) >= n_blocks) n_blocks = 0;
    }
    // the tile's first chunk (0 without a window)
    __device__ __forceinline__ int j0(int n_q, int n_k, int win_left) const {
        if constexpr (!T::kLocal) return 0;
        const int j = first_chunk<T>(m_block * T::kBlockM, n_q, n_k, win_left);   // (tile_row0: no shift)
        return j < n_blocks ? j : n_blocks;
    }
};

// The tail split's work items (kSplit): items 0 .. whole - 1 are tiles 0 .. whole - 1; item whole + s is piece
// s % pieces of tile whole + s / pieces, the piece streaming its even share of the tile's key chunks (a tile's
// pieces are adjacent items, so a round hands them to neighbouring CTAs).  Items: whole + (tiles - whole) pieces.
// With clusters (kCluster = 2) the items are pairs of tiles: pair u is tiles 2u and 2u + 1, one a CTA of the
// cluster (its rank), and a split pair's two tiles take the same chunks, each merged as its own tile.
template <class T>
__device__ __forceinline__ TileInfo<T> split_item(int item, int whole, int pieces, int num_m, int H, int B, int N_q,
                                                  int N_k, int sec, const int* cu_q, const int* cu_k) {
    constexpr int C = T::kCluster;
    const int rank = C > 1 ? int(cluster_rank()) : 0;
    if (!T::kSplit || item < whole) return TileInfo<T>(item * C + rank, num_m, H, B, N_q, N_k, sec, cu_q, cu_k);
    const int s = item - whole, piece = s % pieces;
    TileInfo<T> ti((whole + s / pieces) * C + rank, num_m, H, B, N_q, N_k, sec, cu_q, cu_k);
    const int n = ti.n_blocks;
    ti.lo = piece * n / pieces;
    ti.n_blocks = (piece + 1) * n / pieces;
    ti.slot = C > 1 ? ((s / pieces) * C + rank) * pieces + piece : s;
    return ti;
}

// A tail piece's rows (kSplit): each consumer thread writes its O registers (unnormalised), its rows' maxima
// (log2 domain) and sums (quad-reduced) to the piece's slot in `part`, register i of every thread side by side
// (only the same thread of another piece reads them back, so the accumulator layout never matters); then its
// warp bumps the warp's arrival counter of the tile.  The warp of the tile's last piece to arrive reads every
// piece's slot in piece order (its own too: the merge's bits do not depend on which piece is last), merges them
// into o, m and l (the rows' common maximum M, piece p weighted by exp2(m_p - M)), leaves the counter at zero for
// the next launch and returns true; the epilogue then stores the tile's rows.  A warp's 16 rows are its own in
// every piece, so no warp waits for another.  part: (tiles - whole) * pieces slots of (d / 2 + 4) floats a
// consumer thread; count: (tiles - whole) * 4 * kConsumers ints, zero.
template <class T>
__device__ __forceinline__ bool merge_pieces(float* part, int* count, int slot, int pieces,
                                             float (&o)[T::kHeadDim / 2], float (&m)[2], float (&l)[2], int ctid) {
    constexpr int kQuads = T::kHeadDim / 8;                    // float4s of O a thread holds
    constexpr int kThreadsC = 128 * T::kConsumers;
    constexpr size_t kPiece = size_t(kQuads + 1) * kThreadsC * 4;   // floats of one piece's slot
    const int lane = ctid % 32, tile = slot / pieces;
    float* mine = part + size_t(slot) * kPiece;
#pragma unroll
    for (int i = 0; i < kQuads; ++i)
        st_global_v4(mine + (size_t(i) * kThreadsC + ctid) * 4, o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]);
    st_global_v4(mine + (size_t(kQuads) * kThreadsC + ctid) * 4, m[0], m[1], l[0], l[1]);
    __threadfence();   // this thread's slot before the warp's arrival
    __syncwarp();
    int* arrivals = count + tile * (kThreadsC / 32) + ctid / 32;
    int last = 0;
    if (lane == 0) last = atomicAdd(arrivals, 1) == pieces - 1;
    if (!__shfl_sync(0xffffffffu, last, 0)) return false;
    if (lane == 0) *arrivals = 0;   // every piece has arrived: left at zero
    __threadfence();                // the other pieces' slots after their arrivals
    const float* first = part + size_t(tile) * pieces * kPiece;
    const size_t stats = (size_t(kQuads) * kThreadsC + ctid) * 4;
    float M[2] = {neg_inf(), neg_inf()};
    for (int p = 0; p < pieces; ++p) {
        const float4 st = ld_global_cg_v4(first + p * kPiece + stats);
        M[0] = fmaxf(M[0], st.x);
        M[1] = fmaxf(M[1], st.y);
    }
#pragma unroll
    for (int i = 0; i < T::kHeadDim / 2; ++i) o[i] = 0.f;
    l[0] = l[1] = 0.f;
    // O's float4s in passes of at most 16 over the pieces: the loads of one pass in flight together, and no more
    // (d = 256's 32 at once spilled beside O's 128 registers)
    constexpr int kPass = kQuads < 16 ? kQuads : 16;
#pragma unroll
    for (int i0 = 0; i0 < kQuads; i0 += kPass) {
        for (int p = 0; p < pieces; ++p) {
            const float* src = first + p * kPiece;
            const float4 st = ld_global_cg_v4(src + stats);
            // a row no piece saw a key of (M = -inf) keeps weight 0
            const float w0 = M[0] == neg_inf() ? 0.f : ex2(st.x - M[0]);
            const float w1 = M[1] == neg_inf() ? 0.f : ex2(st.y - M[1]);
            if (i0 == 0) {
                l[0] = __fmaf_rn(w0, st.z, l[0]);
                l[1] = __fmaf_rn(w1, st.w, l[1]);
            }
#pragma unroll
            for (int i = i0; i < i0 + kPass; ++i) {
                const float4 a = ld_global_cg_v4(src + (size_t(i) * kThreadsC + ctid) * 4);
                o[4 * i] = __fmaf_rn(w0, a.x, o[4 * i]);
                o[4 * i + 1] = __fmaf_rn(w0, a.y, o[4 * i + 1]);
                o[4 * i + 2] = __fmaf_rn(w1, a.z, o[4 * i + 2]);
                o[4 * i + 3] = __fmaf_rn(w1, a.w, o[4 * i + 3]);
            }
        }
    }
    m[0] = M[0];
    m[1] = M[1];
    return true;
}

// The walk's walkers: the grid's CTAs, or its clusters (a cluster walks as one, FwdTraits::kCluster).
template <class T>
__device__ __forceinline__ int walkers() {
    if constexpr (T::kCluster > 1) return int(gridDim.x) / T::kCluster;
    return gridDim.x;
}

// Round k of a grid of G CTAs covers tiles [k*G, k*G + G), adjacent tiles (the CTAs running together share
// K/V in L2).  With causal masking CTA i takes k*G + i, odd rounds backwards (k*G + G-1-i, snake order),
// which evens out the per-CTA work of the longest-first schedule.  Without a mask CTA i takes k*G + i where
// every tile is full, and k*G + (i + k) mod G where a head's last tile is short (N_q % block_m != 0): with G a
// multiple of the tiles a head (132 CTAs on the H100, 6 tiles of 192 rows at N_q = 1024, 11 at 2048, 22 at
// 4096) the plain walk hands CTA i tiles of one m_block only, so the CTAs with the short tiles idled while the
// rest carried every full one; rotated, each CTA goes round a head's m_blocks (3.7 to 4.6% faster at N = 1024,
// 2.5% at 4096: validation/results/profile-sm90-schedule-h100-2026-11-25/).  SM90_UNROTATED builds the plain
// walk for A/B runs.  Returns -1 past the last tile.
template <class T>
__device__ __forceinline__ int tile_of_round(int k, int num_tiles, int n_q) {
    const int G = walkers<T>(), i = T::kCluster > 1 ? int(blockIdx.x) / T::kCluster : int(blockIdx.x);
    int c = i;
    if constexpr (T::kCausal) {
        if (k & 1) c = G - 1 - i;
    } else {
#ifndef SM90_UNROTATED
        if (n_q % T::kBlockM != 0) c = (i + k) % G;
#endif
    }
    const int t = k * G + c;
    return t < num_tiles ? t : -1;
}

// The lpt walk: a persistent fixed walk that follows a host-made table instead of the rounds (plain causal
// launches above d = 128 and causal windows, kernels/sm90_schedule.py lpt_order): entry k * gridDim.x + blockIdx.x
// is this CTA's k-th tile, -2 ends its walk.  kTable below gates it at compile time, so that the other variants'
// code is as before.
template <class T>
__device__ __forceinline__ int table_tile(int k, const int* __restrict__ order) {
    return __ldg(order + size_t(k) * gridDim.x + blockIdx.x);
}

// Dynamic schedule: a CTA's first tile is blockIdx.x, each further one the next unclaimed tile.  Every
// tile a CTA takes claims one more, so a launch makes exactly num_tiles claims (values 0 .. num_tiles - 1,
// the grid being at most num_tiles CTAs); the claim that draws the last value is the launch's last use of
// the counter, and atomicInc's wrap (old >= num_tiles - 1 -> 0) leaves it at zero for the next launch: the
// launcher never zeroes it (no extra launch a call).
__device__ __forceinline__ int claim_tile(int* counter, int num_tiles) {
    return int(gridDim.x) + int(atomicInc(reinterpret_cast<unsigned*>(counter), unsigned(num_tiles - 1)));
}
// The slot that hands a decoded tile (m_block, h, b, n_blocks; m_block < 0: no more tiles) from
// the producer to the consumers; the Q barriers order it (mbarrier arrive releases, wait acquires).
__device__ __forceinline__ void st_slot(u32 addr, int a, int b, int c, int d) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d)
                 : "memory");
}
__device__ __forceinline__ void ld_slot(u32 addr, int& a, int& b, int& c, int& d) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr)
                 : "memory");
}

// Persistent when gridDim.x < number of tiles: each CTA walks one tile per round (above), or with
// the dynamic schedule the tiles its producer claims.
// The K/V ring's stage / phase run on across tiles, so the producer fetches the next tile's first
// chunks (and its Q, once the consumers released the Q buffer) while the consumers finish the
// current tile and write it out.
// IOM_FWD90_TILE_TIMES (profiling only): thread 0 of consumer warpgroup 0 writes %globaltimer at 5 points of
// every tile into L (then a buffer of at least B * H * N_q floats, N_q a multiple of block_m; no LSE is
// written): at long long ((b H + h) N_q + m_block block_m) / 2 + slot: [0] SM, [1] the tile decoded,
// [2] Q in SMEM, [3] its first chunk's scores and softmax done, [4] its last P V done, [5] O stored,
// [6] its chunks, [7] this warpgroup's.
#ifdef IOM_FWD90_TILE_TIMES
#define IOM_TILE_TIME(slot, value)                                                                          \
    if (threadIdx.x == 128 && ti.m_block >= 0) {                                                          \
        long long v_ = (value);                                                                            \
        if ((slot) >= 1 && (slot) <= 5) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v_)::"memory");  \
        reinterpret_cast<long long*>(L)[((size_t(ti.b) * H + ti.h) * N_q + size_t(ti.m_block) * T::kBlockM) / 2 \
                                        + (slot)] = v_;                                                    \
    }
#else
#define IOM_TILE_TIME(slot, value)
#endif

template <class T>
__device__ __forceinline__ void flash_fwd_sm90(const TmaDesc& tmQ, const TmaDesc& tmK,
                                               const TmaDesc& tmV, u16* __restrict__ O,
                                               float* __restrict__ L, int B, int H, int H_kv,
                                               int N_q, int N_k, float scale_log2, int sec,
                                               int* __restrict__ counter, const int* __restrict__ order,
                                               const int* __restrict__ cu_q,
                                               const int* __restrict__ cu_k, int total_q, int win_left = 0,
                                               int win_right = 0, float softcap_mul = 0.f,
                                               const float* __restrict__ alibi = nullptr, long long alibi_sb = 0,
                                               int whole = 0, int pieces = 1, float* __restrict__ part = nullptr,
                                               int* __restrict__ count = nullptr) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const u32 smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const u32 sQ = smem0;
    const u32 sK = smem0 + T::kOffK;
    const u32 sV = smem0 + T::kOffV;
    const u32 sBar = smem0 + T::kOffBar;
    constexpr int S = T::kStages;
    const u32 fullQ = sBar;
    const u32 emptyQ = sBar + 8u;
    auto fullK = [&](int s) { return sBar + 8u * (2 + s); };
    auto emptyK = [&](int s) { return sBar + 8u * (2 + S + s); };
    auto fullV = [&](int s) { return sBar + 8u * (2 + 2 * S + s); };
    auto emptyV = [&](int s) { return sBar + 8u * (2 + 3 * S + s); };
    // dynamic schedule's slot: 16 bytes past the barriers, inside the tail of the 1024-byte alignment
    // slack (the dynamic SMEM base is 16-byte aligned, so at least 16 slack bytes stay unused)
    const u32 slot = sBar + 8u * T::kNumBars;

    const int num_m = (N_q + T::kBlockM - 1) / T::kBlockM;
    const int num_tiles = num_m * H * B;
    // the static walk's items: the tiles (with clusters, pairs of them), the tail split's pieces in place of the last
    // round's (split_item); round k's last item is k * walkers<T>() + walkers<T>() - 1, so the walks below end
    // at k * gridDim.x >= kCluster * num_items (written so: the plain form kept the lpt walk's producer spill-free)
    const int num_units = T::kCluster > 1 ? num_tiles / T::kCluster : num_tiles;
    const int num_items = T::kSplit ? whole + (num_units - whole) * pieces : num_units;
    constexpr bool kTable = T::kCausal && !T::kVarlen;   // (table_tile; a causal window's too)
    const int group = H / H_kv;

    const int warpgroup = warp_uniform(int(threadIdx.x) / 128);
    if (threadIdx.x == 0) {
        mbar_init(fullQ, 1);
        mbar_init(emptyQ, 128 * T::kConsumers);
#pragma unroll
        for (int s = 0; s < S; ++s) {
            mbar_init(fullK(s), 1);
            mbar_init(fullV(s), 1);
            // with clusters a warp of either CTA's consumers arrives once (release_kv below)
            mbar_init(emptyK(s), T::kCluster > 1 ? 2 * 4 * T::kConsumers : 128 * T::kConsumers);
            mbar_init(emptyV(s), T::kCluster > 1 ? 2 * 4 * T::kConsumers : 128 * T::kConsumers);
        }
        fence_mbar_init();
    }
    __syncthreads();
    if constexpr (T::kCluster > 1) cluster_sync();   // the other CTA's barriers exist before its loads and arrivals

    if (warpgroup == 0) {
        // ------------------------------------------------------------------ producer
        setmaxnreg_dec<T::kProducerRegs>();
        if (threadIdx.x == 0) {
            tma_prefetch_desc(&tmQ);
            tma_prefetch_desc(&tmK);
            tma_prefetch_desc(&tmV);
            int stage = 0;
            u32 phase = 0;
            u32 q_phase = 0;
            // Q and the K/V chunks of one tile (last chunk first)
            auto load_tile = [&](const TileInfo<T>& ti) {
                const int h_kv = ti.h / group;
                const int row0 = tile_row0<T>(ti.m_block, seq_of<T>(ti.b, N_q, N_k, cu_q, cu_k).n_q);
                mbar_arrive_expect_tx(fullQ, T::kBytesQ);
#pragma unroll
                for (int db = 0; db < T::kDBlocks; ++db)
                    tma_load_4d(sQ + db * (T::kBlockM * T::kRowBytes), &tmQ, fullQ, db * T::kRowCols,
                                ti.q0 + row0, ti.h, T::kVarlen ? 0 : ti.b);
                int n_loads = ti.n_blocks - ti.lo;   // chunks n_blocks - 1 down to the tile's (or piece's) first
                if constexpr (T::kLocal) {
                    const Seq sq = seq_of<T>(ti.b, N_q, N_k, cu_q, cu_k);
                    n_loads -= ti.j0(sq.n_q, sq.n_k, win_left);
                }
                // chunk n's K (or V) into stage st once the consumers emptied it
                auto load_kv = [&](u32 base, const TmaDesc* tm, u32 full, u32 empty, int n, int st, u32 ph) {
                    if constexpr (T::kCluster > 1) {   // this CTA's half of the rows, into both CTAs
                        constexpr int kHalf = T::kBlockN / 2;
                        const int r = int(cluster_rank());
                        mbar_wait(empty, ph ^ 1);
                        mbar_arrive_expect_tx(full, T::kBytesKV);   // both halves land on it
#pragma unroll
                        for (int db = 0; db < T::kDBlocks; ++db)
                            tma_load_4d_multicast(base + st * T::kBytesKV + db * (T::kBlockN * T::kRowBytes) +
                                                      r * kHalf * T::kRowBytes,
                                                  tm, full, db * T::kRowCols, ti.k0 + n * T::kBlockN + r * kHalf,
                                                  h_kv, ti.b,
                                                  (unsigned short)3);
                        return;
                    }
                    mbar_wait(empty, ph ^ 1);
                    mbar_arrive_expect_tx(full, T::kBytesKV);
#pragma unroll
                    for (int db = 0; db < T::kDBlocks; ++db)
                        tma_load_4d(base + st * T::kBytesKV + db * (T::kBlockN * T::kRowBytes), tm, full,
                                    db * T::kRowCols,
                                    ti.k0 + n * T::kBlockN, h_kv, T::kVarlen ? 0 : ti.b);
                };
                if constexpr (T::kVLag) {
                    int pstage = 0;
                    u32 pphase = 0;
                    for (int it = 0; it < n_loads; ++it) {
                        const int n = ti.n_blocks - 1 - it;
                        load_kv(sK, &tmK, fullK(stage), emptyK(stage), n, stage, phase);
                        if (it > 0) load_kv(sV, &tmV, fullV(pstage), emptyV(pstage), n + 1, pstage, pphase);
                        pstage = stage;
                        pphase = phase;
                        next_stage<S>(stage, phase);
                    }
                    if (n_loads > 0)
                        load_kv(sV, &tmV, fullV(pstage), emptyV(pstage), ti.n_blocks - n_loads, pstage, pphase);
                } else {
                    for (int it = 0; it < n_loads; ++it) {
                        const int n = ti.n_blocks - 1 - it;
                        load_kv(sK, &tmK, fullK(stage), emptyK(stage), n, stage, phase);
                        load_kv(sV, &tmV, fullV(stage), emptyV(stage), n, stage, phase);
                        next_stage<S>(stage, phase);
                    }
                }
            };
            if constexpr (T::kDynamic) {
                int t = blockIdx.x;
                while (true) {
                    // decode this tile and claim the next before waiting, so Q goes out right after
                    const bool done = t >= num_tiles;
                    TileInfo<T> ti;
                    if (!done) ti = TileInfo<T>(t, num_m, H, B, N_q, N_k, sec, cu_q, cu_k, win_left, win_right);
                    const int t_next = done ? t : claim_tile(counter, num_tiles);
                    if (T::kVarlen && !done && ti.past) {   // the consumers never see it
                        t = t_next;
                        continue;
                    }
                    mbar_wait(emptyQ, q_phase ^ 1);  // consumers are done with the slot and (last S) with Q
                    q_phase ^= 1;
                    st_slot(slot, ti.m_block, ti.h, ti.b, ti.n_blocks);
                    if (done) {
                        mbar_arrive(fullQ);
                        break;
                    }
                    if (ti.n_blocks == 0)
                        mbar_arrive(fullQ);  // no key for any row (N_k < N_q): the consumers write zeros
                    else
                        load_tile(ti);
                    t = t_next;
                }
            } else {
                for (int k = 0; (kTable && order) || k * int(gridDim.x) < T::kCluster * num_items; ++k) {
                    const int t = kTable && order ? table_tile<T>(k, order) : tile_of_round<T>(k, num_items, N_q);
                    if (kTable && t == -2) break;
                    if (t < 0) continue;
                    const TileInfo<T> ti = T::kSplit || T::kCluster > 1
                        ? split_item<T>(t, whole, pieces, num_m, H, B, N_q, N_k, sec, cu_q, cu_k)
                        : TileInfo<T>(t, num_m, H, B, N_q, N_k, sec, cu_q, cu_k, win_left, win_right);
                    if (ti.n_blocks == 0) continue;  // consumers write zeros, touch no barrier
                    mbar_wait(emptyQ, q_phase ^ 1);  // previous tile's last S wgmma has read Q
                    load_tile(ti);
                    q_phase ^= 1;
                }
            }
        }
    } else {
        // ------------------------------------------------------------------ consumers
        setmaxnreg_inc<T::kConsumerRegs>();
        const int cw = warpgroup - 1;
        const int tid = threadIdx.x % 128;
        const int warp = tid / 32;
        const int lane = tid % 32;
        const u32 q_base = sQ + cw * (64 * T::kRowBytes);
        int stage = 0;
        u32 phase = 0;
        u32 q_phase = 0;
        // Turns go round the consumers in order; every warpgroup takes one per wgmma issue point of
        // every tile (an empty one for a chunk it skips), so the count stays in step.  The last
        // warpgroup hands warpgroup 0 its first turn; warpgroup 0 takes that hand-over back at exit.
        auto turn_wait = [&]() {
            if constexpr (T::kTurns) named_bar_sync(1 + cw, 256);
        };
        auto turn_pass = [&]() {
            if constexpr (T::kTurns) named_bar_arrive(1 + (cw + 1) % T::kConsumers, 256);
        };
        if (cw == T::kConsumers - 1) turn_pass();
        // A K or V stage read: its empty barrier's arrival (with clusters, the warp's once on each CTA's barrier,
        // after all its lanes are done with the stage)
        auto release_kv = [&](u32 bar) {
            if constexpr (T::kCluster > 1) {
                __syncwarp();
                if (lane < 2) mbar_arrive_cluster(bar, cluster_rank() ^ u32(lane));
            } else {
                mbar_arrive(bar);
            }
        };

        for (int k = 0;; ++k) {
            TileInfo<T> ti;
            if constexpr (T::kDynamic) {
#ifdef IOM_FWD90_TILE_TIMES
                long long t_decoded;
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_decoded)::"memory");
#endif
                mbar_wait(fullQ, q_phase);
                q_phase ^= 1;
                ld_slot(slot, ti.m_block, ti.h, ti.b, ti.n_blocks);
                if (ti.m_block < 0) break;
                IOM_TILE_TIME(1, t_decoded);
                IOM_TILE_TIME(2, 0);
            } else {
                if (!(kTable && order) && k * int(gridDim.x) >= T::kCluster * num_items) break;
                const int t = kTable && order ? table_tile<T>(k, order) : tile_of_round<T>(k, num_items, N_q);
                if (kTable && t == -2) break;
                if (t < 0) continue;
                ti = T::kSplit || T::kCluster > 1
                         ? split_item<T>(t, whole, pieces, num_m, H, B, N_q, N_k, sec, cu_q, cu_k)
                               : TileInfo<T>(t, num_m, H, B, N_q, N_k, sec, cu_q, cu_k, win_left, win_right);
                IOM_TILE_TIME(1, 0);
            }
            const int n_blocks = ti.n_blocks;
            const Seq sq = seq_of<T>(ti.b, N_q, N_k, cu_q, cu_k);   // this tile's sequence
            const int n_q = sq.n_q, n_k = sq.n_k;
            // causal: query row i sees keys j <= i + offset; local also j >= i + lo
            const int offset = T::kLocal ? n_k - n_q + win_right : n_k - n_q;
            const int lo = T::kLocal ? n_k - n_q - win_left : 0;
            const int wg_row_min = tile_row0<T>(ti.m_block, n_q) + cw * 64;      // this warpgroup's rows
            const int row0 = wg_row_min + warp * 16 + lane / 4;  // and row0 + 8
            // The chunks this warpgroup computes: none when all its rows lie past N_q (the tail tile) or
            // before row 0 (a causal head's short tile); with causal masking, none above its own diagonal.
            // The tile's chunks above that (visited first) it only releases, so the other warpgroups get
            // the tensor cores and issue slots.
            int n_own = n_blocks;
            if (unsigned(wg_row_min) >= unsigned(n_q)) {   // (a row below 0 wraps past n_q)
                n_own = 0;
            } else if constexpr (T::kCausal) {
                const int last_key = (wg_row_min + 63 < n_q ? wg_row_min + 63 : n_q - 1) + offset;
                const int nb = last_key < 0 ? 0 : last_key / T::kBlockN + 1;
                n_own = nb < n_blocks ? nb : n_blocks;
            }
            if constexpr (!T::kOwnChunks) n_own = n_blocks;
            // Window: the tile's chunks start at tile_j0; this warpgroup computes chunks wg_j0 .. n_own - 1
            // (its first row's first key on) and releases tile_j0 .. wg_j0 - 1, the other's, after them.
            int tile_j0 = 0, wg_j0 = 0;
            if constexpr (T::kLocal) {
                tile_j0 = ti.j0(n_q, n_k, win_left);
                n_own = n_own < tile_j0 ? tile_j0 : n_own;
                wg_j0 = T::kOwnChunks && wg_row_min < n_q ? first_chunk<T>(wg_row_min, n_q, n_k, win_left) : tile_j0;
                wg_j0 = wg_j0 < tile_j0 ? tile_j0 : (wg_j0 > n_own ? n_own : wg_j0);
                tile_j0 = warp_uniform(tile_j0);
                wg_j0 = warp_uniform(wg_j0);
            }
            if constexpr (T::kSplit) n_own = n_own < ti.lo ? ti.lo : n_own;   // a piece's chunks start at lo
            n_own = warp_uniform(n_own);
            const int own = T::kLocal ? n_own - wg_j0 : n_own - ti.lo;   // chunks this warpgroup computes
            // ALiBi: the head's slope in raw-score units (over the softmax scale, scale_log2 / log2 e)
            const float slope =
                (T::kMods & 2) ? alibi[ti.b * alibi_sb + ti.h] * 1.4426950408889634f / scale_log2 : 0.f;
            // s[0]'s distance to the diagonal in chunk n (recomputed per chunk: one register less to hold)
            auto dist0 = [&](int n) { return float(row0 + n_k - n_q - 2 * (lane % 4) - n * T::kBlockN); };

            float o[T::kHeadDim / 2];
#pragma unroll
            for (int i = 0; i < T::kHeadDim / 2; ++i) o[i] = 0.f;
            float m[2] = {neg_inf(), neg_inf()};
            float l[2] = {0.f, 0.f};

            if (!T::kDynamic && n_blocks > 0) {
                mbar_wait(fullQ, q_phase);
                q_phase ^= 1;
                IOM_TILE_TIME(2, 0);
            }
            // Release a chunk this warpgroup skips once loaded: a buffer's empty barrier may take this
            // warpgroup's arrival only after the producer refilled it (all arrivals for its
            // previous use are in).
            auto release_chunk = [&]() {
                mbar_wait(fullK(stage), phase);
                release_kv(emptyK(stage));
                mbar_wait(fullV(stage), phase);
                release_kv(emptyV(stage));
                next_stage<S>(stage, phase);
                turn_wait();
                turn_pass();
            };
            for (int it = n_own; it < n_blocks; ++it) release_chunk();
            if (own == 0 && n_blocks > tile_j0) {  // nor the first S / last PV turns (a window: its own chunks)
                turn_wait();
                turn_pass();
            }
            if (own > 0) {
                float s[T::kBlockN / 2];
                u32 p[T::kBlockN / 4];
                u32 qf[T::kQRegs ? T::kHeadDim / 4 : 1];   // Q's fragments (kQRegs)
                if constexpr (T::kQRegs) load_a_frags<T::kHeadDim, T::kBlockM, T::kRowBytes>(qf, q_base, warp, lane);
                auto s_product = [&](u32 k_tile) {   // S = Q K^T (overwrites s)
                    if constexpr (T::kQRegs)
                        wgmma_tile_rsk<T::kBlockN, T::kHeadDim, T::kBlockN, T::kBF16, T::kRowBytes>(s, qf, k_tile);
                    else
                        wgmma_tile_ss<T::kBlockN, T::kHeadDim, T::kBlockM, T::kBlockN, T::kBF16, T::kRowBytes>(
                            s, q_base, k_tile);
                };
                float alpha[2];
                bool grew = true;   // whether O takes alpha (online_softmax)
                auto need_mask = [&](int n) {
                    return (n + 1) * T::kBlockN > n_k ||
                           (T::kCausal && (n + 1) * T::kBlockN - 1 > wg_row_min + offset);
                };

                // ---- first chunk: S, softmax, P
                {
                    const int n = n_own - 1;
                    mbar_wait(fullK(stage), phase);
                    turn_wait();
                    wgmma_fence();
                    s_product(sK + stage * T::kBytesKV);
                    wgmma_commit();
                    turn_pass();
                    wgmma_wait<0>();
                    fence_regs(s);
                    release_kv(emptyK(stage));
                    if constexpr (T::kMods != 0)
                        apply_mods<T>(s, softcap_mul, slope, dist0(n));
                    if constexpr (T::kLocal) {   // (a chunk below the last row's first key crosses the left edge)
                        if (own == 1) mbar_arrive(emptyQ);
                        if (need_mask(n) || n * T::kBlockN < wg_row_min + 63 + lo)
                            apply_mask<T>(s, n * T::kBlockN + 2 * (lane % 4), row0, n_k, offset, lo);
                    } else {
                        if (own == 1) mbar_arrive(emptyQ);
                        if (need_mask(n)) apply_mask<T>(s, n * T::kBlockN + 2 * (lane % 4), row0, n_k, offset);
                    }
                    grew = online_softmax<T>(s, m, l, alpha, scale_log2);
                    pack_p<T>(p, s);
                }
                IOM_TILE_TIME(3, 0);
                // ---- steady state: S(j+1) and PV(j) in flight while softmax(j+1) runs
                auto step = [&](int it, bool masked) {  // inlined: `masked` is a constant at each call
                    const int n = n_own - 1 - it;
                    const int pstage = stage;
                    const u32 pphase = phase;
                    next_stage<S>(stage, phase);
                    // Wait for both V(j) and K(j+1) (whichever the producer issued first), then fence once and
                    // issue both (a wait loop between two wgmma issues makes ptxas inject another fence).
                    mbar_wait(fullV(pstage), pphase);
                    mbar_wait(fullK(stage), phase);
                    turn_wait();
                    wgmma_fence();
                    s_product(sK + stage * T::kBytesKV);
                    wgmma_commit();
                    if constexpr (T::kRescaleEarly) {   // under the S product; O's registers change: fence again
                        if (grew) rescale_o<T>(o, alpha);
                        wgmma_fence();
                    }
                    wgmma_tile_rs<T::kHeadDim, T::kBlockN, T::kBF16, T::kRowBytes>(o, p, sV + pstage * T::kBytesKV);
                    wgmma_commit();
                    turn_pass();
                    wgmma_wait<1>();  // S(j+1) done, PV(j) may still run
                    fence_regs(s);
                    release_kv(emptyK(stage));
                    if constexpr (T::kMods != 0)
                        apply_mods<T>(s, softcap_mul, slope, dist0(n));
                    if constexpr (T::kLocal) {
                        if (it == own - 1) mbar_arrive(emptyQ);
                        if (masked) apply_mask<T>(s, n * T::kBlockN + 2 * (lane % 4), row0, n_k, offset, lo);
                    } else {
                        if (it == own - 1) mbar_arrive(emptyQ);
                        if (masked) apply_mask<T>(s, n * T::kBlockN + 2 * (lane % 4), row0, n_k, offset);
                    }
                    grew = online_softmax<T>(s, m, l, alpha, scale_log2);
                    wgmma_wait<0>();  // PV(j) done: O and P registers are free again
                    fence_regs(o);
                    fence_regs(p);
                    release_kv(emptyV(pstage));
                    // P packed before O's rescale: behind its branch ptxas left the 16-bit conversions in a run after
                    // the last exponential; here they fill the MUFU queue's gaps (SM90_PACK_LATE, A/B: the old order).
#ifndef SM90_PACK_LATE
                    pack_p<T>(p, s);
#endif
                    if constexpr (!T::kRescaleEarly) {
                        if (grew) rescale_o<T>(o, alpha);
                    }
#ifdef SM90_PACK_LATE
                    pack_p<T>(p, s);
#endif
                };
                // The chunks that need a mask (causal diagonal, key tail) come first; the loop over
                // the rest carries no mask code, which keeps the hot loop small.
                // A window's left edge: its chunks come last, masked again.
                int it = 1;
                if constexpr (T::kLocal) {
                    for (; it < own && need_mask(n_own - 1 - it); ++it) step(it, true);
                    for (; it < own && (n_own - 1 - it) * T::kBlockN >= wg_row_min + 63 + lo; ++it) step(it, false);
                    for (; it < own; ++it) step(it, true);
                } else {
                    for (; it < own && need_mask(n_own - 1 - it); ++it) step(it, true);
                    for (; it < own; ++it) step(it, false);
                }
                // ---- last PV
                mbar_wait(fullV(stage), phase);
                turn_wait();
                if constexpr (T::kRescaleEarly) {
                    if (grew) rescale_o<T>(o, alpha);
                }
                wgmma_fence();
                wgmma_tile_rs<T::kHeadDim, T::kBlockN, T::kBF16, T::kRowBytes>(o, p, sV + stage * T::kBytesKV);
                wgmma_commit();
                turn_pass();
                wgmma_wait<0>();
                fence_regs(o);
                release_kv(emptyV(stage));
                next_stage<S>(stage, phase);
            } else if (T::kDynamic || n_blocks > 0) {
                mbar_arrive(emptyQ);  // done with Q and the slot (a static tile without keys touches no barrier)
            }
            if constexpr (T::kLocal) {   // the other warpgroup's chunks below this one's window: released
                for (int it = tile_j0; it < wg_j0; ++it) release_chunk();
            }

            IOM_TILE_TIME(4, 0);
            IOM_TILE_TIME(6, n_blocks);
            IOM_TILE_TIME(7, own);
            // -------------------------------------------------------------- epilogue
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                l[r] += shfl_xor(l[r], 1);
                l[r] += shfl_xor(l[r], 2);
            }
            if constexpr (T::kSplit) {   // a tail piece: its rows merged by the tile's last piece, which stores them
                if (ti.slot >= 0 && !merge_pieces<T>(part, count, ti.slot, pieces, o, m, l, cw * 128 + tid)) continue;
            }
            const float inv[2] = {l[0] > 0.f ? 1.f / l[0] : 0.f, l[1] > 0.f ? 1.f / l[1] : 0.f};
            const size_t bh = size_t(ti.b) * H + ti.h;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int row = row0 + 8 * r;
                // dense: O (B, H, N_q, d), L (B, H, N_q); varlen: O (total_q, H, d), L (H, total_q)
                const size_t o_row = T::kVarlen ? (size_t(sq.q0) + row) * H + ti.h : bh * N_q + row;
                const size_t l_at = T::kVarlen ? size_t(ti.h) * total_q + sq.q0 + row : bh * N_q + row;
                // O's row in 16-byte stores: the quad trades its column pairs (quad_transpose) so that lane q
                // writes whole 8-column groups 4j + q (every lane shuffles; rows past n_q store nothing)
                u16* out = O + o_row * T::kHeadDim + 8 * (lane % 4);
#pragma unroll
                for (int j = 0; j < T::kHeadDim / 32; ++j) {
                    u32 v[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        v[i] = pack2<T::kBF16>(o[4 * (4 * j + i) + 2 * r] * inv[r], o[4 * (4 * j + i) + 2 * r + 1] * inv[r]);
                    quad_transpose(v, lane % 4);
                    if (unsigned(row) < unsigned(n_q)) {   // (rows below 0: a short tile's)
                        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(out + 32 * j), "r"(v[0]),
                                     "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
                    }
                }
                if (unsigned(row) < unsigned(n_q)) {   // (rows below 0: a short tile's)
#ifndef IOM_FWD90_TILE_TIMES
                    if (L != nullptr && (lane % 4) == 0)
                        L[l_at] = l[r] > 0.f ? (m[r] + lg2(l[r])) * 0.6931471805599453f : neg_inf();
#endif
                }
            }
#ifdef IOM_FWD90_TILE_TIMES
            if (cw == 0) {
                u32 smid_;
                asm volatile("mov.u32 %0, %%smid;" : "=r"(smid_));
                IOM_TILE_TIME(0, smid_);
                IOM_TILE_TIME(5, 0);
            }
#endif
        }
        if (cw == 0) turn_wait();  // the last warpgroup's final hand-over
    }
    // the other CTA's multicasts into this one and its warps' arrivals on this one's barriers are over
    if constexpr (T::kCluster > 1) cluster_sync();
}

}  // namespace sm90

// Kernel instantiation (the Python side emits this with the config's numbers):
//   extern "C" __global__ void __launch_bounds__(T::kThreads, 1)
//   NAME(const __grid_constant__ TmaDesc tmQ, const __grid_constant__ TmaDesc tmK,
//        const __grid_constant__ TmaDesc tmV, u16* O, float* L, int B, int H, int H_kv, int N_q,
//        int N_k, float scale_log2, int sec, int* counter, const int* order, const int* cu_q,
//        const int* cu_k, int total_q)
//        { sm90::flash_fwd_sm90<T>(tmQ, ..., counter, order, cu_q, cu_k, total_q); }
// (a window's, modifiers' and the plain variant's further arguments: kernels/codegen.py, sm90_instance)
// launched on a 1-D grid of min(#items, #SMs) CTAs (persistent) or #tiles CTAs; counter: an int at
// zero (dynamic schedule: causal, varlen), which the launch leaves at zero (claim_tile), or null; order: the
// fixed walk's tile table (table_tile) or null.
// The plain variant's tail split: whole, pieces (1: none), part and count as merge_pieces says.
