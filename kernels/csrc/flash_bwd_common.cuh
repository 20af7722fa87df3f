// flash_bwd_common.cuh -- the FlashAttention backward's row kernels, shared by flash_bwd_sm80 (mma.sync)
// and flash_bwd_sm90 (wgmma):
//   flash_bwd_dot_kernel      D = rowsum(dO * O), L2 = LSE * log2(e) (+inf for a row that sees no key and for
//                             the padding rows), both padded to N_qp = whole query tiles; zeroes the fp32 dQ
//                             accumulator.
//   flash_bwd_convert_kernel  dQ = scale * accumulator in the input dtype; the accumulator holds each query
//                             tile in the order its main kernel's warps hold dQ (a layout class says which).
#pragma once
#include "iom_common.cuh"

namespace iom {

// fp32 atomic add of four neighbours (sm_90 has a vector reduction; older GPUs add one at a time).
// IOM_BWD_SKIP_ATOMICS: a profiling switch only (dQ is then wrong): what the atomic adds cost.
__device__ __forceinline__ void red_add4(float* p, float a, float b, float c, float d) {
#if defined(IOM_BWD_SKIP_ATOMICS)
    if (a == 12345.f && b == 54321.f && c == d) *p = a;   // keeps the dQ product alive
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
#else
    asm volatile("red.global.add.f32 [%0], %1;" :: "l"(p), "f"(a) : "memory");
    asm volatile("red.global.add.f32 [%0], %1;" :: "l"(p + 1), "f"(b) : "memory");
    asm volatile("red.global.add.f32 [%0], %1;" :: "l"(p + 2), "f"(c) : "memory");
    asm volatile("red.global.add.f32 [%0], %1;" :: "l"(p + 3), "f"(d) : "memory");
#endif
}

__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

// ------------------------------------------------------------------------------------------ 1. D, L2
// One 16-byte chunk (8 elements) per thread; a row takes a power of two of threads, TPR, enough for its
// HEAD_DIM / 8 chunks of O and dO and its ACC_DIM / 8 of the dQ accumulator (ACC_DIM: the accumulator's row,
// HEAD_DIM padded to whole 64-column blocks by flash_bwd_sm90 at d = 32 and 96).  Grid: (N_qp / ROWS, H, B).
template <int HEAD_DIM, int ACC_DIM>
__host__ __device__ constexpr int dot_threads_per_row() {
    int t = 1;
    while (t < (HEAD_DIM > ACC_DIM ? HEAD_DIM : ACC_DIM) / 8) t *= 2;
    return t;
}
template <class T, int HEAD_DIM, int ACC_DIM = HEAD_DIM>
__global__ void __launch_bounds__(256)
flash_bwd_dot_kernel(const T* __restrict__ o, const T* __restrict__ dout, const float* __restrict__ lse,
                     float* __restrict__ delta, float* __restrict__ lse2, float* __restrict__ dq_acc,
                     i64 o_sb, i64 o_sh, i64 o_sn, i64 d_sb, i64 d_sh, i64 d_sn,
                     int H, int N_q, int N_qp) {
    constexpr int CPR = HEAD_DIM / 8;
    constexpr int TPR = dot_threads_per_row<HEAD_DIM, ACC_DIM>();
    constexpr int ROWS = 256 / TPR;
    static_assert(HEAD_DIM % 8 == 0 && ACC_DIM % 8 == 0 && TPR <= 32, "rows of whole 16-byte chunks, in a warp");
    const int c = threadIdx.x % TPR;
    const int row = blockIdx.x * ROWS + threadIdx.x / TPR;
    const int h = blockIdx.y, b = blockIdx.z;
    const i64 bh = (i64)b * H + h;
    float acc = 0.f;
    if (row < N_q && c < CPR) {
        const u32x4 ov = *reinterpret_cast<const u32x4*>(o + b * o_sb + h * o_sh + (i64)row * o_sn + c * 8);
        const u32x4 dv = *reinterpret_cast<const u32x4*>(dout + b * d_sb + h * d_sh + (i64)row * d_sn + c * 8);
        const u32 ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            f32x2 a = Elem<T>::unpack(ow[i]), g = Elem<T>::unpack(dw[i]);
            acc = fmaf(a.x, g.x, fmaf(a.y, g.y, acc));
        }
    }
#pragma unroll
    for (int off = TPR / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (row < N_qp) {
        if (c == 0) {
            const float l = row < N_q ? lse[bh * N_q + row] : neg_inf();
            delta[bh * N_qp + row] = acc;
            // a row that sees no key (L = -inf) and a padding row get P = exp2(s - inf) = 0
            lse2[bh * N_qp + row] = (l == neg_inf()) ? pos_inf() : l * 1.4426950408889634f;
        }
        if (dq_acc != nullptr && c < ACC_DIM / 8) {
            f32x4* z = reinterpret_cast<f32x4*>(dq_acc + (bh * N_qp + row) * ACC_DIM + c * 8);
            z[0] = f32x4{0.f, 0.f, 0.f, 0.f};
            z[1] = f32x4{0.f, 0.f, 0.f, 0.f};
        }
    }
}

// ------------------------------------------------------------------------------------------ 3a. dQ out
// dQ = scale * accumulator (in layout L's order: DqLayout for flash_bwd_sm80, sm90::DqSlices for
// flash_bwd_sm90), rows < N_q, columns < D_OUT; a thread per quad (two rows, two columns).  L gives QUADS
// (quads a lane holds) and where(warp, quad, lane, row, col), the place of a quad's first value in the
// tile.  HEAD_DIM: the accumulator's row (D_OUT padded to whole 64-column blocks by flash_bwd_sm90 at
// d = 32 and 96; the padding's columns hold zeros and are not stored).  Grid: (N_qp * HEAD_DIM / 4 / 256,
// H, B).
template <class T, int HEAD_DIM, int BLOCK_Q, class L, int D_OUT = HEAD_DIM>
__global__ void __launch_bounds__(256)
flash_bwd_convert_kernel(const float* __restrict__ dq_acc, T* __restrict__ dq, i64 q_sb, i64 q_sh, i64 q_sn,
                         int H, int N_q, int N_qp, float scale) {
    constexpr int TILE_QUADS = BLOCK_Q * HEAD_DIM / 4;
    const i64 id = (i64)blockIdx.x * 256 + threadIdx.x;   // quad index in this (b, h)
    const int h = blockIdx.y, b = blockIdx.z;
    if (id >= (i64)N_qp * HEAD_DIM / 4) return;
    const int tile = (int)(id / TILE_QUADS), in_tile = (int)(id % TILE_QUADS);
    const int lane = in_tile % 32, rest = in_tile / 32;
    int row, col;
    L::where(rest / L::QUADS, rest % L::QUADS, lane, row, col);
    row += tile * BLOCK_Q;
    const f32x4 x = *reinterpret_cast<const f32x4*>(dq_acc + ((i64)b * H + h) * N_qp * HEAD_DIM + id * 4);
    if (D_OUT < HEAD_DIM && col >= D_OUT) return;
    T* dst = dq + b * q_sb + h * q_sh + col;
    if (row < N_q) *reinterpret_cast<u32*>(dst + (i64)row * q_sn) = Elem<T>::pack(x.x * scale, x.y * scale);
    if (row + 8 < N_q) *reinterpret_cast<u32*>(dst + (i64)(row + 8) * q_sn) = Elem<T>::pack(x.z * scale, x.w * scale);
}

}  // namespace iom
