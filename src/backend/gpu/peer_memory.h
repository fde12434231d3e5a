// Device-side access to memory that other devices write (peer memory over NVLink, PCIe
// P2P or xGMI), for kernels/peer_sum.cu. GPU translation units only.
//
// Publishing: a block's stores, then __syncthreads(), then one thread's publish_flag
// (a system-scope fence before the flag store: the fence is cumulative, so the other
// threads' stores the barrier ordered before it are visible to any device that sees
// the flag). Observing: poll_flag until the value arrives, then a system fence, then
// __syncthreads(); the data is read with load_fresh4, which bypasses the reading SM's
// L1 (a plain load could hit a line cached from an earlier round of the same buffer).
#pragma once
#include <cstdint>

#include "backend/gpu/arch/arch.h"
#include "backend/gpu/vendor.h"

namespace vega::gpu {

__device__ __forceinline__ void publish_flag(uint32_t* flag, uint32_t v) {
    __threadfence_system();
    *reinterpret_cast<volatile uint32_t*>(flag) = v;
}

__device__ __forceinline__ uint32_t poll_flag(const uint32_t* flag) {
    return *reinterpret_cast<const volatile uint32_t*>(flag);
}

__device__ __forceinline__ float4 load_fresh4(const float4* p) {
#if defined(VEGA_GPU_CUDA)
    return __ldcv(p);
#else
    const volatile float* q = reinterpret_cast<const volatile float*>(p);
    return make_float4(q[0], q[1], q[2], q[3]);
#endif
}

__device__ __forceinline__ float load_fresh(const float* p) {
#if defined(VEGA_GPU_CUDA)
    return __ldcv(p);
#else
    return *reinterpret_cast<const volatile float*>(p);
#endif
}

// Ends the kernel with an error the host sees at its next synchronization (a peer that
// never arrives: better a failed step than a hung device).
__device__ __forceinline__ void trap_kernel() {
#if defined(VEGA_GPU_CUDA)
    __trap();
#else
    __builtin_trap();
#endif
}

// Nanoseconds by a clock that runs at a fixed rate whatever the shader clock does: CUDA's
// %globaltimer; on HIP wall_clock64(), whose rate the target's table gives (the emulation
// build, CUDA with the gfx906 table, reads %globaltimer).
__device__ __forceinline__ uint64_t wait_clock_ns() {
#if defined(VEGA_GPU_CUDA)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#elif defined(__HIP_DEVICE_COMPILE__)
    return uint64_t(wall_clock64()) * (1000000000ull / arch::kWallClockHz);
#else
    return 0;  // (a HIP build's host pass, which declares no wall_clock64 and never runs this)
#endif
}

// How long a rank waits for a peer's flag before its kernel traps. A peer that never
// comes (its process died, its launch failed) should fail the step, not hang the device;
// a peer that is only late must not. A rank's host thread can stall for a second or more
// before its launch (first-launch kernel loading, a busy host, paging), and a false trap
// ends the whole run. (The limit was 2^24 polls, a few seconds on an H200. The traps the
// test suite hit beside a busy host came from lazy kernel loading, not from this limit:
// runtime.cu loads every kernel at the start now.)
constexpr uint64_t kPeerWaitSeconds = 60;

// Waits until the round number in *watch has reached e (compared wrapping: rounds count
// up and may wrap). A wait of fewer than 2^14 polls (milliseconds) runs the loop of a
// plain poll count and reads no clock; a longer one reads the clock every 2^14 polls and
// traps kPeerWaitSeconds after its first read. (The first version read the clock when
// every unfinished wait started: B=16 tensor-parallel decode of the 8B on 2 x H200 fell
// from 5051-5071 t/s to 4772-4808, and came back to 5012-5086 with this loop; tg128 did
// not move. docs/PERFORMANCE.md, thirty-sixth session.)
// The loop of both waits below: polls `arrived` until it says so, and traps as above.
template <class Arrived>
__device__ __forceinline__ void wait_until(Arrived arrived) {
    constexpr uint32_t kPollsPerRead = 1u << 14;
    uint64_t start = 0;
    for (uint32_t polls = 1; !arrived(); ++polls) {
        if (polls % kPollsPerRead) continue;
        const uint64_t now = wait_clock_ns();
        if (start == 0) start = now;  // (a count that wraps leaves start where it was)
        else if (now - start > kPeerWaitSeconds * 1000000000ull) trap_kernel();
    }
}

__device__ __forceinline__ void wait_flag(const uint32_t* watch, uint32_t e) {
    wait_until([&] { return int32_t(poll_flag(watch) - e) >= 0; });
}

// A value and its round in one naturally aligned 8-byte word (float bits low, round high),
// stored and polled as one access: a reader that sees the round sees the value with it,
// so neither a fence nor a flag is needed (the link never splits an aligned 8-byte store;
// NCCL's LL protocol rests on the same property).
__device__ __forceinline__ uint64_t round_word(float v, uint32_t e) {
    return uint64_t(__float_as_uint(v)) | uint64_t(e) << 32;
}
__device__ __forceinline__ void store_word(uint64_t* w, uint64_t v) { *reinterpret_cast<volatile uint64_t*>(w) = v; }
// Waits until *w holds round e (an exact match: the slot held round e - 2 before) and
// returns its value. The load bypasses L1, as poll_flag's.
__device__ __forceinline__ float wait_word(const uint64_t* w, uint32_t e) {
    uint64_t v = 0;
    wait_until([&] {
        v = *reinterpret_cast<const volatile uint64_t*>(w);
        return uint32_t(v >> 32) == e;
    });
    return __uint_as_float(uint32_t(v));
}

}  // namespace vega::gpu
