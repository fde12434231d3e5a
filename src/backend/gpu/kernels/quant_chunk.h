// One 32-element chunk of a quantized weight row in the GPU layout (gpu_mat.h):
// its loads, its 4-byte groups of 8-bit codes, and the float value of an integer
// dot against a q8 activation chunk. Shared by the matvec kernels (one lane per
// chunk, dot4) and the tensor-core matmul (four lanes per chunk, mma): both decode
// and scale exactly alike. Everything here reads the type's GpuFormat (kFmt<T>),
// never the type itself.
#pragma once
#include "backend/gpu/gpu_mat.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

template <GgmlType T>
inline constexpr GpuFormat kFmt = gpu_format(T);

// 4 bits (b & 0xF) -> value 16 in each byte whose bit is set (a 1-bit high plane).
__device__ __forceinline__ uint32_t spread4(uint32_t b) { return (((b & 0xFu) * 0x00204081u) & 0x01010101u) << 4; }
// 4 two-bit fields (b & 0xFF) -> bits 4..5 of each byte (the high bits of Q6_K).
__device__ __forceinline__ uint32_t spread2(uint32_t b) {
    b &= 0xFFu;
    return ((b | (b << 6) | (b << 12) | (b << 18)) & 0x03030303u) << 4;
}
// Bytes 0..2*OFF-1 -> signed bytes q - OFF (OFF a power of two; no carries between
// bytes): q ^ OFF is q - OFF for q >= OFF, else q + OFF, whose byte - 2*OFF sets
// the bits above (the OR).
template <int OFF>
__device__ __forceinline__ int sub_offset(uint32_t q) {
    static_assert(OFF > 0 && OFF <= 64 && (OFF & (OFF - 1)) == 0, "a power-of-two offset");
    constexpr uint32_t kB = uint32_t(OFF) * 0x01010101u;
    const uint32_t r = q ^ kB, m = r & kB;
    return int(r | (m / uint32_t(OFF)) * uint32_t(0x100 - 2 * OFF));
}

// A chunk's scale bits as stored: sc = its own (ps.sc bytes, in the low bits), sb =
// its 256-element super-block's d (and dmin), else 0. Kept raw until the dot
// (decode_scales): loads stay free of the float math that would make the compiler
// wait on them early (gfx906 audit).
template <GgmlType T>
__device__ __forceinline__ void load_scale_bits(const GpuMat& W, int64_t row, int64_t c, uint32_t* sc, uint32_t* sb) {
    constexpr PlaneSizes ps = kFmt<T>.ps;
    const int64_t i = row * W.n_chunk + c;
    if constexpr (ps.sc == 1) *sc = W.sc[i];
    if constexpr (ps.sc == 2) *sc = reinterpret_cast<const uint16_t*>(W.sc)[i];
    if constexpr (ps.sc == 4) *sc = reinterpret_cast<const uint32_t*>(W.sc)[i];
    *sb = 0;
    const int64_t s = row * (W.n_chunk / 8) + (c >> 3);
    if constexpr (ps.sb == 4) *sb = reinterpret_cast<const uint32_t*>(W.sb)[s];
    if constexpr (ps.sb == 2) *sb = reinterpret_cast<const uint16_t*>(W.sb)[s];
}

// The chunk's scale factors from its scale bits (GpuScales): f0, f1 multiply the
// codes' values of elements 0..15 and 16..31; g0, g1 are the halves' mins as
// chunk_value uses them (kDM: +m; kK4: dmin * min, subtracted; kQ2K: per half).
template <GgmlType T>
__device__ __forceinline__ void decode_scales(uint32_t sc, uint32_t sb, float* f0, float* f1, float* g0, float* g1) {
    constexpr GpuScales S = kFmt<T>.scales;
    *f1 = 0.f, *g0 = 0.f, *g1 = 0.f;
    if constexpr (S == GpuScales::kD) {
        *f0 = h2f(uint16_t(sc));
    } else if constexpr (S == GpuScales::kDM) {
        *f0 = h2f(uint16_t(sc)), *g0 = h2f(uint16_t(sc >> 16));
    } else if constexpr (S == GpuScales::kK4) {  // sc: (scale, min) bytes; sb: (d, dmin)
        *f0 = h2f(uint16_t(sb)) * float(sc & 0xFFu), *g0 = h2f(uint16_t(sb >> 16)) * float((sc >> 8) & 0xFFu);
    } else if constexpr (S == GpuScales::kI8x2) {  // sc: two signed scale bytes; sb: d
        const float d = h2f(uint16_t(sb));
        *f0 = d * float(int8_t(sc & 0xFFu)), *f1 = d * float(int8_t((sc >> 8) & 0xFFu));
    } else if constexpr (S == GpuScales::kI8) {  // sc: a signed scale byte; sb: d
        *f0 = h2f(uint16_t(sb)) * float(int8_t(sc & 0xFFu));
    } else if constexpr (S == GpuScales::kQ2K) {  // sc: (scale | min << 4) per half; sb: (d, dmin)
        const float d = h2f(uint16_t(sb)), dmin = h2f(uint16_t(sb >> 16));
        *f0 = d * float(sc & 0xFu), *f1 = d * float((sc >> 8) & 0xFu);
        *g0 = dmin * float((sc >> 4) & 0xFu), *g1 = dmin * float((sc >> 12) & 0xFu);
    } else if constexpr (S == GpuScales::kE8M0) {  // 2^(e - 128) = 2^(e - 127) / 2, branch-free (no
        // select in the hot loop: gfx906 audit); e = 0 gives 0 instead of 2^-128, whose
        // block's weights are under 2^-124 (the host decoder keeps the exact value).
        *f0 = __uint_as_float((sc & 0xFFu) << 23) * 0.5f;
    }
}

