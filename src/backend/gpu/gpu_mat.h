// A weight matrix W [n_out][n_in] in the GPU layout (host and device safe), and the
// GPU's row of the weight-type table: how each quantized type's 32-element chunks
// are stored in planes and what its codes and scale bits mean (GpuFormat). The
// repacker, its host reference decoder and every kernel (quant_chunk.h, rows.cu,
// matmul_mma.cu) read the format, not the type: a type is one gpu_format row (and
// its scale bits in repack.cpp), its codes come from quant/type_table.h.
//
// Quantized types are repacked at upload into planes so that a lane reads one
// 32-element chunk of a row with one load:
//   qs  [n_out][n_chunk][qs]  the codes: kNibbles  16 B, byte i = code i | code i+16 << 4
//                                        kBytes    32 B, int8 code i (Q8_0)
//                                        kPairs     8 B, word h (elements 16h..16h+15):
//                                                       bits 2k..2k+1 of byte b = element 16h + 4k + b
//   qh  [n_out][n_chunk][qh]  high code bits: 4 B, bit i of element i (Q5_*: + 16; Q3_K: + 4),
//                             or 8 B, 2 bits an element, elements 0..15 then 16..31 (Q6_K: + 16, + 32)
//   sc  [n_out][n_chunk][sc]  the chunk's scale bits (GpuScales): 1, 2 or 4 B; a 1-byte
//                             scale (IQ4_XS, MXFP4) keeps them at the file's 17 B per 32
//   sb  [n_out][n_chunk/8][sb] the super-block's f16 d (and dmin): K-quants, IQ4_XS
// A code decodes to value (code - offset), or book[code] for codebook types; the
// weight is that times the half's scale plus the half's min. Float types (F32/F16/
// BF16) keep their rows unchanged in qs.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace vega::gpu {

struct GpuMat {
    GgmlType type = GgmlType::F32;
    int64_t n_in = 0, n_out = 0;
    int64_t n_chunk = 0;  // n_in / 32 for quantized types
    const uint8_t* qs = nullptr;
    const uint8_t* qh = nullptr;
    const uint8_t* sc = nullptr;
    const uint8_t* sb = nullptr;
};

// Whether U can be the second matrix of a fused pair with W (SwiGLU's gate and up): one
// type and shape. A null U (no pair) always can.
inline bool pairs_with(const GpuMat& W, const GpuMat* U) {
    return !U || (U->type == W.type && U->n_in == W.n_in && U->n_out == W.n_out);
}

// Bytes per chunk of each plane for a type (0 when the plane is unused).
struct PlaneSizes {
    int qs, qh, sc, sb;  // sb: bytes per 256-element super-block
};

enum class GpuCodes : uint8_t { kNone, kNibbles, kBytes, kPairs };
enum class GpuBook : uint8_t { kNone, kIq4nl, kMxfp4 };  // quant/type_table.h's codebooks
// What a chunk's scale bits (sc, and sb per super-block) hold:
enum class GpuScales : uint8_t {
    kNone,
    kD,        // sc: f16 d                                     (both halves)
    kDM,       // sc: f16 d, f16 m (min added)                  (both halves)
    kK4,       // sc: u8 scale, u8 min; sb: f16 d, f16 dmin     d*scale, -dmin*min
    kI8x2,     // sc: i8 scale of each half; sb: f16 d          d*scale[h]
    kI8,       // sc: i8 scale (1 byte); sb: f16 d              d*scale (both halves)
    kQ2K,      // sc: byte per half (scale | min << 4); sb: f16 d, f16 dmin   d*scale[h], -dmin*min[h]
    kE8M0,     // sc: u8 e (1 byte); value 2^(e-128) (the doubled codebook's half)
};

struct GpuFormat {
    PlaneSizes ps;
    GpuCodes codes;
    int high_bits;  // 0, 1 (qh bit per element) or 2 (Q6_K)
    int high_at;    // the bit the high bits go to in a code: 4 (Q5_*, Q6_K) or 2 (Q3_K)
    int offset;     // the code of value 0 (linear codes)
    GpuBook book;
    GpuScales scales;
    // Per-half scales: the dot product sums each 16-element half apart.
    constexpr bool split_halves() const { return scales == GpuScales::kI8x2 || scales == GpuScales::kQ2K; }
    // Codes the dot4 takes as signed bytes (value = code - offset done on the bytes:
    // per-half scales cannot fold an offset into the chunk's activation sum).
    constexpr bool signed_codes() const { return split_halves() && offset != 0; }
    constexpr bool has_min() const { return scales == GpuScales::kDM || scales == GpuScales::kK4 || scales == GpuScales::kQ2K; }
};

