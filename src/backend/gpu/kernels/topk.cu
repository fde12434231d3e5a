// Top-k of each logits row on the device, so that top-k sampling moves k ids and
// values off the GPU instead of the whole row.
//
// One block per row. Every element gets a unique 64-bit key: the float mapped to
// an order-preserving uint32 in the high half (NaN as -inf), ~index in the low
// half, so a larger key is a larger value or, on ties, a lower index. A radix
// select over the key's 8 bytes (most significant first, a 256-bin LDS histogram
// per pass) finds the k-th largest key T; exactly k keys are >= T. Those are
// gathered into LDS and each is placed by its rank. Reads: 8 passes over the row.
//
// @audit kernel=*top_k_k(* min_waves=4
#include <cmath>

#include "backend/gpu/kernels/order_key.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {
namespace {

constexpr int kTopKThreads = arch::kRowThreads;
constexpr int kTopKMaxK = 64;  // Backend::kTopKMax

__global__ void __launch_bounds__(kTopKThreads) top_k_k(const float* __restrict__ logits, int64_t n, int k,
                                                        int32_t* __restrict__ ids, float* __restrict__ vals) {
    pdl_wait();
    pdl_trigger();
    __shared__ unsigned int hist[256];
    __shared__ unsigned long long prefix_s, mask_s;
    __shared__ int remaining_s, count_s;
    __shared__ unsigned long long picked[kTopKMaxK];
    const float* row = logits + int64_t(blockIdx.x) * n;
    if (threadIdx.x == 0) prefix_s = 0, mask_s = 0, remaining_s = k, count_s = 0;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += kTopKThreads) hist[b] = 0;
        __syncthreads();
        const unsigned long long prefix = prefix_s, mask = mask_s;
        for (int64_t i = threadIdx.x; i < n; i += kTopKThreads) {
            const unsigned long long key = order_key(row[i], i);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {  // the bin holding the remaining-th largest key, from the top
            int rem = remaining_s;
            int b = 255;
            for (; b > 0; --b) {
                if (int(hist[b]) >= rem) break;
                rem -= int(hist[b]);
            }
            remaining_s = rem;
            prefix_s = prefix | (static_cast<unsigned long long>(b) << shift);
            mask_s = mask | (255ull << shift);
        }
        __syncthreads();
    }
    const unsigned long long T = prefix_s;  // the k-th largest key itself
    for (int64_t i = threadIdx.x; i < n; i += kTopKThreads) {
        const unsigned long long key = order_key(row[i], i);
        if (key >= T) picked[atomicAdd(&count_s, 1)] = key;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < k; j += kTopKThreads) {
        const unsigned long long key = picked[j];
        int rank = 0;
        for (int m = 0; m < k; ++m) rank += picked[m] > key;
        const int32_t idx = int32_t(key_index(key));
        const float v = row[idx];
        ids[int64_t(blockIdx.x) * k + rank] = idx;
        vals[int64_t(blockIdx.x) * k + rank] = v != v ? -INFINITY : v;
    }
}

}  // namespace

void ops::top_k(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals, void* s) {
    if (rows > 0) launch(top_k_k, dim3(unsigned(rows)), dim3(kTopKThreads), s, logits, n, k, ids, vals);
}

}  // namespace vega::gpu
