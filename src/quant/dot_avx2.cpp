// AVX2 + FMA + F16C dot kernels (this file is compiled with -mavx2 -mfma -mf16c;
// dot.cpp only calls it when the CPU has all three). Same math as dot_scalar.cpp:
// per 32-block, 8-bit integer products summed with vpmaddubsw (u8 x s8 -> s16
// pairs) and vpmaddwd (-> s32), converted once per block and scaled by d_w * d_a.
// Weights are decoded to unsigned codes (Q4 0..15, Q5 0..31, Q6 0..63), so the
// signed offsets (-8, -16, -32) become d_w * a.s terms or a second maddubs.
#include "quant/internal.h"
#include "quant/type_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>
#include <type_traits>

namespace vega::quant::detail {
namespace {

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256i load_act(const BlockQ8Act& a) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)); }

// 16 bytes of Q4 nibbles -> 32 codes in element order (low nibbles = elements
// 0..15 in the low lane, high nibbles = 16..31 in the high lane).
inline __m256i unpack_nibbles(const uint8_t* qs) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

// Bit j of `bits` -> byte j = 0x10 (set) or 0 (clear), j = 0..31.
inline __m256i bits_to_0x10(uint32_t bits) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    const __m256i sel = _mm256_set1_epi64x(int64_t(0x8040201008040201));
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)), spread);  // byte j = byte j/8 of bits
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// 32 unsigned codes x 32 int8 activations -> 8 int32 partial sums.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The loop shared by the 32-block types. dec(block, act) -> int32x8 products and
// sets dw (multiplies d_a * isum) and ow (multiplies a.s). Two independent
// accumulators keep the FMA chain from being the bottleneck.
template <bool kOffset, typename Block, typename Dec>
inline float dot_blocks32(const Block* x, const BlockQ8Act* a, int64_t nb, Dec dec) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float off0 = 0, off1 = 0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        float dw0, ow0, dw1, ow1;
        const __m256i p0 = dec(x[i], load_act(a[i]), &dw0, &ow0);
        const __m256i p1 = dec(x[i + 1], load_act(a[i + 1]), &dw1, &ow1);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(dw0 * a[i].d), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(dw1 * a[i + 1].d), _mm256_cvtepi32_ps(p1), acc1);
        if constexpr (kOffset) {
            off0 += ow0 * a[i].s;
            off1 += ow1 * a[i + 1].s;
        }
    }
    if (i < nb) {
        float dw0, ow0;
        const __m256i p0 = dec(x[i], load_act(a[i]), &dw0, &ow0);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(dw0 * a[i].d), _mm256_cvtepi32_ps(p0), acc0);
        if constexpr (kOffset) off0 += ow0 * a[i].s;
    }
    return hsum(_mm256_add_ps(acc0, acc1)) + (off0 + off1);
}

float dot_q4_0(const void* w, const BlockQ8Act* a, int64_t n) {
    return dot_blocks32<true>(static_cast<const BlockQ4_0*>(w), a, n / 32,
                              [](const BlockQ4_0& b, __m256i y, float* dw, float* ow) {
                                  *dw = f16(b.d);
                                  *ow = -8.0f * *dw;
                                  return dot_u8s8(unpack_nibbles(b.qs), y);
                              });
}

float dot_q4_1(const void* w, const BlockQ8Act* a, int64_t n) {
    return dot_blocks32<true>(static_cast<const BlockQ4_1*>(w), a, n / 32,
                              [](const BlockQ4_1& b, __m256i y, float* dw, float* ow) {
                                  *dw = f16(b.d);
                                  *ow = f16(b.m);
                                  return dot_u8s8(unpack_nibbles(b.qs), y);
                              });
}

float dot_q5_0(const void* w, const BlockQ8Act* a, int64_t n) {
    return dot_blocks32<true>(static_cast<const BlockQ5_0*>(w), a, n / 32,
                              [](const BlockQ5_0& b, __m256i y, float* dw, float* ow) {
                                  *dw = f16(b.d);
                                  *ow = -16.0f * *dw;
                                  const __m256i q = _mm256_or_si256(unpack_nibbles(b.qs), bits_to_0x10(load_u32(b.qh)));
                                  return dot_u8s8(q, y);
                              });
}

float dot_q5_1(const void* w, const BlockQ8Act* a, int64_t n) {
    return dot_blocks32<true>(static_cast<const BlockQ5_1*>(w), a, n / 32,
                              [](const BlockQ5_1& b, __m256i y, float* dw, float* ow) {
                                  *dw = f16(b.d);
                                  *ow = f16(b.m);
                                  const __m256i q = _mm256_or_si256(unpack_nibbles(b.qs), bits_to_0x10(load_u32(b.qh)));
                                  return dot_u8s8(q, y);
                              });
}

