// Row-wise and element-wise kernels: embedding lookup, RMS norm fused with the
// q8 quantization of the matmul input, per-head norm, bias/residual adds,
// SwiGLU, row gather and the device argmax.
//
// @audit kernel=*prepare_act_k<* min_waves=4 expect=dpp
// @audit kernel=*argmax_k(* min_waves=4 expect=dpp
// @audit kernel=*head_rms_norm_k(* min_waves=4 expect=dpp
// @audit kernel=* min_waves=4
#include "backend/gpu/kernels/q8_chunk.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/repacked_elem.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"
#include "backend/gpu/kernels/norm.h"
#include "backend/gpu/kernels/prep_row.h"
#include "backend/gpu/kernels/silu.h"

namespace vega::gpu {
namespace {

using arch::kEltThreads;
using arch::kPrepThreads;
using arch::kRowThreads;

unsigned grid_for(int64_t n, int per) { return unsigned((n + per - 1) / per); }

// The device's bit conversions for repacked_elem.
struct DeviceConv {
    __device__ float f16(uint16_t h) const { return h2f(h); }
    __device__ float bits(uint32_t u) const { return __uint_as_float(u); }
};

// Element i of row `row` of a weight in the GPU layout (scalar; for lookups): the
// host reference decoder's function (repacked_elem.h), on the type's GpuFormat.
__device__ float weight_elem(const GpuMat& W, int64_t row, int64_t i) {
    switch (W.type) {
        case GgmlType::F32: return reinterpret_cast<const float*>(W.qs)[row * W.n_in + i];
        case GgmlType::F16: return h2f(reinterpret_cast<const uint16_t*>(W.qs)[row * W.n_in + i]);
        case GgmlType::BF16: return bf2f(reinterpret_cast<const uint16_t*>(W.qs)[row * W.n_in + i]);
        default: return repacked_elem(gpu_format(W.type), W, row, i, DeviceConv{});
    }
}

// out [n][n_in]; grid (ceil(n_in / kEltThreads), n).
__global__ void embed_k(GpuMat table, const int32_t* __restrict__ tok, float* __restrict__ out) {
    pdl_wait();
    pdl_trigger();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= table.n_in) return;
    out[int64_t(blockIdx.y) * table.n_in + i] = weight_elem(table, tok[blockIdx.y], i);
}

// One block per row. xo [n] = x * (w ? w / rms(x) : 1); when Q, also the q8 form:
// groups of 8 lanes own one 32-element chunk (4 elements a lane), reduce |max|
// and the q sum with DPP inside the group, and write one packed int32 a lane.
// When Q, xo and q (with ds) may be null: h alone (ops::prepare_act).
template <bool Q>
__global__ void __launch_bounds__(kRowThreads) prepare_act_k(float* x, const float* __restrict__ res,
                                                           const float* __restrict__ w, float eps, int64_t n,
                                                           float* __restrict__ xo, int8_t* __restrict__ q,
                                                           float* __restrict__ ds, uint16_t* __restrict__ h) {
    pdl_wait();
    pdl_trigger();
    __shared__ double lds[kRowThreads / kWave];
    const int64_t r = blockIdx.x;
    float* xr = x + r * n;
    float* yr = xo ? xo + r * n : nullptr;
    float scale = 1.f;
    if (res) {  // fused residual add: x += res (the pass below re-reads x after the block barrier)
        const float* rr = res + r * n;
        double ss = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += kRowThreads) {
            const float v = xr[i] + rr[i];
            xr[i] = v;
            ss += double(v) * v;
        }
        ss = block_reduce_sum_f64<kRowThreads>(ss, lds);  // contains __syncthreads: x is visible to the block
        scale = w ? norm_scale(ss, n, eps) : 1.f;
    } else if (w) {
        double ss = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += kRowThreads) ss += double(xr[i]) * xr[i];
        ss = block_reduce_sum_f64<kRowThreads>(ss, lds);
        scale = norm_scale(ss, n, eps);
    }
    if constexpr (!Q) {
        for (int64_t i = threadIdx.x; i < n; i += kRowThreads) yr[i] = xr[i] * scale * (w ? w[i] : 1.f);
    } else {
        const int64_t nc = n / 32;
        const int sub = threadIdx.x % 8;
        // Uniform trip count over the block so every lane takes part in the group reductions.
        for (int64_t c0 = 0; c0 < nc; c0 += kRowThreads / 8) {
            const int64_t c = c0 + threadIdx.x / 8;
            const bool valid = c < nc;
            const int64_t i = c * 32 + sub * 4;
            float4 v = valid ? *reinterpret_cast<const float4*>(xr + i) : make_float4(0.f, 0.f, 0.f, 0.f);
            const float4 g = (w && valid) ? *reinterpret_cast<const float4*>(w + i) : make_float4(1.f, 1.f, 1.f, 1.f);
            v.x = v.x * scale * g.x, v.y = v.y * scale * g.y, v.z = v.z * scale * g.z, v.w = v.w * scale * g.w;
            if (valid && xo) *reinterpret_cast<float4*>(yr + i) = v;
            const Q8Quad qq = q8_quad(v);
            if (valid) {
                if (q) {
                    reinterpret_cast<uint32_t*>(q + (r * nc + c) * 32)[sub] = qq.packed;
                    if (sub == 0) reinterpret_cast<float2*>(ds)[r * nc + c] = make_float2(qq.d, qq.dsum);
                }
                if (h) store_f16x4(h + r * n + i, qq.d, qq.q[0], qq.q[1], qq.q[2], qq.q[3]);
            }
        }
    }
}

