// The KV cache layout, the one formula that host code (CpuKvCache, GpuKvCache) and
// device code (cache stores, attention, the rope epilogue) all use. Per layer, K and
// V are each [seq][kv_head][ctx][head_dim]: head_dim contiguous, so a decode step
// writes one contiguous row per head and attention reads rows in order (the gfx906
// study measured 357 vs 14 GB/s for writes, 1.76 vs 0.37 TB/s for reads, against
// [head][dim][seq]). Offsets are in elements (f16 or f32), not bytes.
#pragma once
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define VEGA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define VEGA_HOST_DEVICE inline
#endif

namespace vega {

struct KvLayout {
    int n_seq = 1, n_ctx = 0, n_kv_head = 0, head_dim = 0;

    // Elements of one layer's K (or V).
    VEGA_HOST_DEVICE int64_t layer_elems() const { return int64_t(n_seq) * n_kv_head * n_ctx * head_dim; }
    // Element offset, within a layer's K (or V), of dimension 0 of (seq, kv head, position).
    VEGA_HOST_DEVICE int64_t row(int seq, int head, int pos) const {
        return ((int64_t(seq) * n_kv_head + head) * n_ctx + pos) * head_dim;
    }
};

}  // namespace vega
