// VEGA_HOST_DEVICE: a function that host code and GPU kernels share (one formula for
// both: the KV layout, the repacked weights' element decoder, the expert routing's
// held ids). Usable before any GPU runtime header (HIP's __forceinline__ comes from one).
#pragma once
#if defined(__HIPCC__) || defined(__HIP__)
#define VEGA_HOST_DEVICE __host__ __device__ inline __attribute__((always_inline))
#elif defined(__CUDACC__)
#define VEGA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define VEGA_HOST_DEVICE inline
#endif
