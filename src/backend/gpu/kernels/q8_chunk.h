// The q8 form of the activations every quantized matvec reads: per 32-value chunk,
// 32 int8 in [-127, 127] with d = max|x| / 127, q = round(x / d), and ds = (d, d *
// sum(q)). One chunk is made by 8 consecutive lanes holding 4 values each
// (q8_quad); prepare_act's kernels and the expert down projections (which quantize
// h themselves) share it, so their values agree bit for bit.
#pragma once
#include <cstdint>

#include "backend/gpu/wave.h"

namespace vega::gpu {

struct Q8Quad {
    int q[4];         // this lane's 4 values
    uint32_t packed;  // the same, 4 int8 lowest byte first
    float d, dsum;    // the chunk's scale and d * sum(q)
};

// v: this lane's 4 values (elements 4 * (lane % 8) .. + 3 of the chunk). Call from
// converged code: all 8 lanes of the group take part in its reductions.
__device__ __forceinline__ Q8Quad q8_quad(float4 v) {
    Q8Quad r;
    const float amax = group_reduce_max<8>(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    r.d = amax / 127.f;
    const float id = r.d != 0.f ? 1.f / r.d : 0.f;
    r.q[0] = int(roundf(v.x * id)), r.q[1] = int(roundf(v.y * id)), r.q[2] = int(roundf(v.z * id)),
    r.q[3] = int(roundf(v.w * id));
    r.dsum = r.d * group_reduce_sum<8>(float(r.q[0] + r.q[1] + r.q[2] + r.q[3]));
    r.packed = (uint32_t(r.q[0]) & 0xFF) | (uint32_t(r.q[1]) & 0xFF) << 8 | (uint32_t(r.q[2]) & 0xFF) << 16 |
               uint32_t(r.q[3]) << 24;
    return r;
}

}  // namespace vega::gpu
