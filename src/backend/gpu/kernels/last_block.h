// "The last block to finish does the rest" without a second launch: each block
// releases its writes (device-scope fence) and counts itself on a counter in device
// memory (zero before the launch, left zero); the block that brings it to n acquires
// everyone's writes (read them with load_l2) and goes on. Block-uniform; contains
// __syncthreads, so every thread of the block must call it.
#pragma once

#include "backend/gpu/wave.h"

namespace vega::gpu {

__device__ __forceinline__ bool last_block(int* counter, int n) {
    __shared__ int s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        s_last = atomicAdd(counter, 1) == n - 1;
        if (s_last) *counter = 0;  // every block has counted: ready for the next launch
    }
    __syncthreads();
    if (!s_last) return false;
    acquire_fence();
    return true;
}

}  // namespace vega::gpu
