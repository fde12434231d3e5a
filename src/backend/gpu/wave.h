// Wave primitives and dot wrappers: the only place with cross-lane or
// vendor-specific arithmetic. gfx906: DPP (quad_perm, row_half_mirror,
// row_mirror), ds_swizzle (xor 16 inside 32 lanes) and v_readlane for the two
// halves of a wave64 (VEGA_GPU_GFX906_ISA: on the card through the HIP builtins,
// in the emulation build through gfx906_emulation.h on NVIDIA); NVIDIA:
// __shfl_xor_sync. dot4_i8: v_dot4_i32_i8 / __dp4a.
#pragma once
#include <cstdint>

#include "backend/gpu/arch/arch.h"
#include "backend/gpu/vendor.h"
#if defined(VEGA_GPU_EMULATE_GFX906)
#include "backend/gpu/gfx906_emulation.h"
#endif
#include "backend/gpu/gfx906_lanes.h"
#include "backend/gpu/gpu_mat.h"

// The wave primitives are gfx906's cross-lane instructions: on the card, or emulated.
#if defined(VEGA_GPU_HIP) || defined(VEGA_GPU_EMULATE_GFX906)
#define VEGA_GPU_GFX906_ISA 1
#endif

namespace vega::gpu {

constexpr int kWave = arch::kWave;
// The target table's wave size is the compiled target's: every reduction and
// shuffle below assumes it (a wave32 RDNA target built with the gfx906 table
// would otherwise compile and compute garbage).
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE)
static_assert(__AMDGCN_WAVEFRONT_SIZE == kWave, "the target table's kWave is not this target's wavefront size");
#endif
#if defined(__CUDA_ARCH__) && defined(VEGA_GPU_EMULATE_GFX906)
static_assert(kWave == 64, "the gfx906 emulation runs 64-thread waves (two warps)");
static_assert(arch::kRowThreads <= emu::kMaxWavesPerBlock * kWave && arch::kArgmaxThreads <= emu::kMaxWavesPerBlock * kWave &&
                  arch::kEltThreads <= emu::kMaxWavesPerBlock * kWave &&
                  arch::kAttnThreads <= emu::kMaxWavesPerBlock * kWave &&
                  arch::kPrepThreads <= emu::kMaxWavesPerBlock * kWave &&
                  arch::kMatvecWaves <= emu::kMaxWavesPerBlock && arch::epi_waves(1) <= emu::kMaxWavesPerBlock,
              "the emulation runs blocks of at most 15 waves (one named barrier each)");
#elif defined(__CUDA_ARCH__)
static_assert(kWave == 32, "NVIDIA warps are 32 lanes");
#endif

// Asks the compiler to keep a kernel at lo..hi waves per SIMD (gfx906 register
// budget: at most 256 / lo VGPRs; hi = lo also stops it trading loads in flight
// for more waves); the audit checks the result. No-op on NVIDIA.
#if defined(VEGA_GPU_HIP)
#define VEGA_WAVES(lo, hi) __attribute__((amdgpu_waves_per_eu(lo, hi)))
#else
#define VEGA_WAVES(lo, hi)
#endif

__device__ __forceinline__ int lane_id() { return int(threadIdx.x) & (kWave - 1); }
// This thread's wave in the block, as a value the compiler knows is the same on every
// lane (gfx906: v_readfirstlane into an SGPR), so branches on it are scalar: the two
// sides of a wave-uniform role split are not serialized, nor their loads ordered.
__device__ __forceinline__ int wave_in_block_uniform() {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_readfirstlane(int(threadIdx.x) / kWave);
#else
    return int(threadIdx.x) / kWave;
#endif
}

// acc + sum of the four signed byte products of a and b.
__device__ __forceinline__ int dot4_i8(int a, int b, int acc) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_sdot4(a, b, acc, false);
#else
    return __dp4a(a, b, acc);
#endif
}

// acc + sum of the eight signed 4-bit products of a and b (two's complement nibbles):
// gfx906's v_dot8_i32_i4. No NVIDIA instruction does this: elsewhere eight
// multiply-adds, so kNativeDot8 tells vega probe whether timing it means anything.
#if defined(VEGA_GPU_HIP)
constexpr bool kNativeDot8 = true;
#else
constexpr bool kNativeDot8 = false;
#endif
__device__ __forceinline__ int dot8_i4(int a, int b, int acc) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_sdot8(a, b, acc, false);
#else
#pragma unroll
    for (int i = 0; i < 8; ++i) acc += ((a << (28 - 4 * i)) >> 28) * ((b << (28 - 4 * i)) >> 28);
    return acc;
