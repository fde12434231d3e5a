// Reference quantizers (float row -> GGML blocks) and the activation quantizer.
// The block layouts are those read back by dequantize.cpp. F16/BF16 and the
// 32-block types round exactly like ggml's reference quantizers (tests compare
// bytes with llama-quantize output); the K-quant scale search is our own (a
// small grid around the min/max step, refit by least squares), about as
// accurate as llama.cpp's but not byte-identical.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/internal.h"
#include "quant/kscale.h"
#include "quant/quant.h"

namespace vega::quant {
namespace {

// Round to nearest, ties to even (lrintf's result in the default rounding mode), without a
// libm call: adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits, exact
// for |v| < 2^22 (the K-quant fitters call this 21 x 32 times per 32 weights).
inline int nearest_int(float v) {
    if (!(std::fabs(v) < 4194304.f)) return int(std::lrintf(v));
    const float f = v + 12582912.f;
    int32_t i;
    std::memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}
using detail::clampi;
using detail::signed_absmax;

void min_max(const float* x, int n, float* lo, float* hi) {
    *lo = x[0];
    *hi = x[0];
    for (int i = 1; i < n; ++i) {
        *lo = std::min(*lo, x[i]);
        *hi = std::max(*hi, x[i]);
    }
}

// The 32-block quantizers follow ggml's reference rounding exactly (scale from
// the float d, truncation of x/d + offset + 0.5), so converting an F32 tensor
// gives the same bytes as llama.cpp's llama-quantize without an imatrix.

// Symmetric 4/5-bit block (Q4_0: nmax 8, Q5_0: nmax 16): the largest-magnitude
// element maps to -nmax, q = trunc(x/d + nmax + 0.5) clamped to 0..2*nmax-1.
// Returns the f16 bits of d; q[32] are the unsigned codes.
uint16_t quant_sym_block(const float* x, int nmax, uint8_t* q) {
    const float d = signed_absmax(x, 32) / float(-nmax);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const float bias = float(nmax) + 0.5f;
    for (int j = 0; j < 32; ++j) q[j] = uint8_t(clampi(int(x[j] * id + bias), 0, 2 * nmax - 1));
    return f32_to_f16(d);
}

// Affine 4/5-bit block (Q4_1, Q5_1): x ~= q*d + m, q = trunc((x-min)/d + 0.5) in 0..qmax.
void quant_affine_block(const float* x, int qmax, uint8_t* q, uint16_t* dh, uint16_t* mh) {
    float lo, hi;
    min_max(x, 32, &lo, &hi);
    const float d = (hi - lo) / float(qmax);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    *dh = f32_to_f16(d);
    *mh = f32_to_f16(lo);
    for (int j = 0; j < 32; ++j) q[j] = uint8_t(clampi(int((x[j] - lo) * id + 0.5f), 0, qmax));
}

// Pack 32 codes (0..15 in the low 4 bits) as Q4_0-style nibbles: qs[j] = q[j] | q[j+16] << 4.
void pack_nibbles_32(const uint8_t* q, uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = uint8_t((q[j] & 0xF) | (q[j + 16] & 0xF) << 4);
}

// Bit 4 of each of 32 codes -> little-endian uint32 qh (bit j = element j).
void pack_qh_32(const uint8_t* q, uint8_t* qh) {
    uint32_t bits = 0;
    for (int j = 0; j < 32; ++j) bits |= uint32_t((q[j] >> 4) & 1) << j;
    for (int b = 0; b < 4; ++b) qh[b] = uint8_t(bits >> (8 * b));
}

// Least-squares affine fit of x[n] ~= scale*L - mn with L in 0..nmax, mn >= 0
// (the "min" of a K-quant sub-block, stored positive). Tries step sizes
// (max-min)/(nmax+delta), delta in [-1, 1], refitting scale and mn for each
// rounding pattern; returns scale, sets *mn.
float fit_affine(const float* x, int n, int nmax, float* mn) {
    float lo, hi;
    min_max(x, n, &lo, &hi);
    lo = std::min(lo, 0.0f);
    if (hi <= lo) {
        *mn = -lo;
        return 0;
    }
    float best_err = INFINITY, best_scale = (hi - lo) / float(nmax), best_min = lo;
    double sx = 0, sx2 = 0;  // the same for every step
    for (int i = 0; i < n; ++i) sx += x[i], sx2 += double(x[i]) * x[i];
    for (int step = -10; step <= 10; ++step) {
        const float iscale = (float(nmax) + 0.1f * float(step)) / (hi - lo);
        int sl_i = 0, sl2_i = 0;  // exact in int (n <= 32, L <= 31)
        double slx = 0;
        for (int i = 0; i < n; ++i) {
            const int L = clampi(nearest_int(iscale * (x[i] - lo)), 0, nmax);
            sl_i += L;
            sl2_i += L * L;
            slx += double(L) * x[i];
        }
        const double sl = sl_i, sl2 = sl2_i;
        const double D = double(n) * sl2 - sl * sl;
        if (D <= 0) continue;
        double scale = (double(n) * slx - sl * sx) / D;
        double b = (sl2 * sx - sl * slx) / D;  // offset, must be <= 0
        if (b > 0) {
            b = 0;
            scale = slx / sl2;
        }
        if (scale <= 0) continue;
        // sum (scale * L + b - x)^2 from the sums (no second pass over the block).
        const double err = scale * scale * sl2 + 2 * scale * b * sl - 2 * scale * slx + double(n) * b * b - 2 * b * sx + sx2;
        if (err < best_err) {
            best_err = float(err);
            best_scale = float(scale);
            best_min = float(b);
        }
    }
    *mn = -best_min;
    return best_scale;
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per-sub-block fit, 6-bit
// quantization of scales and mins against the super-block d / dmin, then the
// final codes L[256] under the quantized parameters.
void quant_k_affine(const float* x, int nmax, uint16_t* dh, uint16_t* dminh, uint8_t* scales,
                    uint8_t* L) {
    float scale[8], mn[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        scale[j] = fit_affine(x + 32 * j, 32, nmax, &mn[j]);
        max_scale = std::max(max_scale, scale[j]);
        max_min = std::max(max_min, mn[j]);
    }
    *dh = f32_to_f16(max_scale / 63.0f);
    *dminh = f32_to_f16(max_min / 63.0f);
    const float d = f16_to_f32(*dh), dmin = f16_to_f32(*dminh);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        ls[j] = uint8_t(d > 0 ? clampi(nearest_int(scale[j] / d), 0, 63) : 0);
        lm[j] = uint8_t(dmin > 0 ? clampi(nearest_int(mn[j] / dmin), 0, 63) : 0);
    }
    pack_scales_mins_k4(ls, lm, scales);
    for (int j = 0; j < 8; ++j) {
        const float ds = d * float(ls[j]), m = dmin * float(lm[j]);
        for (int i = 0; i < 32; ++i)
            L[32 * j + i] = uint8_t(ds > 0 ? clampi(nearest_int((x[32 * j + i] + m) / ds), 0, nmax) : 0);
    }
}

void quant_q4_k(const float* x, BlockQ4_K* y) {
    uint8_t L[256];
    quant_k_affine(x, 15, &y->d, &y->dmin, y->scales, L);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) y->qs[32 * c + l] = uint8_t(L[64 * c + l] | L[64 * c + 32 + l] << 4);
}

void quant_q5_k(const float* x, BlockQ5_K* y) {
    uint8_t L[256];
    quant_k_affine(x, 31, &y->d, &y->dmin, y->scales, L);
    std::memset(y->qh, 0, sizeof(y->qh));
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t a = L[64 * c + l], b = L[64 * c + 32 + l];
            y->qs[32 * c + l] = uint8_t((a & 0xF) | (b & 0xF) << 4);
            y->qh[l] |= uint8_t(((a >> 4) & 1) << (2 * c) | ((b >> 4) & 1) << (2 * c + 1));
        }
    }
}