// The high-bit planes of a chunk (h0; Q6_K: h0, h1), zero for other types.
template <GgmlType T>
__device__ __forceinline__ void load_qh(const GpuMat& W, int64_t row, int64_t c, uint32_t* h0, uint32_t* h1) {
    constexpr PlaneSizes ps = kFmt<T>.ps;
    const int64_t i = row * W.n_chunk + c;
    *h0 = 0, *h1 = 0;
    if constexpr (ps.qh == 4) *h0 = reinterpret_cast<const uint32_t*>(W.qh)[i];
    if constexpr (ps.qh == 8) {
        const uint2 h = reinterpret_cast<const uint2*>(W.qh)[i];
        *h0 = h.x, *h1 = h.y;
    }
}

// The unsigned codes of elements 4k..4k+3 (lo) and 16+4k..16+4k+3 (hi), one per
// byte, high bits added. kNibbles: qa is the chunk's qs word k; kPairs: qa, qb are
// its two words (elements 0..15, 16..31), bit pair k of each byte.
template <GgmlType T>
__device__ __forceinline__ void codes(uint32_t qa, uint32_t qb, uint32_t h0, uint32_t h1, int k, uint32_t* lo,
                                      uint32_t* hi) {
    constexpr GpuFormat F = kFmt<T>;
    uint32_t l, h;
    if constexpr (F.codes == GpuCodes::kPairs) {
        l = (qa >> (2 * k)) & 0x03030303u, h = (qb >> (2 * k)) & 0x03030303u;
    } else {
        (void)qb;
        l = qa & 0x0F0F0F0Fu, h = (qa >> 4) & 0x0F0F0F0Fu;
    }
    if constexpr (F.high_bits == 1) {
        static_assert(F.high_at <= 4, "spread4 places bit 4");
        l |= spread4(h0 >> (4 * k)) >> (4 - F.high_at);
        h |= spread4(h0 >> (16 + 4 * k)) >> (4 - F.high_at);
    }
    if constexpr (F.high_bits == 2) {
        static_assert(F.high_at == 4, "spread2 places bits 4..5");
        l |= spread2(h0 >> (8 * k));
        h |= spread2(h1 >> (8 * k));
    }
    *lo = l, *hi = h;
}

// Codes -> the signed 8-bit values dot4 takes: per-half scaled types their code -
// offset; the others keep their offset (chunk_value subtracts it through ds.y).
// (Codebook types: book_values.)
template <GgmlType T>
__device__ __forceinline__ int code_values(uint32_t q) {
    constexpr GpuFormat F = kFmt<T>;
    static_assert(F.book == GpuBook::kNone, "codebook codes: book_values");
    if constexpr (F.signed_codes()) return sub_offset<F.offset>(q);
    else return int(q);
}

// Codebook types: chunk word k (q) -> the entries of elements 4k.. (lo), 16+4k.. (hi).
template <GgmlType T>
__device__ __forceinline__ void book_values(uint32_t q, uint32_t* lo, uint32_t* hi) {
    constexpr BookWords b = book_words(kFmt<T>.book);
    lookup16x8(q, b.w0, b.w1, b.w2, b.w3, lo, hi);
}

