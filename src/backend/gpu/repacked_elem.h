// One element of a repacked weight (gpu_mat.h), decoded from the type's GpuFormat
// alone: the host reference decoder (repack.cpp, tested against the CPU's
// dequantizer for every type) and the GPU's embedding lookup (rows.cu) are this one
// function. Conv supplies the bit conversions of the side it runs on:
//   float f16(uint16_t bits), float bits(uint32_t f32 bits).
#pragma once
#include <cstdint>

#include "backend/gpu/gpu_mat.h"
#include "core/host_device.h"

namespace vega::gpu {

// Chunk ch's code of element e (0..31), before its offset or codebook.
VEGA_HOST_DEVICE int repacked_code(const GpuFormat& f, const GpuMat& W, int64_t ch, int e) {
    int q = 0;
    if (f.codes == GpuCodes::kBytes) return int(int8_t(W.qs[ch * 32 + e]));
    if (f.codes == GpuCodes::kNibbles) {
        const uint8_t b = W.qs[ch * 16 + (e % 16)];
        q = e < 16 ? (b & 0xF) : (b >> 4);
    } else {  // kPairs: word e / 16, byte e % 4, bits 2 * ((e % 16) / 4)
        const uint8_t b = W.qs[ch * 8 + 4 * (e / 16) + e % 4];
        q = (b >> (2 * ((e % 16) / 4))) & 3;
    }
    if (f.high_bits == 1) {
        const uint8_t* h = W.qh + ch * 4;
        q |= ((h[e / 8] >> (e % 8)) & 1) << f.high_at;
    } else if (f.high_bits == 2) {  // 2 bits an element: elements 0..15 in word 0, 16..31 in word 1
        const uint8_t* h = W.qh + ch * 8 + 4 * (e / 16);
        const int j = e % 16;
        q |= ((h[j / 4] >> (2 * (j % 4))) & 3) << f.high_at;
    }
    return q;
}

// The scale and min of half h of chunk ch: weight = d * value + m.
template <class Conv>
VEGA_HOST_DEVICE void repacked_scale(const GpuFormat& f, const GpuMat& W, int64_t row, int64_t c, int h, float* d,
                                     float* m, Conv cv) {
    const int64_t ch = row * W.n_chunk + c;
    const uint8_t* sc = W.sc + ch * f.ps.sc;
    const uint8_t* sb = f.ps.sb ? W.sb + (row * (W.n_chunk / 8) + c / 8) * f.ps.sb : nullptr;
    auto u16 = [](const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); };
    *m = 0.f;
    switch (f.scales) {
        case GpuScales::kD: *d = cv.f16(u16(sc)); break;
        case GpuScales::kDM: *d = cv.f16(u16(sc)), *m = cv.f16(u16(sc + 2)); break;
        case GpuScales::kK4:
            *d = cv.f16(u16(sb)) * float(sc[0]);
            *m = -(cv.f16(u16(sb + 2)) * float(sc[1]));
            break;
        case GpuScales::kI8x2: *d = cv.f16(u16(sb)) * float(int8_t(sc[h])); break;
        case GpuScales::kI8: *d = cv.f16(u16(sb)) * float(int8_t(sc[0])); break;
        case GpuScales::kQ2K:
            *d = cv.f16(u16(sb)) * float(sc[h] & 0xF);
            *m = -(cv.f16(u16(sb + 2)) * float(sc[h] >> 4));
            break;
        case GpuScales::kE8M0: {  // 2^(e - 128): e < 2 are the subnormals 2^-128, 2^-127
            const uint32_t e = sc[0];
            *d = cv.bits(e < 2 ? uint32_t(0x00200000u) << e : (e - 1) << 23);
            break;
        }
        default: *d = 0.f;
    }
}

// Element i of row `row` (quantized types).
template <class Conv>
VEGA_HOST_DEVICE float repacked_elem(const GpuFormat& f, const GpuMat& W, int64_t row, int64_t i, Conv cv) {
    const int64_t c = i / 32;
    const int e = int(i % 32);
    const int q = repacked_code(f, W, row * W.n_chunk + c, e);
    const int v = f.book != GpuBook::kNone ? book_value(f.book, q) : q - f.offset;
    float d, m;
    repacked_scale(f, W, row, c, e / 16, &d, &m, cv);
    return f.has_min() ? d * float(v) + m : d * float(v);
}

}  // namespace vega::gpu