// The GPU's table of weight types (every quantized type the GPU computes with).
constexpr GpuFormat gpu_format(GgmlType t) {
    using C = GpuCodes;
    using B = GpuBook;
    using S = GpuScales;
    switch (t) {
        case GgmlType::Q4_0: return {{16, 0, 2, 0}, C::kNibbles, 0, 0, 8, B::kNone, S::kD};
        case GgmlType::Q4_1: return {{16, 0, 4, 0}, C::kNibbles, 0, 0, 0, B::kNone, S::kDM};
        case GgmlType::Q5_0: return {{16, 4, 2, 0}, C::kNibbles, 1, 4, 16, B::kNone, S::kD};
        case GgmlType::Q5_1: return {{16, 4, 4, 0}, C::kNibbles, 1, 4, 0, B::kNone, S::kDM};
        case GgmlType::Q8_0: return {{32, 0, 2, 0}, C::kBytes, 0, 0, 0, B::kNone, S::kD};
        case GgmlType::Q2_K: return {{8, 0, 2, 4}, C::kPairs, 0, 0, 0, B::kNone, S::kQ2K};
        case GgmlType::Q3_K: return {{8, 4, 2, 2}, C::kPairs, 1, 2, 4, B::kNone, S::kI8x2};
        case GgmlType::Q4_K: return {{16, 0, 2, 4}, C::kNibbles, 0, 0, 0, B::kNone, S::kK4};
        case GgmlType::Q5_K: return {{16, 4, 2, 4}, C::kNibbles, 1, 4, 0, B::kNone, S::kK4};
        case GgmlType::Q6_K: return {{16, 8, 2, 2}, C::kNibbles, 2, 4, 32, B::kNone, S::kI8x2};
        case GgmlType::IQ4_NL: return {{16, 0, 2, 0}, C::kNibbles, 0, 0, 0, B::kIq4nl, S::kD};
        case GgmlType::IQ4_XS: return {{16, 0, 1, 2}, C::kNibbles, 0, 0, 0, B::kIq4nl, S::kI8};
        case GgmlType::MXFP4: return {{16, 0, 1, 0}, C::kNibbles, 0, 0, 0, B::kMxfp4, S::kE8M0};
        default: return {{0, 0, 0, 0}, C::kNone, 0, 0, 0, B::kNone, S::kNone};
    }
}

// X(T) for every type of gpu_format: the kernels' dispatch switches.
#define VEGA_GPU_QUANT_TYPES(X) \
    X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(IQ4_NL) X(IQ4_XS) X(MXFP4)

// X(QK, V): the decode q+k+v launches with the rope epilogue whose v has a type of its
// own, from llama.cpp's quantization mixes: Q4_K_M and Q5_K_M give about half the
// layers a Q6_K attn_v, Q4_K_S and IQ4_XS / IQ4_NL (with GQA) a Q5_K one, Q3_K_M a Q4_K
// or Q5_K one. Other pairs run q+k, v and the rope + store as three kernels.
#define VEGA_GPU_QKV_MIXED_TYPES(X) \
    X(Q4_K, Q6_K) X(Q5_K, Q6_K) X(Q4_K, Q5_K) X(IQ4_XS, Q5_K) X(IQ4_NL, Q5_K) X(Q3_K, Q4_K) X(Q3_K, Q5_K)
constexpr bool qkv_v_type_ok(GgmlType qk, GgmlType v) {
    if (qk == v) return true;
#define VEGA_QKV_PAIR(QK, V) \
    if (qk == GgmlType::QK && v == GgmlType::V) return true;
    VEGA_GPU_QKV_MIXED_TYPES(VEGA_QKV_PAIR)
#undef VEGA_QKV_PAIR
    return false;
}

constexpr PlaneSizes plane_sizes(GgmlType t) { return gpu_format(t).ps; }

// A codebook's 16 int8 values as four little-endian words (byte j of word w is entry
// 4w + j): quant/type_table.h's kIq4nlValues and kMxfp4Values (RepackTest checks).
struct BookWords {
    uint32_t w0, w1, w2, w3;
};
constexpr BookWords book_words(GpuBook b) {
    return b == GpuBook::kIq4nl ? BookWords{0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u}
                                : BookWords{0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu};
}
// Entry i of a codebook (scalar: the host reference, embedding rows).
constexpr int book_value(GpuBook b, int i) {
    const BookWords t = book_words(b);
    const uint32_t w = (i & 12) == 0 ? t.w0 : (i & 12) == 4 ? t.w1 : (i & 12) == 8 ? t.w2 : t.w3;
    return int(int8_t(uint8_t(w >> (8 * (i & 3)))));
}

