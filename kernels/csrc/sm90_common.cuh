// sm90_common.cuh -- raw-PTX helpers for the Hopper (sm_90a) FlashAttention forward kernel.
//
// No CUDA headers are included on purpose: the same text compiles with NVRTC (no include path
// to the toolkit) and with nvcc.  Everything here is a thin wrapper around one PTX instruction:
//   * mbarrier (init / arrive / arrive.expect_tx / try_wait.parity)
//   * TMA bulk tensor loads (cp.async.bulk.tensor.4d ... mbarrier::complete_tx::bytes)
//   * wgmma fences / commit / wait and the shared-memory matrix descriptor
//   * setmaxnreg, ex2.approx, bf16x2 / f16x2 packing.
#pragma once
#include "quad_transpose.cuh"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

// 128-byte CUtensorMap, passed by value as `const __grid_constant__ TmaDesc`.
struct __align__(64) TmaDesc {
    u64 opaque[16];
};

namespace sm90 {

__device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ----------------------------------------------------------------------------------- mbarrier
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(u32 bar, u32 parity) {
    u32 ok;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}
// Wait until the phase with parity `parity` of barrier `bar` has completed.
// With SM90_WATCHDOG defined, a wait longer than 2^34 cycles (~9 s) traps: a hang becomes an error.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
#ifdef SM90_WATCHDOG
    long long t0;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0));
    while (!mbar_try_wait(bar, parity)) {
        long long t1;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1));
        if (t1 - t0 > (1ll << 34)) asm volatile("trap;");
    }
#else
    while (!mbar_try_wait(bar, parity)) {
    }
#endif
}

// ----------------------------------------------------------------------------------- clusters
// (the plain forward's pair of CTAs that share K and V, FwdTraits::kCluster)
__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
// Every thread of every CTA of the cluster: its shared-memory writes and barrier inits before, the others' after.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
// Arrive on the barrier at the same offset in CTA `rank` of the cluster.  At the instruction's default scope
// (.release.cta), as CUTLASS's ClusterBarrier arrives: the pair's stages wait on remote arrivals, and with a
// cluster-scope release here and a cluster-scope acquire on the producer's polls the pair ran 15 to 27% slower
// than the plain kernel on the H200, with them at the default scope level with it
// (validation/results/profile-sm90-cluster-scope-h200-2026-11-29/).
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 rank) {
    asm volatile(
        "{\n\t.reg .b32 remote;\n\t"
        "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(bar), "r"(rank)
        : "memory");
}

// ----------------------------------------------------------------------------------- TMA
__device__ __forceinline__ void tma_prefetch_desc(const TmaDesc* desc) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(desc)) : "memory");
}
// 4-D tiled bulk tensor load global -> shared, completion signalled on mbarrier `bar` (tx bytes).
__device__ __forceinline__ void tma_load_4d(u32 dst, const TmaDesc* desc, u32 bar, int c0, int c1,
                                            int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
        "l"(reinterpret_cast<u64>(desc)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
}

// tma_load_4d into the same offset of the shared memory of every CTA in `mask` (bit r: cluster rank r), each CTA's
// barrier at offset `bar` counting the bytes that land in it.
__device__ __forceinline__ void tma_load_4d_multicast(u32 dst, const TmaDesc* desc, u32 bar, int c0, int c1, int c2,
                                                      int c3, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(dst),
        "l"(reinterpret_cast<u64>(desc)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(mask)
        : "memory");
}

// ----------------------------------------------------------------------------------- wgmma
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pin registers: the compiler may not move reads/writes of `r` across this point.
// Named barriers (ids 1..15; 0 is __syncthreads): `sync` waits for `count` threads (itself
// included), `arrive` only counts.  Used to hand a turn from one warpgroup to another.
__device__ __forceinline__ void named_bar_sync(u32 id, u32 count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(u32 id, u32 count) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// 16-byte fp32 stores and loads of partial results that other CTAs read (the tail splits' slots)
__device__ __forceinline__ void st_global_v4(float* p, float a, float b, float c, float d) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(reinterpret_cast<u64>(p)), "f"(a), "f"(b), "f"(c),
                 "f"(d) : "memory");
}
// Read at the L2 (another SM's writes: this SM's L1 may hold nothing of them, but never trust it).
__device__ __forceinline__ float4 ld_global_cg_v4(const float* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(reinterpret_cast<u64>(p)) : "memory");
    return v;
}

__device__ __forceinline__ void reg_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void reg_fence(u32& r) { asm volatile("" : "+r"(r)::"memory"); }

