// One definition per quantized weight type: how 32 consecutive elements of a block (a
// "chunk") decode to int8 codes and per-16-element scales (and mins). Every quantized
// type vega computes with has an entry; the CPU's reference dequantizer and its generic
// dot product read nothing else, and a new type is one entry here plus its quantizer
// (quantize.cpp). docs/ARCHITECTURE.md lists what a type provides.
//
//   element 32 * c + i of a block (c < kChunks, i < 32), half h = i / 16:
//     value = d[h] * q[i]            (kHasMin false)
//     value = d[h] * q[i] + m[h]     (kHasMin true; m is the negated ggml "min" term)
// which is the float arithmetic of ggml's reference dequantizers, so the decode is bit
// exact with them. Codes fit int8 for every type (codebook types: the codebook's value,
// e.g. IQ4_NL's -127..113, MXFP4's doubled e2m1 -12..12), so a dot product is an integer
// sum per half against q8 activations.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "quant/kscale.h"
#include "quant/types.h"

namespace vega::quant {

// 32 elements of a block as codes; d, m per half (both halves equal where the type has
// one scale per 32 elements).
struct ChunkCodes {
    int8_t q[32];
    float d[2];
    float m[2];
};

// The two 4-bit codebooks (ggml's tables): IQ4_NL / IQ4_XS, and MXFP4's e2m1 values
// doubled (the block scale carries the half back, e8m0_half).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128): half the power of two an e8m0 byte encodes (the doubled codebook's
// other factor). e < 2 give the subnormals 2^-128, 2^-127.
inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// GGUF block layouts of the types added after the first eleven.
struct BlockQ2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; };  // 84 B
struct BlockQ3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; };  // 110 B
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };  // 18 B / 32
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };  // 136 B
struct BlockMXFP4 { uint8_t e; uint8_t qs[16]; };  // 17 B / 32
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockIQ4_NL) == 18 &&
              sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17, "GGUF block layouts");

template <GgmlType T>
struct WeightType;  // the entries below

