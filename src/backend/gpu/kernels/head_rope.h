// One head of one token through its optional RMS norm (qwen3's q/k norms) and rope,
// and for k the store into the cache: rope_store's work for a head, shared by its
// kernel and by the q+k+v matvec's per-head tail (matvec.cu, kEpiNormRope), so both
// round alike. NT threads of the block take part (it syncs); x is read through L2
// (load_l2: in the matvec another block wrote it).
#pragma once
#include <cstdint>

#include "backend/gpu/kernels/norm.h"
#include "backend/gpu/kernels/rope.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

constexpr int kHeadRopeMaxDim = 256;  // head dims the per-head LDS row holds

// x [hd]: the head's values, replaced by the result (normed by nw if set, eps; then
// the pairs j < n_rot / 2 rotated at position p). k_dst: for a k head, its cache
// row (c.k + k_dst); negative for q. lds_f: [kHeadRopeMaxDim] floats, lds_d: [NT / kWave]
// doubles of shared memory. E: the cache's element type (c.elem), f16 or f32 (a q8_0
// cache quantizes whole blocks of the finished head: the caller's work, from x).
template <int NT, KvElem E>
__device__ void norm_rope_head(float* x, int hd, const float* __restrict__ nw, float eps, const ops::RopeArgs& r, int p,
                               const ops::KvLayer& c, int64_t k_dst, float* lds_f, double* lds_d) {
    const int tid = int(threadIdx.x);
    double ss = 0.0;
    for (int d = tid; d < hd; d += NT) {
        const float v = load_l2(x + d);
        lds_f[d] = v;
        ss += double(v) * v;
    }
    if (nw) {  // block-uniform
        const float sc = norm_scale(block_reduce_sum_f64<NT>(ss, lds_d), hd, eps);
        for (int d = tid; d < hd; d += NT) lds_f[d] = lds_f[d] * sc * nw[d];
    }
    __syncthreads();  // the rotation below reads other threads' elements
    static_assert(E != KvElem::Q8_0, "q8_0: the caller stores the head's blocks");
    auto put = [&](int d, float val) {
        if constexpr (E == KvElem::F16) static_cast<uint16_t*>(c.k)[k_dst + d] = f2h(val);
        else static_cast<float*>(c.k)[k_dst + d] = val;
    };
    const int half = r.n_rot / 2;
    for (int j = tid; j < half; j += NT) {
        float sn, cs;
        rope_cs(r, p, j, &sn, &cs);
        const RopePair d = rope_pair(r, j);
        float y0, y1;
        rotate(lds_f[d.a], lds_f[d.b], cs, sn, &y0, &y1);
        x[d.a] = y0, x[d.b] = y1;
        if (k_dst >= 0) put(d.a, y0), put(d.b, y1);
    }
    for (int d = r.n_rot + tid; d < hd; d += NT) {  // not rotated
        x[d] = lds_f[d];
        if (k_dst >= 0) put(d, lds_f[d]);
    }
}

}  // namespace vega::gpu