// Symmetric 6-bit fit of x[16] ~= scale*L, L in -32..31; returns scale (signed).
float fit_sym6(const float* x) {
    const float mx = signed_absmax(x, 16);
    if (mx == 0) return 0;
    float best_err = INFINITY, best = mx / -32.0f;
    double sx2 = 0;
    for (int i = 0; i < 16; ++i) sx2 += double(x[i]) * x[i];
    for (int step = -8; step <= 8; ++step) {
        const float iscale = -(32.0f + 0.1f * float(step)) / mx;
        double slx = 0;
        int sl2_i = 0;
        for (int i = 0; i < 16; ++i) {
            const int L = clampi(nearest_int(iscale * x[i]), -32, 31);
            slx += double(L) * x[i];
            sl2_i += L * L;
        }
        const double sl2 = sl2_i;
        if (sl2 == 0) continue;
        const double scale = slx / sl2;
        const double err = scale * scale * sl2 - 2 * scale * slx + sx2;  // sum (scale * L - x)^2
        if (err < best_err) {
            best_err = float(err);
            best = float(scale);
        }
    }
    return best;
}

void quant_q6_k(const float* x, BlockQ6_K* y) {
    float scale[16];
    float ms = 0;  // scale of largest magnitude, signed
    for (int g = 0; g < 16; ++g) {
        scale[g] = fit_sym6(x + 16 * g);
        if (std::fabs(scale[g]) > std::fabs(ms)) ms = scale[g];
    }
    uint8_t L[256];
    if (ms == 0) {
        y->d = 0;
        std::memset(y->scales, 0, sizeof(y->scales));
        std::memset(L, 32, sizeof(L));
    } else {
        // The largest scale maps to -128 (the wider end of int8).
        y->d = f32_to_f16(ms / -128.0f);
        const float d = f16_to_f32(y->d);
        for (int g = 0; g < 16; ++g) {
            const int sc = d != 0 ? clampi(nearest_int(scale[g] / d), -128, 127) : 0;
            y->scales[g] = int8_t(sc);
            const float eff = d * float(sc);
            for (int i = 0; i < 16; ++i) {
                const int q = eff != 0 ? clampi(nearest_int(x[16 * g + i] / eff), -32, 31) : 0;
                L[16 * g + i] = uint8_t(q + 32);
            }
        }
    }
    for (int h = 0; h < 2; ++h) {
        uint8_t* ql = y->ql + 64 * h;
        uint8_t* qh = y->qh + 32 * h;
        const uint8_t* q = L + 128 * h;
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = q[l], q2 = q[l + 32], q3 = q[l + 64], q4 = q[l + 96];
            ql[l] = uint8_t((q1 & 0xF) | (q3 & 0xF) << 4);
            ql[l + 32] = uint8_t((q2 & 0xF) | (q4 & 0xF) << 4);
            qh[l] = uint8_t((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
        }
    }
}

}  // namespace

