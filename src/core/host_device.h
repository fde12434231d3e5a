// VEGA_HOST_DEVICE: a function that host code and GPU kernels share (one formula for
// both: the KV layout, the repacked weights' element decoder).
#pragma once
#if defined(__CUDACC__) || defined(__HIPCC__)
#define VEGA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define VEGA_HOST_DEVICE inline
#endif
