// Matrix-vector products for decode (1..8 activation rows per launch) and the
// same kernel over groups of 8 rows for prompts. One wave per output row; each
// lane walks the row's 32-element chunks with 16-byte weight loads
// (kMatvecUnroll of them in flight), integer dots against the q8 activations
// through dot4_i8, and one wave reduction per activation row at the end.
//
// Audit specs (glob over the demangled kernel name, '?' for its spaces; the longest matching
// one applies). The fused gate/up kernels for 8 rows of K-quants hold 3 waves/SIMD (no spills).
// @audit kernel=*matvec_q<* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp
// @audit kernel=*matvec_q<*,?8,?true>* min_waves=3 expect=v_dot4_i32_i8,global_load_dwordx4,dpp
// @audit kernel=*matvec_f<* min_waves=4 expect=global_load_dwordx4,dpp
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {
namespace {

using arch::kMatvecUnroll;
using arch::kMatvecWaves;
constexpr int kMatvecThreads = kWave * kMatvecWaves;

// 4 bits (b & 0xF) -> value 16 in each byte whose bit is set (the 5th bit of Q5 types).
__device__ __forceinline__ uint32_t spread4(uint32_t b) { return (((b & 0xFu) * 0x00204081u) & 0x01010101u) << 4; }
// 4 two-bit fields (b & 0xFF) -> bits 4..5 of each byte (the high bits of Q6_K).
__device__ __forceinline__ uint32_t spread2(uint32_t b) {
    b &= 0xFFu;
    return ((b | (b << 6) | (b << 12) | (b << 18)) & 0x03030303u) << 4;
}
// Bytes 0..63 -> signed bytes q - 32 (no carries between bytes).
__device__ __forceinline__ int sub32(uint32_t q) {
    const uint32_t r = q ^ 0x20202020u, m = r & 0x20202020u;
    return int(r | (m << 1) | (m << 2));
}

// One 32-element chunk of a quantized weight row, in registers.
struct Chunk {
    uint4 q0, q1;     // q1 only for Q8_0
    uint32_t h0, h1;  // 5th-bit mask (Q5_*) or the 2-bit planes (Q6_K)
    float f0, f1;     // type-specific scales
};

template <GgmlType T>
__device__ __forceinline__ Chunk load_chunk(const GpuMat& W, int64_t row, int64_t c) {
    constexpr PlaneSizes ps = plane_sizes(T);
    const int64_t i = row * W.n_chunk + c;
    Chunk r;
    const uint4* q = reinterpret_cast<const uint4*>(W.qs) + i * (ps.qs / 16);
    r.q0 = q[0];
    if constexpr (ps.qs == 32) r.q1 = q[1];
    if constexpr (ps.qh == 4) r.h0 = reinterpret_cast<const uint32_t*>(W.qh)[i];
    if constexpr (ps.qh == 8) {
        const uint2 h = reinterpret_cast<const uint2*>(W.qh)[i];
        r.h0 = h.x, r.h1 = h.y;
    }
    if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q5_0 || T == GgmlType::Q8_0) {
        r.f0 = h2f(reinterpret_cast<const uint16_t*>(W.sc)[i]);
    } else if constexpr (T == GgmlType::Q4_1 || T == GgmlType::Q5_1) {
        const ushort2 dm = reinterpret_cast<const ushort2*>(W.sc)[i];
        r.f0 = h2f(dm.x), r.f1 = h2f(dm.y);
    } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
        const uchar2 sm = reinterpret_cast<const uchar2*>(W.sc)[i];
        const ushort2 dd = reinterpret_cast<const ushort2*>(W.sb)[row * (W.n_chunk / 8) + c / 8];
        r.f0 = h2f(dd.x) * float(sm.x), r.f1 = h2f(dd.y) * float(sm.y);
    } else if constexpr (T == GgmlType::Q6_K) {
        const char2 sc = reinterpret_cast<const char2*>(W.sc)[i];
        const float d = h2f(reinterpret_cast<const uint16_t*>(W.sb)[row * (W.n_chunk / 8) + c / 8]);
        r.f0 = d * float(sc.x), r.f1 = d * float(sc.y);
    }
    return r;
}

