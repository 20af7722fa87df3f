"""The CuPy microbenchmarks of the ceilings: chains of one instruction kind (per-clock unit rates) and
an L2 read kernel (the L2 bandwidth).  cupy is passed in by the caller (GPU side only)."""

from __future__ import annotations

import statistics

__all__ = ["MICROBENCH_SRC", "L2_READ_SRC", "UNIT_FIELDS", "BLOCKS_PER_SM", "THREADS", "run_microbench",
           "L2Measure", "l2_buffer_bytes", "measure_l2"]

MICROBENCH_SRC = r"""
#define CHAINS 8
#define UNROLL 16

extern "C" __global__ void __launch_bounds__(256) ex2_chain(float* __restrict__ out, int iters) {
    float x[CHAINS];
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) x[j] = -1.0f - 1e-3f * (float)(threadIdx.x + j);
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            #pragma unroll
            for (int j = 0; j < CHAINS; ++j) {
                asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[j]));
            }
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) s += x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(256) fma_chain(float* __restrict__ out, int iters) {
    float x[CHAINS];
    const float a = 0.999f, b = 1.0e-3f;
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) x[j] = 1.0f + 1e-3f * (float)(threadIdx.x + j);
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            #pragma unroll
            for (int j = 0; j < CHAINS; ++j) {
                asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x[j]) : "f"(a), "f"(b));
            }
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) s += x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

#define MMA_CHAINS 4
#define MMA_UNROLL 4

extern "C" __global__ void __launch_bounds__(256) mma_chain(float* __restrict__ out, int iters) {
    // bf16 1.0 is 0x3f80; two per 32-bit register
    const unsigned one2 = 0x3f803f80u;
    unsigned a0 = one2, a1 = one2 ^ (threadIdx.x & 1u), a2 = one2, a3 = one2;
    unsigned b0 = one2, b1 = one2 ^ ((threadIdx.x >> 1) & 1u);
    float c[MMA_CHAINS][4];
    #pragma unroll
    for (int j = 0; j < MMA_CHAINS; ++j) {
        #pragma unroll
        for (int r = 0; r < 4; ++r) c[j][r] = 0.0f;
    }
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int u = 0; u < MMA_UNROLL; ++u) {
            #pragma unroll
            for (int j = 0; j < MMA_CHAINS; ++j) {
                asm volatile(
                    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                    : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            }
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < MMA_CHAINS; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

# operations each thread (or warp, for mma) issues per loop iteration
_PER_ITER = {
    "ex2_chain": 8 * 16,            # ex2 per thread
    "fma_chain": 8 * 16,            # FMA per thread
    "mma_chain": 4 * 4 * 2 * 16 * 8 * 16,  # FLOPs per warp (16 mma.sync of 4096 FLOPs)
}
THREADS = 256
BLOCKS_PER_SM = 4


def run_microbench(cupy, module, name: str, sm_count: int, target_s: float = 0.25, repeats: int = 3) -> float:
    """Operations per second of one chain kernel (median of ``repeats`` launches of about ``target_s``)."""
    kernel = module.get_function(name)
    blocks = sm_count * BLOCKS_PER_SM
    out = cupy.empty(blocks * THREADS, dtype=cupy.float32)

    def run(iters: int) -> float:
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        kernel((blocks,), (THREADS,), (out, cupy.int32(iters)))
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1e3

    run(16)  # load the module
    iters = 64
    t = run(iters)
    while t < 0.02 and iters < (1 << 26):
        iters *= 4
        t = run(iters)
    iters = max(1, int(iters * target_s / max(t, 1e-9)))
    times = [run(iters) for _ in range(repeats)]
    t = statistics.median(times)
    issuers = THREADS // 32 if name == "mma_chain" else THREADS  # _PER_ITER counts per warp for mma
    return blocks * issuers * iters * _PER_ITER[name] / t


# per-clock unit rates (CuPy): field -> (kernel, instruction, unit counted)
UNIT_FIELDS = {
    "exp2_per_clk_per_sm": ("ex2_chain", "ex2.approx.ftz.f32", "op"),
    "fp32_fma_per_clk_per_sm": ("fma_chain", "fma.rn.f32", "FMA"),
    "mma_sync_flops_per_clk_per_sm": ("mma_chain", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "FLOP"),
}



# --------------------------------------------------------------------------- L2 bandwidth

L2_READ_SRC = r"""
// Every thread reads 16-byte words of a buffer resident in L2 (ld.global.cg: cached in L2, not in L1),
// grid-stride over `total` words, word i at i & mask: the whole buffer is read total / (mask + 1) times,
// spread over every SM.  The 32-bit sums of the words read are written out, so the loads stay and the
// caller can check that each word was read exactly that many times.
extern "C" __global__ void __launch_bounds__(512) l2_read(const uint4* __restrict__ buf, unsigned long long mask,
                                                          unsigned long long total, unsigned* __restrict__ out) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned s0 = 0u, s1 = 0u, s2 = 0u, s3 = 0u;
    for (; i + 3 * stride < total; i += 4 * stride) {
        const uint4 a = __ldcg(buf + (i & mask));
        const uint4 b = __ldcg(buf + ((i + stride) & mask));
        const uint4 c = __ldcg(buf + ((i + 2 * stride) & mask));
        const uint4 d = __ldcg(buf + ((i + 3 * stride) & mask));
        s0 += a.x + a.y + a.z + a.w;
        s1 += b.x + b.y + b.z + b.w;
        s2 += c.x + c.y + c.z + c.w;
        s3 += d.x + d.y + d.z + d.w;
    }
    for (; i < total; i += stride) {
        const uint4 a = __ldcg(buf + (i & mask));
        s0 += a.x + a.y + a.z + a.w;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = s0 + s1 + s2 + s3;
}
"""
L2_THREADS = 512
L2_BLOCKS_PER_SM = 4
L2_MAX_BUFFER = 8 << 20


class L2Measure:
    """An L2 bandwidth measurement: bytes read per second and how it was made."""

    def __init__(self, bandwidth: float, buffer_bytes: int, passes: int, blocks: int, repeats: int):
        self.bandwidth, self.buffer_bytes, self.passes = bandwidth, buffer_bytes, passes
        self.blocks, self.repeats = blocks, repeats

    def source(self) -> str:
        return (f"python -m validation: CuPy kernel l2_read, {self.blocks} blocks x {L2_THREADS} threads reading "
                f"16-byte words with ld.global.cg (L2, not L1) from a {self.buffer_bytes >> 20} MiB random buffer "
                f"(under a quarter of L2, made resident by warm-up launches), {self.passes} passes over it per "
                f"launch spread over all SMs, sums checked; median of {self.repeats} CUDA-event timings, "
                "bytes read per second")


def l2_buffer_bytes(l2_bytes: int) -> int:
    """The buffer the L2 kernel re-reads: the largest power of two up to a quarter of L2, at most 8 MiB."""
    size = 1 << 20
    while size * 2 <= min(L2_MAX_BUFFER, l2_bytes // 4):
        size *= 2
    return size


def _check_l2_sums(cupy, buf, out, passes: int) -> None:
    """Every word of ``buf`` was read exactly ``passes`` times: the sums agree modulo 2^32."""
    want = (int(buf.astype(cupy.uint64).sum()) * passes) % (1 << 32)
    got = int(out.astype(cupy.uint64).sum()) % (1 << 32)
    if want != got:
        raise RuntimeError(f"l2_read: sum of words read {got} != {passes} x sum of the buffer {want} (mod 2^32)")


def measure_l2(cupy, sm_count: int, l2_bytes: int, *, target_s: float = 0.01, repeats: int = 10,
               buffer_bytes: int | None = None) -> L2Measure:
    """Bytes per second read from an L2-resident buffer by every SM: checked once, then the median of
    ``repeats`` CUDA-event timings of launches of about ``target_s`` after warm-up.  ``buffer_bytes``
    (a power of two, at least 16) replaces the size picked from ``l2_bytes``, e.g. to sweep past L2."""
    nbytes = buffer_bytes or l2_buffer_bytes(l2_bytes)
    if nbytes < 16 or nbytes & (nbytes - 1):
        raise ValueError(f"buffer_bytes must be a power of two of at least 16 (got {nbytes})")
    kernel = cupy.RawModule(code=L2_READ_SRC, options=("--std=c++17",)).get_function("l2_read")
    words = nbytes // 16
    buf = cupy.random.randint(0, 1 << 31, size=nbytes // 4, dtype=cupy.int64).astype(cupy.uint32)
    blocks = sm_count * L2_BLOCKS_PER_SM
    out = cupy.empty(blocks * L2_THREADS, dtype=cupy.uint32)

    def run(passes: int) -> float:
        out.fill(0xFFFFFFFF)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        kernel((blocks,), (L2_THREADS,), (buf, cupy.uint64(words - 1), cupy.uint64(words * passes), out))
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1e3

    passes = 16
    run(passes)
    _check_l2_sums(cupy, buf, out, passes)
    t = run(passes)
    while t < target_s / 4 and passes < (1 << 24):
        passes *= 4
        t = run(passes)
    passes = max(1, int(passes * target_s / max(t, 1e-9)))
    run(passes)  # warm-up at the final size
    _check_l2_sums(cupy, buf, out, passes)
    t = statistics.median(run(passes) for _ in range(repeats))
    return L2Measure(nbytes * passes / t, nbytes, passes, blocks, repeats)
