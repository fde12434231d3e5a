// One row's matmul input held in registers: x += a residual, the RMS norm by w, and the
// q8 (and f16) form. Written once for the kernels that end in it: prep_fast_k (rows.cu:
// the residual a buffer or a weighted sum of experts' slices) and peer_sum_norm_k
// (peer_sum.cu: the residual the ranks' parts summed over peer memory), so both round
// alike bit for bit.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backend/gpu/kernels/norm.h"
#include "backend/gpu/kernels/q8_chunk.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

// Act::h: four q8 values q0..q3 of scale d as f16 (f16(q * d)), one 8-byte store.
__device__ __forceinline__ void store_f16x4(uint16_t* h, float d, int q0, int q1, int q2, int q3) {
    const uint32_t lo = uint32_t(f2h(float(q0) * d)) | uint32_t(f2h(float(q1) * d)) << 16;
    const uint32_t hi = uint32_t(f2h(float(q2) * d)) | uint32_t(f2h(float(q3) * d)) << 16;
    *reinterpret_cast<uint2*>(h) = make_uint2(lo, hi);
}

// The one-block row kernels' vectors (float4s) per thread, V = 1, 2 or 4: the fewest whose
// Threads x V float4s cover a row of n floats. f(std::integral_constant<int, V>{}) for that
// V; false (f not called) for rows past Threads x 16 floats. prepare_act,
// prepare_act_experts and peer_sum_norm dispatch through it, and peer_sum_norm_ok states
// its bound with kMaxPrepVectors.
constexpr int kMaxPrepVectors = 4;
template <int Threads, class F>
inline bool with_prep_vectors(int64_t n, F&& f) {
    const int64_t v = (n / 4 + Threads - 1) / Threads;
    if (v <= 1) return f(std::integral_constant<int, 1>{}), true;
    if (v <= 2) return f(std::integral_constant<int, 2>{}), true;
    if (v <= kMaxPrepVectors) return f(std::integral_constant<int, kMaxPrepVectors>{}), true;
    return false;
}

// Row r of x [rows][n] (n % 32 == 0), thread t of a block of Threads owning the float4s
// base + k * Threads, k < V (base: the float4 index of k = 0). With residual (a functor
// float4 (int k, int64_t i4), k a constant after unrolling) where add_residual: x +=
// residual(k, i4), written back. With w: the block-wide sum of
// squares (Threads * V * 4 >= n: the whole row in this block) and xo = x * (w / rms);
// without, xo = x. Then q [rows][n] int8 and ds [rows][n/32] (scale, scale * sum) of
// xo, and with h its f16 form. xo and q (with ds) may be null: an input only the
// tensor-core matmul reads needs h alone. lds: Threads / kWave doubles of shared memory.
template <int Threads, int V, class Residual>
__device__ __forceinline__ void prep_row(float* x, bool add_residual, const Residual& residual, const float* __restrict__ w, float eps,
                                         int64_t n, int64_t r, int64_t base, float* __restrict__ xo,
                                         int8_t* __restrict__ q, float* __restrict__ ds, uint16_t* __restrict__ h,
                                         double* lds) {
    const int64_t n4 = n / 4, nc = n / 32;
    float* xr = x + r * n;
    float4 v[V];
    double ss = 0.0;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int64_t i4 = base + int64_t(k) * Threads;
        v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (i4 < n4) {
            v[k] = reinterpret_cast<const float4*>(xr)[i4];
            if (add_residual) {
                const float4 rr = residual(k, i4);
                v[k].x += rr.x, v[k].y += rr.y, v[k].z += rr.z, v[k].w += rr.w;
                reinterpret_cast<float4*>(xr)[i4] = v[k];
            }
        }
        ss += double(v[k].x) * v[k].x + double(v[k].y) * v[k].y + double(v[k].z) * v[k].z + double(v[k].w) * v[k].w;
    }
    float scale = 1.f;
    if (w) scale = norm_scale(block_reduce_sum_f64<Threads>(ss, lds), n, eps);
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int64_t i4 = base + int64_t(k) * Threads;
        const bool valid = i4 < n4;  // uniform over each group of 8 lanes (n4 % 8 == 0)
        float4 a = v[k];
        const float4 g = (w && valid) ? reinterpret_cast<const float4*>(w)[i4] : make_float4(1.f, 1.f, 1.f, 1.f);
        a.x = a.x * scale * g.x, a.y = a.y * scale * g.y, a.z = a.z * scale * g.z, a.w = a.w * scale * g.w;
        if (valid && xo) reinterpret_cast<float4*>(xo + r * n)[i4] = a;
        const Q8Quad qq = q8_quad(a);
        if (valid) {
            const int64_t c = i4 / 8;
            if (q) {
                reinterpret_cast<uint32_t*>(q + r * n)[i4] = qq.packed;
                if (i4 % 8 == 0) reinterpret_cast<float2*>(ds)[r * nc + c] = make_float2(qq.d, qq.dsum);
            }
            if (h) store_f16x4(h + r * n + i4 * 4, qq.d, qq.q[0], qq.q[1], qq.q[2], qq.q[3]);
        }
    }
}

}  // namespace vega::gpu
