// src/core/half.h: f16 / bf16 <-> f32 against references computed here from the
// IEEE definitions in double precision (value tables and nearest-value search).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"

namespace {

float from_bits(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
uint32_t to_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// Value of a positive finite f16 pattern h (< 0x7C00): subnormal m*2^-24, normal (1024+m)*2^(e-25).
double f16_value(uint32_t h) {
    const uint32_t e = h >> 10, m = h & 0x3ff;
    return e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), int(e) - 25);
}

// Reference f32 -> f16: nearest of all finite f16 values, ties to even pattern;
// |v| >= 65520 (max + half an ulp) -> inf.
uint16_t ref_f32_to_f16(float v) {
    static const std::vector<double> table = [] {
        std::vector<double> t(0x7c00);
        for (uint32_t h = 0; h < 0x7c00; ++h) t[h] = f16_value(h);
        return t;
    }();
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (std::isnan(v)) return 0x7e00;
    const double a = std::fabs(double(v));
    if (a >= 65520.0) return uint16_t(sign | 0x7c00);
    const auto it = std::lower_bound(table.begin(), table.end(), a);  // first >= a
    uint32_t hi = uint32_t(it - table.begin());
    if (hi == 0) return sign;  // a == 0
    const uint32_t lo = hi - 1;
    const double dlo = a - table[lo], dhi = table[hi] - a;
    uint32_t h;
    if (dlo < dhi) h = lo;
    else if (dhi < dlo) h = hi;
    else h = (lo & 1) ? hi : lo;
    return uint16_t(sign | h);
}

// Reference f32 -> bf16 for finite v: the two bf16 neighbours by truncation,
// nearest in double, ties to even; 2^128 stands for inf.
uint16_t ref_f32_to_bf16(float v) {
    const uint32_t b = to_bits(v);
    const uint32_t sign = b & 0x80000000u, mag = b & 0x7fffffffu;
    auto value = [](uint32_t m16) {  // magnitude pattern (16 bits) -> double
        const uint32_t e = m16 >> 7, m = m16 & 0x7f;
        return e == 0 ? std::ldexp(double(m), -133) : std::ldexp(double(128 + m), int(e) - 134);
    };
    const uint32_t lo = mag >> 16, hi = lo + 1;
    const double a = std::fabs(double(v));
    const double dlo = a - value(lo), dhi = value(hi) - a;
    uint32_t r;
    if (dlo < dhi) r = lo;
    else if (dhi < dlo) r = hi;
    else r = (lo & 1) ? hi : lo;
    return uint16_t((sign >> 16) | r);
}

TEST(Half, F16ToF32MatchesDefinitionForEveryPattern) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = vega::f16_to_f32(uint16_t(h));
        const uint32_t mag = h & 0x7fff;
        EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
        if (mag == 0x7c00) {
            EXPECT_TRUE(std::isinf(f)) << std::hex << h;
        } else if (mag > 0x7c00) {
            EXPECT_TRUE(std::isnan(f)) << std::hex << h;
        } else {
            EXPECT_EQ(double(std::fabs(f)), f16_value(mag)) << std::hex << h;
        }
    }
}

TEST(Half, F16RoundTripEveryPattern) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint16_t back = vega::f32_to_f16(vega::f16_to_f32(uint16_t(h)));
        if ((h & 0x7fff) > 0x7c00) {
            EXPECT_GT(back & 0x7fff, 0x7c00) << "NaN must stay NaN: " << std::hex << h;
            EXPECT_EQ(back & 0x8000, h & 0x8000);
        } else {
            EXPECT_EQ(back, h) << std::hex << h;
        }
    }
}

