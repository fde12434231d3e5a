// The KV cache layout, the one formula that host code (CpuKvCache, GpuKvCache) and
// device code (cache stores, attention, the rope epilogue) all use. Per layer, K and
// V are each [seq][kv_head][ctx][head_dim]: head_dim contiguous, so a decode step
// writes one contiguous row per head and attention reads rows in order (the gfx906
// study measured 357 vs 14 GB/s for writes, 1.76 vs 0.37 TB/s for reads, against
// [head][dim][seq]). Offsets are in elements, not bytes.
//
// Element types (KvElem): f32, f16, or q8_0. A q8_0 cache keeps, per layer, a value
// plane for K and one for V, one int8 at each element offset (the same offsets as
// f16), and one scale plane of f16 (K, V) pairs, one pair per block of
// kv_q8_block(head_dim) consecutive elements of a row: the K scale of element offset
// o at scale_index(o) = 2 * (o / block), V's right after it (blocks never straddle
// rows or heads; one 4-byte load gives a decode step both scales). A value decodes
// as q * scale; kv_q8_quantize is the rule (ggml's q8_0: scale = amax / 127,
// q = round(x / scale)). 32-element blocks where the head dimension allows (every
// model with head_dim 64, 96, 128, 256), else 16 or 8.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace vega {

enum class KvElem : uint8_t { F32, F16, Q8_0 };

// Elements per q8_0 scale for rows of head_dim elements: 32, 16 or 8, the largest
// that divides head_dim; 0 when none does (no q8_0 cache for such heads).
VEGA_HOST_DEVICE constexpr int kv_q8_block(int head_dim) {
    return head_dim % 32 == 0 ? 32 : head_dim % 16 == 0 ? 16 : head_dim % 8 == 0 ? 8 : 0;
}

// Bytes of the value plane per element (the scale plane adds 2 / kv_q8_block for q8_0).
VEGA_HOST_DEVICE constexpr int kv_value_bytes(KvElem e) { return e == KvElem::F32 ? 4 : e == KvElem::F16 ? 2 : 1; }

// x [n] -> q [n] and the block's scale (stored as f16 by the caller), ggml's q8_0 rule.
VEGA_HOST_DEVICE float kv_q8_quantize(const float* x, int n, int8_t* q) {
    float amax = 0.f;
    for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
    const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    for (int i = 0; i < n; ++i) {
        const float r = roundf(x[i] * id);
        q[i] = int8_t(r > 127.f ? 127.f : r < -127.f ? -127.f : r);
    }
    return d;
}

struct KvLayout {
    int n_seq = 1, n_ctx = 0, n_kv_head = 0, head_dim = 0;
    KvElem elem = KvElem::F16;

    // Elements of one layer's K (or V).
    VEGA_HOST_DEVICE int64_t layer_elems() const { return int64_t(n_seq) * n_kv_head * n_ctx * head_dim; }
    // Element offset, within a layer's K (or V), of dimension 0 of (seq, kv head, position).
    VEGA_HOST_DEVICE int64_t row(int seq, int head, int pos) const {
        return ((int64_t(seq) * n_kv_head + head) * n_ctx + pos) * head_dim;
    }
    // q8_0: elements per scale, and the index of element offset o's K scale in the
    // layer's scale plane (its V scale: + 1).
    VEGA_HOST_DEVICE int q8_block() const { return kv_q8_block(head_dim); }
    VEGA_HOST_DEVICE int64_t scale_index(int64_t o) const { return 2 * (o / q8_block()); }
    // Bytes of one layer's K (or V): values, plus the scale plane for q8_0.
    VEGA_HOST_DEVICE int64_t layer_bytes() const {
        const int64_t n = layer_elems();
        return n * kv_value_bytes(elem) + (elem == KvElem::Q8_0 ? n / q8_block() * 2 : 0);
    }
};

}  // namespace vega