// Fast form of prepare_act_k for n % 32 == 0, V float4 per thread held in registers
// (one read of x, no second pass over memory; prep_row.h). With w or res: one block per
// row (grid (1, rows)), kPrepThreads * V * 4 >= n, block-wide sum of squares. Without:
// grid (ceil(n / (4 * kPrepThreads)), rows), V == 1, chunk-local quantization only.
// The q8 blocks are computed exactly as in prepare_act_k.
// With res_k > 0 the residual is the weighted sum of res_k slices, res [rows][res_k][n]
// with weights res_w [rows][res_k], summed in slice order from zero (ops::combine_experts'
// order), then added to x.
template <int V>
__global__ void __launch_bounds__(kPrepThreads) prep_fast_k(float* x, const float* __restrict__ res,
                                                          const float* __restrict__ w, float eps, int64_t n,
                                                          float* __restrict__ xo, int8_t* __restrict__ q,
                                                          float* __restrict__ ds, uint16_t* __restrict__ h,
                                                          const float* __restrict__ res_w, int res_k) {
    __shared__ double lds[kPrepThreads / kWave];
    pdl_wait();
    pdl_trigger();
    const int64_t r = blockIdx.y;
    const int64_t base = int64_t(blockIdx.x) * kPrepThreads + threadIdx.x;  // float4 index of k = 0
    auto residual = [&](int, int64_t i4) {
        if (res_k == 0) return reinterpret_cast<const float4*>(res + r * n)[i4];
        float4 rr = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int j = 0; j < res_k; ++j) {
            const float wj = res_w[r * res_k + j];
            if (wj == 0.f) continue;  // (an expert another device holds: y unwritten)
            const float4 y = reinterpret_cast<const float4*>(res + (r * res_k + j) * n)[i4];
            rr.x += wj * y.x, rr.y += wj * y.y, rr.z += wj * y.z, rr.w += wj * y.w;
        }
        return rr;
    };
    prep_row<kPrepThreads, V>(x, res != nullptr, residual, w, eps, n, r, base, xo, q, ds, h, lds);
}

__global__ void add_bias_k(float* __restrict__ y, const float* __restrict__ b, int n, int64_t total) {
    pdl_wait();
    pdl_trigger();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < total) y[i] += b[i % n];
}
__global__ void add_k(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
    pdl_wait();
    pdl_trigger();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}
__global__ void swiglu_k(const float* __restrict__ g, const float* __restrict__ u, float* __restrict__ h, int64_t n) {
    pdl_wait();
    pdl_trigger();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) h[i] = silu(g[i]) * u[i];
}

