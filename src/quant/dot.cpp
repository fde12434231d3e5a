// Run-time choice between the scalar and AVX2 dot kernels, made once.
// Environment: VEGA_NO_AVX2=1 forces the portable scalar kernels even on a CPU
// with AVX2 (for debugging and for comparing the two paths).
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "quant/internal.h"
#include "quant/quant.h"

namespace vega::quant {
namespace detail {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    }();
    return has;
#else
    return false;
#endif
}

bool using_avx2() {
    static const bool use = [] {
        const bool disabled = env::flag("VEGA_NO_AVX2", false);
        return !disabled && avx2_compiled() && cpu_has_avx2();
    }();
    return use;
}

}  // namespace detail

float dot_q8(GgmlType t, const void* w_row, const BlockQ8Act* a, int64_t n) {
    return detail::using_avx2() ? detail::dot_q8_avx2(t, w_row, a, n)
                                : detail::dot_q8_scalar(t, w_row, a, n);
}

float dot_f32(GgmlType t, const void* w_row, const float* x, int64_t n) {
    return detail::using_avx2() ? detail::dot_f32_avx2(t, w_row, x, n)
                                : detail::dot_f32_scalar(t, w_row, x, n);
}

}  // namespace vega::quant
