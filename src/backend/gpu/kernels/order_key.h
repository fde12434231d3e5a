// A total order on (value, index) pairs as one 64-bit key, for device-side top-k
// selection (top_k over logits, the expert router): the float mapped to an
// order-preserving uint32 in the high half (NaN ranks as -inf, -0 ties with +0 as in
// the CPU's comparisons), ~index in the low half, so a larger key is a larger value
// or, on a tie, a lower index. The index of a key: key_index().
#pragma once
#include <cstdint>

#include "backend/gpu/vendor.h"

namespace vega::gpu {

__device__ __forceinline__ unsigned long long order_key(float v, int64_t i) {
    unsigned int b = __float_as_uint(v == 0.f ? 0.f : v);
    if (v != v) b = 0xff800000u;
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return (static_cast<unsigned long long>(b) << 32) | static_cast<unsigned int>(0xffffffffu - unsigned(i));
}
__device__ __forceinline__ int64_t key_index(unsigned long long key) {
    return int64_t(0xffffffffu - unsigned(key & 0xffffffffull));
}
// The value of a key (order_key's inverse on its high half): NaN comes back as -inf,
// -0 as +0.
__device__ __forceinline__ float key_value(unsigned long long key) {
    const unsigned int b = unsigned(key >> 32);
    return __uint_as_float((b & 0x80000000u) ? (b & 0x7fffffffu) : ~b);
}

}  // namespace vega::gpu
