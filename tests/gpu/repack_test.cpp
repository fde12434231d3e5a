// The GPU weight layout (repack.h) decodes to exactly what the reference
// dequantizer gives for every quantized type, on random rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/gpu/repack.h"
#include "quant/quant.h"

namespace vega::gpu {
namespace {

class RepackTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(RepackTest, DecodesLikeReference) {
    const GgmlType t = GetParam();
    const int64_t n_in = 512, n_out = 7;
    std::mt19937 rng(uint32_t(t) * 7919u + 1);
    std::normal_distribution<float> nd(0.f, 1.f);
    const size_t rb = quant::row_bytes(t, n_in);
    std::vector<uint8_t> src(rb * n_out);
    std::vector<float> row(n_in);
    for (int64_t r = 0; r < n_out; ++r) {
        for (auto& x : row) x = nd(rng);
        quant::quantize_row(t, row.data(), src.data() + r * rb, n_in);
    }
    const RepackLayout L = repack_layout(t, n_in, n_out);
    std::vector<uint8_t> dst(L.total, 0xCD);
    repack_matrix(t, src.data(), n_in, n_out, dst.data(), 3);
    std::vector<float> ref(n_in), got(n_in);
    for (int64_t r = 0; r < n_out; ++r) {
        quant::dequantize_row(t, src.data() + r * rb, ref.data(), n_in);
        dequantize_repacked_row(t, dst.data(), n_in, n_out, r, got.data());
        for (int64_t i = 0; i < n_in; ++i)
            ASSERT_NEAR(got[i], ref[i], 1e-6f * (1.f + std::fabs(ref[i]))) << "row " << r << " elem " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, RepackTest,
                         ::testing::Values(GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K),
                         [](const auto& info) { return std::string(type_traits(info.param).name); });

}  // namespace
}  // namespace vega::gpu
