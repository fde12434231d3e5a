// Tensor element types (GGML numbering, as stored in GGUF) and the on-disk block
// layouts of the quantized ones. Plain structs, no host-only code: this header
// is included by CPU code and by the GPU kernels alike.
#pragma once
#include <cstddef>
#include <cstdint>

namespace vega {

enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,  // gpt-oss experts: 32 e2m1 values (4 bits) with one e8m0 scale byte
};

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

// f16 values are kept as raw uint16_t bits so this header needs no half type.
struct BlockQ4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };                   // 18 B / 32
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[QK4_1 / 2]; };                // 20 B / 32
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };    // 22 B / 32
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; }; // 24 B / 32
struct BlockQ8_0 { uint16_t d; int8_t qs[QK8_0]; };                        // 34 B / 32
// K-quants: super-blocks of 256.
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };  // 144 B
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };  // 176 B
struct BlockQ6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };  // 210 B

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210, "GGUF block layouts");

// Activations quantized once per matmul input and reused by every weight row:
// 32 int8 values with a float scale d and s = d * sum(qs) (the sum serves the
// "min" terms of Q4_1/Q5_1/K-quants and the -8/-16 offsets of Q4_0/Q5_0).
constexpr int QK_ACT = 32;
struct BlockQ8Act { float d; float s; int8_t qs[QK_ACT]; };  // 40 B / 32
static_assert(sizeof(BlockQ8Act) == 40, "BlockQ8Act layout");

struct TypeTraits {
    const char* name;
    int block_size;    // elements per block (1 for plain types)
    int type_size;     // bytes per block
    bool supported;    // vega can compute with it (on the CPU; Backend::supports_type says per backend)
};

// Returns traits for any GGML type id; unknown ids get {nullptr,0,0,false}.
constexpr TypeTraits type_traits(GgmlType t) {
    switch (t) {
        case GgmlType::F32: return {"F32", 1, 4, true};
        case GgmlType::F16: return {"F16", 1, 2, true};
        case GgmlType::BF16: return {"BF16", 1, 2, true};
        case GgmlType::Q4_0: return {"Q4_0", 32, 18, true};
        case GgmlType::Q4_1: return {"Q4_1", 32, 20, true};
        case GgmlType::Q5_0: return {"Q5_0", 32, 22, true};
        case GgmlType::Q5_1: return {"Q5_1", 32, 24, true};
        case GgmlType::Q8_0: return {"Q8_0", 32, 34, true};
        case GgmlType::Q8_1: return {"Q8_1", 32, 36, false};
        case GgmlType::Q2_K: return {"Q2_K", 256, 84, true};
        case GgmlType::Q3_K: return {"Q3_K", 256, 110, true};
        case GgmlType::Q4_K: return {"Q4_K", 256, 144, true};
        case GgmlType::Q5_K: return {"Q5_K", 256, 176, true};
        case GgmlType::Q6_K: return {"Q6_K", 256, 210, true};
        case GgmlType::Q8_K: return {"Q8_K", 256, 292, false};
        case GgmlType::IQ2_XXS: return {"IQ2_XXS", 256, 66, false};
        case GgmlType::IQ2_XS: return {"IQ2_XS", 256, 74, false};
        case GgmlType::IQ3_XXS: return {"IQ3_XXS", 256, 98, false};
        case GgmlType::IQ1_S: return {"IQ1_S", 256, 50, false};
        case GgmlType::IQ4_NL: return {"IQ4_NL", 32, 18, true};
        case GgmlType::IQ3_S: return {"IQ3_S", 256, 110, false};
        case GgmlType::IQ2_S: return {"IQ2_S", 256, 82, false};
        case GgmlType::IQ4_XS: return {"IQ4_XS", 256, 136, true};
        case GgmlType::I8: return {"I8", 1, 1, false};
        case GgmlType::I16: return {"I16", 1, 2, false};
        case GgmlType::I32: return {"I32", 1, 4, false};
        case GgmlType::I64: return {"I64", 1, 8, false};
        case GgmlType::F64: return {"F64", 1, 8, false};
        case GgmlType::IQ1_M: return {"IQ1_M", 256, 56, false};
        case GgmlType::TQ1_0: return {"TQ1_0", 256, 54, false};
        case GgmlType::TQ2_0: return {"TQ2_0", 256, 66, false};
        case GgmlType::MXFP4: return {"MXFP4", 32, 17, true};
    }
    return {nullptr, 0, 0, false};
}

constexpr bool is_known_type(uint32_t id) { return type_traits(GgmlType(id)).name != nullptr; }
constexpr bool is_float_type(GgmlType t) {
    return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

}  // namespace vega
