// Portable dot products of one weight row against one activation row.
// Quantized weights x q8 activations: integer sums per 32-block, scaled by
// d_w * d_a; the -8/-16 offsets and the mins go through a.s = d_a * sum(a.qs).
#include "core/half.h"
#include "quant/internal.h"
#include "quant/kscale.h"
#include "quant/type_table.h"

#include <type_traits>

namespace vega::quant::detail {
namespace {

inline uint32_t load_qh(const uint8_t* qh) {
    return uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
}

// sum_j nib(qs)[j] * a[j] over one 32-block with Q4 nibble order (+ optional 5th bits).
inline int isum_q4(const uint8_t* qs, const int8_t* a) {
    int s = 0;
    for (int j = 0; j < 16; ++j) s += (qs[j] & 0xF) * a[j] + (qs[j] >> 4) * a[j + 16];
    return s;
}
inline int isum_q5(const uint8_t* qs, uint32_t qh, const int8_t* a) {
    int s = 0;
    for (int j = 0; j < 16; ++j) {
        const int q0 = (qs[j] & 0xF) | int((qh >> j) & 1) << 4;
        const int q1 = (qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
        s += q0 * a[j] + q1 * a[j + 16];
    }
    return s;
}

float dot_q4_0(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    float acc = 0;
    for (int64_t i = 0; i < n / 32; ++i)
        acc += f16_to_f32(x[i].d) * (a[i].d * float(isum_q4(x[i].qs, a[i].qs)) - 8.0f * a[i].s);
    return acc;
}

float dot_q4_1(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ4_1*>(w);
    float acc = 0;
    for (int64_t i = 0; i < n / 32; ++i)
        acc += f16_to_f32(x[i].d) * a[i].d * float(isum_q4(x[i].qs, a[i].qs)) + f16_to_f32(x[i].m) * a[i].s;
    return acc;
}

float dot_q5_0(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ5_0*>(w);
    float acc = 0;
    for (int64_t i = 0; i < n / 32; ++i) {
        const int s = isum_q5(x[i].qs, load_qh(x[i].qh), a[i].qs);
        acc += f16_to_f32(x[i].d) * (a[i].d * float(s) - 16.0f * a[i].s);
    }
    return acc;
}

float dot_q5_1(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ5_1*>(w);
    float acc = 0;
    for (int64_t i = 0; i < n / 32; ++i) {
        const int s = isum_q5(x[i].qs, load_qh(x[i].qh), a[i].qs);
        acc += f16_to_f32(x[i].d) * a[i].d * float(s) + f16_to_f32(x[i].m) * a[i].s;
    }
    return acc;
}

float dot_q8_0(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    float acc = 0;
    for (int64_t i = 0; i < n / 32; ++i) {
        int s = 0;
        for (int j = 0; j < 32; ++j) s += x[i].qs[j] * a[i].qs[j];
        acc += f16_to_f32(x[i].d) * a[i].d * float(s);
    }
    return acc;
}

// Q4_K and Q5_K: sub-block j of the super-block meets activation block j:
// d*sc_j*d_a*isum_j - dmin*m_j*s_j. Q5_K's qh[l] bit 2c / 2c+1 adds 16 to the code of
// sub-block 2c / 2c+1.
template <class Block>
float dot_k4_family(const void* w, const BlockQ8Act* a, int64_t n) {
    constexpr bool kHighBits = std::is_same_v<Block, BlockQ5_K>;
    const auto* x = static_cast<const Block*>(w);
    float acc = 0;
    for (int64_t i = 0; i < n / 256; ++i, a += 8) {
        uint8_t sc[8], m[8];
        unpack_scales_mins_k4(x[i].scales, sc, m);
        float sumi = 0, summ = 0;
        for (int c = 0; c < 4; ++c) {
            const uint8_t* q = x[i].qs + 32 * c;
            const int8_t* a0 = a[2 * c].qs;
            const int8_t* a1 = a[2 * c + 1].qs;
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; ++l) {
                int lo = q[l] & 0xF, hi = q[l] >> 4;
                if constexpr (kHighBits) {
                    lo |= ((x[i].qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((x[i].qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                s0 += lo * a0[l];
                s1 += hi * a1[l];
            }
            sumi += a[2 * c].d * float(sc[2 * c] * s0) + a[2 * c + 1].d * float(sc[2 * c + 1] * s1);
            summ += float(m[2 * c]) * a[2 * c].s + float(m[2 * c + 1]) * a[2 * c + 1].s;
        }
        acc += f16_to_f32(x[i].d) * sumi - f16_to_f32(x[i].dmin) * summ;
    }
    return acc;
}

float dot_q4_k(const void* w, const BlockQ8Act* a, int64_t n) { return dot_k4_family<BlockQ4_K>(w, a, n); }
float dot_q5_k(const void* w, const BlockQ8Act* a, int64_t n) { return dot_k4_family<BlockQ5_K>(w, a, n); }

// Q6_K: half h, group k (0..3) of 32 elements meets activation block 4h+k; its
// first 16 elements use scales[8h+2k], the next 16 scales[8h+2k+1]. The -32
// offset is applied to the codes directly (scales differ within a 32-block).
float dot_q6_k(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    float acc = 0;
    for (int64_t i = 0; i < n / 256; ++i, a += 8) {
        float sumi = 0;
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = x[i].ql + 64 * h;
            const uint8_t* qh = x[i].qh + 32 * h;
            const int8_t* sc = x[i].scales + 8 * h;
            for (int k = 0; k < 4; ++k) {
                const BlockQ8Act& ab = a[4 * h + k];
                const uint8_t* qlk = ql + 32 * (k & 1);
                const int shift_l = 4 * (k >> 1), shift_h = 2 * k;
                int s0 = 0, s1 = 0;  // elements 0..15 and 16..31 (two scales)
                for (int l = 0; l < 16; ++l)
                    s0 += ((((qlk[l] >> shift_l) & 0xF) | ((qh[l] >> shift_h) & 3) << 4) - 32) * ab.qs[l];
                for (int l = 16; l < 32; ++l)
                    s1 += ((((qlk[l] >> shift_l) & 0xF) | ((qh[l] >> shift_h) & 3) << 4) - 32) * ab.qs[l];
                sumi += ab.d * float(sc[2 * k] * s0 + sc[2 * k + 1] * s1);
            }
        }
        acc += f16_to_f32(x[i].d) * sumi;
    }
    return acc;
}

}  // namespace

// Any type of the table (type_table.h): per chunk, the integer sum of codes times
// activation codes per 16-element half, scaled by d[h] * d_a; mins meet the half's
// activation sum (d_a * sum(a.qs) over the half).
template <GgmlType T>
float dot_chunks(const void* w, const BlockQ8Act* a, int64_t n) {
    using W = WeightType<T>;
    const auto* x = static_cast<const typename W::Block*>(w);
    const int64_t nb = n / (32 * W::kChunks);
    ChunkCodes c;
    float acc = 0;
    for (int64_t i = 0; i < nb; ++i)
        for (int k = 0; k < W::kChunks; ++k, ++a) {
            W::decode(x[i], k, c);
            int s[2] = {0, 0}, sa[2] = {0, 0};
            for (int l = 0; l < 32; ++l) s[l / 16] += c.q[l] * a->qs[l], sa[l / 16] += a->qs[l];
            float part = c.d[0] * float(s[0]) + c.d[1] * float(s[1]);
            if constexpr (W::kHasMin) part += c.m[0] * float(sa[0]) + c.m[1] * float(sa[1]);
            acc += a->d * part;
        }
    return acc;
}

float dot_q8_table(GgmlType t, const void* w, const BlockQ8Act* a, int64_t n) {
    float r = 0;
    if (!with_weight_type(t, [&]<GgmlType T>() { r = dot_chunks<T>(w, a, n); })) fail_unsupported("dot_q8", t);
    return r;
}

float dot_q8_scalar(GgmlType t, const void* w, const BlockQ8Act* a, int64_t n) {
    switch (t) {
        case GgmlType::Q4_0: return dot_q4_0(w, a, n);
        case GgmlType::Q4_1: return dot_q4_1(w, a, n);
        case GgmlType::Q5_0: return dot_q5_0(w, a, n);
        case GgmlType::Q5_1: return dot_q5_1(w, a, n);
        case GgmlType::Q8_0: return dot_q8_0(w, a, n);
        case GgmlType::Q4_K: return dot_q4_k(w, a, n);
        case GgmlType::Q5_K: return dot_q5_k(w, a, n);
        case GgmlType::Q6_K: return dot_q6_k(w, a, n);
        default: return dot_q8_table(t, w, a, n);
    }
}

float dot_f32_scalar(GgmlType t, const void* w, const float* x, int64_t n) {
    float acc = 0;
    switch (t) {
        case GgmlType::F32: {
            const auto* v = static_cast<const float*>(w);
            for (int64_t i = 0; i < n; ++i) acc += v[i] * x[i];
            return acc;
        }
        case GgmlType::F16: {
            const auto* v = static_cast<const uint16_t*>(w);
            for (int64_t i = 0; i < n; ++i) acc += f16_to_f32(v[i]) * x[i];
            return acc;
        }
        case GgmlType::BF16: {
            const auto* v = static_cast<const uint16_t*>(w);
            for (int64_t i = 0; i < n; ++i) acc += bf16_to_f32(v[i]) * x[i];
            return acc;
        }
        default: fail_unsupported("dot_f32", t);
    }
}

}  // namespace vega::quant::detail
