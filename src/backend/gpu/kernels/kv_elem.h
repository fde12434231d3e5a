// Cache elements on the device, for every KvElem (kv_layout.h): rows stored into a
// layer (rounded to f16, as f32, or quantized to q8_0 blocks by kv_q8_quantize, the
// rule the CPU cache uses) and the q8_0 scale index. Shared by the cache stores
// (attention.cu), the rope + store tail (head_rope.h) and the q8_0 -> f16 staging.
#pragma once
#include <cstdint>

#include "backend/gpu/ops.h"
#include "backend/gpu/wave.h"
#include "backend/kv_layout.h"

// Expands F(E, QB) for each cache element type and q8_0 block size of layer c (a
// kernel template per pair: QB only matters for q8_0, 32 elsewhere).
#define VEGA_KV_DISPATCH(c, F)                                   \
    do {                                                         \
        switch ((c).elem) {                                      \
            case KvElem::F16: F(KvElem::F16, 32); break;         \
            case KvElem::F32: F(KvElem::F32, 32); break;         \
            case KvElem::Q8_0:                                   \
                switch ((c).layout().q8_block()) {               \
                    case 32: F(KvElem::Q8_0, 32); break;         \
                    case 16: F(KvElem::Q8_0, 16); break;         \
                    default: F(KvElem::Q8_0, 8); break;          \
                }                                                \
                break;                                           \
        }                                                        \
    } while (0)

namespace vega::gpu {

// q8_0: the (K, V) scale pair of element o (blocks of 1 << q8_shift elements), one
// 4-byte load from the K side of the scale plane (KvLayout::scale_index, with a shift).
__device__ __forceinline__ uint32_t kv_scales(const uint16_t* k_scale, int q8_shift, int64_t o) {
    return *reinterpret_cast<const uint32_t*>(k_scale + 2 * (o >> q8_shift));
}

// One q8_0 block: src [B] -> B int8 values at vals + o (o a multiple of B: 8-byte
// aligned) and the f16 scale at scales[2 * (o / B)] (KvLayout::scale_index).
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
    scales[2 * (o / B)] = f2h(d);
}

// src [n] (memory every thread of the block can read) -> n elements of a cache plane
// of element type E from element offset dst (values `plane`, and `scales` for q8_0:
// n and dst whole blocks of QB = L.q8_block()). NT threads of the block share the row.
// (E and QB at compile time: a kernel holds only its own type's code; gfx906's SGPRs.)
template <int NT, KvElem E, int QB>
__device__ __forceinline__ void store_kv_row(const float* src, int n, void* plane, uint16_t* scales, int64_t dst) {
    const int tid = int(threadIdx.x);
    if constexpr (E == KvElem::F16) {
        for (int d = tid; d < n; d += NT) static_cast<uint16_t*>(plane)[dst + d] = f2h(src[d]);
    } else if constexpr (E == KvElem::F32) {
        for (int d = tid; d < n; d += NT) static_cast<float*>(plane)[dst + d] = src[d];
    } else {
        for (int b = tid; b * QB < n; b += NT)
            store_q8_block<QB>(src + b * QB, static_cast<int8_t*>(plane), scales, dst + int64_t(b) * QB);
    }
}

}  // namespace vega::gpu
