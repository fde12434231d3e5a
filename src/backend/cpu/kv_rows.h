// Rows of the CPU KV cache in and out of f32, for every cache element type
// (kv_layout.h: f32, f16, or q8_0 values with one f16 scale per block).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/kv_layout.h"
#include "core/half.h"

namespace vega::cpu {

// The K and V planes of a cache (all layers: layer l's element o at l *
// layout.layer_elems() + o); for q8_0 also the scale plane of (K, V) pairs, seen from
// K's (k_scale) and from V's (v_scale = k_scale + 1) side: element o's at scale_index(o).
struct KvView {
    uint8_t* k = nullptr;
    uint8_t* v = nullptr;
    uint16_t* k_scale = nullptr;
    uint16_t* v_scale = nullptr;
    KvLayout layout;
    size_t layer_base = 0;  // elements before this view's layer
};

// dst [n] = the n elements from element idx of a plane (vals, and for q8_0 its side of
// the scale plane; idx and n whole blocks for q8_0, which rows always are).
inline void decode_kv_row(const uint8_t* vals, const uint16_t* scales, const KvLayout& L, size_t idx, int n,
                          float* dst) {
    switch (L.elem) {
        case KvElem::F32: std::memcpy(dst, vals + idx * 4, size_t(n) * 4); return;
        case KvElem::F16:
            for (int i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, vals + (idx + size_t(i)) * 2, 2);
                dst[i] = f16_to_f32(h);
            }
            return;
        case KvElem::Q8_0: {
            const int B = L.q8_block();
            for (int b = 0; b < n; b += B) {
                const float d = f16_to_f32(scales[L.scale_index(int64_t(idx) + b)]);
                const auto* q = reinterpret_cast<const int8_t*>(vals + idx + size_t(b));
                for (int i = 0; i < B; ++i) dst[b + i] = float(q[i]) * d;
            }
            return;
        }
    }
}

// The n elements from element idx of a plane = src [n] (rounded or quantized).
inline void encode_kv_row(uint8_t* vals, uint16_t* scales, const KvLayout& L, size_t idx, int n, const float* src) {
    switch (L.elem) {
        case KvElem::F32: std::memcpy(vals + idx * 4, src, size_t(n) * 4); return;
        case KvElem::F16:
            for (int i = 0; i < n; ++i) {
                const uint16_t h = f32_to_f16(src[i]);
                std::memcpy(vals + (idx + size_t(i)) * 2, &h, 2);
            }
            return;
        case KvElem::Q8_0: {
            const int B = L.q8_block();
            for (int b = 0; b < n; b += B)
                scales[L.scale_index(int64_t(idx) + b)] =
                    f32_to_f16(kv_q8_quantize(src + b, B, reinterpret_cast<int8_t*>(vals + idx + size_t(b))));
            return;
        }
    }
}

}  // namespace vega::cpu
