// quantize_row -> dequantize_row round trips, and the activation quantizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "core/half.h"
#include "quant/quant.h"
#include "quant/type_table.h"
#include "quant_test_util.h"

namespace {

using vega::GgmlType;
using vega::test::type_name;

class RoundTrip : public ::testing::TestWithParam<GgmlType> {};

// The brief's metric: sqrt(sum((x - dq(q(x)))^2)) / n <= 0.002 on 0.1 + 2cos(i).
TEST_P(RoundTrip, CosSignal) {
    const GgmlType t = GetParam();
    const int64_t n = 4096;
    const auto x = vega::test::cos_signal(n);
    const auto q = vega::test::quantize(t, x);
    ASSERT_EQ(q.size(), vega::quant::row_bytes(t, n));
    const auto y = vega::test::dequantize(t, q.data(), n);
    const double metric = vega::test::l2_diff(x, y) / double(n);
    std::printf("  %-5s cos round trip: sqrt(sum err^2)/n = %.3g\n", type_name(t).c_str(), metric);
    EXPECT_LE(metric, 0.002) << type_name(t);
}

// A block of zeros stays zeros (no NaN from 0/0 scales).
TEST_P(RoundTrip, ZerosStayZero) {
    const GgmlType t = GetParam();
    const std::vector<float> x(512, 0.0f);
    const auto y = vega::test::dequantize(t, vega::test::quantize(t, x).data(), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << type_name(t);
}

// Constant blocks and blocks with one outlier: the result stays finite and the
// outlier is reproduced to within the type's step.
TEST_P(RoundTrip, OutlierAndConstant) {
    const GgmlType t = GetParam();
    std::vector<float> x(512, 0.75f);
    x[300] = -40.0f;
    const auto y = vega::test::dequantize(t, vega::test::quantize(t, x).data(), 512);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << type_name(t);
    EXPECT_NEAR(y[300], -40.0f, 40.0f / 6) << type_name(t);
    EXPECT_NEAR(y[10], 0.75f, 0.02f) << type_name(t);  // a constant 32-block away from the outlier
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip, ::testing::ValuesIn(vega::test::all_supported_types()),
                         [](const auto& info) { return type_name(info.param); });

// IQ4_NL's codes are the codebook entries nearest to x / d for the block's stored scale
// (ties to the lower value), checked against all 16 entries: the quantizer's lookup table
// over half-integer intervals must agree with a plain search (every fourth block holds
// multiples of 0.5 with repeats and zeros; x / d landing exactly on an interval's end,
// where the quantizer falls back to the search, is left to chance).
TEST(RoundTripCodebook, Iq4nlCodesAreTheNearestEntries) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int64_t n = 32 * 512;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = (i / 32) % 4 == 3 ? float(int(nd(rng) * 80.f)) * 0.5f : nd(rng) * 3.f;
    std::vector<uint8_t> q(vega::quant::row_bytes(GgmlType::IQ4_NL, n));
    vega::quant::quantize_row(GgmlType::IQ4_NL, x.data(), q.data(), n);
    const auto* b = reinterpret_cast<const vega::quant::BlockIQ4_NL*>(q.data());
    const int8_t* book = vega::quant::kIq4nlValues;
    for (int64_t blk = 0; blk < n / 32; ++blk) {
        const float d = vega::f16_to_f32(b[blk].d);
        ASSERT_GT(d, 0.f) << "block " << blk;
        for (int j = 0; j < 32; ++j) {
            const int code = j < 16 ? b[blk].qs[j] & 0xF : b[blk].qs[j - 16] >> 4;
            const float t = x[size_t(blk * 32 + j)] * (1.f / d);
            for (int k = 0; k < 16; ++k) {
                const float got = std::fabs(t - float(book[code])), other = std::fabs(t - float(book[k]));
                ASSERT_TRUE(got < other || (got == other && book[code] <= book[k]))
                    << "block " << blk << " element " << j << ": x/d " << t << " took " << int(book[code])
                    << ", nearer (or a tie below): " << int(book[k]);
            }
        }
    }
}

// Values on a type's grid come back exactly (scale and offset exactly representable).
TEST(RoundTripExact, GridValues) {
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[j] = float((j * 7) % 16 - 8) * 0.5f;  // codes 0..15 - 8, includes -8
    EXPECT_EQ(vega::test::dequantize(GgmlType::Q4_0, vega::test::quantize(GgmlType::Q4_0, x).data(), 32), x);
    for (int j = 0; j < 32; ++j) x[j] = float((j * 5) % 32 - 16) * 0.25f;  // includes -16
    EXPECT_EQ(vega::test::dequantize(GgmlType::Q5_0, vega::test::quantize(GgmlType::Q5_0, x).data(), 32), x);
    for (int j = 0; j < 32; ++j) x[j] = float((j * 11) % 255 - 127) * 0.125f;
    x[0] = -127 * 0.125f;
    EXPECT_EQ(vega::test::dequantize(GgmlType::Q8_0, vega::test::quantize(GgmlType::Q8_0, x).data(), 32), x);
    for (int j = 0; j < 32; ++j) x[j] = 1.0f + float((j * 3) % 16) * 0.5f;  // min 1, max 8.5
    EXPECT_EQ(vega::test::dequantize(GgmlType::Q4_1, vega::test::quantize(GgmlType::Q4_1, x).data(), 32), x);
}

// Gaussian data: relative rms error per type, with an upper bound from the step
// size of each format (uniform rounding error ~ step/sqrt(12); for N(0,1) blocks
// of 32 the max |x| is ~2.1-2.5), and the ordering Q8_0 < Q6_K < Q5 < Q4.
TEST(RoundTripNormal, ErrorsSensibleAndOrdered) {
    const int64_t n = 65536;
    const auto x = vega::test::normal_data(n, 42);
    std::map<GgmlType, double> rel;
    for (GgmlType t : vega::test::all_supported_types()) {
        const auto y = vega::test::dequantize(t, vega::test::quantize(t, x).data(), n);
        rel[t] = vega::test::l2_diff(x, y) / vega::test::l2_norm(x);
        std::printf("  %-5s N(0,1) relative rms error %.5f\n", type_name(t).c_str(), rel[t]);
    }
    EXPECT_EQ(rel[GgmlType::F32], 0.0);
    EXPECT_LT(rel[GgmlType::F16], 3e-4);   // 2^-11 / sqrt(3) relative
    EXPECT_LT(rel[GgmlType::BF16], 2.5e-3);  // 2^-8 / sqrt(3)
    EXPECT_LT(rel[GgmlType::Q8_0], 0.008);  // step 2.5/127
    EXPECT_LT(rel[GgmlType::Q6_K], 0.03);   // step ~2.5/32
    EXPECT_LT(rel[GgmlType::Q5_0], 0.06);   // step 2.5/16
    EXPECT_LT(rel[GgmlType::Q5_1], 0.06);   // step 5/31
    EXPECT_LT(rel[GgmlType::Q5_K], 0.06);
    EXPECT_LT(rel[GgmlType::Q4_0], 0.12);   // step 2.5/8
    EXPECT_LT(rel[GgmlType::Q4_1], 0.11);   // step 5/15
    EXPECT_LT(rel[GgmlType::Q4_K], 0.11);

    EXPECT_LT(rel[GgmlType::F16], rel[GgmlType::BF16]);
    EXPECT_LT(rel[GgmlType::BF16], rel[GgmlType::Q8_0]);
    EXPECT_LT(rel[GgmlType::Q8_0], rel[GgmlType::Q6_K]);
    const double q5_best = std::min({rel[GgmlType::Q5_0], rel[GgmlType::Q5_1], rel[GgmlType::Q5_K]});
    const double q5_worst = std::max({rel[GgmlType::Q5_0], rel[GgmlType::Q5_1], rel[GgmlType::Q5_K]});
    const double q4_best = std::min({rel[GgmlType::Q4_0], rel[GgmlType::Q4_1], rel[GgmlType::Q4_K]});
    EXPECT_LT(rel[GgmlType::Q6_K], q5_best);
    EXPECT_LT(q5_worst, q4_best);
    // The K-quants' searched scales beat the plain min/max formats of the same width.
    EXPECT_LT(rel[GgmlType::Q4_K], rel[GgmlType::Q4_1]);
    EXPECT_LT(rel[GgmlType::Q5_K], rel[GgmlType::Q5_1]);
}

// Data with a common offset (N(3, 0.5)) exercises the mins. Bound per 32-block
// from the format's step: uniform rounding error has rms step/sqrt(12), where
// step = (max - lo)/qmax and lo = the block minimum for Q4_1/Q5_1, but min(0,
// block minimum) for the K-quants (their "- dmin*m" offset can only go down).
// 15% margin covers the 6-bit quantization of the K-quant scales.
TEST(RoundTripNormal, OffsetData) {
    const int64_t n = 8192;
    auto x = vega::test::normal_data(n, 9, 3.0f, 0.5f);
    for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K}) {
        const bool k_quant = t == GgmlType::Q4_K || t == GgmlType::Q5_K;
        const int qmax = (t == GgmlType::Q4_1 || t == GgmlType::Q4_K) ? 15 : 31;
        const auto y = vega::test::dequantize(t, vega::test::quantize(t, x).data(), n);
        double s = 0, bound = 0;
        for (int64_t b = 0; b < n / 32; ++b) {
            float lo = x[32 * b], hi = x[32 * b];
            for (int j = 0; j < 32; ++j) {
                lo = std::min(lo, x[32 * b + j]);
                hi = std::max(hi, x[32 * b + j]);
                s += double(x[32 * b + j] - y[32 * b + j]) * (x[32 * b + j] - y[32 * b + j]);
            }
            if (k_quant) lo = std::min(lo, 0.0f);
            const double step = (hi - lo) / qmax;
            bound += 32 * step * step / 12;
        }
        const double rms = std::sqrt(s / double(n)), rms_bound = 1.15 * std::sqrt(bound / double(n));
        std::printf("  %-5s N(3,0.5) rms error %.5f (bound %.5f)\n", type_name(t).c_str(), rms, rms_bound);
        EXPECT_LT(rms, rms_bound) << type_name(t);
    }
}

