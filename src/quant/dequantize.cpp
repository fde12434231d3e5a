// Reference dequantization of one row: blocks -> float, bit exact with the
// GGML/GGUF block layouts in quant/types.h.
#include <cstring>

#include "core/half.h"
#include "quant/internal.h"
#include "quant/kscale.h"
#include "quant/quant.h"

namespace vega::quant {
namespace {

// Q4_0: 32 values; qs[j] low nibble = element j, high nibble = element j+16; (q-8)*d.
void deq_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = f16_to_f32(x[i].d);
        for (int j = 0; j < 16; ++j) {
            y[j] = float((x[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = float((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

// Q4_1: q*d + m, same nibble order as Q4_0.
void deq_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
        for (int j = 0; j < 16; ++j) {
            y[j] = float(x[i].qs[j] & 0xF) * d + m;
            y[j + 16] = float(x[i].qs[j] >> 4) * d + m;
        }
    }
}

// The 5th bits of a Q5 block: bit j of the little-endian uint32 qh is element j's.
inline uint32_t load_qh(const uint8_t* qh) {
    return uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
}

// Q5_0: (q-16)*d with q = nibble | bit << 4.
void deq_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = f16_to_f32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < 16; ++j) {
            const int q0 = (x[i].qs[j] & 0xF) | int((qh >> j) & 1) << 4;
            const int q1 = (x[i].qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
            y[j] = float(q0 - 16) * d;
            y[j + 16] = float(q1 - 16) * d;
        }
    }
}

// Q5_1: q*d + m.
void deq_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < 16; ++j) {
            const int q0 = (x[i].qs[j] & 0xF) | int((qh >> j) & 1) << 4;
            const int q1 = (x[i].qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
            y[j] = float(q0) * d + m;
            y[j + 16] = float(q1) * d + m;
        }
    }
}

void deq_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = f16_to_f32(x[i].d);
        for (int j = 0; j < 32; ++j) y[j] = float(x[i].qs[j]) * d;
    }
}

// Q4_K: 256 = 4 chunks of 64; chunk c: qs[32c+l] low nibble = sub-block 2c
// element l, high nibble = sub-block 2c+1 element l; value d*sc*q - dmin*m.
void deq_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
        uint8_t sc[8], m[8];
        unpack_scales_mins_k4(x[i].scales, sc, m);
        for (int c = 0; c < 4; ++c) {
            const uint8_t* q = x[i].qs + 32 * c;
            const float d1 = d * sc[2 * c], m1 = dmin * m[2 * c];
            const float d2 = d * sc[2 * c + 1], m2 = dmin * m[2 * c + 1];
            for (int l = 0; l < 32; ++l) y[l] = d1 * float(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) y[32 + l] = d2 * float(q[l] >> 4) - m2;
            y += 64;
        }
    }
}

// Q5_K: as Q4_K, plus qh[l] bit 2c (sub-block 2c) / bit 2c+1 (sub-block 2c+1) adds 16.
void deq_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
        uint8_t sc[8], m[8];
        unpack_scales_mins_k4(x[i].scales, sc, m);
        for (int c = 0; c < 4; ++c) {
            const uint8_t* q = x[i].qs + 32 * c;
            const uint8_t* qh = x[i].qh;
            const float d1 = d * sc[2 * c], m1 = dmin * m[2 * c];
            const float d2 = d * sc[2 * c + 1], m2 = dmin * m[2 * c + 1];
            for (int l = 0; l < 32; ++l)
                y[l] = d1 * float((q[l] & 0xF) | ((qh[l] >> (2 * c)) & 1) << 4) - m1;
            for (int l = 0; l < 32; ++l)
                y[32 + l] = d2 * float((q[l] >> 4) | ((qh[l] >> (2 * c + 1)) & 1) << 4) - m2;
            y += 64;
        }
    }
}

// Q6_K: two halves of 128. In half h, for l in 0..31:
//   element l      = ql[64h+l] low  | qh[32h+l] bits 0-1 << 4
//   element l + 32 = ql[64h+l+32] low  | qh bits 2-3 << 4
//   element l + 64 = ql[64h+l] high | qh bits 4-5 << 4
//   element l + 96 = ql[64h+l+32] high | qh bits 6-7 << 4
// value (q-32) * d * scales[e/16] (e = element index in the super-block).
void deq_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(x[i].d);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = x[i].ql + 64 * h;
            const uint8_t* qh = x[i].qh + 32 * h;
            const int8_t* sc = x[i].scales + 8 * h;
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * float(sc[is + 0]) * float(q1);
                y[l + 32] = d * float(sc[is + 2]) * float(q2);
                y[l + 64] = d * float(sc[is + 4]) * float(q3);
                y[l + 96] = d * float(sc[is + 6]) * float(q4);
            }
            y += 128;
        }
    }
}

}  // namespace

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
    const TypeTraits tt = type_traits(t);
    if (!tt.supported) fail_unsupported("dequantize_row", t);
    const int64_t nb = n / tt.block_size;
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
        case GgmlType::Q4_0: return deq_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
        case GgmlType::Q4_1: return deq_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
        case GgmlType::Q5_0: return deq_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
        case GgmlType::Q5_1: return deq_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
        case GgmlType::Q8_0: return deq_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
        case GgmlType::Q4_K: return deq_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
        case GgmlType::Q5_K: return deq_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
        case GgmlType::Q6_K: return deq_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
        default: fail_unsupported("dequantize_row", t);
    }
}

}  // namespace vega::quant