// Shared-memory matrix descriptor, 128-byte swizzle (layout type 1 in bits 62-63).
//   bits  0-13: start address >> 4      bits 16-29: leading byte offset >> 4
//   bits 32-45: stride byte offset >> 4 bits 49-51: base offset (0: atoms are 1024-B aligned)
__device__ __forceinline__ u64 make_desc_sw128(u32 smem_addr, u32 lbo_bytes, u32 sbo_bytes) {
    u64 d = 0;
    d |= static_cast<u64>((smem_addr & 0x3FFFF) >> 4);
    d |= static_cast<u64>((lbo_bytes >> 4) & 0x3FFF) << 16;
    d |= static_cast<u64>((sbo_bytes >> 4) & 0x3FFF) << 32;
    d |= 1ull << 62;
    return d;
}

// The same descriptor in its two 32-bit words, for a walk over one tile: the low word (start address >> 4 and
// the leading byte offset) of the tile's base once, each step's offset added to it (offset >> 4: the tile stays
// inside shared memory's 256 KiB window, so the 14-bit address field cannot carry), the high word a constant.
// make_desc_sw128 at every step cost four uniform instructions a descriptor (mask, shift, or, add), 16
// descriptors a chunk at d = 64.
__device__ __forceinline__ u32 desc_lo_sw128(u32 smem_addr, u32 lbo_bytes) {
    return ((smem_addr & 0x3FFFF) >> 4) | (((lbo_bytes >> 4) & 0x3FFF) << 16);
}
// The high word: the stride between 8-row groups (bits 32-45) and the swizzle mode (bits 62-63) of a tile of ROW-byte
// swizzled rows: 128 (SWIZZLE_128B, mode 1) or 64 (SWIZZLE_64B, mode 2).
template <u32 SBO_BYTES, u32 ROW>
__device__ __forceinline__ u64 desc_swizzled_at(u32 lo, u32 offset_bytes) {
    static_assert(ROW == 128 || ROW == 64, "a swizzled row is 128 or 64 bytes");
    constexpr u32 hi = ((SBO_BYTES >> 4) & 0x3FFF) | ((ROW == 128 ? 1u : 2u) << 30);
    return (static_cast<u64>(hi) << 32) | (lo + (offset_bytes >> 4));
}

// ----------------------------------------------------------------------------------- misc
template <u32 N>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <u32 N>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
// tanh(x), approximate (one MUFU.TANH; relative error about 2^-11): the softcap.
__device__ __forceinline__ float tanh_approx(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float lg2(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
// Pack two floats into a 16-bit pair: `lo` in bits 0-15, `hi` in bits 16-31.
template <bool BF16>
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
    if constexpr (BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

// ----------------------------------------------------------------------------------- kernel plumbing
// Keep the compiler from moving reads / writes of a whole register array across this point (after a
// wgmma wait: the accumulators and A operands an asynchronous wgmma used).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) reg_fence(r[i]);
}
template <int N>
__device__ __forceinline__ void fence_regs(u32 (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) reg_fence(r[i]);
}

// The next slot of an S-deep ring; the barrier phase flips each time the ring wraps.
template <int S>
__device__ __forceinline__ void next_stage(int& stage, u32& phase) {
    if (++stage == S) {
        stage = 0;
        phase ^= 1;
    }
}

// Lane 0's value for the whole warp.  ptxas then treats it as warp-uniform, so loop bounds, the ring
// stage and the SMEM descriptors derived from it stay in uniform registers: the wgmma descriptors
// need no per-chunk R2UR moves from per-thread registers.  Used on values derived from the thread
// index only; broadcasting the slot's n_blocks or the ring stage itself added R2URs instead (SASS).
__device__ __forceinline__ int warp_uniform(int x) { return __shfl_sync(0xffffffffu, x, 0); }

// Unpack a 16-bit pair (bits 0-15 -> x, bits 16-31 -> y) to floats.
template <bool BF16>
__device__ __forceinline__ float2 unpack2(u32 v) {
    if constexpr (BF16) {
        return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
    } else {
        float2 r;
        asm("{\n\t.reg .f16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\tcvt.f32.f16 %0, lo;\n\tcvt.f32.f16 %1, hi;\n\t}"
            : "=f"(r.x), "=f"(r.y) : "r"(v));
        return r;
    }
}


// the quad transpose of the epilogues' 16-byte stores (quad_transpose.cuh)
using iom_lanes::quad_transpose;

}  // namespace sm90
