// One 32-element chunk of a quantized weight row in the GPU layout (gpu_mat.h):
// its loads, its 4-byte groups of signed 8-bit values, and the float value of an
// integer dot against a q8 activation chunk. Shared by the matvec kernels (one
// lane per chunk, dot4) and the tensor-core matmul (four lanes per chunk, mma):
// both decode and scale exactly alike.
#pragma once
#include "backend/gpu/gpu_mat.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

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

// A chunk's scale bits as stored: sc = its own (plane_sizes(T).sc bytes, in the
// low bits), sb = its 256-element super-block's d (and dmin; K-quants, else 0).
// Kept raw until the dot (decode_scales): loads stay free of the float math that
// would make the compiler wait on them early (gfx906 audit).
template <GgmlType T>
__device__ __forceinline__ void load_scale_bits(const GpuMat& W, int64_t row, int64_t c, uint32_t* sc, uint32_t* sb) {
    constexpr PlaneSizes ps = plane_sizes(T);
    const int64_t i = row * W.n_chunk + c;
    if constexpr (ps.sc == 2) *sc = reinterpret_cast<const uint16_t*>(W.sc)[i];
    if constexpr (ps.sc == 4) *sc = reinterpret_cast<const uint32_t*>(W.sc)[i];
    *sb = 0;
    const int64_t s = row * (W.n_chunk / 8) + (c >> 3);
    if constexpr (ps.sb == 4) *sb = reinterpret_cast<const uint32_t*>(W.sb)[s];
    if constexpr (ps.sb == 2) *sb = reinterpret_cast<const uint16_t*>(W.sb)[s];
}

// The chunk's two scale factors from its scale bits (type-specific meaning, see
// chunk_value). The matvec and the tensor-core matmul both decode through this.
template <GgmlType T>
__device__ __forceinline__ void decode_scales(uint32_t sc, uint32_t sb, float* f0, float* f1) {
    *f1 = 0.f;
    if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q5_0 || T == GgmlType::Q8_0) {
        *f0 = h2f(uint16_t(sc));
    } else if constexpr (T == GgmlType::Q4_1 || T == GgmlType::Q5_1) {
        *f0 = h2f(uint16_t(sc)), *f1 = h2f(uint16_t(sc >> 16));
    } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {  // sc: (scale, min) bytes; sb: (d, dmin)
        *f0 = h2f(uint16_t(sb)) * float(sc & 0xFFu), *f1 = h2f(uint16_t(sb >> 16)) * float((sc >> 8) & 0xFFu);
    } else if constexpr (T == GgmlType::Q6_K) {  // sc: two signed scale bytes; sb: d
        const float d = h2f(uint16_t(sb));
        *f0 = d * float(int8_t(sc & 0xFFu)), *f1 = d * float(int8_t((sc >> 8) & 0xFFu));
    }
}

// The high-bit planes of a chunk (Q5_*: h0; Q6_K: h0, h1), zero for other types.
template <GgmlType T>
__device__ __forceinline__ void load_qh(const GpuMat& W, int64_t row, int64_t c, uint32_t* h0, uint32_t* h1) {
    constexpr PlaneSizes ps = plane_sizes(T);
    const int64_t i = row * W.n_chunk + c;
    *h0 = 0, *h1 = 0;
    if constexpr (ps.qh == 4) *h0 = reinterpret_cast<const uint32_t*>(W.qh)[i];
    if constexpr (ps.qh == 8) {
        const uint2 h = reinterpret_cast<const uint2*>(W.qh)[i];
        *h0 = h.x, *h1 = h.y;
    }
}

// 4-bit types: byte k*4..k*4+3 of the chunk's 16 (the word q) -> the unsigned 8-bit
// codes of elements 4k..4k+3 (lo) and 16+4k..16+4k+3 (hi): the 4-bit values with
// the 5th bit (Q5_*) or the two high bits (Q6_K: q, before its - 32) added.
template <GgmlType T>
__device__ __forceinline__ void codes(uint32_t q, uint32_t h0, uint32_t h1, int k, uint32_t* lo, uint32_t* hi) {
    uint32_t l = q & 0x0F0F0F0Fu, h = (q >> 4) & 0x0F0F0F0Fu;
    if constexpr (T == GgmlType::Q5_0 || T == GgmlType::Q5_1 || T == GgmlType::Q5_K) {
        l |= spread4(h0 >> (4 * k));
        h |= spread4(h0 >> (16 + 4 * k));
    }
    if constexpr (T == GgmlType::Q6_K) {
        l |= spread2(h0 >> (8 * k));
        h |= spread2(h1 >> (8 * k));
    }
    *lo = l, *hi = h;
}

