// The deferred RMS norm of a decode input (ops::Act::ss): q8 (and, for an f32
// reader such as the expert router, x) hold x * w without the 1/rms factor, and ss
// [n / 32] the per-chunk sums of x^2, at most 4 * kWave chunks (one float4 a lane).
// A reader loads its lane's float4 early (deferred_ss: its latency hides under the
// weight loads), then multiplies each dot by deferred_scale: the same value in every
// kernel (the same loads, the same wave sum), 1 / sqrt(mean(x^2) + eps) as the CPU.
#pragma once
#include <cstdint>

#include "backend/gpu/wave.h"

namespace vega::gpu {

__device__ __forceinline__ float4 deferred_ss(const float* ss, int64_t nc) {
    const int lane = lane_id();
    return ss && lane < nc / 4 ? reinterpret_cast<const float4*>(ss)[lane] : make_float4(0.f, 0.f, 0.f, 0.f);
}
__device__ __forceinline__ float deferred_scale(float4 ss4, int64_t n, float eps) {
    return 1.f / sqrtf(wave_reduce_sum(ss4.x + ss4.y + ss4.z + ss4.w) / float(n) + eps);
}

}  // namespace vega::gpu