void quantize_row(GgmlType t, const float* x, void* dst, int64_t n) {
    const TypeTraits tt = type_traits(t);
    if (!tt.supported) fail_unsupported("quantize_row", t);
    const int64_t nb = n / tt.block_size;
    uint8_t q[32];
    switch (t) {
        case GgmlType::F32:
            std::memcpy(dst, x, size_t(n) * sizeof(float));
            return;
        case GgmlType::F16: {
            auto* y = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
            return;
        }
        case GgmlType::BF16: {
            auto* y = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
            return;
        }
        case GgmlType::Q4_0: {
            auto* y = static_cast<BlockQ4_0*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 32) {
                y[i].d = quant_sym_block(x, 8, q);
                pack_nibbles_32(q, y[i].qs);
            }
            return;
        }
        case GgmlType::Q4_1: {
            auto* y = static_cast<BlockQ4_1*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 32) {
                quant_affine_block(x, 15, q, &y[i].d, &y[i].m);
                pack_nibbles_32(q, y[i].qs);
            }
            return;
        }
        case GgmlType::Q5_0: {
            auto* y = static_cast<BlockQ5_0*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 32) {
                y[i].d = quant_sym_block(x, 16, q);
                pack_nibbles_32(q, y[i].qs);
                pack_qh_32(q, y[i].qh);
            }
            return;
        }
        case GgmlType::Q5_1: {
            auto* y = static_cast<BlockQ5_1*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 32) {
                quant_affine_block(x, 31, q, &y[i].d, &y[i].m);
                pack_nibbles_32(q, y[i].qs);
                pack_qh_32(q, y[i].qh);
            }
            return;
        }
        case GgmlType::Q8_0: {
            auto* y = static_cast<BlockQ8_0*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 32) {
                float amax = 0;
                for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
                const float d = amax / 127.0f;
                const float id = d != 0 ? 1.0f / d : 0.0f;
                y[i].d = f32_to_f16(d);
                for (int j = 0; j < 32; ++j) y[i].qs[j] = int8_t(clampi(int(std::roundf(x[j] * id)), -127, 127));
            }
            return;
        }
        case GgmlType::Q4_K: {
            auto* y = static_cast<BlockQ4_K*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 256) quant_q4_k(x, &y[i]);
            return;
        }
        case GgmlType::Q5_K: {
            auto* y = static_cast<BlockQ5_K*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 256) quant_q5_k(x, &y[i]);
            return;
        }
        case GgmlType::Q6_K: {
            auto* y = static_cast<BlockQ6_K*>(dst);
            for (int64_t i = 0; i < nb; ++i, x += 256) quant_q6_k(x, &y[i]);
            return;
        }
        case GgmlType::Q2_K: return detail::quantize_q2_k(x, dst, n);
        case GgmlType::Q3_K: return detail::quantize_q3_k(x, dst, n);
        case GgmlType::IQ4_NL: return detail::quantize_iq4_nl(x, dst, n);
        case GgmlType::IQ4_XS: return detail::quantize_iq4_xs(x, dst, n);
        case GgmlType::MXFP4: return detail::quantize_mxfp4(x, dst, n);
        default: fail_unsupported("quantize_row", t);
    }
}

// d = amax/127, qs = round(x/d) (half away from zero), s = d * sum(qs).
void quantize_act_row(const float* x, BlockQ8Act* y, int64_t n) {
    const int64_t nb = n / QK_ACT;
    for (int64_t i = 0; i < nb; ++i, x += QK_ACT) {
        float amax = 0;
        for (int j = 0; j < QK_ACT; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK_ACT; ++j) {
            const int q = clampi(int(std::roundf(x[j] * id)), -127, 127);
            y[i].qs[j] = int8_t(q);
            sum += q;
        }
        y[i].d = d;
        y[i].s = d * float(sum);
    }
}

}  // namespace vega::quant
