// Kernel launches and programmatic dependent launch (PDL). GPU translation units only.
//
// On NVIDIA sm_90+ every kernel is launched with programmatic stream
// serialization: the next kernel's blocks may start while the previous grid
// drains, run their prologue (matvecs: the first weight loads, which depend on
// nothing earlier), then pdl_wait() until the previous grid has finished and its
// memory is visible. Rule: every kernel calls pdl_wait() before it touches memory
// an earlier kernel of the step writes or reads (activations, cache, scratch); only
// what no kernel of the step writes may be read before it: weights, host-uploaded
// step data (pos, seq, BatchView::fresh) and the cache rows below fresh (attention).
// Waits are transitive, so a chain stays ordered (a grid's blocks may skip the wait
// only if one of them always waits).
// On HIP both calls are no-ops and launches are plain stream launches.
#pragma once
#include <utility>

#include "backend/gpu/runtime.h"
#include "backend/gpu/vendor.h"

namespace vega::gpu {

__device__ __forceinline__ void pdl_wait() {
#if defined(VEGA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next kernel's blocks be scheduled (called after pdl_wait(), so at
// most two grids are in flight).
__device__ __forceinline__ void pdl_trigger() {
#if defined(VEGA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// k<<<g, b, smem, s>>>(args...), with the PDL attribute where rt::pdl_enabled().
// smem: dynamic shared memory bytes (over 48 KiB: the kernel's attribute raised first).
template <typename... P, typename... A>
void launch_smem(void (*k)(P...), dim3 g, dim3 b, size_t smem, void* s, A&&... args) {
#if defined(VEGA_GPU_CUDA)
    if (rt::pdl_enabled()) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = g;
        cfg.blockDim = b;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = static_cast<gpuStream_t>(s);
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        const cudaError_t e = cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
        if (e != cudaSuccess) gpu_fail(std::string("kernel launch failed: ") + cudaGetErrorString(e));
        return;
    }
#endif
    k<<<g, b, smem, static_cast<gpuStream_t>(s)>>>(std::forward<A>(args)...);
}

template <typename... P, typename... A>
void launch(void (*k)(P...), dim3 g, dim3 b, void* s, A&&... args) {
    launch_smem(k, g, b, 0, s, std::forward<A>(args)...);
}

}  // namespace vega::gpu
