// N consecutive 32-bit words into registers with the widest loads their count
// allows: 16-byte loads for multiples of 4, one 8-byte load for 2, else 4-byte
// loads. p must be aligned to the load width (16 bytes for N % 4 == 0).
// Device code: the tensor-core matmul's scale words, attention's K / V chunks.
#pragma once
#include <cstdint>

#include "backend/gpu/vendor.h"

namespace vega::gpu {

template <int N>
__device__ __forceinline__ void load_words(const uint32_t* __restrict__ p, uint32_t (&w)[N]) {
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
            const uint4 v = reinterpret_cast<const uint4*>(p)[i];
            w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
        }
    } else if constexpr (N == 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        w[0] = v.x, w[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) w[i] = p[i];
    }
}

}  // namespace vega::gpu
