// Cache elements on the device, for every KvElem (kv_layout.h): rows stored into a
// layer (rounded to f16, as f32, or quantized to q8_0 blocks by kv_q8_quantize, the
// rule the CPU cache uses) and the q8_0 scale index. Shared by the cache stores
// (attention.cu), the rope + store tail (head_rope.h) and the q8_0 -> f16 staging.
#pragma once
#include <cstdint>

#include "backend/gpu/ops.h"
#include "backend/gpu/wave.h"
#include "backend/kv_layout.h"

namespace vega::gpu {

// One q8_0 block: src [B] -> B int8 values at vals + o (o a multiple of B: 8-byte
// aligned) and the f16 scale at scales[o / B].
template <int B>
__device__ __forceinline__ void store_q8_block(const float* src, int8_t* vals, uint16_t* scales, int64_t o) {
    static_assert(B % 8 == 0, "blocks of 8, 16 or 32");
    float x[B];
#pragma unroll
    for (int i = 0; i < B; ++i) x[i] = src[i];
    int8_t q[B];
    const float d = kv_q8_quantize(x, B, q);
#pragma unroll
    for (int i = 0; i < B / 8; ++i) {
        uint2 w;
        w.x = uint32_t(uint8_t(q[8 * i])) | uint32_t(uint8_t(q[8 * i + 1])) << 8 | uint32_t(uint8_t(q[8 * i + 2])) << 16 |
              uint32_t(uint8_t(q[8 * i + 3])) << 24;
        w.y = uint32_t(uint8_t(q[8 * i + 4])) | uint32_t(uint8_t(q[8 * i + 5])) << 8 |
              uint32_t(uint8_t(q[8 * i + 6])) << 16 | uint32_t(uint8_t(q[8 * i + 7])) << 24;
        reinterpret_cast<uint2*>(vals + o)[i] = w;
    }
    scales[o / B] = f2h(d);
}

// src [n] (memory every thread of the block can read) -> n elements of a cache plane
// from element offset dst (values `plane`, and `scales` for q8_0: n and dst whole
// blocks of L.q8_block()). NT threads of the block share the row.
template <int NT>
__device__ __forceinline__ void store_kv_row(const float* src, int n, void* plane, uint16_t* scales, const KvLayout& L,
                                             int64_t dst) {
    const int tid = int(threadIdx.x);
    switch (L.elem) {  // (uniform)
        case KvElem::F16:
            for (int d = tid; d < n; d += NT) static_cast<uint16_t*>(plane)[dst + d] = f2h(src[d]);
            return;
        case KvElem::F32:
            for (int d = tid; d < n; d += NT) static_cast<float*>(plane)[dst + d] = src[d];
            return;
        case KvElem::Q8_0: {
            auto* vals = static_cast<int8_t*>(plane);
            const int B = L.q8_block();
            for (int b = tid; b * B < n; b += NT) {
                const int64_t o = dst + int64_t(b) * B;
                if (B == 32) store_q8_block<32>(src + b * B, vals, scales, o);
                else if (B == 16) store_q8_block<16>(src + b * B, vals, scales, o);
                else store_q8_block<8>(src + b * B, vals, scales, o);
            }
            return;
        }
    }
}

}  // namespace vega::gpu
