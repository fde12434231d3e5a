// dequantize_row on blocks built field by field from the GGML format
// definitions, with the expected value of every element written out here
// independently of the library's loops. Scales are powers of two, so the
// expected values are exact and compared with ==.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "core/error.h"
#include "core/half.h"
#include "quant/quant.h"
#include "quant_test_util.h"

namespace {

using vega::GgmlType;

constexpr uint16_t kF16Half = 0x3800;      // 0.5
constexpr uint16_t kF16MinusOne = 0xbc00;  // -1.0
constexpr uint16_t kF16Sixteenth = 0x2c00; // 2^-4
constexpr uint16_t kF16ThirtySecond = 0x2800;  // 2^-5
constexpr uint16_t kF16SixtyFourth = 0x2400;   // 2^-6

template <typename T>
void fill_random(T* p, size_t n, std::mt19937& rng) {
    for (size_t i = 0; i < n; ++i) p[i] = T(rng() & 0xff);
}

TEST(Layout, HalfConstants) {
    EXPECT_EQ(vega::f16_to_f32(kF16Half), 0.5f);
    EXPECT_EQ(vega::f16_to_f32(kF16MinusOne), -1.0f);
    EXPECT_EQ(vega::f16_to_f32(kF16Sixteenth), 0.0625f);
    EXPECT_EQ(vega::f16_to_f32(kF16ThirtySecond), 0.03125f);
    EXPECT_EQ(vega::f16_to_f32(kF16SixtyFourth), 0.015625f);
}

// Element e of a 32-block: byte e % 16 of qs; low nibble for e < 16, high nibble for e >= 16.
int nibble_of(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4); }
// 5th bit of element e: bit e of the little-endian 32-bit qh.
int qh_bit(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }

TEST(Layout, Q4_0) {
    std::mt19937 rng(1);
    vega::BlockQ4_0 b[2];
    b[0].d = kF16Half;
    b[1].d = kF16MinusOne;
    for (auto& blk : b) fill_random(blk.qs, 16, rng);
    b[0].qs[0] = 0x21;  // element 0 -> code 1, element 16 -> code 2
    const auto y = vega::test::dequantize(GgmlType::Q4_0, b, 64);
    EXPECT_EQ(y[0], (1 - 8) * 0.5f);
    EXPECT_EQ(y[16], (2 - 8) * 0.5f);
    for (int i = 0; i < 2; ++i)
        for (int e = 0; e < 32; ++e)
            ASSERT_EQ(y[32 * i + e], float(nibble_of(b[i].qs, e) - 8) * vega::f16_to_f32(b[i].d)) << i << " " << e;
}

TEST(Layout, Q4_1) {
    std::mt19937 rng(2);
    vega::BlockQ4_1 b;
    b.d = kF16Half;
    b.m = kF16MinusOne;
    fill_random(b.qs, 16, rng);
    const auto y = vega::test::dequantize(GgmlType::Q4_1, &b, 32);
    for (int e = 0; e < 32; ++e) ASSERT_EQ(y[e], float(nibble_of(b.qs, e)) * 0.5f - 1.0f) << e;
}

TEST(Layout, Q5_0) {
    std::mt19937 rng(3);
    vega::BlockQ5_0 b;
    b.d = kF16Half;
    fill_random(b.qs, 16, rng);
    fill_random(b.qh, 4, rng);
    b.qh[0] = 0x01;  // only element 0 of the first 8 has its 5th bit
    const auto y = vega::test::dequantize(GgmlType::Q5_0, &b, 32);
    EXPECT_EQ(y[1], float(nibble_of(b.qs, 1) - 16) * 0.5f);
    EXPECT_EQ(y[0], float((nibble_of(b.qs, 0) | 16) - 16) * 0.5f);
    for (int e = 0; e < 32; ++e)
        ASSERT_EQ(y[e], float((nibble_of(b.qs, e) | qh_bit(b.qh, e) << 4) - 16) * 0.5f) << e;
}

TEST(Layout, Q5_1) {
    std::mt19937 rng(4);
    vega::BlockQ5_1 b;
    b.d = kF16Sixteenth;
    b.m = kF16MinusOne;
    fill_random(b.qs, 16, rng);
    fill_random(b.qh, 4, rng);
    b.qh[3] = 0x80;  // element 31 only, of 24..31
    const auto y = vega::test::dequantize(GgmlType::Q5_1, &b, 32);
    EXPECT_EQ(y[31], float(nibble_of(b.qs, 31) + 16) * 0.0625f - 1.0f);
    for (int e = 0; e < 32; ++e)
        ASSERT_EQ(y[e], float(nibble_of(b.qs, e) | qh_bit(b.qh, e) << 4) * 0.0625f - 1.0f) << e;
}

