// SiLU, the gate of SwiGLU, written once for every kernel that applies it (the
// fused gate/up matvec and matmul, and the element-wise swiglu), so that fused
// and unfused paths round alike.
#pragma once
#include "backend/gpu/vendor.h"

namespace vega::gpu {

__device__ __forceinline__ float silu(float g) { return g / (1.f + expf(-g)); }

}  // namespace vega::gpu