#endif
}

// gfx906's v_perm_b32 for byte selectors 0..7 (the only ones vega passes): byte i of the
// result is byte sel_i of the 8 bytes {s1 (bytes 0..3), s0 (bytes 4..7)}. The emulation
// build computes it with prmt.
__device__ __forceinline__ uint32_t perm_b32(uint32_t s0, uint32_t s1, uint32_t sel) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_perm(s0, s1, sel);
#else
    const uint32_t s16 = (sel & 7u) | ((sel >> 4) & 0x70u) | ((sel >> 8) & 0x700u) | ((sel >> 12) & 0x7000u);
    return __byte_perm(s1, s0, s16);
#endif
}

#if !defined(VEGA_GPU_HIP)
// NVIDIA's prmt.b32 in its default mode: byte i of the result is byte (c >> 4i) & 7 of
// {a (bytes 0..3), b (4..7)}, or with selector bit 3 that byte's sign replicated.
__device__ __forceinline__ uint32_t prmt_b32(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
#endif

// A 16-entry int8 codebook (gpu_mat.h BookWords) applied to the 8 nibbles of q, a
// 4-bit chunk word k (byte j = code of element 4k + j | code of element 16 + 4k + j
// << 4, as quant_chunk.h's codes), its entries left in the order the target's byte
// permute gives them (p0, p1; book_pair_act pairs an activation chunk's bytes with
// them, once for all the weight rows that share it):
//  - gfx906: per four codes (one a byte) one v_perm_b32 per 8-entry half and a v_bfi
//    on each code's bit 3 (its byte mask: 4 full-rate ALU ops); element order: p0 =
//    elements 4k..4k+3, p1 = 16+4k..16+4k+3.
//  - NVIDIA: prmt takes 4-bit selectors, so q's own nibbles select, four codes a
//    prmt in nibble order: p0 = elements (4k, 16+4k, 4k+1, 17+4k), p1 = (4k+2,
//    18+4k, 4k+3, 19+4k); prmt's sign mode makes the bit-3 masks, one lop3 each
//    picks the half: about 14 instructions for 8 codes.
__device__ __forceinline__ void lookup16x8_paired(uint32_t q, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3,
                                                  uint32_t* p0, uint32_t* p1) {
#if defined(VEGA_GPU_GFX906_ISA)
    auto four = [&](uint32_t n) {  // n: one code per byte, 0..15
        const uint32_t sel = n & 0x07070707u;
        const uint32_t a = perm_b32(w1, w0, sel), b = perm_b32(w3, w2, sel);
        const uint32_t m = n & 0x08080808u;
        const uint32_t upper = (m << 5) - (m >> 3);  // 0xFF in the bytes of codes 8..15 (no borrows)
        return (b & upper) | (a & ~upper);
    };
    *p0 = four(q & 0x0F0F0F0Fu);
    *p1 = four((q >> 4) & 0x0F0F0F0Fu);
#else
    const uint32_t sa = q & 0x7777u, sb = (q >> 16) & 0x7777u;  // elements (0, 16, 1, 17), (2, 18, 3, 19)
    const uint32_t la = prmt_b32(w0, w1, sa), ua = prmt_b32(w2, w3, sa);
    const uint32_t lb = prmt_b32(w0, w1, sb), ub = prmt_b32(w2, w3, sb);
    // bit 3 of nibble i is the sign of byte 0/1 of q << 4 (i = 0, 2) or of q (i = 1, 3)
    const uint32_t ma = prmt_b32(q << 4, q, 0xD9C8u), mb = prmt_b32(q >> 12, q >> 16, 0xD9C8u);
    *p0 = (ua & ma) | (la & ~ma), *p1 = (ub & mb) | (lb & ~mb);
#endif
}

// The activation words that pair with lookup16x8_paired's p0, p1 for chunk word k, from
// the q8 words lo (elements 4k..4k+3) and hi (16+4k..16+4k+3): gfx906 those two;
// NVIDIA interleaved as the entries are.
__device__ __forceinline__ void book_pair_act(int lo, int hi, int* b0, int* b1) {
#if defined(VEGA_GPU_GFX906_ISA)
    *b0 = lo, *b1 = hi;
#else
    *b0 = int(prmt_b32(uint32_t(lo), uint32_t(hi), 0x5140u));  // (4k, 16+4k, 4k+1, 17+4k)
    *b1 = int(prmt_b32(uint32_t(lo), uint32_t(hi), 0x7362u));  // (4k+2, 18+4k, 4k+3, 19+4k)
#endif
}

// The codebook dot of chunk word q's 8 codes (as lookup16x8_paired) against the
// activation words b0, b1 that book_pair_act arranged: s0 += entries(p0) . b0, s1 +=
// entries(p1) . b1, every entry plus kBookDotBias<B>:
//  - gfx906: lookup16x8_paired, one dot4 each; exact entries (bias 0).
//  - NVIDIA: the book as two sign-split tables (gpu_mat.h SplitBook): the lower table by
//    the selectors q, the upper by q ^ 0x8888, prmt's sign mode giving each table's
//    constant for the other half's codes, and both lookups dotted: 1 xor, 2 shifts, 4
//    prmt and 4 dp4a for 8 codes, where the lookup and a lop3 select took 13 ALU ops
//    and 2 dp4a. The entries come out plus SplitBook.bias (MXFP4: -1), which the
//    chunk's value takes back through the activation's sum.
template <GpuBook B>
inline constexpr int kBookDotBias =
#if defined(VEGA_GPU_GFX906_ISA)
    0;
#else
    split_book(B).bias;
#endif
template <GpuBook B>
__device__ __forceinline__ void book_dot8(uint32_t q, int b0, int b1, int* s0, int* s1) {
#if defined(VEGA_GPU_GFX906_ISA)
    constexpr BookWords w = book_words(B);
    uint32_t p0, p1;
    lookup16x8_paired(q, w.w0, w.w1, w.w2, w.w3, &p0, &p1);
    *s0 = dot4_i8(int(p0), b0, *s0);
    *s1 = dot4_i8(int(p1), b1, *s1);
#else
    constexpr SplitBook t = split_book(B);
    const uint32_t qx = q ^ 0x88888888u;  // upper table: bit 3 clear for codes 8..15
    *s0 = dot4_i8(int(prmt_b32(t.lo0, t.lo1, q)), b0, *s0);
    *s0 = dot4_i8(int(prmt_b32(t.up0, t.up1, qx)), b0, *s0);
    *s1 = dot4_i8(int(prmt_b32(t.lo0, t.lo1, q >> 16)), b1, *s1);
    *s1 = dot4_i8(int(prmt_b32(t.up0, t.up1, qx >> 16)), b1, *s1);
#endif
}

// lookup16x8_paired's entries in element order: lo = elements 4k..4k+3, hi = 16+4k..
// (the tensor-core matmul's f16 staging and the dot4 GEMM's, which stage weights alone).
__device__ __forceinline__ void lookup16x8(uint32_t q, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, uint32_t* lo,
                                           uint32_t* hi) {
    uint32_t p0, p1;
    lookup16x8_paired(q, w0, w1, w2, w3, &p0, &p1);
#if defined(VEGA_GPU_GFX906_ISA)
    *lo = p0, *hi = p1;
#else
    *lo = prmt_b32(p0, p1, 0x6420u);
    *hi = prmt_b32(p0, p1, 0x7531u);
#endif
}

// f16 / bf16 bits -> float.
__device__ __forceinline__ float h2f(uint16_t h) {
#if defined(VEGA_GPU_HIP)
    return float(__builtin_bit_cast(_Float16, h));
#else
    return __half2float(__ushort_as_half(h));
#endif
}
__device__ __forceinline__ uint16_t f2h(float f) {
#if defined(VEGA_GPU_HIP)
    return __builtin_bit_cast(uint16_t, _Float16(f));
#else
    return __half_as_ushort(__float2half_rn(f));
#endif
}
// Two floats -> a half2 bit pattern (lo in bits 0..15), round to nearest.
__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) { return uint32_t(f2h(lo)) | uint32_t(f2h(hi)) << 16; }
// acc + a.lo * b.lo + a.hi * b.hi for two f16 pairs (half2 bit patterns), in f32:
// v_dot2_f32_f16 on gfx906; elsewhere (the emulation build) two f32 fmas.
__device__ __forceinline__ float dot2_f16(uint32_t a, uint32_t b, float acc) {
#if defined(VEGA_GPU_HIP)
    typedef _Float16 half2_v __attribute__((ext_vector_type(2)));
    return __builtin_amdgcn_fdot2(__builtin_bit_cast(half2_v, a), __builtin_bit_cast(half2_v, b), acc, false);
#else
    acc = fmaf(h2f(uint16_t(a)), h2f(uint16_t(b)), acc);
    return fmaf(h2f(uint16_t(a >> 16)), h2f(uint16_t(b >> 16)), acc);
#endif
}
__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// Reading what other blocks of the same grid wrote (split-attention partials, after
// their release fence and an atomic counter): acquire_fence() once, then
// load_l2() for each value. NVIDIA: a device-scope fence and loads that bypass the
// SM's L1 (ld.global.cg), which is not coherent; gfx906: an agent-scope acquire,
// which invalidates the CU's vector L1, then plain loads (no glc, no volatile:
// they pipeline).
__device__ __forceinline__ void acquire_fence() {
#if defined(VEGA_GPU_HIP)
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
#else
    __threadfence();
#endif
}
__device__ __forceinline__ float load_l2(const float* p) {
#if defined(VEGA_GPU_HIP)
    return *p;
#else
    return __ldcg(p);
#endif
}
__device__ __forceinline__ int32_t load_l2(const int32_t* p) {
#if defined(VEGA_GPU_HIP)
    return *p;
#else
    return __ldcg(p);
#endif
}