// The same as the signed 8-bit values dot4 / mma.s8 take (Q4_0, Q5_0 keep their
// offset: chunk_value subtracts it through ds.y; Q6_K's codes become q - 32).
template <GgmlType T>
__device__ __forceinline__ void nibbles(uint32_t q, uint32_t h0, uint32_t h1, int k, int* lo, int* hi) {
    uint32_t l, h;
    codes<T>(q, h0, h1, k, &l, &h);
    if constexpr (T == GgmlType::Q6_K) {
        *lo = sub32(l), *hi = sub32(h);
    } else {
        *lo = int(l), *hi = int(h);
    }
}

// The float value of sum_i w[i] * x[i] over a chunk from the integer dots of the
// 8-bit values: s0 over elements 0..15, s1 over 16..31 (only Q6_K scales the
// halves apart; for the others s0 + s1 is all that matters). x is q8 with
// ds = (d, d * sum(q)).
template <GgmlType T>
__device__ __forceinline__ float chunk_value(float f0, float f1, float2 ds, int s0, int s1) {
    if constexpr (T == GgmlType::Q8_0) return f0 * ds.x * float(s0 + s1);
    if constexpr (T == GgmlType::Q4_0) return f0 * (ds.x * float(s0 + s1) - 8.f * ds.y);
    if constexpr (T == GgmlType::Q5_0) return f0 * (ds.x * float(s0 + s1) - 16.f * ds.y);
    if constexpr (T == GgmlType::Q4_1 || T == GgmlType::Q5_1) return f0 * ds.x * float(s0 + s1) + f1 * ds.y;
    if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) return f0 * ds.x * float(s0 + s1) - f1 * ds.y;
    if constexpr (T == GgmlType::Q6_K) return ds.x * (f0 * float(s0) + f1 * float(s1));
    return 0.f;
}

// One 32-element chunk of a quantized weight row, in registers.
struct Chunk {
    uint4 q0, q1;     // q1 only for Q8_0
    uint32_t h0, h1;  // 5th-bit mask (Q5_*) or the 2-bit planes (Q6_K)
    uint32_t sc, sb;  // scale bits (load_scale_bits), decoded at the dot
};

template <GgmlType T>
__device__ __forceinline__ Chunk load_chunk(const GpuMat& W, int64_t row, int64_t c) {
    constexpr PlaneSizes ps = plane_sizes(T);
    const int64_t i = row * W.n_chunk + c;
    Chunk r;
    const uint4* q = reinterpret_cast<const uint4*>(W.qs) + i * (ps.qs / 16);
    r.q0 = q[0];
    if constexpr (ps.qs == 32) r.q1 = q[1];
    if constexpr (ps.qh != 0) load_qh<T>(W, row, c, &r.h0, &r.h1);
    load_scale_bits<T>(W, row, c, &r.sc, &r.sb);
    return r;
}

// sum_i w[i] * x[i] over the chunk, with x given as q8 (a0: elems 0..15, a1: 16..31; ds = d, d*sum(q)).
template <GgmlType T>
__device__ __forceinline__ float dot_chunk(const Chunk& r, const int4& a0, const int4& a1, float2 ds) {
    const int a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    int s0 = 0, s1 = 0;  // two accumulators: independent dot4 chains
    if constexpr (T == GgmlType::Q8_0) {
        const uint32_t w[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) s0 = dot4_i8(int(w[k]), a[k], s0), s1 = dot4_i8(int(w[k + 4]), a[k + 4], s1);
    } else {
        const uint32_t q[4] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            int lo, hi;
            nibbles<T>(q[k], r.h0, r.h1, k, &lo, &hi);
            s0 = dot4_i8(lo, a[k], s0);
            s1 = dot4_i8(hi, a[k + 4], s1);
        }
    }
    float f0, f1;
    decode_scales<T>(r.sc, r.sb, &f0, &f1);
    return chunk_value<T>(f0, f1, ds, s0, s1);
}

}  // namespace vega::gpu
