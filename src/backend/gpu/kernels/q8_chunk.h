// The q8 form of one 32-value chunk, by one lane: the activation format every
// quantized matvec reads (32 int8 in [-127, 127], d = max|x| / 127, ds = (d, d *
// sum(q))), bit for bit what prepare_act writes (its eight lanes per chunk reduce the
// same max and the same integer sum).
#pragma once

#include "backend/gpu/vendor.h"

namespace vega::gpu {

// x: 32 floats, 16-byte aligned -> a0 (values 0..15), a1 (16..31) packed 4 a word,
// lowest byte first; ds.
__device__ __forceinline__ void q8_chunk(const float* __restrict__ x, int4& a0, int4& a1, float2& ds) {
    float4 v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = reinterpret_cast<const float4*>(x)[i];
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w))));
    const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    int word[8], sum = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int q0 = int(roundf(v[i].x * id)), q1 = int(roundf(v[i].y * id)), q2 = int(roundf(v[i].z * id)),
                  q3 = int(roundf(v[i].w * id));
        sum += q0 + q1 + q2 + q3;
        word[i] = int((uint32_t(q0) & 0xFF) | (uint32_t(q1) & 0xFF) << 8 | (uint32_t(q2) & 0xFF) << 16 | uint32_t(q3) << 24);
    }
    a0 = make_int4(word[0], word[1], word[2], word[3]);
    a1 = make_int4(word[4], word[5], word[6], word[7]);
    ds = make_float2(d, d * float(sum));
}

}  // namespace vega::gpu