#if defined(VEGA_GPU_GFX906_ISA)
namespace detail {
using gfx906::kQuadXor1;
using gfx906::kQuadXor2;
using gfx906::kRowHalfMirror;
using gfx906::kRowMirror;
using gfx906::kSwizzleXor16;

// The instructions, on 32-bit lanes: v_mov_b32_dpp with bound_ctrl (0 from an
// out-of-range or inactive source), update_dpp (the lane's old value there),
// ds_swizzle_b32, v_readlane_b32.
template <int Ctrl>
__device__ __forceinline__ int mov_dpp(int v) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_mov_dpp(v, Ctrl, 0xF, 0xF, true);
#else
    return emu::dpp<Ctrl, true>(0, v);
#endif
}
template <int Ctrl>
__device__ __forceinline__ int update_dpp(int old, int v) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_update_dpp(old, v, Ctrl, 0xF, 0xF, false);
#else
    return emu::dpp<Ctrl, false>(old, v);
#endif
}
template <int Offset>
__device__ __forceinline__ int ds_swizzle(int v) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_ds_swizzle(v, Offset);
#else
    return emu::swizzle<Offset>(v);
#endif
}
__device__ __forceinline__ int readlane_i(int v, int l) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_readlane(v, l);
#else
    return emu::readlane(v, l);
