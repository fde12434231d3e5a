// Reference dequantization of one row: blocks -> float through each type's chunk
// decode (type_table.h), bit exact with ggml's reference dequantizers.
#include <cstring>

#include "core/half.h"
#include "quant/internal.h"
#include "quant/quant.h"
#include "quant/type_table.h"

namespace vega::quant {
namespace {

// A quantized row through its type's chunk decode (type_table.h).
template <GgmlType T>
void deq_row(const void* src, float* y, int64_t n) {
    using W = WeightType<T>;
    const auto* x = static_cast<const typename W::Block*>(src);
    const int64_t nb = n / (32 * W::kChunks);
    ChunkCodes c;
    for (int64_t i = 0; i < nb; ++i)
        for (int k = 0; k < W::kChunks; ++k, y += 32) {
            W::decode(x[i], k, c);
            for (int l = 0; l < 32; ++l) {
                if constexpr (W::kHasMin) y[l] = c.d[l / 16] * float(c.q[l]) + c.m[l / 16];
                else y[l] = c.d[l / 16] * float(c.q[l]);
            }
        }
}

}  // namespace

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
    const TypeTraits tt = type_traits(t);
    if (!tt.supported) fail_unsupported("dequantize_row", t);
    switch (t) {
        case GgmlType::F32:
            std::memcpy(dst, src, size_t(n) * sizeof(float));
            return;
        case GgmlType::F16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
            return;
        }
        case GgmlType::BF16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
            return;
        }
        default:
            if (!with_weight_type(t, [&]<GgmlType T>() { deq_row<T>(src, dst, n); }))
                fail_unsupported("dequantize_row", t);
    }
}

}  // namespace vega::quant
