// The 12-byte packing of the eight 6-bit (scale, min) pairs of a Q4_K / Q5_K
// super-block (llama.cpp's get_scale_min_k4 scheme), in both directions.
//   j < 4 : scale = b[j] & 63,                        min = b[j+4] & 63
//   j >= 4: scale = (b[j+4] & 15) | (b[j-4] >> 6) << 4, min = (b[j+4] >> 4) | (b[j] >> 6) << 4
// i.e. bytes 0..3 hold scales 0..3 (+ the top 2 bits of scales 4..7), bytes 4..7
// hold mins 0..3 (+ the top 2 bits of mins 4..7), bytes 8..11 hold the low
// nibbles of scale (low) and min (high) of sub-blocks 4..7.
#pragma once
#include <cstdint>

#include "quant/types.h"

namespace vega::quant {

// Scale and min of sub-block j (0..7), each 0..63.
inline void get_scale_min_k4(int j, const uint8_t* b, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = b[j] & 63;
        *m = b[j + 4] & 63;
    } else {
        *sc = uint8_t((b[j + 4] & 0xF) | ((b[j - 4] >> 6) << 4));
        *m = uint8_t((b[j + 4] >> 4) | ((b[j] >> 6) << 4));
    }
}

// All eight at once: sc[8], m[8] (0..63).
inline void unpack_scales_mins_k4(const uint8_t* b, uint8_t* sc, uint8_t* m) {
    for (int j = 0; j < 8; ++j) get_scale_min_k4(j, b, &sc[j], &m[j]);
}

// Inverse: sc[8], m[8] (each 0..63) -> b[12].
inline void pack_scales_mins_k4(const uint8_t* sc, const uint8_t* m, uint8_t* b) {
    for (int j = 0; j < K_SCALE_SIZE; ++j) b[j] = 0;
    for (int j = 0; j < 4; ++j) {
        b[j] = sc[j] & 63;
        b[j + 4] = m[j] & 63;
    }
    for (int j = 4; j < 8; ++j) {
        b[j + 4] = uint8_t((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
        b[j - 4] |= uint8_t((sc[j] >> 4) << 6);
        b[j] |= uint8_t((m[j] >> 4) << 6);
    }
}

}  // namespace vega::quant
