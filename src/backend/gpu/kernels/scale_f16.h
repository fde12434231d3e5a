// A chunk's scales as f16x2 splats for the tensor-core matmul (NVIDIA sm_80+), made
// with f16 arithmetic on the scale bits instead of through f32 and back:
//
//   s0 / s1   the halves' scales (elements 0..15 / 16..31), each as (s, s)
//   m0 / m1   the halves' mins, each as (m, m) (kK4: -dmin * min; kDM: +m; else 0)
//
// What the f32 route computes, f16(h2f(d) * float(byte)), is one rounding of an exact
// product (11 significant bits times 8 fit in f32's 24), and so is mul.rn.f16x2 of
// the same two values: an integer byte is exact in f16 (prmt of the byte under 0x64
// makes f16 1024 + byte, and subtracting 1024 is exact), and d is an f16 already.
// The two routes agree bit for bit (Parity.MmaScalesMatchF32Route checks every d
// bit pattern); this one takes a prmt, two f16 ops and the splats where the other
// took two conversions to f32, a multiply and a conversion back per value, and the
// conversions run at a quarter of the rate of other ops on sm_90.
//
// word: the 32-bit word of the scale plane holding the chunk's sc entry, at byte b0
// (a multiple of the entry's size: 1, 2 or 4 bytes); sb: the chunk's super-block
// entry (kK4: f16 d | f16 dmin << 16; kI8x2, kI8: f16 d in bits 0..15).
#pragma once

#include "backend/gpu/gpu_mat.h"
#include "backend/gpu/kernels/quant_chunk.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

#if defined(VEGA_GPU_CUDA) && !defined(VEGA_GPU_EMULATE_GFX906)

__device__ __forceinline__ uint32_t hsub2_bits(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
// (x.lo, x.lo) and (x.hi, x.hi).
__device__ __forceinline__ uint32_t splat_lo(uint32_t x) { return prmt_b32(x, x, 0x1010u); }
__device__ __forceinline__ uint32_t splat_hi(uint32_t x) { return prmt_b32(x, x, 0x3232u); }
// f16 (1024 + byte i0 of w, 1024 + byte i1 of w): prmt's selector takes bytes 4..7
// from the 0x64 word.
__device__ __forceinline__ uint32_t bytes_1024(uint32_t w, int i0, int i1) {
    return prmt_b32(w, 0x64646464u, uint32_t(i0) | 4u << 4 | uint32_t(i1) << 8 | 4u << 12);
}

template <GgmlType T>
__device__ __forceinline__ void chunk_scales_f16(uint32_t word, int b0, uint32_t sb, uint32_t& s0, uint32_t& s1,
                                                 uint32_t& m0, uint32_t& m1) {
    constexpr GpuScales S = kFmt<T>.scales;
    static_assert(S != GpuScales::kQ2K, "Q2_K: dequant4_q2k (f32 weights, one rounding)");
    constexpr uint32_t k1024 = 0x64006400u, k1152 = 0x64806480u;  // f16 1024 and 1024 + 128, twice
    m0 = m1 = 0;
    if constexpr (S == GpuScales::kD) {  // sc: f16 d
        s0 = s1 = b0 ? splat_hi(word) : splat_lo(word);
    } else if constexpr (S == GpuScales::kDM) {  // sc: f16 d | f16 m << 16 (the whole word)
        s0 = s1 = splat_lo(word), m0 = m1 = splat_hi(word);
    } else if constexpr (S == GpuScales::kK4) {  // sc: scale byte, min byte; sb: d, dmin
        // (scale, min) exact, times (d, -dmin): (d * scale, -dmin * min), one rounding each
        const uint32_t p = hmul2_bits(hsub2_bits(bytes_1024(word, b0, b0 + 1), k1024), sb ^ 0x80000000u);
        s0 = s1 = splat_lo(p), m0 = m1 = splat_hi(p);
    } else if constexpr (S == GpuScales::kI8x2) {  // sc: a signed scale byte per half; sb: d
        // flipping bit 7 makes byte + 128 unsigned: 1024 + 128 + scale, less 1152
        const uint32_t p = hmul2_bits(hsub2_bits(bytes_1024(word ^ 0x80808080u, b0, b0 + 1), k1152), splat_lo(sb));
        s0 = splat_lo(p), s1 = splat_hi(p);
    } else if constexpr (S == GpuScales::kI8) {  // sc: one signed scale byte; sb: d
        s0 = s1 = hmul2_bits(hsub2_bits(bytes_1024(word ^ 0x80808080u, b0, b0), k1152), splat_lo(sb));
    } else {  // kE8M0: 2^(e - 128), exact in f32; f16 rounds it (or flushes it) as before
        float f0, f1, g0, g1;
        decode_scales<T>((word >> (8 * b0)) & 0xFFu, sb, &f0, &f1, &g0, &g1);
        s0 = s1 = splat_lo(f2h(f0));
    }
}

#endif

}  // namespace vega::gpu
