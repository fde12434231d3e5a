// Selects the per-target table: one file per target, no #ifdefs inside kernels.
#pragma once
#include "quant/types.h"

namespace vega::gpu::arch {
// Shape of a decode matvec: output rows per wave, and 16-byte weight-load chunks
// in flight per lane and row (the kernel halves it for the fused gate/up kernel).
struct MatvecShape {
    int rows, unroll;
};
// What a decode matvec computes: q/k/v and the output (plain), gate/up + SwiGLU
// (and its q8 epilogue), o/down with the residual + norm epilogue, q+k+v with the
// rope + cache-store epilogue (rows per wave even: a wave owns whole rotated pairs).
enum class Role { kPlain, kSwiglu, kResidualNorm, kQkvRope };
}  // namespace vega::gpu::arch

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#include "backend/gpu/arch/gfx906.h"
#else
#include "backend/gpu/arch/nvidia.h"
#endif
