// Against llama.cpp's own output: the synth-llama-<type>.gguf models were
// converted from synth-llama-f32.gguf by llama.cpp's llama-quantize (see
// testdata/README.md). So for every weight tensor:
//  - our dequantization of llama.cpp's blocks must reproduce the F32 original
//    to within that format's quantization error (a layout bug gives errors ~1);
//  - our F16/BF16 conversion and our Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 quantizers must
//    produce exactly llama.cpp's bytes (same reference rounding);
//  - our K-quant quantizers must be about as accurate as llama.cpp's;
//  - dot_q8 on llama.cpp's blocks must match the dequantized reference.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>

#include "mini_gguf.h"
#include "quant/quant.h"
#include "quant_test_util.h"
#include "test_data.h"

namespace {

using vega::GgmlType;
using vega::test::MiniGguf;
using vega::test::MiniTensor;
using vega::test::type_name;

std::unique_ptr<MiniGguf> load(const std::string& rel) {
    return std::make_unique<MiniGguf>(vega::test::read_file(vega::test::data_file(rel)));
}

int64_t n_elements(const MiniTensor& t) {
    int64_t n = 1;
    for (auto d : t.ne) n *= int64_t(d);
    return n;
}

// Upper bounds on the relative rms error of one tensor (N(0, s) data), from
// each format's step size (see roundtrip_test.cpp).
double max_rel_error(GgmlType t) {
    switch (t) {
        case GgmlType::F16: return 3e-4;
        case GgmlType::BF16: return 2.5e-3;
        case GgmlType::Q8_0: return 0.008;
        case GgmlType::Q6_K: return 0.03;
        case GgmlType::Q5_0:
        case GgmlType::Q5_1:
        case GgmlType::Q5_K: return 0.06;
        default: return 0.12;
    }
}

class LlamaCpp : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCpp, Tensors) {
    VEGA_REQUIRE_TEST_DATA();
    const auto f32 = load("models/synth-llama-f32.gguf");
    const auto q = load("models/synth-llama-" + GetParam() + ".gguf");
    int checked = 0;
    for (const MiniTensor& qt : q->tensors()) {
        const GgmlType t = GgmlType(qt.type);
        if (t == GgmlType::F32) continue;
        ASSERT_TRUE(vega::type_traits(t).supported) << qt.name;
        const MiniTensor* ft = f32->find(qt.name);
        ASSERT_NE(ft, nullptr) << qt.name;
        ASSERT_EQ(ft->type, 0u);
        ASSERT_EQ(ft->ne, qt.ne);
        const int64_t n = n_elements(qt), row = int64_t(qt.ne[0]), rows = n / row;
        const size_t rb = vega::quant::row_bytes(t, row);
        const auto* orig = reinterpret_cast<const float*>(ft->data);
        const std::vector<float> x(orig, orig + n);

        // 1. Dequantize llama.cpp's blocks.
        const std::vector<float> y = vega::test::dequantize_rows(t, qt.data, row, rows);
        const double rel_theirs = vega::test::l2_diff(x, y) / vega::test::l2_norm(x);
        EXPECT_LT(rel_theirs, max_rel_error(t)) << qt.name << " " << type_name(t);

        // 2./3. Our quantizer on the same F32 rows.
        std::vector<uint8_t> ours(rb * size_t(rows));
        for (int64_t r = 0; r < rows; ++r) vega::quant::quantize_row(t, orig + r * row, ours.data() + r * rb, row);
        const bool exact_expected = t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::Q4_0 ||
                                    t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q5_1 ||
                                    t == GgmlType::Q8_0;
        if (exact_expected) {
            size_t first_diff = ours.size();
            for (size_t i = 0; i < ours.size(); ++i)
                if (ours[i] != qt.data[i]) {
                    first_diff = i;
                    break;
                }
            EXPECT_EQ(first_diff, ours.size()) << qt.name << " " << type_name(t) << ": bytes differ from llama.cpp at offset "
                                               << first_diff << " (block " << first_diff / vega::type_traits(t).type_size << ")";
        }
        const std::vector<float> z = vega::test::dequantize_rows(t, ours.data(), row, rows);
        const double rel_ours = vega::test::l2_diff(x, z) / vega::test::l2_norm(x);
        if (!exact_expected) {
            std::printf("  %-22s %-5s rel rms error: llama.cpp %.5f, ours %.5f\n", qt.name.c_str(),
                        type_name(t).c_str(), rel_theirs, rel_ours);
            EXPECT_LT(rel_ours, 1.10 * rel_theirs) << qt.name << " " << type_name(t);
        }

        // 4. dot_q8 on llama.cpp's rows, against a correlated activation (the original row + noise).
        if (vega::quant::uses_q8_activations(t)) {
            const float inv_rms = float(std::sqrt(double(n)) / vega::test::l2_norm(x));
            for (int64_t r = 0; r < std::min<int64_t>(rows, 8); ++r) {
                const auto a = vega::test::correlated_act(orig + r * row, row, inv_rms, uint32_t(r));
                double ref = 0;
                for (int64_t i = 0; i < row; ++i) ref += double(y[r * row + i]) * a[i / 32].d * a[i / 32].qs[i % 32];
                const float got = vega::quant::dot_q8(t, qt.data + r * rb, a.data(), row);
                EXPECT_LT(std::fabs(got - ref), 1e-4 * std::fabs(ref)) << qt.name << " row " << r;
            }
        } else {
            const auto x0 = vega::test::normal_data(row, 1);
            double ref = 0;
            for (int64_t i = 0; i < row; ++i) ref += double(y[i]) * x0[i];
            const float got = vega::quant::dot_f32(t, qt.data, x0.data(), row);
            double abs_ref = 0;
            for (int64_t i = 0; i < row; ++i) abs_ref += std::fabs(double(y[i]) * x0[i]);
            EXPECT_LT(std::fabs(got - ref), 1e-5 * abs_ref) << qt.name;
        }
        ++checked;
    }
    EXPECT_GE(checked, 16) << "expected 16 non-F32 weight tensors";
}

INSTANTIATE_TEST_SUITE_P(Models, LlamaCpp,
                         ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k",
                                           "q6_k", "q4_k_m"),
                         [](const auto& info) { return info.param; });

}  // namespace