TEST(Half, F16KnownValues) {
    using vega::f16_to_f32;
    using vega::f32_to_f16;
    EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
    EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
    EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
    EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
    EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)) && f16_to_f32(0x7c00) > 0);
    EXPECT_TRUE(std::isinf(f16_to_f32(0xfc00)) && f16_to_f32(0xfc00) < 0);
    EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)) && f16_to_f32(0x8000) == 0.0f);

    EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie between 65504 and 2^16 -> even -> inf
    EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
    EXPECT_EQ(f32_to_f16(-1e30f), 0xfc00);
    EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
    EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
    EXPECT_GT(f32_to_f16(NAN) & 0x7fff, 0x7c00);
    // NaN whose payload sits only in the low float mantissa bits must not become inf.
    EXPECT_GT(f32_to_f16(from_bits(0x7f800001u)) & 0x7fff, 0x7c00);
    // Ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
    EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
    EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
    // Subnormals: 2^-25 is halfway between 0 and 2^-24 -> 0; 3*2^-25 -> 2 (even).
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
    EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);
    EXPECT_EQ(f32_to_f16(5 * std::ldexp(1.0f, -25)), 0x0002);
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -26)), 0x0000);
    // Largest subnormal + half ulp rounds up into the smallest normal.
    EXPECT_EQ(f32_to_f16(std::ldexp(2047.0f, -25)), 0x0400);
    // Mantissa overflow carries into the exponent: 1 + 2047/2048 (halfway between
    // 0x3fff, odd, and 2.0) rounds to 2.0; 2047/1024 itself is exact.
    EXPECT_EQ(f32_to_f16(1.0f + 2047.0f / 2048.0f), 0x4000);
    EXPECT_EQ(f32_to_f16(2047.0f / 1024.0f), 0x3fff);
}

TEST(Half, F32ToF16MatchesNearestValueSearch) {
    std::vector<float> cases;
    // Every f16 value, the exact midpoints between neighbours, and one float ulp either side.
    for (uint32_t h = 0; h < 0x7bff; ++h) {
        const float a = float(f16_value(h)), b = float(f16_value(h + 1));
        const float mid = float((f16_value(h) + f16_value(h + 1)) / 2);
        for (float v : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), b}) {
            cases.push_back(v);
            cases.push_back(-v);
        }
    }
    // Random float bit patterns, over all exponents.
    std::mt19937 rng(123);
    for (int i = 0; i < 300000; ++i) {
        const float v = from_bits(rng());
        if (!std::isnan(v)) cases.push_back(v);
    }
    int bad = 0;
    for (float v : cases) {
        const uint16_t got = vega::f32_to_f16(v), want = ref_f32_to_f16(v);
        if (got != want && ++bad < 10) ADD_FAILURE() << "f32_to_f16(" << v << ") = " << got << ", want " << want;
    }
    EXPECT_EQ(bad, 0);
}

TEST(Half, BF16) {
    using vega::bf16_to_f32;
    using vega::f32_to_bf16;
    // Every pattern converts to the float with those top 16 bits and back.
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = bf16_to_f32(uint16_t(h));
        EXPECT_EQ(to_bits(f), h << 16);
        const uint16_t back = f32_to_bf16(f);
        if ((h & 0x7fff) > 0x7f80) {
            EXPECT_GT(back & 0x7fff, 0x7f80) << std::hex << h;
        } else {
            EXPECT_EQ(back, h) << std::hex << h;
        }
    }
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
    EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
    EXPECT_EQ(f32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
    EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
    EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
    EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
    EXPECT_GT(f32_to_bf16(from_bits(0x7f800001u)) & 0x7fff, 0x7f80);  // NaN stays NaN
    EXPECT_GT(f32_to_bf16(from_bits(0xffc00000u)) & 0x7fff, 0x7f80);
    EXPECT_EQ(f32_to_bf16(from_bits(0x00000001u)), 0x0000);  // smallest subnormal -> 0
    EXPECT_EQ(f32_to_bf16(from_bits(0x00008000u)), 0x0000);  // tie -> even 0
    EXPECT_EQ(f32_to_bf16(from_bits(0x00018000u)), 0x0002);  // tie -> even 2

    std::mt19937 rng(7);
    int bad = 0;
    for (int i = 0; i < 300000; ++i) {
        const float v = from_bits(rng());
        if (std::isnan(v) || std::isinf(v)) continue;
        const uint16_t got = f32_to_bf16(v), want = ref_f32_to_bf16(v);
        if (got != want && ++bad < 10) ADD_FAILURE() << "f32_to_bf16(" << v << ") = " << got << ", want " << want;
    }
    EXPECT_EQ(bad, 0);
}

}  // namespace