TEST(ActQuant, Semantics) {
    auto x = vega::test::normal_data(1024, 3, 0.0f, 2.0f);
    for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // an all-zero block
    x[5] = 9.0f;                                  // a positive maximum
    x[40] = -7.5f;                                // a negative maximum
    std::vector<vega::BlockQ8Act> a(1024 / 32);
    vega::quant::quantize_act_row(x.data(), a.data(), 1024);
    for (size_t b = 0; b < a.size(); ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
        ASSERT_FLOAT_EQ(a[b].d, amax / 127.0f) << b;
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            const float v = x[32 * b + j];
            sum += a[b].qs[j];
            if (a[b].d == 0) {
                ASSERT_EQ(a[b].qs[j], 0);
                continue;
            }
            ASSERT_LE(std::fabs(float(a[b].qs[j]) - v / a[b].d), 0.5001f) << b << " " << j;  // nearest
            ASSERT_LE(std::fabs(v - a[b].d * a[b].qs[j]), a[b].d * 0.5001f);
        }
        ASSERT_FLOAT_EQ(a[b].s, a[b].d * float(sum)) << b;
    }
    EXPECT_EQ(a[0].qs[5], 127);
    EXPECT_EQ(a[1].qs[8], -127);
    EXPECT_EQ(a[2].d, 0.0f);
    EXPECT_EQ(a[2].s, 0.0f);
}

}  // namespace