#endif
}
__device__ __forceinline__ int ds_bpermute(int byte_address, int v) {
#if defined(VEGA_GPU_HIP)
    return __builtin_amdgcn_ds_bpermute(byte_address, v);
#else
    return emu::bpermute(byte_address, v);
#endif
}

// v from the lane Ctrl names; 0 where that lane is out of range or inactive
// (bound_ctrl): what a sum needs.
template <int Ctrl>
__device__ __forceinline__ float dpp(float v) {
    return __int_as_float(mov_dpp<Ctrl>(__float_as_int(v)));
}
// The same, but the lane's own v where the source is out of range or inactive
// (update_dpp with old = v, no bound_ctrl): a max must not see a 0 there, or a max
// over negative values in a partly active quad or row would return 0.
template <int Ctrl>
__device__ __forceinline__ float dpp_or_self(float v) {
    const int i = __float_as_int(v);
    return __int_as_float(update_dpp<Ctrl>(i, i));
}
__device__ __forceinline__ float swz_xor16(float v) { return __int_as_float(ds_swizzle<kSwizzleXor16>(__float_as_int(v))); }
__device__ __forceinline__ float readlane(float v, int l) { return __int_as_float(readlane_i(__float_as_int(v), l)); }
}  // namespace detail
#endif

// Sum over aligned groups of W lanes (W a power of two <= kWave); every lane of
// the group gets the result. Call from converged code (all lanes active).
template <int W>
__device__ __forceinline__ float group_reduce_sum(float v) {
    static_assert(W >= 1 && W <= kWave && (W & (W - 1)) == 0, "group width");
#if defined(VEGA_GPU_GFX906_ISA)
    using namespace detail;
    // After each step every lane holds the sum of its 2, 4, 8, ... lanes: mirrors
    // pair each half of a group with the other half, which is all a sum needs.
    if constexpr (W >= 2) v += dpp<kQuadXor1>(v);
    if constexpr (W >= 4) v += dpp<kQuadXor2>(v);
    if constexpr (W >= 8) v += dpp<kRowHalfMirror>(v);
    if constexpr (W >= 16) v += dpp<kRowMirror>(v);
    if constexpr (W >= 32) v += swz_xor16(v);
    if constexpr (W >= 64) v = readlane(v, 0) + readlane(v, 32);
    return v;
#else
#pragma unroll
    for (int o = W / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
#endif
}

// Max over aligned groups of W lanes; every lane of the group gets the result.
// Call from converged code, as for the sum: an inactive lane breaks the butterfly
// (no reduction reaches every lane through lanes that do not run). Where a lane is
// inactive anyway, the DPP steps keep the reading lane's own value (dpp_or_self),
// so the result is a max over some active lanes, never a 0 that no lane holds (a
// max over negative values used to return 0: tests/gpu/gfx906_lanes_test.cpp).
template <int W>
__device__ __forceinline__ float group_reduce_max(float v) {
    static_assert(W >= 1 && W <= kWave && (W & (W - 1)) == 0, "group width");
#if defined(VEGA_GPU_GFX906_ISA)
    using namespace detail;
    if constexpr (W >= 2) v = fmaxf(v, dpp_or_self<kQuadXor1>(v));
    if constexpr (W >= 4) v = fmaxf(v, dpp_or_self<kQuadXor2>(v));
    if constexpr (W >= 8) v = fmaxf(v, dpp_or_self<kRowHalfMirror>(v));
    if constexpr (W >= 16) v = fmaxf(v, dpp_or_self<kRowMirror>(v));
    if constexpr (W >= 32) v = fmaxf(v, swz_xor16(v));
    if constexpr (W >= 64) v = fmaxf(readlane(v, 0), readlane(v, 32));
    return v;
#else
#pragma unroll
    for (int o = W / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
#endif
}

__device__ __forceinline__ float wave_reduce_sum(float v) { return group_reduce_sum<kWave>(v); }
__device__ __forceinline__ float wave_reduce_max(float v) { return group_reduce_max<kWave>(v); }

// Orders the shared-memory writes of this wave's lanes before its later reads of
// them by other lanes of the same wave (no block barrier): gfx906 runs a wave's LDS
// operations in order, so only the compiler is held (a wavefront fence); the
// emulation's wave is two warps, which meet at their named barrier.
__device__ __forceinline__ void wave_lds_sync() {
#if defined(VEGA_GPU_HIP)
    __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "wavefront");
    __builtin_amdgcn_wave_barrier();
#elif defined(VEGA_GPU_EMULATE_GFX906)
    emu::need_whole_wave("wave_lds_sync in divergent code");
    emu::wave_barrier();
#else
    __syncwarp();
#endif
}

// Value of lane src (uniform src) to all lanes.
__device__ __forceinline__ float wave_broadcast(float v, int src) {
#if defined(VEGA_GPU_GFX906_ISA)
    return detail::readlane(v, src);
#else
    return __shfl_sync(0xffffffffu, v, src);
#endif
}

// Value of lane (lane ^ mask): arbitrary in-wave exchange (ds_bpermute on gfx906).
__device__ __forceinline__ int wave_shuffle_xor(int v, int mask) {
#if defined(VEGA_GPU_GFX906_ISA)
    return detail::ds_bpermute((lane_id() ^ mask) << 2, v);
#else
    return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

// Lane i gets lane i - 1's v within its row of 16 lanes, 0 at a row's first lane:
// gfx906's v_mov_b32_dpp row_shr:1; NVIDIA: a shuffle up inside 16 lanes (vega probe's
// exchange study).
__device__ __forceinline__ int row_shift1(int v) {
#if defined(VEGA_GPU_GFX906_ISA)
    return detail::mov_dpp<0x111>(v);
#else
    const int u = __shfl_up_sync(0xffffffffu, v, 1, 16);
    return (lane_id() & 15) == 0 ? 0 : u;
#endif
}

// Over the same lane of every aligned group of G lanes in the wave (lanes l, l ^ G,
// l ^ 2G, ...; G a power of two < kWave): sum / max, every lane gets its result.
// gfx906: xor 16 is ds_swizzle, xor 32 ds_bpermute. Converged code only.
__device__ __forceinline__ float lane_xor(float v, int mask) {
#if defined(VEGA_GPU_GFX906_ISA)
    if (mask == 16) return detail::swz_xor16(v);
#endif
    return __int_as_float(wave_shuffle_xor(__float_as_int(v), mask));
}
template <int G>
__device__ __forceinline__ float across_groups_sum(float v) {
    static_assert(G >= 1 && G < kWave && (G & (G - 1)) == 0, "group width");
#pragma unroll
    for (int o = G; o < kWave; o *= 2) v += lane_xor(v, o);
    return v;
}
template <int G>
__device__ __forceinline__ float across_groups_max(float v) {
    static_assert(G >= 1 && G < kWave && (G & (G - 1)) == 0, "group width");
#pragma unroll
    for (int o = G; o < kWave; o *= 2) v = fmaxf(v, lane_xor(v, o));
    return v;
}

// Block-wide sum for blocks of NT threads (NT a multiple of kWave): wave
// reductions, then one LDS slot per wave. Every thread gets the result.
template <int NT>
__device__ __forceinline__ float block_reduce_sum(float v, float* lds /* [NT/kWave] */) {
    constexpr int NW = NT / kWave;
    v = wave_reduce_sum(v);
    if constexpr (NW == 1) return v;
    const int w = int(threadIdx.x) / kWave;
    __syncthreads();  // lds may still be read from a previous call
    if (lane_id() == 0) lds[w] = v;
    __syncthreads();
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < NW; ++i) s += lds[i];
    return s;
}

// Block-wide sum in double (RMS norm sums of squares, so that the GPU scale rounds
// like the CPU's double sum): the wave steps of group_reduce_sum on both 32-bit
// halves (gfx906) or a double shuffle butterfly, then one LDS slot per wave.
// Every thread gets the result. Converged code only.
template <int NT>
__device__ __forceinline__ double block_reduce_sum_f64(double v, double* lds /* [NT/kWave] */) {
    constexpr int NW = NT / kWave;
#if defined(VEGA_GPU_GFX906_ISA)
    // The float reduction's DPP / ds_swizzle steps, applied to both 32-bit halves.
    using namespace detail;
    const auto step = [](double x, auto mov) {
        const long long b = __double_as_longlong(x);
        const int lo = mov(int(b & 0xffffffffll)), hi = mov(int(b >> 32));
        return __longlong_as_double((static_cast<long long>(hi) << 32) | static_cast<unsigned>(lo));
    };
    v += step(v, [](int x) { return mov_dpp<kQuadXor1>(x); });
    v += step(v, [](int x) { return mov_dpp<kQuadXor2>(x); });
    v += step(v, [](int x) { return mov_dpp<kRowHalfMirror>(x); });
    v += step(v, [](int x) { return mov_dpp<kRowMirror>(x); });
    v += step(v, [](int x) { return ds_swizzle<kSwizzleXor16>(x); });
    if constexpr (kWave == 64)
        v = step(v, [](int x) { return readlane_i(x, 0); }) + step(v, [](int x) { return readlane_i(x, 32); });
#else
#pragma unroll
    for (int o = kWave / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
#endif
    if constexpr (NW == 1) return v;
    const int w = int(threadIdx.x) / kWave;
    __syncthreads();
    if (lane_id() == 0) lds[w] = v;
    __syncthreads();
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < NW; ++i) s += lds[i];
    return s;
}

template <int NT>
__device__ __forceinline__ float block_reduce_max(float v, float* lds) {
    constexpr int NW = NT / kWave;
    v = wave_reduce_max(v);
    if constexpr (NW == 1) return v;
    const int w = int(threadIdx.x) / kWave;
    __syncthreads();
    if (lane_id() == 0) lds[w] = v;
    __syncthreads();
    float s = lds[0];
#pragma unroll
    for (int i = 1; i < NW; ++i) s = fmaxf(s, lds[i]);
    return s;
}

}  // namespace vega::gpu