// Q8_0: signed x signed via the sign trick: |w| (unsigned) x sign(w)*a.
float dot_q8_0(const void* w, const BlockQ8Act* a, int64_t n) {
    return dot_blocks32<false>(static_cast<const BlockQ8_0*>(w), a, n / 32,
                               [](const BlockQ8_0& b, __m256i y, float* dw, float* ow) {
                                   *dw = f16(b.d);
                                   *ow = 0;
                                   const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
                                   return dot_u8s8(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
                               });
}

// The 4-bit codebook types (IQ4_NL, IQ4_XS, MXFP4; type_table.h): the nibbles index a
// 16-entry int8 codebook with one byte permute (vpshufb, as v_perm_b32 on gfx906), then
// signed x signed by the sign trick as Q8_0.
inline __m256i codebook_codes(const uint8_t* qs, const int8_t* book) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(book)));
    return _mm256_shuffle_epi8(table, unpack_nibbles(qs));
}
inline __m256i dot_s8s8(__m256i q, __m256i y) { return dot_u8s8(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q)); }

float dot_iq4_nl(const void* w, const BlockQ8Act* a, int64_t n) {
    return dot_blocks32<false>(static_cast<const BlockIQ4_NL*>(w), a, n / 32,
                               [](const BlockIQ4_NL& b, __m256i y, float* dw, float* ow) {
                                   *dw = f16(b.d);
                                   *ow = 0;
                                   return dot_s8s8(codebook_codes(b.qs, kIq4nlValues), y);
                               });
}

float dot_mxfp4(const void* w, const BlockQ8Act* a, int64_t n) {
    return dot_blocks32<false>(static_cast<const BlockMXFP4*>(w), a, n / 32,
                               [](const BlockMXFP4& b, __m256i y, float* dw, float* ow) {
                                   *dw = e8m0_half(b.e);
                                   *ow = 0;
                                   return dot_s8s8(codebook_codes(b.qs, kMxfp4Values), y);
                               });
}

// IQ4_XS: eight 32-element chunks per super-block, each its own 6-bit scale.
float dot_iq4_xs(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; ++i, a += 8) {
        const float d = f16(x[i].d);
        for (int c = 0; c < 8; ++c) {
            const int ls = WeightType<GgmlType::IQ4_XS>::scale(x[i], c);  // (6-bit, minus 32)
            const __m256i p = dot_s8s8(codebook_codes(x[i].qs + 16 * c, kIq4nlValues), load_act(a[c]));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(ls) * a[c].d), _mm256_cvtepi32_ps(p), acc);
        }
    }
    return hsum(acc);
}

// The eight 6-bit scales and mins of a Q4_K/Q5_K super-block (see kscale.h),
// decoded with 32-bit word operations: sc[0..7], m[0..7].
inline void k4_scales(const uint8_t* b, uint8_t* sc, uint8_t* m) {
    const uint32_t u0 = load_u32(b), u1 = load_u32(b + 4), u2 = load_u32(b + 8);
    const uint32_t s_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    const uint32_t s_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    std::memcpy(sc, &s_lo, 4);
    std::memcpy(sc + 4, &s_hi, 4);
    std::memcpy(m, &m_lo, 4);
    std::memcpy(m + 4, &m_hi, 4);
}

// sum_j m[j] * a[j].s over the 8 activation blocks of a super-block.
inline float mins_dot(const uint8_t* m, const BlockQ8Act* a) {
    float s0 = 0, s1 = 0;
    for (int j = 0; j < 8; j += 2) {
        s0 += float(m[j]) * a[j].s;
        s1 += float(m[j + 1]) * a[j + 1].s;
    }
    return s0 + s1;
}

