// The gfx906 cross-lane instructions that vega's wave primitives use, as lane
// arithmetic: which lane each lane reads, and what it reads when that lane is out
// of range or inactive. One definition for the CUDA emulation of a wave64
// (gfx906_emulation.h) and for the CPU test that checks it against a plain
// reading of the ISA (tests/gpu/gfx906_lanes_test.cpp). Host and device code.
//
// Sources: the Vega ISA's DPP_CTRL and ds_swizzle offset encodings; LLVM's
// AMDGPU modifier reference (bound_ctrl: an invalid lane reads as 0); the
// ds_bpermute reference (reading from an inactive lane returns 0).
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define VEGA_LANES_HD __host__ __device__
#else
#define VEGA_LANES_HD
#endif

namespace vega::gpu::gfx906 {

constexpr int kWave = 64;

// DPP controls (GCN5 encoding) used by wave.h.
constexpr int kQuadXor1 = 0xB1;        // quad_perm [1,0,3,2]
constexpr int kQuadXor2 = 0x4E;        // quad_perm [2,3,0,1]
constexpr int kRowHalfMirror = 0x141;  // lane i <-> 7-i within 8
constexpr int kRowMirror = 0x140;      // lane i <-> 15-i within 16
// ds_swizzle offset, bitmask mode: and 0x1f, or 0, xor 0x10 (lane ^ 16 within 32).
constexpr int kSwizzleXor16 = 0x401F;

constexpr int kNone = -1;         // no source lane: the read is invalid
constexpr int kUnsupported = -2;  // a control these helpers do not model

// Source lane of `lane` for DPP control `ctrl` (rows of 16 lanes), kNone where
// the control names a lane outside the row (row_shl / row_shr past its edge).
VEGA_LANES_HD constexpr int dpp_source(int ctrl, int lane) {
    const int row = lane & ~15, i = lane & 15;
    if (ctrl >= 0x00 && ctrl <= 0xFF) return (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3);  // quad_perm
    if (ctrl >= 0x101 && ctrl <= 0x10F) {  // row_shl:n: lane i reads i + n
        const int s = i + (ctrl & 15);
        return s < 16 ? row | s : kNone;
    }
    if (ctrl >= 0x111 && ctrl <= 0x11F) {  // row_shr:n: lane i reads i - n
        const int s = i - (ctrl & 15);
        return s >= 0 ? row | s : kNone;
    }
    if (ctrl >= 0x121 && ctrl <= 0x12F) return row | ((i - (ctrl & 15) + 16) & 15);  // row_ror:n
    if (ctrl == 0x140) return row | (15 - i);                                         // row_mirror
    if (ctrl == 0x141) return row | (i & 8) | (7 - (i & 7));                          // row_half_mirror
    return kUnsupported;  // wave_shl/shr/rol/ror, row_bcast15/31: not used by vega
}

// Source lane of `lane` for a ds_swizzle offset; only the bitmask mode (offset
// bit 15 clear), which works within groups of 32 lanes:
// src = ((lane & and_mask) | or_mask) ^ xor_mask on the low 5 bits.
VEGA_LANES_HD constexpr int swizzle_source(int offset, int lane) {
    if (offset & 0x8000) return kUnsupported;  // quad-permute mode
    const int and_mask = offset & 0x1F, or_mask = (offset >> 5) & 0x1F, xor_mask = (offset >> 10) & 0x1F;
    return (lane & 0x20) | ((((lane & 0x1F) & and_mask) | or_mask) ^ xor_mask);
}

// ds_bpermute: lane reads lane (byte_address / 4) mod 64.
VEGA_LANES_HD constexpr int bpermute_source(int byte_address) { return (byte_address >> 2) & 63; }

// What a lane of v_mov_b32_dpp reads from `src` (kNone: out of range), with
// `active` the wave's 64-bit EXEC mask: the source's value where the source is a
// valid, active lane; otherwise 0 with bound_ctrl, or the lane's old value without.
template <typename T>
VEGA_LANES_HD constexpr T dpp_read(T src_value, T old, int src, unsigned long long active, bool bound_ctrl) {
    const bool valid = src >= 0 && ((active >> src) & 1ull);
    return valid ? src_value : bound_ctrl ? T(0) : old;
}

// ds_swizzle / ds_bpermute: 0 from an inactive source lane.
template <typename T>
VEGA_LANES_HD constexpr T lds_xchg_read(T src_value, int src, unsigned long long active) {
    return src >= 0 && ((active >> src) & 1ull) ? src_value : T(0);
}

}  // namespace vega::gpu::gfx906
