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
// Tile of the quantized dot4 GEMM (kernels/gemm_dot4.cu): bm weight rows x bn
// activation rows per block, kc 32-element chunks per K step (one LDS stage; two
// stages double-buffer the steps), and tm x tn outputs per thread ((bm/tm) x (bn/tn)
// threads; each thread stages (bm + bn) * kc / threads chunks per step).
struct GemmTile {
    int bm, bn, kc, tm, tn;
    constexpr int threads() const { return (bm / tm) * (bn / tn); }
};
}  // namespace vega::gpu::arch

// The table is the build's target family, not its vendor: CMake maps every
// architecture of VEGA_HIP_ARCHS / VEGA_CUDA_ARCHS to its table and defines
// VEGA_GPU_TARGET_<TABLE> (cmake/gpu.cmake refuses a build whose architectures
// need two tables, and an architecture without one). The host and device passes
// of a kernel file see the same table, so launch shapes chosen on the host fit
// the compiled kernels; rt::check_device_target() refuses a device the table
// does not serve (another architecture, another wave size).
#if defined(VEGA_GPU_TARGET_GFX906)
#include "backend/gpu/arch/gfx906.h"
#elif defined(VEGA_GPU_TARGET_NVIDIA)
#include "backend/gpu/arch/nvidia.h"
#else
#error "no GPU target table: define VEGA_GPU_TARGET_GFX906 or VEGA_GPU_TARGET_NVIDIA (cmake/gpu.cmake does)"
#endif