// Q4_K and Q5_K: chunk c (64 elements) = 32 bytes of qs; low nibbles = sub-block 2c,
// high = 2c+1. The 6-bit scale is folded into vpmaddwd. Q5_K: qh[l] bit 2c / 2c+1 adds
// 16 to sub-block 2c / 2c+1; the qh vector is shifted right by 2 per chunk so bits 0 and
// 1 are always the ones used.
template <class Block>
float dot_k4_family(const void* w, const BlockQ8Act* a, int64_t n) {
    constexpr bool kHighBits = std::is_same_v<Block, BlockQ5_K>;
    const auto* x = static_cast<const Block*>(w);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i b0 = _mm256_set1_epi8(0x01), b1 = _mm256_set1_epi8(0x02);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float off = 0;
    for (int64_t i = 0; i < n / 256; ++i, a += 8) {
        const float d = f16(x[i].d);
        uint8_t sc[8], m[8];
        k4_scales(x[i].scales, sc, m);
        off += f16(x[i].dmin) * mins_dot(m, a);
        __m256i hb = _mm256_setzero_si256();
        if constexpr (kHighBits) hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh));
        for (int c = 0; c < 4; ++c) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if constexpr (kHighBits) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, b0), 4));  // bit 0 -> 0x10
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(hb, b1), 3));  // bit 1 -> 0x10
                hb = _mm256_srli_epi16(hb, 2);
            }
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load_act(a[2 * c])),
                                                 _mm256_set1_epi16(sc[2 * c]));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load_act(a[2 * c + 1])),
                                                 _mm256_set1_epi16(sc[2 * c + 1]));
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d * a[2 * c].d), _mm256_cvtepi32_ps(p0), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d * a[2 * c + 1].d), _mm256_cvtepi32_ps(p1), acc1);
        }
    }
    return hsum(_mm256_add_ps(acc0, acc1)) - off;
}

float dot_q4_k(const void* w, const BlockQ8Act* a, int64_t n) { return dot_k4_family<BlockQ4_K>(w, a, n); }
float dot_q5_k(const void* w, const BlockQ8Act* a, int64_t n) { return dot_k4_family<BlockQ5_K>(w, a, n); }

// Q6_K: group g = 4h+k (32 elements) meets activation block g; its two 16-element
// halves (the two 128-bit lanes) use scales[2g] and scales[2g+1]. Codes are
// 0..63; (q-32)*a = maddubs(q, a) - maddubs(32, a), exact in int16.
float dot_q6_k(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i c32 = _mm256_set1_epi8(32);
    const __m128i pair = _mm_set_epi64x(0x0101010101010101, 0);  // bytes 0..7 -> 0, 8..15 -> 1
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; ++i, a += 8) {
        const float d = f16(x[i].d);
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
        for (int h = 0; h < 2; ++h) {
            const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h));
            const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h));
            __m256i g[4];
            g[0] = _mm256_or_si256(_mm256_and_si256(qa, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x03)), 4));
            g[1] = _mm256_or_si256(_mm256_and_si256(qb, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x0C)), 2));
            g[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4),
                                   _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
            g[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                   _mm256_srli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(int8_t(0xC0))), 2));
            for (int k = 0; k < 4; ++k) {
                const int gi = 4 * h + k;
                const __m256i y = load_act(a[gi]);
                const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(g[k], y), _mm256_maddubs_epi16(c32, y));
                // int16 scales: low lane = scales[2gi], high lane = scales[2gi+1].
                const __m128i idx = _mm_add_epi8(pair, _mm_set1_epi8(char(2 * gi)));
                const __m256i scv = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, idx));
                const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, scv));
                if (k & 1)
                    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d * a[gi].d), p, acc1);
                else
                    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d * a[gi].d), p, acc0);
            }
        }
    }
    return hsum(_mm256_add_ps(acc0, acc1));
}

// Q2_K / Q3_K: chunk c (32 elements) is bit pair c % 4 of the 32 bytes qs[32 * (c / 4)..];
// its halves (the two 128-bit lanes) have their own scales, applied by vpmaddwd with a
// per-lane int16 vector as in Q6_K.
inline __m256i lane_pair16(int lo, int hi) { return _mm256_set_m128i(_mm_set1_epi16(short(hi)), _mm_set1_epi16(short(lo))); }

// Q2_K: value d * sc * q - dmin * m (q 0..3, sc and m 4 bits per 16 elements): the mins
// meet each half's activation sum (vpmaddubsw of ones).
float dot_q2_k(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const __m256i m2 = _mm256_set1_epi8(3), ones = _mm256_set1_epi8(1);
    __m256 acc_d = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; ++i, a += 8) {
        const float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int c = 0; c < 8; ++c) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * (c / 4)));
            const __m256i codes = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c % 4)), m2);
            const __m256i y = load_act(a[c]);
            const uint8_t s0 = x[i].scales[2 * c], s1 = x[i].scales[2 * c + 1];
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(codes, y), lane_pair16(s0 & 0xF, s1 & 0xF));
            const __m256i pm = _mm256_madd_epi16(_mm256_maddubs_epi16(ones, y), lane_pair16(s0 >> 4, s1 >> 4));
            acc_d = _mm256_fmadd_ps(_mm256_set1_ps(d * a[c].d), _mm256_cvtepi32_ps(p), acc_d);
            acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin * a[c].d), _mm256_cvtepi32_ps(pm), acc_m);
        }
    }
    return hsum(acc_d) - hsum(acc_m);
}