// One wave per (row, head): x [rows][n_head][hd] *= w / rms.
__global__ void __launch_bounds__(kEltThreads) head_rms_norm_k(float* __restrict__ x, const float* __restrict__ w,
                                                               int64_t n_vec, int hd, float eps) {
    pdl_wait();
    pdl_trigger();
    const int64_t v = int64_t(blockIdx.x) * (kEltThreads / kWave) + threadIdx.x / kWave;
    if (v >= n_vec) return;
    float* p = x + v * hd;
    double ss = 0.0;
    for (int i = lane_id(); i < hd; i += kWave) ss += double(p[i]) * p[i];
    const float sc = norm_scale(block_reduce_sum_f64<kWave>(ss, nullptr), hd, eps);  // one wave: no LDS
    for (int i = lane_id(); i < hd; i += kWave) p[i] = p[i] * sc * w[i];
}

__global__ void gather_k(const float* __restrict__ x, const int32_t* __restrict__ idx, int64_t n, float* __restrict__ y) {
    pdl_wait();
    pdl_trigger();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[int64_t(blockIdx.y) * n + i] = x[int64_t(idx[blockIdx.y]) * n + i];
}

// One block per row (arch::kArgmaxThreads); (value, index) pairs reduced with the lowest
// index winning ties. out [rows], max_out [rows] (optional): the index and its logit.
constexpr int kArgmaxThreads = arch::kArgmaxThreads;
__global__ void __launch_bounds__(kArgmaxThreads) argmax_k(const float* __restrict__ logits, int64_t n,
                                                           int32_t* __restrict__ out, float* __restrict__ max_out) {
    pdl_wait();
    pdl_trigger();
    __shared__ float lv[kArgmaxThreads / kWave];
    __shared__ int li[kArgmaxThreads / kWave];
    const float* p = logits + int64_t(blockIdx.x) * n;
    float best = -INFINITY;
    int bi = int(n);  // larger than any index
    // Each thread's values in increasing index order, so a strict > keeps the lowest
    // index of its maximum. Whole rows of float4 (n % 4 == 0: every vocabulary seen):
    // 16-byte loads, 4 in flight a thread (a 152k vocabulary took 28 us one float at
    // a time, ncu on the H100).
    if (n % 4 == 0) {
        const float4* p4 = reinterpret_cast<const float4*>(p);
        const int64_t n4 = n / 4;
#pragma unroll 4
        for (int64_t i = threadIdx.x; i < n4; i += kArgmaxThreads) {
            const float4 v = p4[i];
            const int b = int(i * 4);
            if (v.x > best) best = v.x, bi = b;
            if (v.y > best) best = v.y, bi = b + 1;
            if (v.z > best) best = v.z, bi = b + 2;
            if (v.w > best) best = v.w, bi = b + 3;
        }
    } else {
        for (int64_t i = threadIdx.x; i < n; i += kArgmaxThreads) {
            const float v = p[i];
            if (v > best) best = v, bi = int(i);
        }
    }
    // Wave: max value, then the smallest index holding it.
    const float m = wave_reduce_max(best);
    float cand = best == m ? float(-bi) : -INFINITY;  // max of -index = min index (exact below 2^24)
    const int wi = int(-wave_reduce_max(cand));
    if (lane_id() == 0) lv[threadIdx.x / kWave] = m, li[threadIdx.x / kWave] = wi;
    __syncthreads();
    if (threadIdx.x == 0) {
        float bv = lv[0];
        int bidx = li[0];
        for (int k = 1; k < kArgmaxThreads / kWave; ++k)
            if (lv[k] > bv || (lv[k] == bv && li[k] < bidx)) bv = lv[k], bidx = li[k];
        out[blockIdx.x] = bidx >= n ? 0 : bidx;
        if (max_out) max_out[blockIdx.x] = bv;
    }
}

}  // namespace

void ops::embed(const GpuMat& table, const int32_t* tokens, int n, float* out, void* s) {
    if (n <= 0) return;
    launch(embed_k, dim3(grid_for(table.n_in, kEltThreads), unsigned(n)), dim3(kEltThreads), s, table, tokens, out);
}

namespace {
template <int V>
void prep_fast(float* x, const float* res, const float* w, float eps, int rows, int64_t n, float* xo, int8_t* q,
               float* ds, uint16_t* h, unsigned bx, void* s, const float* res_w = nullptr, int res_k = 0) {
    launch(prep_fast_k<V>, dim3(bx, unsigned(rows)), dim3(kPrepThreads), s, x, res, w, eps, n, xo, q, ds, h, res_w,
           res_k);
}
}  // namespace