namespace type_detail {
inline uint32_t load_u32(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline void one_scale(ChunkCodes& o, float d) { o.d[0] = o.d[1] = d, o.m[0] = o.m[1] = 0.f; }
// Q4_K / Q5_K: chunk c's 6-bit scale and min (pair c of the 12-byte packing, kscale.h).
inline void k4_scale_min(const uint8_t* scales, uint16_t d, uint16_t dmin, int c, ChunkCodes& o) {
    uint8_t sc, m;
    get_scale_min_k4(c, scales, &sc, &m);
    o.d[0] = o.d[1] = f16_to_f32(d) * float(sc);
    o.m[0] = o.m[1] = -(f16_to_f32(dmin) * float(m));
}
// Low nibbles are elements 0..15, high nibbles 16..31 (the 32-blocks' order), through a codebook.
inline void nibbles(ChunkCodes& o, const uint8_t* qs, const int8_t* book) {
    for (int j = 0; j < 16; ++j) o.q[j] = book[qs[j] & 0xF], o.q[j + 16] = book[qs[j] >> 4];
}
}  // namespace type_detail

// ---- 32-element blocks ----
template <>
struct WeightType<GgmlType::Q4_0> {
    using Block = BlockQ4_0;
    static constexpr int kChunks = 1;
    static constexpr bool kHasMin = false;
    static void decode(const Block& b, int, ChunkCodes& o) {
        for (int j = 0; j < 16; ++j) o.q[j] = int8_t((b.qs[j] & 0xF) - 8), o.q[j + 16] = int8_t((b.qs[j] >> 4) - 8);
        type_detail::one_scale(o, f16_to_f32(b.d));
    }
};
template <>
struct WeightType<GgmlType::Q4_1> {
    using Block = BlockQ4_1;
    static constexpr int kChunks = 1;
    static constexpr bool kHasMin = true;
    static void decode(const Block& b, int, ChunkCodes& o) {
        for (int j = 0; j < 16; ++j) o.q[j] = int8_t(b.qs[j] & 0xF), o.q[j + 16] = int8_t(b.qs[j] >> 4);
        o.d[0] = o.d[1] = f16_to_f32(b.d);
        o.m[0] = o.m[1] = f16_to_f32(b.m);
    }
};
template <>
struct WeightType<GgmlType::Q5_0> {
    using Block = BlockQ5_0;
    static constexpr int kChunks = 1;
    static constexpr bool kHasMin = false;
    static void decode(const Block& b, int, ChunkCodes& o) {
        const uint32_t qh = type_detail::load_u32(b.qh);
        for (int j = 0; j < 16; ++j) {
            o.q[j] = int8_t(((b.qs[j] & 0xF) | int((qh >> j) & 1) << 4) - 16);
            o.q[j + 16] = int8_t(((b.qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4) - 16);
        }
        type_detail::one_scale(o, f16_to_f32(b.d));
    }
};
template <>
struct WeightType<GgmlType::Q5_1> {
    using Block = BlockQ5_1;
    static constexpr int kChunks = 1;
    static constexpr bool kHasMin = true;
    static void decode(const Block& b, int, ChunkCodes& o) {
        const uint32_t qh = type_detail::load_u32(b.qh);
        for (int j = 0; j < 16; ++j) {
            o.q[j] = int8_t((b.qs[j] & 0xF) | int((qh >> j) & 1) << 4);
            o.q[j + 16] = int8_t((b.qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4);
        }
        o.d[0] = o.d[1] = f16_to_f32(b.d);
        o.m[0] = o.m[1] = f16_to_f32(b.m);
    }
};
template <>
struct WeightType<GgmlType::Q8_0> {
    using Block = BlockQ8_0;
    static constexpr int kChunks = 1;
    static constexpr bool kHasMin = false;
    static void decode(const Block& b, int, ChunkCodes& o) {
        std::memcpy(o.q, b.qs, 32);
        type_detail::one_scale(o, f16_to_f32(b.d));
    }
};
template <>
struct WeightType<GgmlType::IQ4_NL> {
    using Block = BlockIQ4_NL;
    static constexpr int kChunks = 1;
    static constexpr bool kHasMin = false;
    static void decode(const Block& b, int, ChunkCodes& o) {
        type_detail::nibbles(o, b.qs, kIq4nlValues);
        type_detail::one_scale(o, f16_to_f32(b.d));
    }
};
template <>
struct WeightType<GgmlType::MXFP4> {
    using Block = BlockMXFP4;
    static constexpr int kChunks = 1;
    static constexpr bool kHasMin = false;
    static void decode(const Block& b, int, ChunkCodes& o) {
        type_detail::nibbles(o, b.qs, kMxfp4Values);
        type_detail::one_scale(o, e8m0_half(b.e));
    }
};

// ---- 256-element super-blocks (8 chunks) ----
// Q2_K / Q3_K: chunk c is half c / 4 of the block (32 bytes of qs), bit pair c % 4 of each
// byte; its two 16-element sub-blocks have scales 2c and 2c + 1.
template <>
struct WeightType<GgmlType::Q2_K> {
    using Block = BlockQ2_K;
    static constexpr int kChunks = 8;
    static constexpr bool kHasMin = true;
    static void decode(const Block& b, int c, ChunkCodes& o) {
        const uint8_t* q = b.qs + 32 * (c / 4);
        const int shift = 2 * (c % 4);
        for (int l = 0; l < 32; ++l) o.q[l] = int8_t((q[l] >> shift) & 3);
        const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
        for (int h = 0; h < 2; ++h) {
            const uint8_t sc = b.scales[2 * c + h];
            o.d[h] = d * float(sc & 0xF);
            o.m[h] = -(dmin * float(sc >> 4));
        }
    }
};
// Q3_K: code = low 2 bits - 4 where the chunk's bit (1 << c) of hmask[l] is clear; 16
// 6-bit scales (minus 32): low nibbles in bytes 0..7 (scales 8..15 in the high nibbles),
// high bit pairs in bytes 8..11 (scale j's at bit 2 * (j / 4) of byte 8 + j % 4).
template <>
struct WeightType<GgmlType::Q3_K> {
    using Block = BlockQ3_K;
    static constexpr int kChunks = 8;
    static constexpr bool kHasMin = false;
    static int scale(const Block& b, int j) {
        const int lo = j < 8 ? b.scales[j] & 0xF : b.scales[j - 8] >> 4;
        const int hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        return (lo | hi << 4) - 32;
    }
    static void decode(const Block& b, int c, ChunkCodes& o) {
        const uint8_t* q = b.qs + 32 * (c / 4);
        const int shift = 2 * (c % 4);
        const uint8_t bit = uint8_t(1u << c);
        for (int l = 0; l < 32; ++l) o.q[l] = int8_t(((q[l] >> shift) & 3) - ((b.hmask[l] & bit) ? 0 : 4));
        const float d = f16_to_f32(b.d);
        for (int h = 0; h < 2; ++h) o.d[h] = d * float(scale(b, 2 * c + h)), o.m[h] = 0.f;
    }
};
// Q4_K / Q5_K: chunk c is the low (c even) or high nibbles of qs[32 * (c / 2) ..]
// (+ Q5_K's bit c of qh[l]); scale and min by type_detail::k4_scale_min.
template <>
struct WeightType<GgmlType::Q4_K> {
    using Block = BlockQ4_K;
    static constexpr int kChunks = 8;
    static constexpr bool kHasMin = true;
    static void decode(const Block& b, int c, ChunkCodes& o) {
        const uint8_t* q = b.qs + 32 * (c / 2);
        const int shift = 4 * (c % 2);
        for (int l = 0; l < 32; ++l) o.q[l] = int8_t((q[l] >> shift) & 0xF);
        type_detail::k4_scale_min(b.scales, b.d, b.dmin, c, o);
    }
};
template <>
struct WeightType<GgmlType::Q5_K> {
    using Block = BlockQ5_K;
    static constexpr int kChunks = 8;
    static constexpr bool kHasMin = true;
    static void decode(const Block& b, int c, ChunkCodes& o) {
        const uint8_t* q = b.qs + 32 * (c / 2);
        const int shift = 4 * (c % 2);
        for (int l = 0; l < 32; ++l) o.q[l] = int8_t(((q[l] >> shift) & 0xF) | ((b.qh[l] >> c) & 1) << 4);
        type_detail::k4_scale_min(b.scales, b.d, b.dmin, c, o);
    }
};
// Q6_K: chunk c = 4h + k (half h of 128): low 4 bits from ql[64h + 32 (k & 1) + l] (high
// nibble for k >= 2), high 2 bits from qh[32h + l] bits 2k, minus 32; scales 8h + 2k, +1.
template <>
struct WeightType<GgmlType::Q6_K> {
    using Block = BlockQ6_K;
    static constexpr int kChunks = 8;
    static constexpr bool kHasMin = false;
    static void decode(const Block& b, int c, ChunkCodes& o) {
        const int h = c / 4, k = c % 4;
        const uint8_t* ql = b.ql + 64 * h + 32 * (k & 1);
        const uint8_t* qh = b.qh + 32 * h;
        const int shift_l = 4 * (k >> 1), shift_h = 2 * k;
        for (int l = 0; l < 32; ++l) o.q[l] = int8_t((((ql[l] >> shift_l) & 0xF) | ((qh[l] >> shift_h) & 3) << 4) - 32);
        const float d = f16_to_f32(b.d);
        for (int s = 0; s < 2; ++s) o.d[s] = d * float(b.scales[8 * h + 2 * k + s]), o.m[s] = 0.f;
    }
};
// IQ4_XS: chunk c has a 6-bit scale (minus 32): low nibble c % 2 of scales_l[c / 2], high
// bits 2c of scales_h; codes through IQ4_NL's codebook, nibbles as a 32-block's.
template <>
struct WeightType<GgmlType::IQ4_XS> {
    using Block = BlockIQ4_XS;
    static constexpr int kChunks = 8;
    static constexpr bool kHasMin = false;
    static int scale(const Block& b, int c) {
        return (((b.scales_l[c / 2] >> (4 * (c % 2))) & 0xF) | ((b.scales_h >> (2 * c)) & 3) << 4) - 32;
    }
    static void decode(const Block& b, int c, ChunkCodes& o) {
        type_detail::nibbles(o, b.qs + 16 * c, kIq4nlValues);
        type_detail::one_scale(o, f16_to_f32(b.d) * float(scale(b, c)));
    }
};

// Calls f.template operator()<T>() for the quantized type t (a WeightType entry); false
// when t has none.
template <class F>
bool with_weight_type(GgmlType t, F&& f) {
    switch (t) {
#define VEGA_WEIGHT_TYPE(TT) \
    case GgmlType::TT: f.template operator()<GgmlType::TT>(); return true;
        VEGA_WEIGHT_TYPE(Q4_0) VEGA_WEIGHT_TYPE(Q4_1) VEGA_WEIGHT_TYPE(Q5_0) VEGA_WEIGHT_TYPE(Q5_1)
        VEGA_WEIGHT_TYPE(Q8_0) VEGA_WEIGHT_TYPE(Q2_K) VEGA_WEIGHT_TYPE(Q3_K) VEGA_WEIGHT_TYPE(Q4_K)
        VEGA_WEIGHT_TYPE(Q5_K) VEGA_WEIGHT_TYPE(Q6_K) VEGA_WEIGHT_TYPE(IQ4_NL) VEGA_WEIGHT_TYPE(IQ4_XS)
        VEGA_WEIGHT_TYPE(MXFP4)
#undef VEGA_WEIGHT_TYPE
        default: return false;
    }
}

}  // namespace vega::quant