TEST(Layout, Q8_0) {
    std::mt19937 rng(5);
    vega::BlockQ8_0 b;
    b.d = kF16Sixteenth;
    fill_random(b.qs, 32, rng);
    b.qs[5] = -128;
    const auto y = vega::test::dequantize(GgmlType::Q8_0, &b, 32);
    EXPECT_EQ(y[5], -8.0f);
    for (int e = 0; e < 32; ++e) ASSERT_EQ(y[e], float(b.qs[e]) * 0.0625f) << e;
}

// The 12 scale bytes of Q4_K/Q5_K from 8 scales and 8 mins (6 bits each):
// bytes 0..3: scale j (bits 0-5) | bits 4-5 of scale j+4 (bits 6-7);
// bytes 4..7: min j   (bits 0-5) | bits 4-5 of min j+4   (bits 6-7);
// bytes 8..11: low 4 bits of scale j+4 | low 4 bits of min j+4 << 4.
void pack_k_scales(const int* sc, const int* m, uint8_t* out) {
    for (int j = 0; j < 4; ++j) {
        out[j] = uint8_t(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = uint8_t(m[j] | (m[j + 4] >> 4) << 6);
        out[j + 8] = uint8_t((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

TEST(Layout, Q4_K) {
    std::mt19937 rng(6);
    vega::BlockQ4_K b;
    b.d = kF16Sixteenth;
    b.dmin = kF16ThirtySecond;
    const int sc[8] = {1, 63, 17, 32, 48, 5, 60, 33};
    const int m[8] = {62, 0, 31, 16, 3, 50, 19, 47};
    pack_k_scales(sc, m, b.scales);
    fill_random(b.qs, 128, rng);
    const auto y = vega::test::dequantize(GgmlType::Q4_K, &b, 256);
    for (int e = 0; e < 256; ++e) {
        const int j = e / 32;                          // sub-block
        const uint8_t byte = b.qs[(e / 64) * 32 + e % 32];
        const int q = (j % 2) ? byte >> 4 : byte & 15;  // even sub-block: low nibbles
        ASSERT_EQ(y[e], 0.0625f * float(sc[j] * q) - 0.03125f * float(m[j])) << e;
    }
}

TEST(Layout, Q5_K) {
    std::mt19937 rng(7);
    vega::BlockQ5_K b;
    b.d = kF16Sixteenth;
    b.dmin = kF16ThirtySecond;
    const int sc[8] = {40, 2, 63, 15, 16, 31, 47, 9};
    const int m[8] = {7, 55, 0, 63, 20, 36, 12, 49};
    pack_k_scales(sc, m, b.scales);
    fill_random(b.qs, 128, rng);
    fill_random(b.qh, 32, rng);
    const auto y = vega::test::dequantize(GgmlType::Q5_K, &b, 256);
    for (int e = 0; e < 256; ++e) {
        const int j = e / 32;
        const uint8_t byte = b.qs[(e / 64) * 32 + e % 32];
        const int hi = (b.qh[e % 32] >> j) & 1;  // qh byte l, bit = sub-block index
        const int q = ((j % 2) ? byte >> 4 : byte & 15) | hi << 4;
        ASSERT_EQ(y[e], 0.0625f * float(sc[j] * q) - 0.03125f * float(m[j])) << e;
    }
}

TEST(Layout, Q6_K) {
    std::mt19937 rng(8);
    vega::BlockQ6_K b;
    b.d = kF16SixtyFourth;
    fill_random(b.ql, 128, rng);
    fill_random(b.qh, 64, rng);
    const int8_t sc[16] = {-128, 127, 1, -1, 64, -64, 3, 100, -7, 12, 0, 45, -99, 2, 77, -33};
    std::memcpy(b.scales, sc, 16);
    const auto y = vega::test::dequantize(GgmlType::Q6_K, &b, 256);
    for (int e = 0; e < 256; ++e) {
        const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
        const uint8_t lbyte = b.ql[64 * h + 32 * (k % 2) + l];
        const int low = k < 2 ? lbyte & 15 : lbyte >> 4;
        const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
        const int q = (low | high << 4) - 32;
        ASSERT_EQ(y[e], 0.015625f * float(sc[e / 16] * q)) << e;
    }
}

TEST(Layout, FloatTypes) {
    const float x[4] = {1.5f, -2.25f, 3e-8f, 65504.0f};
    EXPECT_EQ(vega::test::dequantize(GgmlType::F32, x, 4), std::vector<float>(x, x + 4));
    const uint16_t h[3] = {0x3c00, 0xc100, 0x0001};  // 1, -2.5, 2^-24
    EXPECT_EQ(vega::test::dequantize(GgmlType::F16, h, 3), (std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -24)}));
    const uint16_t bf[3] = {0x3f80, 0xc020, 0x4049};  // 1, -2.5, 3.140625
    EXPECT_EQ(vega::test::dequantize(GgmlType::BF16, bf, 3), (std::vector<float>{1.0f, -2.5f, 3.140625f}));
}

TEST(Layout, RowBytes) {
    using vega::quant::row_bytes;
    EXPECT_EQ(row_bytes(GgmlType::F32, 10), 40u);
    EXPECT_EQ(row_bytes(GgmlType::F16, 10), 20u);
    EXPECT_EQ(row_bytes(GgmlType::BF16, 7), 14u);
    EXPECT_EQ(row_bytes(GgmlType::Q4_0, 4096), 128u * 18);
    EXPECT_EQ(row_bytes(GgmlType::Q4_1, 64), 40u);
    EXPECT_EQ(row_bytes(GgmlType::Q5_0, 64), 44u);
    EXPECT_EQ(row_bytes(GgmlType::Q5_1, 64), 48u);
    EXPECT_EQ(row_bytes(GgmlType::Q8_0, 64), 68u);
    EXPECT_EQ(row_bytes(GgmlType::Q4_K, 512), 288u);
    EXPECT_EQ(row_bytes(GgmlType::Q5_K, 256), 176u);
    EXPECT_EQ(row_bytes(GgmlType::Q6_K, 4096), 16u * 210);
    EXPECT_EQ(row_bytes(GgmlType::Q2_K, 256), 84u);  // sizes are known for unsupported types too
    EXPECT_THROW(row_bytes(GgmlType::Q4_0, 48), vega::Error);
    EXPECT_THROW(row_bytes(GgmlType(99), 32), vega::Error);
}

// The message names the type.
void expect_error_naming(const std::function<void()>& f, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "no vega::Error thrown (expected one naming " << needle << ")";
    } catch (const vega::Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(Layout, UnsupportedTypesFail) {
    std::vector<uint8_t> buf(4096);
    std::vector<float> f(256);
    std::vector<vega::BlockQ8Act> act(8);
    expect_error_naming([&] { vega::quant::dequantize_row(GgmlType::IQ2_XXS, buf.data(), f.data(), 256); }, "IQ2_XXS");
    expect_error_naming([&] { vega::quant::dequantize_row(GgmlType::TQ1_0, buf.data(), f.data(), 256); }, "TQ1_0");
    expect_error_naming([&] { vega::quant::dequantize_row(GgmlType(99), buf.data(), f.data(), 256); }, "99");
    expect_error_naming([&] { vega::quant::quantize_row(GgmlType::IQ1_S, f.data(), buf.data(), 256); }, "IQ1_S");
    expect_error_naming([&] { vega::quant::dot_q8(GgmlType::IQ2_XS, buf.data(), act.data(), 256); }, "IQ2_XS");
    expect_error_naming([&] { vega::quant::dot_q8(GgmlType::F16, buf.data(), act.data(), 256); }, "F16");
    expect_error_naming([&] { vega::quant::dot_q8(GgmlType::Q8_K, buf.data(), act.data(), 256); }, "Q8_K");
    expect_error_naming([&] { vega::quant::dot_f32(GgmlType::Q4_0, buf.data(), f.data(), 256); }, "Q4_0");
}

TEST(Layout, UsesQ8Activations) {
    for (GgmlType t : vega::test::q8_types()) EXPECT_TRUE(vega::quant::uses_q8_activations(t)) << vega::test::type_name(t);
    for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4})
        EXPECT_TRUE(vega::quant::uses_q8_activations(t)) << vega::test::type_name(t);
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_K, GgmlType::IQ2_XS, GgmlType::TQ2_0})
        EXPECT_FALSE(vega::quant::uses_q8_activations(t)) << vega::test::type_name(t);
}

}  // namespace
