// RoPE on the device: the rotation angle of a dimension pair and the rotation
// itself, rounded as the CPU backend does. Shared by the rope kernels
// (attention.cu) and the q+k+v matvec's rope epilogue (matvec.cu).
#pragma once
#include "backend/gpu/ops.h"
#include "backend/gpu/vendor.h"

namespace vega::gpu {

// Rotation of pair j at position p, as the CPU backend computes it: the angle,
// cos and sin in double, then rounded to float (a float angle is off by ~1e-6
// rad at position 50, which the bf16 rounding of later activations magnifies).
// The library's double sincos keeps a large-argument path that needs scratch on
// gfx906 (audit), so: Cody-Waite reduction by pi/2 (two-part constant, exact
// for the angles of any context length) and Taylor series on [-pi/4, pi/4],
// accurate to ~1e-15 before the rounding to float.
__device__ __forceinline__ void sincos_f64(double x, double* s, double* c) {
    constexpr double kTwoOverPi = 0.63661977236758134308, kPio2Hi = 1.57079632673412561417e+00,
                     kPio2Lo = 6.07710050650619224932e-11;
    const double k = rint(x * kTwoOverPi);
    const double r = (x - k * kPio2Hi) - k * kPio2Lo, r2 = r * r;
    // sin r = r (1 - r2/3! + ... - r2^6/13!), cos r = 1 - r2/2! + ... + r2^7/14!
    double ps = 1.0 / 6227020800.0, pc = -1.0 / 87178291200.0;
    ps = ps * r2 - 1.0 / 39916800.0, pc = pc * r2 + 1.0 / 479001600.0;
    ps = ps * r2 + 1.0 / 362880.0, pc = pc * r2 - 1.0 / 3628800.0;
    ps = ps * r2 - 1.0 / 5040.0, pc = pc * r2 + 1.0 / 40320.0;
    ps = ps * r2 + 1.0 / 120.0, pc = pc * r2 - 1.0 / 720.0;
    ps = ps * r2 - 1.0 / 6.0, pc = pc * r2 + 1.0 / 24.0;
    pc = pc * r2 - 0.5;
    const double sr = r + r * r2 * ps, cr = 1.0 + r2 * pc;
    const int q = int(static_cast<long long>(k) & 3);
    *s = q == 0 ? sr : q == 1 ? cr : q == 2 ? -sr : -cr;
    *c = q == 0 ? cr : q == 1 ? -sr : q == 2 ? -cr : sr;
}
__device__ __forceinline__ void rope_cs(const ops::RopeArgs& r, int p, int j, float* sn, float* cs) {
    // base^(-2j/n_rot) as exp(-2j/n_rot * ln(base)), ln(base) from the host (a double
    // pow here needs more SGPRs than gfx906 has: spills, audit).
    double theta = double(p) * double(r.freq_scale) * exp(-2.0 * j / r.n_rot * r.ln_base);
    if (r.freq_factors) theta /= double(r.freq_factors[j]);
    double s, c;
    sincos_f64(theta, &s, &c);
    *sn = float(s), *cs = float(c);
}
// (x0, x1) rotated by (cs, sn), rounded like the CPU (no fused multiply-add).
__device__ __forceinline__ void rotate(float x0, float x1, float cs, float sn, float* y0, float* y1) {
    *y0 = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    *y1 = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
}

// Dimension pair j of a head of hd dims: the two dims it joins, and whether it is
// rotated (j < n_rot / 2). Rotated pairs are (2j, 2j+1), or (j, j + n_rot/2) in the
// neox style; the dims from n_rot on pass through, paired as (2j, 2j+1).
struct RopePair {
    int a, b;
    bool rotated;
};
__device__ __forceinline__ RopePair rope_pair(const ops::RopeArgs& r, int j) {
    const int half = r.n_rot / 2;
    if (j >= half) return {2 * j, 2 * j + 1, false};
    return r.neox ? RopePair{j, j + half, true} : RopePair{2 * j, 2 * j + 1, true};
}

}  // namespace vega::gpu
