// Shared device helpers for the iomodel attention kernels (mma.sync path).
//
// Self-contained on purpose: no CUDA or C++ standard headers, so the same text
// compiles under NVRTC (run time, kernels/compile.py) and under nvcc (kernels/reports.py).
// bf16 / fp16 values are moved around as raw 16-bit patterns; every conversion
// and every tensor-core operation is inline PTX (sm_80 and newer).
#pragma once
#include "quad_transpose.cuh"

namespace iom {

// the quad transpose of the epilogues' 16-byte stores (quad_transpose.cuh)
using iom_lanes::quad_transpose;

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// Plain vector types of our own (NVRTC compiles these headers without the CUDA headers).
struct alignas(8) f32x2 { float x, y; };
struct alignas(16) f32x4 { float x, y, z, w; };
struct alignas(16) u32x4 { u32 x, y, z, w; };

// Element tags: the template parameter that selects the input dtype.
struct bf16 { unsigned short bits; };
struct fp16 { unsigned short bits; };

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// tanh(x), approximate (one MUFU.TANH, sm_75 and newer; relative error about 2^-11).
__device__ __forceinline__ float tanh_approx(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 2^x, approximate (one MUFU.EX2); ex2(-inf) == 0.
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <class T> struct Elem;

template <> struct Elem<bf16> {
    // Pack two floats (round to nearest even): lo -> bits 0..15, hi -> bits 16..31.
    static __device__ __forceinline__ u32 pack(float lo, float hi) {
        u32 r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
    // Unpack two values (bits 0..15 -> x, bits 16..31 -> y): a bf16 is the top half of a float.
    static __device__ __forceinline__ f32x2 unpack(u32 w) {
        return {__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u)};
    }
    // D = A * B + D, m16n8k16, fp32 accumulate.
    static __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <> struct Elem<fp16> {
    static __device__ __forceinline__ u32 pack(float lo, float hi) {
        u32 r;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
    static __device__ __forceinline__ f32x2 unpack(u32 w) {
        float lo, hi;
        asm("cvt.f32.f16 %0, %1;" : "=f"(lo) : "h"((unsigned short)(w & 0xffffu)));
        asm("cvt.f32.f16 %0, %1;" : "=f"(hi) : "h"((unsigned short)(w >> 16)));
        return {lo, hi};
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

// Generic -> shared-window address (what ldmatrix / cp.async take).
__device__ __forceinline__ u32 smem_addr(const void* p) {
    u32 r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

// The one dynamic shared-memory array (declared once so that several kernels
// can live in one translation unit).
__device__ __forceinline__ unsigned char* dyn_smem() {
    extern __shared__ __align__(128) unsigned char iom_dyn_smem[];
    return iom_dyn_smem;
}

// 16-byte global -> shared copy; src_bytes == 0 writes 16 zero bytes and reads nothing.
#ifndef IOM_CP_ASYNC_L2_HINT
#define IOM_CP_ASYNC_L2_HINT 0
#endif
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int src_bytes) {
#if IOM_CP_ASYNC_L2_HINT
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
// Wait until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

// XOR swizzle of 16-byte chunks inside a tile whose rows hold CPR chunks
// (row length = CPR * 16 bytes, no padding).  Any 8 consecutive rows read at
// the same logical chunk (one ldmatrix phase) land in 8 distinct 16-byte bank
// groups, i.e. on all 32 banks exactly once.
template <int CPR> __device__ __forceinline__ int swizzle(int row, int chunk) {
    if constexpr (CPR >= 8) return chunk ^ (row & 7);
    else if constexpr (CPR == 4) return chunk ^ ((row >> 1) & 3);
    else if constexpr (CPR == 2) return chunk ^ ((row >> 2) & 1);
    else return chunk;
}

// Copy a ROWS x (CPR*8) tile into a swizzled SMEM tile with THREADS threads, its rows STRIDE >= CPR chunks
// apart (STRIDE > CPR: a row padded to whole swizzle groups, the padding never written nor read).
// COLS >= CPR threads share a row (COLS dividing THREADS: CPR 12 and 24, head dims 96 and 192, take 16 and
// 32, their last threads idle): thread tid copies chunk c = tid % COLS (if c < CPR) of rows r0 + i*RSTEP
// (r0 = tid / COLS, RSTEP = THREADS / COLS).  `src` is this thread's first source element (tile +
// r0*stride + c*8), `step` = RSTEP*stride; rows >= rows_valid are zero-filled (src-size 0) and read from
// `dummy`, a valid address; so are chunks >= chunks_valid (a tail along the contiguous dimension).
template <int ROWS, int CPR, int THREADS, int STRIDE = CPR, int COLS = CPR>
struct TileLoader {
    static_assert(THREADS % COLS == 0 && COLS >= CPR, "threads must cover whole rows");
    static_assert(STRIDE >= CPR && (STRIDE % 8 == 0 || STRIDE == CPR), "rows of whole swizzle groups");
    static constexpr int RSTEP = THREADS / COLS;
    static constexpr int ITERS = (ROWS + RSTEP - 1) / RSTEP;
    int r0;          // first row of this thread
    u32 s_off;       // byte offset of (r0, c) inside a tile (swizzled)
    int c8;          // element offset of the chunk inside a row
    __device__ __forceinline__ TileLoader(int tid) {
        r0 = tid / COLS;
        const int c = tid % COLS;
        c8 = c * 8;
        s_off = (u32)((r0 * STRIDE + swizzle<STRIDE>(r0, c)) * 16);
    }
    template <class T>
    __device__ __forceinline__ void load(u32 s_tile, const T* src, i64 step, int rows_valid,
                                         int chunks_valid, const void* dummy) const {
        if (COLS > CPR && c8 >= CPR * 8) return;   // an idle column
        const bool c_ok = c8 < chunks_valid * 8;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int r = r0 + it * RSTEP;
            if (ROWS % RSTEP == 0 || r < ROWS) {
                const bool ok = c_ok && (r < rows_valid);
                u32 dst;
                if constexpr (RSTEP % 8 == 0) {
                    // the swizzle only looks at r & 7, constant along this thread's rows
                    dst = s_tile + s_off + (u32)(it * RSTEP * STRIDE * 16);
                } else {
                    dst = s_tile + (u32)((r * STRIDE + swizzle<STRIDE>(r, c8 / 8)) * 16);
                }
                cp_async16(dst, ok ? (const void*)src : dummy, ok ? 16 : 0);
            }
            src += step;
        }
    }
};

}  // namespace iom
