// The gfx906 cross-lane instructions emulated on NVIDIA (the emulation build,
// -DVEGA_GPU_EMULATE_GFX906=ON): a wave is 64 threads, two consecutive warps of a
// block, and each wave64 primitive of wave.h runs as the instruction it stands
// for, with that instruction's semantics (gfx906_lanes.h), not as a convenient
// 64-lane shuffle:
// - DPP (quad_perm, row_mirror, row_half_mirror, row_shl/shr/ror) and ds_swizzle
//   (bitmask mode) stay inside 16 or 32 lanes, so inside one warp: a shuffle from
//   the source lane the instruction names, and 0 (bound_ctrl, ds_swizzle) or the
//   lane's old value (no bound_ctrl) where that lane is out of range or inactive.
// - v_readlane and ds_bpermute can cross the two warps: through shared memory and
//   a named barrier of the wave's 64 threads. That needs every lane of the wave
//   present, so these trap with a message in divergent code (on gfx906 readlane
//   would read an inactive lane's stale register, which no emulation can know).
// Device code, CUDA only.
#pragma once
#include <cstdio>

#include "backend/gpu/gfx906_lanes.h"

namespace vega::gpu::emu {

// Named barriers 1..15 serve one wave each (0 is __syncthreads): blocks of at most
// 15 waves (960 threads). wave.h checks the target table's block sizes against it.
constexpr int kMaxWavesPerBlock = 15;

__device__ __forceinline__ int lane() { return int(threadIdx.x) & 63; }
__device__ __forceinline__ int wave_in_block() { return int(threadIdx.x) >> 6; }
// The wave's EXEC as far as this warp sees it: this warp's active lanes, in its half.
__device__ __forceinline__ unsigned long long exec_half(unsigned warp_mask) {
    return static_cast<unsigned long long>(warp_mask) << (lane() & 32);
}

[[noreturn]] __device__ __forceinline__ void fail(const char* what) {
    printf("vega gfx906 emulation: %s (block %d, thread %d)\n", what, int(blockIdx.x), int(threadIdx.x));
    __trap();
    __builtin_unreachable();
}

// The 64 threads of this wave meet (barrier 1 + wave; barrier 0 is __syncthreads).
// Callers check need_whole_wave() first.
__device__ __forceinline__ void wave_barrier() { asm volatile("bar.sync %0, 64;" ::"r"(wave_in_block() + 1) : "memory"); }

// Before a cross-warp exchange (its shared slots and named barrier): every lane of
// the wave present, and a wave index that has a barrier and a slot.
__device__ __forceinline__ void need_whole_wave(const char* what) {
    if (blockDim.x > kMaxWavesPerBlock * 64) fail("blocks of more than 15 waves have no named barrier per wave");
    if (__activemask() != 0xffffffffu) fail(what);
}

// v_mov_b32_dpp (bound_ctrl: invalid reads 0) / update_dpp with old (no bound_ctrl).
template <int Ctrl, bool BoundCtrl>
__device__ __forceinline__ int dpp(int old, int v) {
    static_assert(gfx906::dpp_source(Ctrl, 0) != gfx906::kUnsupported, "DPP control not modelled");
    const unsigned m = __activemask();
    const int src = gfx906::dpp_source(Ctrl, lane());
    const int got = __shfl_sync(m, v, (src < 0 ? lane() : src) & 31);
    return gfx906::dpp_read(got, old, src, exec_half(m), BoundCtrl);
}

// ds_swizzle_b32, bitmask mode.
template <int Offset>
__device__ __forceinline__ int swizzle(int v) {
    static_assert(gfx906::swizzle_source(Offset, 0) != gfx906::kUnsupported, "ds_swizzle mode not modelled");
    const unsigned m = __activemask();
    const int src = gfx906::swizzle_source(Offset, lane());
    const int got = __shfl_sync(m, v, src & 31);
    return gfx906::lds_xchg_read(got, src, exec_half(m));
}

// v_readlane_b32 (l uniform): lane l's value in every lane.
__device__ __forceinline__ int readlane(int v, int l) {
    need_whole_wave("v_readlane in divergent code");
    __shared__ int slot[kMaxWavesPerBlock];
    if (lane() == l) slot[wave_in_block()] = v;
    wave_barrier();
    const int r = slot[wave_in_block()];
    wave_barrier();  // the slot is free for the next call
    return r;
}

// ds_bpermute_b32: lane reads lane (byte_address / 4) mod 64; 0 from an inactive
// lane. Within one warp for every lane: a shuffle; else shared memory. Both warps
// must take the same path (an xor pattern does: masks below 32 stay in the warp,
// 32 and above cross it for every lane).
__device__ __forceinline__ int bpermute(int byte_address, int v) {
    const unsigned m = __activemask();
    const int src = gfx906::bpermute_source(byte_address);
    if (__all_sync(m, (src >> 5) == (lane() >> 5))) {
        const int got = __shfl_sync(m, v, src & 31);
        return gfx906::lds_xchg_read(got, src, exec_half(m));
    }
    need_whole_wave("ds_bpermute across the wave's halves in divergent code");
    __shared__ int vals[kMaxWavesPerBlock][64];
    vals[wave_in_block()][lane()] = v;
    wave_barrier();
    const int r = vals[wave_in_block()][src];  // the whole wave is active
    wave_barrier();
    return r;
}

}  // namespace vega::gpu::emu