int64_t& ops::h_only_launch_count() {
    static int64_t n = 0;
    return n;
}

bool ops::prepare_act_experts(float* x, const float* y, const float* yw, int k, const float* w, float eps, int rows,
                              int64_t n, float* xo, int8_t* q, float* ds, uint16_t* h, void* s) {
    if (rows <= 0 || (!q && !h) || !w || n % 32 != 0 || k < 1) return false;
    const bool launched = with_prep_vectors<kPrepThreads>(
        n, [&](auto v) { prep_fast<decltype(v)::value>(x, y, w, eps, rows, n, xo, q, ds, h, 1, s, yw, k); });
    h_only_launch_count() += launched && !xo && !q;
    return launched;
}

void ops::prepare_act(float* x, const float* res, const float* w, float eps, int rows, int64_t n, float* xo, int8_t* q,
                      float* ds, uint16_t* h, void* s) {
    if (rows <= 0) return;
    if ((q || h) && n % 32 == 0) {
        h_only_launch_count() += !xo && !q;
        const int64_t n4 = n / 4;
        if (!w && !res) return prep_fast<1>(x, res, w, eps, rows, n, xo, q, ds, h, grid_for(n4, kPrepThreads), s);
        if (with_prep_vectors<kPrepThreads>(
                n, [&](auto v) { prep_fast<decltype(v)::value>(x, res, w, eps, rows, n, xo, q, ds, h, 1, s); }))
            return;
        launch(prepare_act_k<true>, dim3(unsigned(rows)), dim3(kRowThreads), s, x, res, w, eps, n, xo, q, ds, h);
    } else {
        if (!xo) gpu_fail("prepare_act: the f32 form is the only one for n % 32 != 0, and no buffer was given");
        launch(prepare_act_k<false>, dim3(unsigned(rows)), dim3(kRowThreads), s, x, res, w, eps, n, xo, (int8_t*)nullptr,
               (float*)nullptr, (uint16_t*)nullptr);
    }
}

void ops::rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps, void* s) {
    if (rows <= 0) return;
    launch(prepare_act_k<false>, dim3(unsigned(rows)), dim3(kRowThreads), s, const_cast<float*>(x), (const float*)nullptr,
           w, eps, int64_t(n), y, (int8_t*)nullptr, (float*)nullptr, (uint16_t*)nullptr);
}

void ops::add_bias(float* y, const float* b, int rows, int n, void* s) {
    const int64_t total = int64_t(rows) * n;
    if (total > 0) launch(add_bias_k, dim3(grid_for(total, kEltThreads)), dim3(kEltThreads), s, y, b, n, total);
}
void ops::add(float* x, const float* y, int64_t n, void* s) {
    if (n > 0) launch(add_k, dim3(grid_for(n, kEltThreads)), dim3(kEltThreads), s, x, y, n);
}
void ops::swiglu(const float* g, const float* u, float* h, int64_t n, void* s) {
    if (n > 0) launch(swiglu_k, dim3(grid_for(n, kEltThreads)), dim3(kEltThreads), s, g, u, h, n);
}
void ops::head_rms_norm(float* x, const float* w, int rows, int n_head, int hd, float eps, void* s) {
    const int64_t nv = int64_t(rows) * n_head;
    if (nv > 0)
        launch(head_rms_norm_k, dim3(grid_for(nv, kEltThreads / kWave)), dim3(kEltThreads), s, x, w, nv, hd, eps);
}
void ops::gather_rows(const float* x, const int32_t* idx, int n_idx, int64_t n, float* y, void* s) {
    if (n_idx > 0) launch(gather_k, dim3(grid_for(n, kEltThreads), unsigned(n_idx)), dim3(kEltThreads), s, x, idx, n, y);
}
void ops::argmax(const float* logits, int rows, int64_t n, int32_t* out, float* max_out, void* s) {
    if (rows > 0) launch(argmax_k, dim3(unsigned(rows)), dim3(kArgmaxThreads), s, logits, n, out, max_out);
}

}  // namespace vega::gpu
