"""The decode rows' floor (``read_floor_decode``): one kernel that reads a group's K and V caches once and
does nothing else, timed beside the attention kernels on the same input sets.

Why: the read roof (a 2 GiB ``torch.sum``) is a bandwidth, and a decode of a small cache is far from any
bandwidth: a launch, the ramp of the first loads and the tail of the last take microseconds whatever the
kernel.  This row says what reading exactly these bytes costs on this GPU in this run, so a decode row is
also read as a fraction of its floor, and a bar below the floor shows as one.

The kernel: 16-byte loads (``ld.global.nc``), four in flight per thread, grid-strided over each cache
(``blockIdx.y`` picks K or V), ``blocks_per_sm`` blocks of 256 threads an SM for each; every block adds the
32-bit words it read into a 64-bit integer and writes it to its slot of a small output.  Integer sums
are exact in any order, so the check is equality with torch's sum of the same words: the kernel read
every byte, once.  CuPy compiles and launches it on torch's current stream (cupy is in the ``gpu`` extra).
"""
from __future__ import annotations

from typing import Any

__all__ = ["SOURCE", "ReadFloor", "measure_hbm_latency"]

THREADS = 256
UNROLL = 4

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(256)
read_floor(const uint4* __restrict__ a, const uint4* __restrict__ b, long long n16, long long* __restrict__ out) {
    const uint4* src = blockIdx.y == 0 ? a : b;
    const long long step = (long long)gridDim.x * blockDim.x * 4;
    long long sum = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x * 4 + threadIdx.x; i < n16; i += step) {
        uint4 x[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {   // four independent loads in flight before any is used
            const long long j = i + (long long)k * blockDim.x;
            x[k] = j < n16 ? __ldg(src + j) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int k = 0; k < 4; ++k)
            sum += (long long)(int)x[k].x + (int)x[k].y + (int)x[k].z + (int)x[k].w;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    __shared__ long long warp_sums[8];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long s = 0;
        for (int w = 0; w < 8; ++w) s += warp_sums[w];
        out[blockIdx.y * gridDim.x + blockIdx.x] = s;
    }
}
"""


class ReadFloor:
    """``fn(s)`` reads ``s.k_cache`` and ``s.v_cache`` (a ``DecodeSet``) once and returns the blocks'
    partial sums (int64); ``expected(s)`` is torch's sum of the same 32-bit words."""

    how = {"kernel": "read-only: 16-byte loads of K and V, integer sum a block (validation/read_floor.py)"}

    def __init__(self, torch, blocks_per_sm: int = 4):
        import cupy

        self.torch, self.cupy = torch, cupy
        self.fn = cupy.RawModule(code=SOURCE, options=("--std=c++17",)).get_function("read_floor")
        self.sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        self.blocks_per_sm = blocks_per_sm
        self.how = dict(self.how, blocks_per_sm=str(blocks_per_sm))

    def _n16(self, s) -> int:
        k, v = s.k_cache, s.v_cache
        nbytes = k.numel() * k.element_size()
        if not (k.is_contiguous() and v.is_contiguous() and v.numel() * v.element_size() == nbytes
                and nbytes % 16 == 0 and k.data_ptr() % 16 == 0 and v.data_ptr() % 16 == 0):
            raise ValueError("the read floor takes two contiguous, 16-byte aligned caches of one size")
        return nbytes // 16

    def __call__(self, s) -> Any:
        n16 = self._n16(s)
        return self.launch(s.k_cache, s.v_cache, n16, max(1, min(self.sms * self.blocks_per_sm,
                                                                  -(-n16 // (THREADS * UNROLL)))))

    def launch(self, a, b, n16: int, grid_x: int) -> Any:
        """Read ``n16`` 16-byte words of each of ``a`` and ``b`` with ``grid_x`` blocks each; the partial sums."""
        out = self.torch.empty(2 * grid_x, device=a.device, dtype=self.torch.int64)
        stream = self.cupy.cuda.ExternalStream(self.torch.cuda.current_stream().cuda_stream)
        args = (self.cupy.uint64(a.data_ptr()), self.cupy.uint64(b.data_ptr()), self.cupy.int64(n16),
                self.cupy.uint64(out.data_ptr()))
        self.fn((grid_x, 2), (THREADS,), args, stream=stream)
        return out

    def expected(self, s) -> int:
        """The sum of every 32-bit word of both caches, a slice at a time (no copy of a cache)."""
        total = 0
        for x in (s.k_cache, s.v_cache):
            words = x.view(-1).view(self.torch.int32)
            for i in range(0, words.numel(), 1 << 28):
                total += int(words[i:i + (1 << 28)].sum(dtype=self.torch.int64))
        return total


def measure_hbm_latency(torch, nbytes: int = 256 << 20, grids: tuple[int, ...] = (2, 4, 8, 16),
                        repeats: int = 5) -> tuple[float, str]:
    """The HBM latency by Little's law: the read floor's kernel over ``nbytes`` with a few blocks (each
    keeps THREADS x UNROLL 16-byte loads in flight, far from what the HBM needs busy), bytes in flight
    over the bandwidth they drew, the median over ``grids`` (blocks a buffer) of each one's median time.
    Returns (seconds, source)."""
    import statistics

    floor = ReadFloor(torch)
    half = torch.randint(-1000, 1000, (2, nbytes // 8), device="cuda", dtype=torch.int32)
    n16 = nbytes // 2 // 16
    latencies = []
    for grid_x in grids:
        floor.launch(half[0], half[1], n16, grid_x)
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            floor.launch(half[0], half[1], n16, grid_x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        in_flight = 2 * grid_x * THREADS * UNROLL * 16
        latencies.append(in_flight * statistics.median(times) / nbytes)
    latency = statistics.median(latencies)
    source = (f"python -m validation: validation/read_floor.py's kernel over {nbytes >> 20} MiB with "
              f"{', '.join(str(2 * g) for g in grids)} blocks of {THREADS} threads, {UNROLL} 16-byte loads in flight "
              f"a thread; bytes in flight / bandwidth = {', '.join(f'{x * 1e9:.0f}' for x in latencies)} ns, "
              f"median {latency * 1e9:.0f} ns")
    return latency, source