// sum_i w[i] * x[i] over the chunk, with x given as q8 (a0: elems 0..15, a1: 16..31; ds = d, d*sum(q)).
template <GgmlType T>
__device__ __forceinline__ float dot_chunk(const Chunk& r, const int4& a0, const int4& a1, float2 ds) {
    const int a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    if constexpr (T == GgmlType::Q8_0) {
        const uint32_t w[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
        int s0 = 0, s1 = 0;  // two accumulators: independent dot4 chains
#pragma unroll
        for (int k = 0; k < 4; ++k) s0 = dot4_i8(int(w[k]), a[k], s0), s1 = dot4_i8(int(w[k + 4]), a[k + 4], s1);
        return r.f0 * ds.x * float(s0 + s1);
    } else {
        const uint32_t q[4] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w};
        int s0 = 0, s1 = 0;  // elems 0..15, 16..31
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            uint32_t lo = q[k] & 0x0F0F0F0Fu, hi = (q[k] >> 4) & 0x0F0F0F0Fu;
            if constexpr (T == GgmlType::Q5_0 || T == GgmlType::Q5_1 || T == GgmlType::Q5_K) {
                lo |= spread4(r.h0 >> (4 * k));
                hi |= spread4(r.h0 >> (16 + 4 * k));
            }
            if constexpr (T == GgmlType::Q6_K) {
                s0 = dot4_i8(sub32(lo | spread2(r.h0 >> (8 * k))), a[k], s0);
                s1 = dot4_i8(sub32(hi | spread2(r.h1 >> (8 * k))), a[k + 4], s1);
            } else {
                s0 = dot4_i8(int(lo), a[k], s0);
                s1 = dot4_i8(int(hi), a[k + 4], s1);
            }
        }
        if constexpr (T == GgmlType::Q4_0) return r.f0 * (ds.x * float(s0 + s1) - 8.f * ds.y);
        if constexpr (T == GgmlType::Q5_0) return r.f0 * (ds.x * float(s0 + s1) - 16.f * ds.y);
        if constexpr (T == GgmlType::Q4_1 || T == GgmlType::Q5_1) return r.f0 * ds.x * float(s0 + s1) + r.f1 * ds.y;
        if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K)
            return r.f0 * ds.x * float(s0 + s1) - r.f1 * ds.y;
        if constexpr (T == GgmlType::Q6_K) return ds.x * (r.f0 * float(s0) + r.f1 * float(s1));
        return 0.f;
    }
}

__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

