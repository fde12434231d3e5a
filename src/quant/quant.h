// Reference (de)quantization of every supported weight type, the activation
// quantizer, and the CPU dot products between a weight row and an activation.
// Row length n must be a multiple of the type's block size (checked by callers
// at load time; violating it here is a programming error).
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace vega::quant {

// Bytes of one row of n elements of type t (n % block_size == 0).
size_t row_bytes(GgmlType t, int64_t n);

// dst[0..n) = dequantized src row. Supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// Reference quantizer (round to nearest, llama.cpp-compatible block layouts);
// used by `vega synth`, by tests, and for F32 -> other conversions.
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// Activation quantization: x[n] -> n/32 BlockQ8Act.
void quantize_act_row(const float* x, BlockQ8Act* y, int64_t n);

// sum_i w[i] * a[i] for one weight row of quantized type t against a q8
// activation row (both n elements). Picks the AVX2 kernel when the CPU has it.
float dot_q8(GgmlType t, const void* w_row, const BlockQ8Act* a, int64_t n);

// sum_i w[i] * x[i] for a float-type weight row (F32, F16, BF16) against f32 x.
float dot_f32(GgmlType t, const void* w_row, const float* x, int64_t n);

// True when dot_q8 serves type t (all quantized supported types); float types use dot_f32.
bool uses_q8_activations(GgmlType t);

}  // namespace vega::quant