// One half of codes<T>: the codes of elements 16h + 4k .. 16h + 4k + 3 (h = 0: codes'
// lo, h = 1: its hi), for kernels that decode a chunk in halves (the dot4 GEMM's
// staging). kNibbles: qa is the chunk's qs word k; kPairs: qa, qb its two words.
template <GgmlType T>
__device__ __forceinline__ uint32_t codes_half(uint32_t qa, uint32_t qb, uint32_t h0, uint32_t h1, int k, int h) {
    constexpr GpuFormat F = kFmt<T>;
    uint32_t c;
    if constexpr (F.codes == GpuCodes::kPairs) c = ((h ? qb : qa) >> (2 * k)) & 0x03030303u;
    else (void)qb, c = (qa >> (4 * h)) & 0x0F0F0F0Fu;
    if constexpr (F.high_bits == 1) {
        static_assert(F.high_at <= 4, "spread4 places bit 4");
        c |= spread4(h0 >> (16 * h + 4 * k)) >> (4 - F.high_at);
    }
    if constexpr (F.high_bits == 2) {
        static_assert(F.high_at == 4, "spread2 places bits 4..5");
        c |= spread2((h ? h1 : h0) >> (8 * k));
    }
    return c;
}

// codes_half's codes as the weights' signed 8-bit values, whatever the format: code -
// offset, or the codebook's entries (the dot4 GEMM keeps no offset term).
template <GgmlType T>
__device__ __forceinline__ uint32_t signed_values(uint32_t c) {
    constexpr GpuFormat F = kFmt<T>;
    if constexpr (F.book != GpuBook::kNone) {
        uint32_t lo, hi;
        book_values<T>(c, &lo, &hi);  // c's codes are low nibbles: lo holds their entries
        return lo;
    } else if constexpr (F.offset != 0) {
        return uint32_t(sub_offset<F.offset>(c));
    }
    return c;
}

// The float value of sum_i w[i] * x[i] over a chunk from the integer dots of the
// 8-bit values: s0 over elements 0..15, s1 over 16..31, x as q8 with ds = (d, d *
// sum(q)); x0, x1: the sums of x's q8 codes per half (kQ2K's per-half mins only; the
// integer form of the min term moved the gfx906 audit's loads, so it stays in float).
template <GgmlType T>
__device__ __forceinline__ float chunk_value(float f0, float f1, float g0, float g1, float2 ds, int s0, int s1, int x0,
                                             int x1) {
    constexpr GpuFormat F = kFmt<T>;
    if constexpr (F.scales == GpuScales::kQ2K) return ds.x * (f0 * float(s0) + f1 * float(s1) - (g0 * float(x0) + g1 * float(x1)));
    if constexpr (F.split_halves()) return ds.x * (f0 * float(s0) + f1 * float(s1));
    if constexpr (F.book != GpuBook::kNone && kBookDotBias<F.book> != 0)  // dot_chunk's s = sum (entry + bias) x
        return f0 * (ds.x * float(s0 + s1) - float(kBookDotBias<F.book>) * ds.y);
    if constexpr (F.scales == GpuScales::kDM) return f0 * ds.x * float(s0 + s1) + g0 * ds.y;
    if constexpr (F.scales == GpuScales::kK4) return f0 * ds.x * float(s0 + s1) - g0 * ds.y;
    if constexpr (F.offset != 0) return f0 * (ds.x * float(s0 + s1) - float(F.offset) * ds.y);
    return f0 * ds.x * float(s0 + s1);
}

// One 32-element chunk of a quantized weight row, in registers.
struct Chunk {
    uint4 q0, q1;     // q1 only for kBytes (Q8_0); kPairs: q0.x, q0.y
    uint32_t h0, h1;  // the high-bit planes
    uint32_t sc, sb;  // scale bits (load_scale_bits), decoded at the dot
};

template <GgmlType T>
__device__ __forceinline__ Chunk load_chunk(const GpuMat& W, int64_t row, int64_t c) {
    constexpr PlaneSizes ps = kFmt<T>.ps;
    const int64_t i = row * W.n_chunk + c;
    Chunk r;
    if constexpr (ps.qs == 8) {
        const uint2 q = reinterpret_cast<const uint2*>(W.qs)[i];
        r.q0 = make_uint4(q.x, q.y, 0u, 0u);
    } else {
        const uint4* q = reinterpret_cast<const uint4*>(W.qs) + i * (ps.qs / 16);
        r.q0 = q[0];
        if constexpr (ps.qs == 32) r.q1 = q[1];
    }
    if constexpr (ps.qh != 0) load_qh<T>(W, row, c, &r.h0, &r.h1);
    load_scale_bits<T>(W, row, c, &r.sc, &r.sb);
    return r;
}

