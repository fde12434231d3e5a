// The RMS norm's scale, written once for every kernel that normalises (rows.cu's norms
// and input preparation, the per-head q/k norm inside rope_store).
#pragma once
#include <cstdint>

#include "backend/gpu/vendor.h"

namespace vega::gpu {

// 1/rms as the CPU backend computes it: double sum of squares, float(1 / sqrt(mean + eps)),
// then y = x * scale * w in that order, so both backends round the norm alike.
__device__ __forceinline__ float norm_scale(double ss, int64_t n, float eps) {
    return float(1.0 / sqrt(ss / double(n) + double(eps)));
}

}  // namespace vega::gpu
