// Loads from a float-type weight row (F32, F16, BF16) and the rounding of an f32
// activation to the weight's type: shared by every kernel with float weights
// (matvec, the expert matvec), so that they and the CPU round alike.
#pragma once
#include "backend/gpu/wave.h"
#include "quant/types.h"

namespace vega::gpu {

// 8 consecutive weights of a float-type row starting at element i (16-byte aligned).
template <GgmlType T>
__device__ __forceinline__ void load8(const uint8_t* row, int64_t i, float* w) {
    if constexpr (T == GgmlType::F32) {
        const float4* p = reinterpret_cast<const float4*>(row) + i / 4;
        const float4 x = p[0], z = p[1];
        w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w, w[4] = z.x, w[5] = z.y, w[6] = z.z, w[7] = z.w;
    } else {
        const uint4 v = reinterpret_cast<const uint4*>(row)[i / 8];
        const uint32_t p[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if constexpr (T == GgmlType::F16)
                w[2 * k] = h2f(uint16_t(p[k] & 0xFFFF)), w[2 * k + 1] = h2f(uint16_t(p[k] >> 16));
            else
                w[2 * k] = bf2f(uint16_t(p[k] & 0xFFFF)), w[2 * k + 1] = bf2f(uint16_t(p[k] >> 16));
        }
    }
}
template <GgmlType T>
__device__ __forceinline__ float load1(const uint8_t* row, int64_t i) {
    if constexpr (T == GgmlType::F32) return reinterpret_cast<const float*>(row)[i];
    else if constexpr (T == GgmlType::F16) return h2f(reinterpret_cast<const uint16_t*>(row)[i]);
    else return bf2f(reinterpret_cast<const uint16_t*>(row)[i]);
}

// x rounded to the weight's type (f16 / bf16, round to nearest even), as the CPU
// backend does before its float dot products, so both backends agree.
template <GgmlType T>
__device__ __forceinline__ float round_to(float x) {
    if constexpr (T == GgmlType::F16) return h2f(f2h(x));
    if constexpr (T == GgmlType::BF16) {
        const uint32_t u = __float_as_uint(x);
        if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN stays NaN
        return bf2f(uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
    }
    return x;
}

}  // namespace vega::gpu