// The planes of a chunk one of whose halves a thread decodes (the dot4 GEMM's
// staging, two threads a chunk): q0 holds the chunk's qs, or for kBytes (Q8_0) only
// half h's 16 bytes; the high bits and scale bits as load_chunk.
template <GgmlType T>
__device__ __forceinline__ Chunk load_chunk_half(const GpuMat& W, int64_t row, int64_t c, int h) {
    constexpr PlaneSizes ps = kFmt<T>.ps;
    const int64_t i = row * W.n_chunk + c;
    Chunk r;
    if constexpr (ps.qs == 8) {
        const uint2 q = reinterpret_cast<const uint2*>(W.qs)[i];
        r.q0 = make_uint4(q.x, q.y, 0u, 0u);
    } else {
        r.q0 = reinterpret_cast<const uint4*>(W.qs)[i * (ps.qs / 16) + (ps.qs == 32 ? h : 0)];
    }
    r.h0 = r.h1 = 0u;
    if constexpr (ps.qh != 0) load_qh<T>(W, row, c, &r.h0, &r.h1);
    load_scale_bits<T>(W, row, c, &r.sc, &r.sb);
    return r;
}

// A q8 activation chunk as weight type T's dot reads it (act_chunk): the words a[k]
// (elements 4k..4k+3) and a[4 + k] (16+4k..), ds = (d, d * sum(q)); for codebook types
// the words pair with lookup16x8_paired's entries (book_pair_act), arranged once per
// activation chunk for every weight row a lane dots it with.
template <GgmlType T>
struct ActChunk {
    int a[8];
    float2 ds;
};
template <GgmlType T>
__device__ __forceinline__ ActChunk<T> act_chunk(const int4& a0, const int4& a1, float2 ds) {
    ActChunk<T> x;
    const int a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if constexpr (kFmt<T>.book != GpuBook::kNone) book_pair_act(a[k], a[k + 4], &x.a[k], &x.a[k + 4]);
        else x.a[k] = a[k], x.a[k + 4] = a[k + 4];
    }
    x.ds = ds;
    return x;
}

// sum_i w[i] * x[i] over the chunk, with x given as q8 (act_chunk<T>).
template <GgmlType T>
__device__ __forceinline__ float dot_chunk(const Chunk& r, const ActChunk<T>& x) {
    constexpr GpuFormat F = kFmt<T>;
    const int* a = x.a;
    const float2 ds = x.ds;
    int s0 = 0, s1 = 0;  // two accumulators: independent dot4 chains
    // kQ2K: the activation codes' sums per half (dot4 against ones: the same for every
    // weight row, so the compiler shares them between the rows and matrices of a wave).
    int x0 = 0, x1 = 0;
    if constexpr (F.codes == GpuCodes::kBytes) {
        const uint32_t w[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) s0 = dot4_i8(int(w[k]), a[k], s0), s1 = dot4_i8(int(w[k + 4]), a[k + 4], s1);
    } else {
        const uint32_t q[4] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if constexpr (F.book != GpuBook::kNone) {
                // (s0, s1 each a mix of both halves here: codebook types scale the chunk as one;
                // every entry plus kBookDotBias, which chunk_value takes back.)
                static_assert(!F.split_halves(), "codebook types: one scale a chunk");
                book_dot8<F.book>(q[k], a[k], a[k + 4], &s0, &s1);
            } else {
                uint32_t lo, hi;
                if constexpr (F.codes == GpuCodes::kPairs) codes<T>(q[0], q[1], r.h0, r.h1, k, &lo, &hi);
                else codes<T>(q[k], 0u, r.h0, r.h1, k, &lo, &hi);
                lo = uint32_t(code_values<T>(lo)), hi = uint32_t(code_values<T>(hi));
                s0 = dot4_i8(int(lo), a[k], s0);
                s1 = dot4_i8(int(hi), a[k + 4], s1);
            }
            if constexpr (F.scales == GpuScales::kQ2K) {
                x0 = dot4_i8(0x01010101, a[k], x0);
                x1 = dot4_i8(0x01010101, a[k + 4], x1);
            }
        }
    }
    float f0, f1, g0, g1;
    decode_scales<T>(r.sc, r.sb, &f0, &f1, &g0, &g1);
    return chunk_value<T>(f0, f1, g0, g1, ds, s0, s1, x0, x1);
}

}  // namespace vega::gpu
