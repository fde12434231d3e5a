// Internals of vega_quant shared between its .cpp files and its tests: error
// helpers and the two kernel sets (portable scalar, AVX2+FMA+F16C).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "quant/types.h"

namespace vega::quant {

// "Q2_K (id 10)" or "unknown type id 99".
std::string type_label(GgmlType t);
// Throws vega::Error "<what>: tensor type X (id N) is not supported".
[[noreturn]] void fail_unsupported(const char* what, GgmlType t);

namespace detail {

// The portable kernels (dot_scalar.cpp). Same contract as dot_q8 / dot_f32.
// dot_q8_table: any type of quant/type_table.h through its chunk decode (the types
// without a hand-written kernel take it on both paths).
float dot_q8_table(GgmlType t, const void* w_row, const BlockQ8Act* a, int64_t n);
float dot_q8_scalar(GgmlType t, const void* w_row, const BlockQ8Act* a, int64_t n);
float dot_f32_scalar(GgmlType t, const void* w_row, const float* x, int64_t n);

// The AVX2 kernels (dot_avx2.cpp). Only call when avx2_compiled() and the CPU
// has AVX2, FMA and F16C (cpu_has_avx2()).
bool avx2_compiled();
float dot_q8_avx2(GgmlType t, const void* w_row, const BlockQ8Act* a, int64_t n);
float dot_f32_avx2(GgmlType t, const void* w_row, const float* x, int64_t n);

// Shared by the quantizers (quantize.cpp, quantize_lowbit.cpp).
inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }
// The element with the largest magnitude, with its sign (the first of equals).
inline float signed_absmax(const float* x, int n) {
    float amax = 0, mx = 0;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            mx = x[i];
        }
    }
    return mx;
}

// Reference quantizers of the low-bit types (quantize_lowbit.cpp): n elements of x
// into dst's blocks (n a multiple of the block size).
void quantize_q2_k(const float* x, void* dst, int64_t n);
void quantize_q3_k(const float* x, void* dst, int64_t n);
void quantize_iq4_nl(const float* x, void* dst, int64_t n);
void quantize_iq4_xs(const float* x, void* dst, int64_t n);
void quantize_mxfp4(const float* x, void* dst, int64_t n);

// True when this CPU runs AVX2+FMA+F16C code (ignores VEGA_NO_AVX2).
bool cpu_has_avx2();
// The choice dot_q8/dot_f32 made (once, at first use): true = AVX2 kernels.
bool using_avx2();

}  // namespace detail
}  // namespace vega::quant
