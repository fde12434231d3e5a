// dot_q8 / dot_f32 against float64 dot products of the dequantized operands,
// for the dispatching entry points and for the scalar and AVX2 kernels directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/half.h"
#include "quant/internal.h"
#include "quant/quant.h"
#include "quant_test_util.h"

namespace {

using vega::BlockQ8Act;
using vega::GgmlType;
using vega::test::type_name;
namespace detail = vega::quant::detail;

bool have_avx2() { return detail::avx2_compiled() && detail::cpu_has_avx2(); }

struct Reference {
    double dot = 0;    // sum w_i a_i in double
    double abs_dot = 0;  // sum |w_i a_i|: the scale of rounding error when the dot cancels
};

std::vector<BlockQ8Act> quantize_act(const std::vector<float>& x) {
    std::vector<BlockQ8Act> a(x.size() / 32);
    vega::quant::quantize_act_row(x.data(), a.data(), int64_t(x.size()));
    return a;
}

Reference reference_q8(GgmlType t, const void* w, const std::vector<BlockQ8Act>& a, int64_t n) {
    const auto wf = vega::test::dequantize(t, w, n);
    Reference r;
    for (int64_t i = 0; i < n; ++i) {
        const double p = double(wf[i]) * (double(a[i / 32].d) * a[i / 32].qs[i % 32]);
        r.dot += p;
        r.abs_dot += std::fabs(p);
    }
    return r;
}

using DotFn = float (*)(GgmlType, const void*, const BlockQ8Act*, int64_t);

struct Kernel {
    const char* name;
    DotFn fn;
};
std::vector<Kernel> kernels() {
    std::vector<Kernel> k = {{"dot_q8", vega::quant::dot_q8}, {"scalar", detail::dot_q8_scalar}};
    if (have_avx2()) k.push_back({"avx2", detail::dot_q8_avx2});
    return k;
}

class DotQ8 : public ::testing::TestWithParam<GgmlType> {};

// Correlated weights and activations (a = w + noise): the dot is far from zero,
// so its relative error is meaningful: < 1e-4.
TEST_P(DotQ8, CorrelatedMatchesDequantizedReference) {
    const GgmlType t = GetParam();
    for (int64_t n : {256, 512, 2048, 4096, 11008}) {
        const auto wx = vega::test::normal_data(n, uint32_t(n) + 1, 0.0f, 0.05f);
        auto ax = vega::test::normal_data(n, uint32_t(n) + 2, 0.0f, 0.5f);
        for (int64_t i = 0; i < n; ++i) ax[i] += 20.0f * wx[i];
        const auto w = vega::test::quantize(t, wx);
        const auto a = quantize_act(ax);
        const Reference ref = reference_q8(t, w.data(), a, n);
        ASSERT_GT(std::fabs(ref.dot), 0.2 * ref.abs_dot);
        for (const Kernel& k : kernels()) {
            const float got = k.fn(t, w.data(), a.data(), n);
            EXPECT_LT(std::fabs(got - ref.dot), 1e-4 * std::fabs(ref.dot))
                << type_name(t) << " " << k.name << " n=" << n << " got " << got << " want " << ref.dot;
        }
    }
}

// Activations with a large common offset (mean 3) stress the a.s terms (the
// -8/-16 offsets and the mins); weights with a nonzero mean stress the mins.
TEST_P(DotQ8, OffsetsAndMins) {
    const GgmlType t = GetParam();
    const int64_t n = 4096;
    const auto wx = vega::test::normal_data(n, 11, 0.4f, 0.3f);
    const auto ax = vega::test::normal_data(n, 12, 3.0f, 1.0f);
    const auto w = vega::test::quantize(t, wx);
    const auto a = quantize_act(ax);
    const Reference ref = reference_q8(t, w.data(), a, n);
    for (const Kernel& k : kernels()) {
        const float got = k.fn(t, w.data(), a.data(), n);
        EXPECT_LT(std::fabs(got - ref.dot), 1e-4 * std::fabs(ref.dot)) << type_name(t) << " " << k.name;
    }
}

// Blocks of random bytes (every code, including Q8_0's -128 and Q6_K scale
// -128) with finite random scales: the kernels must decode the whole code space,
// not just what our quantizer emits. Uncorrelated data, so the error is judged
// against sum |w_i a_i|.
void randomize_scales(GgmlType t, uint8_t* p, int64_t nb, std::mt19937& rng) {
    std::uniform_real_distribution<float> scale(-0.02f, 0.02f), pos(0.0f, 0.02f);
    for (int64_t i = 0; i < nb; ++i) {
        switch (t) {
            case GgmlType::Q4_0: reinterpret_cast<vega::BlockQ4_0*>(p)[i].d = vega::f32_to_f16(scale(rng)); break;
            case GgmlType::Q4_1: {
                auto& b = reinterpret_cast<vega::BlockQ4_1*>(p)[i];
                b.d = vega::f32_to_f16(pos(rng));
                b.m = vega::f32_to_f16(scale(rng));
                break;
            }
            case GgmlType::Q5_0: reinterpret_cast<vega::BlockQ5_0*>(p)[i].d = vega::f32_to_f16(scale(rng)); break;
            case GgmlType::Q5_1: {
                auto& b = reinterpret_cast<vega::BlockQ5_1*>(p)[i];
                b.d = vega::f32_to_f16(pos(rng));
                b.m = vega::f32_to_f16(scale(rng));
                break;
            }
            case GgmlType::Q8_0: reinterpret_cast<vega::BlockQ8_0*>(p)[i].d = vega::f32_to_f16(scale(rng)); break;
            case GgmlType::Q4_K: {
                auto& b = reinterpret_cast<vega::BlockQ4_K*>(p)[i];
                b.d = vega::f32_to_f16(pos(rng));
                b.dmin = vega::f32_to_f16(pos(rng));
                break;
            }
            case GgmlType::Q5_K: {
                auto& b = reinterpret_cast<vega::BlockQ5_K*>(p)[i];
                b.d = vega::f32_to_f16(pos(rng));
                b.dmin = vega::f32_to_f16(pos(rng));
                break;
            }
            case GgmlType::Q6_K: reinterpret_cast<vega::BlockQ6_K*>(p)[i].d = vega::f32_to_f16(scale(rng)); break;
            default: FAIL();
        }
    }
}

TEST_P(DotQ8, RandomBlocks) {
    const GgmlType t = GetParam();
    std::mt19937 rng(uint32_t(t) * 77 + 1);
    for (int64_t n : {256, 1024, 4096}) {
        std::vector<uint8_t> w(vega::quant::row_bytes(t, n));
        for (auto& b : w) b = uint8_t(rng());
        const int64_t nb = n / vega::type_traits(t).block_size;
        randomize_scales(t, w.data(), nb, rng);
        auto a = quantize_act(vega::test::normal_data(n, uint32_t(n), 0.5f, 2.0f));
        a[1].qs[3] = -127;  // the extremes (s kept consistent: d * sum(qs))
        a[1].qs[4] = 127;
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += a[1].qs[j];
        a[1].s = a[1].d * float(sum);
        const Reference ref = reference_q8(t, w.data(), a, n);
        for (const Kernel& k : kernels()) {
            const float got = k.fn(t, w.data(), a.data(), n);
            EXPECT_LT(std::fabs(got - ref.dot), 1e-5 * ref.abs_dot) << type_name(t) << " " << k.name << " n=" << n;
        }
    }
}

// The AVX2 and scalar kernels compute the same integer sums; only the float
// summation order differs.
TEST_P(DotQ8, Avx2AgreesWithScalar) {
    if (!detail::avx2_compiled()) GTEST_SKIP() << "AVX2 kernels not compiled for this target";
    if (!detail::cpu_has_avx2()) GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C";
    const GgmlType t = GetParam();
    for (int64_t n : {256, 768, 4096, 14336}) {
        const auto w = vega::test::quantize(t, vega::test::normal_data(n, 5, 0.1f, 1.0f));
        const auto a = quantize_act(vega::test::normal_data(n, 6, 0.2f, 1.0f));
        const Reference ref = reference_q8(t, w.data(), a, n);
        const float s = detail::dot_q8_scalar(t, w.data(), a.data(), n);
        const float v = detail::dot_q8_avx2(t, w.data(), a.data(), n);
        EXPECT_LT(std::fabs(s - v), 1e-5 * ref.abs_dot) << type_name(t) << " n=" << n << " " << s << " vs " << v;
    }
}

INSTANTIATE_TEST_SUITE_P(QuantTypes, DotQ8, ::testing::ValuesIn(vega::test::q8_types()),
                         [](const auto& info) { return type_name(info.param); });

TEST(DotQ8Dispatch, ReportsChoice) {
    std::printf("  cpu_has_avx2=%d avx2_compiled=%d using_avx2=%d (VEGA_NO_AVX2=1 forces scalar)\n",
                detail::cpu_has_avx2(), detail::avx2_compiled(), detail::using_avx2());
    if (const char* env = std::getenv("VEGA_NO_AVX2"); env && std::strcmp(env, "1") == 0)
        EXPECT_FALSE(detail::using_avx2());
    else
        EXPECT_EQ(detail::using_avx2(), have_avx2());
}

class DotF32 : public ::testing::TestWithParam<GgmlType> {};

TEST_P(DotF32, MatchesReference) {
    const GgmlType t = GetParam();
    using Fn = float (*)(GgmlType, const void*, const float*, int64_t);
    std::vector<std::pair<const char*, Fn>> fns = {{"dot_f32", vega::quant::dot_f32}, {"scalar", detail::dot_f32_scalar}};
    if (have_avx2()) fns.push_back({"avx2", detail::dot_f32_avx2});
    for (int64_t n : {1, 7, 8, 33, 100, 4096, 4099}) {
        const auto wx = vega::test::normal_data(n, uint32_t(n) + 100, 0.1f, 1.0f);
        const auto x = vega::test::normal_data(n, uint32_t(n) + 200, 0.0f, 1.0f);
        const auto w = vega::test::quantize(t, wx);  // F32 / F16 / BF16 conversion
        const auto wf = vega::test::dequantize(t, w.data(), n);
        double ref = 0, abs_ref = 0;
        for (int64_t i = 0; i < n; ++i) {
            ref += double(wf[i]) * x[i];
            abs_ref += std::fabs(double(wf[i]) * x[i]);
        }
        for (const auto& [name, fn] : fns) {
            const float got = fn(t, w.data(), x.data(), n);
            EXPECT_LE(std::fabs(got - ref), 2e-5 * abs_ref + 1e-30) << type_name(t) << " " << name << " n=" << n;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, DotF32, ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16),
                         [](const auto& info) { return type_name(info.param); });

}  // namespace
