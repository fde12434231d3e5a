// Tensor-core primitives of NVIDIA sm_80+ (mma.sync, cp.async, ldmatrix), shared by
// the tensor-core matmul (matmul_mma.cu) and prompt attention (attention_mma.cu).
// Included only where the target is NVIDIA (those files compile to nothing for
// gfx906 and its emulation); below sm_80 each primitive is empty and the host never
// launches a kernel that uses it (checked at run time).
#pragma once
#include <cstdint>
#include "backend/gpu/per_device.h"

namespace vega::gpu {

// d += A (16x16 f16, row) x B (16x8 f16, col), f32 accumulation; fragments as the
// PTX ISA lays them out: a0 = A[g][2t, 2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8, 2t+9],
// a3 = A[g+8][2t+8..]; b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g];
// d0, d1 = D[g][2t, 2t+1], d2, d3 = D[g+8][2t, 2t+1].
__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;  // never launched (mma_device_ok)
#endif
}

// Shared-memory operands are 32-bit shared-window addresses (SmemAddr), converted
// once per kernel: a generic pointer costs a special-register read per use.
using SmemAddr = unsigned;

// cp.async (sm_80+): G bytes (4, 8 or 16) global -> shared without registers.
// A thread's copies since its last commit form one group; cp_async_wait<N> returns
// once at most N of its groups are still in flight (the block then syncs before
// anyone reads what the others copied).
template <int G>
__device__ __forceinline__ void cp_async(SmemAddr d, const void* src) {
    static_assert(G == 4 || G == 8 || G == 16, "cp.async sizes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (G == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d), "l"(src), "n"(G) : "memory");
#else
    (void)d, (void)src;  // never launched (mma_device_ok)
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// ldmatrix (sm_75+): 8x8 matrices of 16-bit elements from shared memory, one row of
// 16 bytes per address (lanes 8j..8j+7 give matrix j's rows). Register j of lane
// (g, t) = g * 4 + t receives bytes 4t..4t+3 of row g of matrix j: for an 8-row x
// 16-byte slice of int8 data, exactly the word an mma fragment wants from row g.
__device__ __forceinline__ void ldmatrix_x4(SmemAddr a, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
#else
    (void)a, r0 = r1 = r2 = r3 = 0;
#endif
}
// ldmatrix .trans: register j of lane (g, t) receives elements [2t][g] and [2t+1][g]
// of matrix j (the transposed 8x8 tile): B fragments of a [k][n] row-major operand.
__device__ __forceinline__ void ldmatrix_x4_trans(SmemAddr a, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
#else
    (void)a, r0 = r1 = r2 = r3 = 0;
#endif
}
// cp.async of 16 bytes, of which only `bytes` (0 or 16) are read from src: the rest
// of the destination is zero-filled (rows past the end of a tile's data).
__device__ __forceinline__ void cp_async_zfill(SmemAddr d, const void* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(bytes) : "memory");
#else
    (void)d, (void)src, (void)bytes;
#endif
}
// Two floats -> one half2 bit pattern (lo in the low half), round to nearest.
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    (void)lo, (void)hi;
    return 0;
#endif
}

#if defined(VEGA_GPU_CUDA)
// Host side. Whether the current device has the mma instructions (sm_80+), read once;
// the kernels above are launched only where it does.
inline bool mma_device_ok() {  // of the current device
    static PerDevice<bool> ok;
    return ok.get([] {
        int dev = 0, major = 0;
        if (cudaGetDevice(&dev) != cudaSuccess) return false;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
        return major >= 8;
    });
}
// Raises kernel k's dynamic shared memory limit to `dynamic` bytes where the current
// device lends a block dynamic + static_bytes (opt-in); false where it does not (the
// caller keeps another path). Call once per kernel and device (callers cache it in a PerDevice).
template <typename... P>
bool allow_dynamic_smem(void (*k)(P...), int dynamic, int static_bytes = 0) {
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) return false;
    if (optin < dynamic + static_bytes) return false;
    return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic) == cudaSuccess;
}
#endif

}  // namespace vega::gpu