// Q3_K: code = (low 2 bits | hmask bit c << 2) - 4, signed 6-bit scales per 16 elements:
// (u - 4) * y = maddubs(u, y) - maddubs(4, y), exact in int16.
float dot_q3_k(const void* w, const BlockQ8Act* a, int64_t n) {
    const auto* x = static_cast<const BlockQ3_K*>(w);
    const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; ++i, a += 8) {
        const float d = f16(x[i].d);
        const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].hmask));
        for (int c = 0; c < 8; ++c) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * (c / 4)));
            const __m256i bit = _mm256_set1_epi8(char(1 << c));
            const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four);
            const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * (c % 4)), m2), high);
            const __m256i y = load_act(a[c]);
            const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(u, y), _mm256_maddubs_epi16(four, y));
            using W = WeightType<GgmlType::Q3_K>;
            const __m256i p = _mm256_madd_epi16(p16, lane_pair16(W::scale(x[i], 2 * c), W::scale(x[i], 2 * c + 1)));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * a[c].d), _mm256_cvtepi32_ps(p), acc);
        }
    }
    return hsum(acc);
}

float dot_f32_f32(const float* w, const float* x, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; ++k)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc[0]);
    float s = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) s += w[i] * x[i];
    return s;
}

// 8 f16 / bf16 values -> 8 floats.
inline __m256 load8_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_bf16(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

template <bool kBF16>
float dot_f32_half(const uint16_t* w, const float* x, int64_t n) {
    auto load8 = [](const uint16_t* p) { return kBF16 ? load8_bf16(p) : load8_f16(p); };
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; ++k)
            acc[k] = _mm256_fmadd_ps(load8(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load8(w + i), _mm256_loadu_ps(x + i), acc[0]);
    float s = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) {
        uint32_t bits = kBF16 ? uint32_t(w[i]) << 16 : 0;
        float v;
        if (kBF16)
            std::memcpy(&v, &bits, 4);
        else
            v = _cvtsh_ss(w[i]);
        s += v * x[i];
    }
    return s;
}

}  // namespace

bool avx2_compiled() { return true; }

float dot_q8_avx2(GgmlType t, const void* w, const BlockQ8Act* a, int64_t n) {
    switch (t) {
        case GgmlType::Q4_0: return dot_q4_0(w, a, n);
        case GgmlType::Q4_1: return dot_q4_1(w, a, n);
        case GgmlType::Q5_0: return dot_q5_0(w, a, n);
        case GgmlType::Q5_1: return dot_q5_1(w, a, n);
        case GgmlType::Q8_0: return dot_q8_0(w, a, n);
        case GgmlType::Q4_K: return dot_q4_k(w, a, n);
        case GgmlType::Q5_K: return dot_q5_k(w, a, n);
        case GgmlType::Q6_K: return dot_q6_k(w, a, n);
        case GgmlType::Q2_K: return dot_q2_k(w, a, n);
        case GgmlType::Q3_K: return dot_q3_k(w, a, n);
        case GgmlType::IQ4_NL: return dot_iq4_nl(w, a, n);
        case GgmlType::IQ4_XS: return dot_iq4_xs(w, a, n);
        case GgmlType::MXFP4: return dot_mxfp4(w, a, n);
        default: return dot_q8_table(t, w, a, n);
    }
}

float dot_f32_avx2(GgmlType t, const void* w, const float* x, int64_t n) {
    switch (t) {
        case GgmlType::F32: return dot_f32_f32(static_cast<const float*>(w), x, n);
        case GgmlType::F16: return dot_f32_half<false>(static_cast<const uint16_t*>(w), x, n);
        case GgmlType::BF16: return dot_f32_half<true>(static_cast<const uint16_t*>(w), x, n);
        default: fail_unsupported("dot_f32", t);
    }
}

}  // namespace vega::quant::detail

#else  // not built for AVX2 (non-x86 target): never selected.

namespace vega::quant::detail {
bool avx2_compiled() { return false; }
float dot_q8_avx2(GgmlType t, const void* w, const BlockQ8Act* a, int64_t n) { return dot_q8_scalar(t, w, a, n); }
float dot_f32_avx2(GgmlType t, const void* w, const float* x, int64_t n) { return dot_f32_scalar(t, w, x, n); }
}  // namespace vega::quant::detail

#endif
