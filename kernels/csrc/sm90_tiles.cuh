// sm90_tiles.cuh -- warpgroup matrix products over whole SMEM tiles (wgmma m64nNk16), shared by the Hopper
// forward and backward kernels.  Tiles of 16-bit values are stored as 64-column blocks of rows x 128
// bytes (TMA SWIZZLE_128B boxes; 1024-byte swizzle atoms of 8 rows), or, where ROW = 64 (the forward at
// d = 32), as 32-column rows of 64 bytes (SWIZZLE_64B; 512-byte atoms), so:
//   * K-major operand (the contracted axis along the rows): a k16 step advances 32 bytes in the row, a new
//     column block every ROW / 32 steps; SBO = 8 rows.
//   * MN-major operand (the contracted axis down the rows): a k16 step advances 16 rows; LBO = the
//     distance between column blocks (rows x ROW bytes), SBO = 8 rows.
#pragma once
#include "sm90_common.cuh"
#include "sm90_wgmma.cuh"

namespace sm90 {

// SM90_DESC_EACH_STEP (A/B runs only): every step's descriptor built whole (make_desc_sw128), as before 2026-11-28.
#ifdef SM90_DESC_EACH_STEP
template <u32 SBO_BYTES, u32 ROW = 128>
__device__ __forceinline__ u64 desc_step(u32 base, u32 lbo_bytes, u32 offset_bytes) {
    static_assert(ROW == 128, "the old form builds 128-byte rows only");
    return make_desc_sw128(base + offset_bytes, lbo_bytes, SBO_BYTES);
}
#else
template <u32 SBO_BYTES, u32 ROW = 128>
__device__ __forceinline__ u64 desc_step(u32 lo, u32, u32 offset_bytes) {
    return desc_swizzled_at<SBO_BYTES, ROW>(lo, offset_bytes);
}
#endif
// a tile's descriptor base for desc_step: its address, or its descriptor's low word.  The callers take it once,
// before their step loop: built inside it (desc_lo_sw128(base) + offset >> 4 at each step), nvcc folded the add
// back into every step's mask and shift, the four instructions a step this saves.
__device__ __forceinline__ u32 desc_base(u32 smem_addr, u32 lbo_bytes) {
#ifdef SM90_DESC_EACH_STEP
    return smem_addr + 0 * lbo_bytes;
#else
    return desc_lo_sw128(smem_addr, lbo_bytes);
#endif
}

// D (64 x N) = A B^T over K: A the 64 rows at a_base of a K-major tile of A_ROWS rows, B the N rows at
// b_base of a K-major tile of B_ROWS rows, rows of ROW bytes.  Overwrites D (scale_d 0 on the first step).
template <int N, int K, int A_ROWS, int B_ROWS, bool BF16, u32 ROW = 128>
__device__ __forceinline__ void wgmma_tile_ss(float (&d)[N / 2], u32 a_base, u32 b_base) {
    constexpr int kSteps = ROW / 32;   // k16 steps in a row
    const u32 a_lo = desc_base(a_base, 16), b_lo = desc_base(b_base, 16);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        const u64 da = desc_step<8 * ROW, ROW>(a_lo, 16, (kk / kSteps) * (A_ROWS * ROW) + (kk % kSteps) * 32);
        const u64 db = desc_step<8 * ROW, ROW>(b_lo, 16, (kk / kSteps) * (B_ROWS * ROW) + (kk % kSteps) * 32);
        wgmma_ss<N, BF16>(d, da, db, kk > 0 ? 1 : 0);
    }
}

// D (64 x N) = A B^T over K as wgmma_tile_ss, but A from registers (load_a_frags): the forward's S = Q K^T with Q
// held through the tile (SM90_Q_REGS_MAX), so the S product reads only K from SMEM.
template <int N, int K, int B_ROWS, bool BF16, u32 ROW = 128>
__device__ __forceinline__ void wgmma_tile_rsk(float (&d)[N / 2], const u32 (&a)[K / 4], u32 b_base) {
    constexpr int kSteps = ROW / 32;   // k16 steps in a row
    const u32 b_lo = desc_base(b_base, 16);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        const u64 db = desc_step<8 * ROW, ROW>(b_lo, 16, (kk / kSteps) * (B_ROWS * ROW) + (kk % kSteps) * 32);
        wgmma_rsk<N, BF16>(d, a[4 * kk + 0], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3], db, kk > 0 ? 1 : 0);
    }
}

// wgmma_tile_rsk's A: the 64 rows at a_base of a K-major tile of A_ROWS rows (ROW-byte swizzled rows, the swizzle
// atom-aligned), each warp its 16 rows in the accumulator's pair layout, by one ldmatrix x4 a k16 step (lanes 0-15
// address rows 0-15 at the step's first 8 columns, lanes 16-31 at its last 8).  The swizzle XORs address bits 4..6
// (4..5 for 64-byte rows) with bits 7..9 (7..8), as TMA wrote them.
template <int K, int A_ROWS, u32 ROW = 128>
__device__ __forceinline__ void load_a_frags(u32 (&a)[K / 4], u32 a_base, int warp, int lane) {
    constexpr u32 kCols = ROW / 2;                  // 16-bit values in a row of a column block
    constexpr u32 kMask = ROW == 128 ? 7u : 3u;
    const u32 row = u32(warp * 16 + lane % 16);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        const u32 col = u32(kk * 16 + (lane / 16) * 8);
        const u32 lin = a_base + (col / kCols) * (A_ROWS * ROW) + row * ROW + (col % kCols) * 2;
        const u32 addr = lin ^ (((lin >> 7) & kMask) << 4);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(a[4 * kk + 0]), "=r"(a[4 * kk + 1]), "=r"(a[4 * kk + 2]), "=r"(a[4 * kk + 3])
                     : "r"(addr)
                     : "memory");
    }
}

// D (64 x N) += A B over K: A from registers (the accumulator layout packed to 16-bit pairs, 4 x 32 bits a
// k16 step), B an MN-major tile of K rows x N columns at b_base, rows of ROW bytes.
template <int N, int K, bool BF16, u32 ROW = 128>
__device__ __forceinline__ void wgmma_tile_rs(float (&d)[N / 2], const u32 (&a)[K / 4], u32 b_base) {
    const u32 b_lo = desc_base(b_base, K * ROW);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        const u64 db = desc_step<8 * ROW, ROW>(b_lo, K * ROW, kk * 16 * ROW);
        wgmma_rs<N, BF16>(d, a[4 * kk + 0], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3], db, 1);
    }
}

// D (64 x N) = A B over K, both from SMEM and MN-major (the contracted axis down the rows of both): A the
// 64 columns at a_base of a tile of K rows, B the N columns at b_base of a tile of K rows.  Overwrites D.
template <int N, int K, bool BF16>
__device__ __forceinline__ void wgmma_tile_sst(float (&d)[N / 2], u32 a_base, u32 b_base) {
    const u32 a_lo = desc_base(a_base, K * 128), b_lo = desc_base(b_base, K * 128);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        const u64 da = desc_step<1024>(a_lo, K * 128, kk * 16 * 128);
        const u64 db = desc_step<1024>(b_lo, K * 128, kk * 16 * 128);
        wgmma_sst<N, BF16>(d, da, db, kk > 0 ? 1 : 0);
    }
}

}  // namespace sm90