// A codebook as two 8-entry tables whose lookups add up to its entries plus a
// constant (NVIDIA's codebook dot, wave.h book_dot8): prmt looks up 8 bytes by a
// selector's low 3 bits, and with the selector's bit 3 set gives the selected byte's
// sign instead (0x00 or 0xFF). With the selectors c (lower) and c ^ 8 (upper):
//   lower(c) = c < 8 ? book[c] : sign(lower entries)          (lo: entries 0..7)
//   upper(c) = c >= 8 ? book[c] + delta : sign(upper entries)   (up: entries 8..15 + delta)
// so lower + upper = book[c] + bias for every c, when each half keeps one sign: bias =
// the upper entries' sign value (0 or -1), delta = bias - the lower entries' sign value.
// IQ4_NL's book: lower entries negative, upper +1 non-negative, bias 0; MXFP4's e2m1:
// lower non-negative, upper -1 negative, bias -1 (the dot adds the activation's sum back).
struct SplitBook {
    uint32_t lo0, lo1, up0, up1;
    int bias;
    bool ok;  // every entry's half has one sign and every shifted entry fits an int8
};
constexpr SplitBook split_book(GpuBook b) {
    const int s_lo = book_value(b, 0) < 0 ? -1 : 0;
    const int bias = s_lo == -1 ? 0 : -1, delta = bias - s_lo;
    SplitBook r{0, 0, 0, 0, bias, true};
    for (int i = 0; i < 8; ++i) {
        const int l = book_value(b, i), u = book_value(b, 8 + i) + delta;
        if ((l < 0 ? -1 : 0) != s_lo || (u < 0 ? -1 : 0) != bias || u < -128 || u > 127) r.ok = false;
        (i < 4 ? r.lo0 : r.lo1) |= uint32_t(uint8_t(l)) << (8 * (i & 3));
        (i < 4 ? r.up0 : r.up1) |= uint32_t(uint8_t(u)) << (8 * (i & 3));
    }
    return r;
}
static_assert(split_book(GpuBook::kIq4nl).ok && split_book(GpuBook::kMxfp4).ok, "each codebook half keeps one sign");

// A codebook as two 8-entry tables of unsigned bytes whose lookups differ by its
// entries (NVIDIA's f16 dequantization in the tensor-core matmul, matmul_mma.cu book_dequant8):
// with the selectors c (lower table) and c ^ 8 (upper), prmt's sign mode giving each
// table's constant (kl, ku: 0 or 255, the sign of its bytes) for the other half's codes,
//   lower(c) - upper(c ^ 8) = book[c]  for every c,
// when lower = entries 0..7 + ku and upper = kl - entries 8..15 are bytes whose sign
// bits give back kl and ku. As f16 (1024 + byte, one prmt with 0x64 each) the
// difference is exact, so a weight is (lower - upper) * scale: the codes themselves
// select, no select or mask per byte. IQ4_NL: kl = ku = 255; MXFP4's e2m1: kl = ku = 0.
struct DiffBook {
    uint32_t lo0, lo1, up0, up1;
    bool ok;  // both tables' bytes fit and keep the sign their constant needs
};
constexpr DiffBook diff_book(GpuBook b) {
    for (int kl = 0; kl <= 255; kl += 255)
        for (int ku = 0; ku <= 255; ku += 255) {
            DiffBook r{0, 0, 0, 0, true};
            for (int i = 0; i < 8; ++i) {
                const int l = book_value(b, i) + ku, u = kl - book_value(b, 8 + i);
                if (l < 0 || l > 255 || u < 0 || u > 255 || (l >= 128 ? 255 : 0) != kl || (u >= 128 ? 255 : 0) != ku)
                    r.ok = false;
                (i < 4 ? r.lo0 : r.lo1) |= uint32_t(l & 0xFF) << (8 * (i & 3));
                (i < 4 ? r.up0 : r.up1) |= uint32_t(u & 0xFF) << (8 * (i & 3));
            }
            if (r.ok) return r;
        }
    return DiffBook{0, 0, 0, 0, false};
}
static_assert(diff_book(GpuBook::kIq4nl).ok && diff_book(GpuBook::kMxfp4).ok, "each codebook has a difference form");

// prmt.b32's default mode on the host (tests): byte (sel >> 4i) & 7 of {a, b}, or its
// sign replicated when the selector's bit 3 is set.
constexpr uint32_t prmt_host(uint32_t a, uint32_t b, uint32_t sel) {
    const uint64_t ab = uint64_t(a) | uint64_t(b) << 32;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t s = (sel >> (4 * i)) & 0xFu, byte = uint32_t(ab >> (8 * (s & 7u))) & 0xFFu;
        r |= ((s & 8u) ? ((byte & 0x80u) ? 0xFFu : 0u) : byte) << (8 * i);
    }
    return r;
}

}  // namespace vega::gpu
