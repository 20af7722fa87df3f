// A 4 x 4 transpose across the lanes of a quad, shared by the mma.sync and the wgmma kernels' epilogues.
//
// An mma accumulator row is held by the 4 lanes of a quad, each with two adjacent columns of every 8-column
// group; stored as they lie, a row takes 4-byte stores.  After the transpose lane q holds the 16
// contiguous bytes of group q (of each 4 groups), so the row goes out in 16-byte stores.
// No CUDA headers are included (NVRTC has no include path): the shuffles are builtins.
#pragma once

namespace iom_lanes {

// Lane q holds a[i] = columns 2q, 2q+1 of 8-column group i (i = 0..3, packed 16-bit pairs); afterwards it
// holds a[p] = columns 2p, 2p+1 of group q, p = 0..3.  Two butterfly rounds of two shuffles: first the pairs
// of lanes (q, q^1), then (q, q^2).  Every lane of the warp must call it.
__device__ __forceinline__ void quad_transpose(unsigned (&a)[4], int q) {
    const bool odd = q & 1, high = q & 2;
    unsigned c[4];
#pragma unroll
    for (int k = 0; k < 2; ++k) {   // round 1: keep the groups of index parity q & 1, from both lanes
        const unsigned own = odd ? a[2 * k + 1] : a[2 * k];
        const unsigned got = __shfl_xor_sync(0xffffffffu, odd ? a[2 * k] : a[2 * k + 1], 1);
        c[2 * k] = odd ? got : own;          // from the lane of even index
        c[2 * k + 1] = odd ? own : got;
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {   // round 2: keep group q's pair from the other two lanes
        const unsigned own = high ? c[2 + s] : c[s];
        const unsigned got = __shfl_xor_sync(0xffffffffu, high ? c[s] : c[2 + s], 2);
        a[s] = high ? got : own;             // lanes 0, 1
        a[2 + s] = high ? own : got;         // lanes 2, 3
    }
}

}  // namespace iom_lanes