// Block b covers output rows [b / n_groups * kMatvecWaves, +kMatvecWaves) for the
// activation rows [b % n_groups * NB, +NB): blocks sharing weight rows run together.
// Writes y [a.rows][W.n_out] (or h = silu(W·x) * (U·x) when SWIGLU).
template <GgmlType T, int NB, bool SWIGLU>
__global__ void __launch_bounds__(kMatvecThreads) matvec_q(GpuMat W, GpuMat U, ops::Act a, float* __restrict__ y) {
    const int n_groups = (a.rows + NB - 1) / NB;
    const int64_t row = int64_t(blockIdx.x / n_groups) * kMatvecWaves + threadIdx.x / kWave;
    const int t0 = int(blockIdx.x % n_groups) * NB;
    if (row >= W.n_out) return;  // whole waves leave together
    const int nt = min(NB, a.rows - t0);
    const int64_t nc = W.n_chunk;
    const int lane = lane_id();
    // The fused gate/up kernel streams two matrices: half the depth keeps the
    // same bytes in flight within the register budget.
    constexpr int kU = SWIGLU ? (kMatvecUnroll + 1) / 2 : kMatvecUnroll;
    float acc[NB], accu[NB];
#pragma unroll
    for (int t = 0; t < NB; ++t) acc[t] = 0.f, accu[t] = 0.f;

    for (int64_t c0 = lane; c0 < nc; c0 += int64_t(kWave) * kU) {
        Chunk w[kU], u[kU];
#pragma unroll
        for (int k = 0; k < kU; ++k) {
            const int64_t c = c0 + int64_t(k) * kWave;
            if (c < nc) {
                w[k] = load_chunk<T>(W, row, c);
                if constexpr (SWIGLU) u[k] = load_chunk<T>(U, row, c);
            }
        }
#pragma unroll
        for (int k = 0; k < kU; ++k) {
            const int64_t c = c0 + int64_t(k) * kWave;
            if (c >= nc) break;
#pragma unroll
            for (int t = 0; t < NB; ++t) {
                if (t >= nt) break;
                const int64_t ai = int64_t(t0 + t) * nc + c;
                const int4* aq = reinterpret_cast<const int4*>(a.q) + ai * 2;
                const int4 a0 = aq[0], a1 = aq[1];
                const float2 ds = reinterpret_cast<const float2*>(a.ds)[ai];
                acc[t] += dot_chunk<T>(w[k], a0, a1, ds);
                if constexpr (SWIGLU) accu[t] += dot_chunk<T>(u[k], a0, a1, ds);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NB; ++t) {
        const float s = wave_reduce_sum(acc[t]);
        float v = s;
        if constexpr (SWIGLU) v = silu(s) * wave_reduce_sum(accu[t]);
        if (lane == 0 && t < nt) y[int64_t(t0 + t) * W.n_out + row] = v;
    }
}

// 8 consecutive weights of a float-type row starting at element i (16-byte aligned).
template <GgmlType T>
__device__ __forceinline__ void load8(const uint8_t* row, int64_t i, float* w) {
    if constexpr (T == GgmlType::F32) {
        const float4* p = reinterpret_cast<const float4*>(row) + i / 4;
        const float4 x = p[0], z = p[1];
        w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w, w[4] = z.x, w[5] = z.y, w[6] = z.z, w[7] = z.w;
    } else {
        const uint4 v = reinterpret_cast<const uint4*>(row)[i / 8];
        const uint32_t p[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if constexpr (T == GgmlType::F16)
                w[2 * k] = h2f(uint16_t(p[k] & 0xFFFF)), w[2 * k + 1] = h2f(uint16_t(p[k] >> 16));
            else
                w[2 * k] = bf2f(uint16_t(p[k] & 0xFFFF)), w[2 * k + 1] = bf2f(uint16_t(p[k] >> 16));
        }
    }
}
template <GgmlType T>
__device__ __forceinline__ float load1(const uint8_t* row, int64_t i) {
    if constexpr (T == GgmlType::F32) return reinterpret_cast<const float*>(row)[i];
    else if constexpr (T == GgmlType::F16) return h2f(reinterpret_cast<const uint16_t*>(row)[i]);
    else return bf2f(reinterpret_cast<const uint16_t*>(row)[i]);
}

// Float weights against the f32 activations; 16-byte loads when n_in % 8 == 0.
template <GgmlType T, int NB, bool SWIGLU>
__global__ void __launch_bounds__(kMatvecThreads) matvec_f(GpuMat W, GpuMat U, ops::Act a, float* __restrict__ y) {
    constexpr int esz = T == GgmlType::F32 ? 4 : 2;
    const int n_groups = (a.rows + NB - 1) / NB;
    const int64_t row = int64_t(blockIdx.x / n_groups) * kMatvecWaves + threadIdx.x / kWave;
    const int t0 = int(blockIdx.x % n_groups) * NB;
    if (row >= W.n_out) return;
    const int nt = min(NB, a.rows - t0);
    const int64_t n = W.n_in;
    const uint8_t* wr = W.qs + row * n * esz;
    const uint8_t* ur = SWIGLU ? U.qs + row * n * esz : nullptr;
    const int lane = lane_id();
    float acc[NB], accu[NB];
#pragma unroll
    for (int t = 0; t < NB; ++t) acc[t] = 0.f, accu[t] = 0.f;
    if (n % 8 == 0) {
        for (int64_t i = int64_t(lane) * 8; i < n; i += int64_t(kWave) * 8) {
            float w[8], u[8];
            load8<T>(wr, i, w);
            if constexpr (SWIGLU) load8<T>(ur, i, u);
#pragma unroll
            for (int t = 0; t < NB; ++t) {
                if (t >= nt) break;
                const float4* xp = reinterpret_cast<const float4*>(a.x + int64_t(t0 + t) * n + i);
                const float4 x0 = xp[0], x1 = xp[1];
                const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    acc[t] += w[k] * x[k];
                    if constexpr (SWIGLU) accu[t] += u[k] * x[k];
                }
            }
        }
    } else {
        for (int64_t i = lane; i < n; i += kWave) {
            const float w = load1<T>(wr, i);
            const float u = SWIGLU ? load1<T>(ur, i) : 0.f;
#pragma unroll
            for (int t = 0; t < NB; ++t) {
                if (t >= nt) break;
                const float x = a.x[int64_t(t0 + t) * n + i];
                acc[t] += w * x;
                if constexpr (SWIGLU) accu[t] += u * x;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NB; ++t) {
        const float s = wave_reduce_sum(acc[t]);
        float v = s;
        if constexpr (SWIGLU) v = silu(s) * wave_reduce_sum(accu[t]);
        if (lane == 0 && t < nt) y[int64_t(t0 + t) * W.n_out + row] = v;
    }
}

template <GgmlType T, int NB, bool SW>
void launch_nb(const GpuMat& W, const GpuMat& U, const ops::Act& a, float* y, void* s) {
    const int n_groups = (a.rows + NB - 1) / NB;
    const int64_t blocks = (W.n_out + kMatvecWaves - 1) / kMatvecWaves * n_groups;
    if constexpr (T == GgmlType::F32 || T == GgmlType::F16 || T == GgmlType::BF16)
        matvec_f<T, NB, SW><<<dim3(unsigned(blocks)), dim3(kMatvecThreads), 0, static_cast<gpuStream_t>(s)>>>(W, U, a, y);
    else
        matvec_q<T, NB, SW><<<dim3(unsigned(blocks)), dim3(kMatvecThreads), 0, static_cast<gpuStream_t>(s)>>>(W, U, a, y);
}

template <GgmlType T, bool SW>
void launch_t(const GpuMat& W, const GpuMat& U, const ops::Act& a, float* y, void* s) {
    // Activation rows per block: 1, 2, 4, or 8 (prompts: 8 per block, many blocks).
    if (a.rows == 1) launch_nb<T, 1, SW>(W, U, a, y, s);
    else if (a.rows == 2) launch_nb<T, 2, SW>(W, U, a, y, s);
    else if (a.rows <= 4) launch_nb<T, 4, SW>(W, U, a, y, s);
    else launch_nb<T, 8, SW>(W, U, a, y, s);
}

template <bool SW>
void dispatch(const GpuMat& W, const GpuMat& U, const ops::Act& a, float* y, void* s) {
    switch (W.type) {
        case GgmlType::F32: return launch_t<GgmlType::F32, SW>(W, U, a, y, s);
        case GgmlType::F16: return launch_t<GgmlType::F16, SW>(W, U, a, y, s);
        case GgmlType::BF16: return launch_t<GgmlType::BF16, SW>(W, U, a, y, s);
        case GgmlType::Q4_0: return launch_t<GgmlType::Q4_0, SW>(W, U, a, y, s);
        case GgmlType::Q4_1: return launch_t<GgmlType::Q4_1, SW>(W, U, a, y, s);
        case GgmlType::Q5_0: return launch_t<GgmlType::Q5_0, SW>(W, U, a, y, s);
        case GgmlType::Q5_1: return launch_t<GgmlType::Q5_1, SW>(W, U, a, y, s);
        case GgmlType::Q8_0: return launch_t<GgmlType::Q8_0, SW>(W, U, a, y, s);
        case GgmlType::Q4_K: return launch_t<GgmlType::Q4_K, SW>(W, U, a, y, s);
        case GgmlType::Q5_K: return launch_t<GgmlType::Q5_K, SW>(W, U, a, y, s);
        case GgmlType::Q6_K: return launch_t<GgmlType::Q6_K, SW>(W, U, a, y, s);
        default: gpu_fail(std::string("matvec: unsupported weight type ") + type_traits(W.type).name);
    }
}

}  // namespace

void ops::matvec(const GpuMat& W, const Act& a, float* y, void* s) {
    if (a.rows <= 0) return;
    dispatch<false>(W, W, a, y, s);
}

void ops::matvec_swiglu(const GpuMat& G, const GpuMat& U, const Act& a, float* h, void* s) {
    if (a.rows <= 0) return;
    dispatch<true>(G, U, a, h, s);
}

}  // namespace vega::gpu
