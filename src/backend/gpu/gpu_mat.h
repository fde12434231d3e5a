// A weight matrix W [n_out][n_in] in the GPU layout (host and device safe).
//
// Quantized types are repacked at upload into planes so that a lane reads one
// 32-element chunk of a row with one 16-byte load (two for Q8_0):
//   qs  [n_out][n_chunk][16]  4-bit values: byte i = elem i (low nibble) | elem i+16 (high)
//       [n_out][n_chunk][32]  Q8_0: int8 elems 0..31
//   qh  [n_out][n_chunk]      Q5_0/Q5_1/Q5_K: uint32, bit i = 5th bit of elem i
//                             Q6_K: uint32 x2, 2 bits per elem (elems 0..15, 16..31)
//   sc  [n_out][n_chunk]      Q4_0/Q5_0/Q8_0: f16 d; Q4_1/Q5_1: f16 d, f16 m;
//                             Q4_K/Q5_K: u8 scale, u8 min; Q6_K: i8 scale (elems 0..15), i8 (16..31)
//   sb  [n_out][n_chunk/8]    Q4_K/Q5_K: f16 d, f16 dmin; Q6_K: f16 d
// Float types (F32/F16/BF16) keep their rows unchanged in qs.
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

// Bytes per chunk of each plane for a type (0 when the plane is unused).
struct PlaneSizes {
    int qs, qh, sc, sb;  // sb: bytes per 256-element super-block
};

constexpr PlaneSizes plane_sizes(GgmlType t) {
    switch (t) {
        case GgmlType::Q4_0: return {16, 0, 2, 0};
        case GgmlType::Q4_1: return {16, 0, 4, 0};
        case GgmlType::Q5_0: return {16, 4, 2, 0};
        case GgmlType::Q5_1: return {16, 4, 4, 0};
        case GgmlType::Q8_0: return {32, 0, 2, 0};
        case GgmlType::Q4_K: return {16, 0, 2, 4};
        case GgmlType::Q5_K: return {16, 4, 2, 4};
        case GgmlType::Q6_K: return {16, 8, 2, 2};
        default: return {0, 0, 0, 0};
    }
}

}  // namespace vega::gpu
