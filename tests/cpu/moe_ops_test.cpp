// Mixture-of-experts ops of the CPU backend (the reference every GPU op is compared
// with): the routing rule, the grouped expert matmuls against one plain matmul per
// (row, slot), and the weighted combine.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "random.h"

namespace vega {
namespace {

using test::randn;

ExpertRouting routing(int n_expert, int n_used) {
    ExpertRouting r;
    r.n_expert = n_expert, r.n_used = n_used;
    return r;
}

TEST(MoeRouting, SoftmaxTopKRenormalised) {
    const int E = 8, K = 3;
    const std::vector<float> l = {0.5f, 2.0f, -1.0f, 1.0f, 3.0f, 0.0f, 1.5f, -2.0f};
    std::vector<int32_t> ids(K);
    std::vector<float> w(K);
    route_experts_host(l.data(), 1, routing(E, K), ids.data(), w.data());
    EXPECT_EQ(ids, (std::vector<int32_t>{4, 1, 6}));
    double den = 0;
    for (float v : l) den += std::exp(double(v));
    const double p4 = std::exp(3.0) / den, p1 = std::exp(2.0) / den, p6 = std::exp(1.5) / den, s = p4 + p1 + p6;
    EXPECT_NEAR(w[0], p4 / s, 1e-6);
    EXPECT_NEAR(w[1], p1 / s, 1e-6);
    EXPECT_NEAR(w[2], p6 / s, 1e-6);
    // Without renormalisation: the softmax probabilities themselves, times the scale.
    ExpertRouting r = routing(E, K);
    r.norm_weights = false, r.scale = 2.f;
    route_experts_host(l.data(), 1, r, ids.data(), w.data());
    EXPECT_NEAR(w[0], 2 * p4, 1e-6);
    EXPECT_NEAR(w[2], 2 * p6, 1e-6);
}

TEST(MoeRouting, TiesGoToTheLowerIdAndNaNNeverWins) {
    const std::vector<float> l = {1.f, NAN, 2.f, 2.f, -INFINITY, 2.f, 1.f, 0.f};
    std::vector<int32_t> ids(4);
    std::vector<float> w(4);
    route_experts_host(l.data(), 1, routing(8, 4), ids.data(), w.data());
    EXPECT_EQ(ids, (std::vector<int32_t>{2, 3, 5, 0}));
    EXPECT_FLOAT_EQ(w[0], w[1]);
    EXPECT_FLOAT_EQ(w[1], w[2]);
    float s = 0;
    for (float v : w) s += v;
    EXPECT_NEAR(s, 1.f, 1e-6);
    EXPECT_THROW(route_experts_host(l.data(), 1, routing(8, 9), ids.data(), w.data()), Error);
}

// matmul_experts (shared and per-slot input) and the SwiGLU pair against one plain
// matmul per (row, slot) through the same backend: the grouping must not change a
// single value. Rows choose overlapping experts; some experts go unused.
void check_expert_matmuls(GgmlType t, int n_in, int n_out, int X, int K, int rows) {
    auto be = make_cpu_backend(2);
    const size_t rb = quant::row_bytes(t, n_in);
    // Three stacked tensors: gate, up [X][n_out][n_in] and down-shaped [X][n_out][n_in] too.
    auto make = [&](uint64_t seed, std::vector<uint8_t>& bytes, gguf::TensorInfo& ti) {
        const std::vector<float> wf = randn(size_t(X) * n_out * n_in, seed, 0.05f);
        bytes.resize(rb * size_t(X) * n_out);
        for (int64_t o = 0; o < int64_t(X) * n_out; ++o)
            quant::quantize_row(t, wf.data() + o * n_in, bytes.data() + o * rb, n_in);
        ti.type = t, ti.n_dims = 3, ti.ne[0] = n_in, ti.ne[1] = n_out, ti.ne[2] = X;
        ti.data = bytes.data(), ti.n_bytes = bytes.size();
        Weight w = be->upload_weight(ti);
        w.n_out = n_out, w.n_mat = X;
        return w;
    };
    std::vector<uint8_t> gb, ub;
    gguf::TensorInfo gi, ui;
    const Weight G = make(11, gb, gi), U = make(12, ub, ui);
    // One expert's matrix as a plain Weight (rows e * n_out ..).
    auto slice = [&](const Weight& w, int e) {
        Weight s = w;
        s.n_mat = 1;
        s.data = static_cast<const uint8_t*>(w.data) + size_t(e) * n_out * rb;
        return s;
    };
    std::vector<int32_t> ids(size_t(rows) * K);
    std::mt19937 rng(5);
    for (int r = 0; r < rows; ++r)
        for (int j = 0; j < K; ++j) ids[size_t(r) * K + j] = int32_t((r + 3 * j + int(rng() % 2)) % std::max(2, X - 2));
    be->reserve(rows * K, n_in);
    const std::vector<float> x = randn(size_t(rows) * n_in, 13), xs = randn(size_t(rows) * K * n_in, 14);
    std::vector<float> y(size_t(rows) * K * n_out), ys(y.size()), h(y.size()), g(y.size()), u(y.size()), one(n_out),
        one_u(n_out);
    be->matmul_input(x.data(), rows, n_in);
    be->matmul_experts(G, ids.data(), rows, K, false, y.data());
    be->matmul_experts_swiglu(G, U, ids.data(), rows, K, g.data(), u.data(), h.data());
    be->matmul_input(xs.data(), rows * K, n_in);
    be->matmul_experts(G, ids.data(), rows, K, true, ys.data());
    for (int r = 0; r < rows; ++r)
        for (int j = 0; j < K; ++j) {
            const size_t p = size_t(r) * K + j;
            const int e = ids[p];
            be->matmul_input(x.data() + size_t(r) * n_in, 1, n_in);
            be->matmul(slice(G, e), one.data());
            be->matmul(slice(U, e), one_u.data());
            for (int o = 0; o < n_out; ++o) {
                ASSERT_EQ(y[p * n_out + o], one[size_t(o)]) << "shared input, row " << r << " slot " << j;
                const float gv = one[size_t(o)];
                EXPECT_NEAR(h[p * n_out + o], gv / (1.f + std::exp(-gv)) * one_u[size_t(o)], 1e-6f);
            }
            be->matmul_input(xs.data() + p * n_in, 1, n_in);
            be->matmul(slice(G, e), one.data());
            for (int o = 0; o < n_out; ++o) ASSERT_EQ(ys[p * n_out + o], one[size_t(o)]) << "per slot, pair " << p;
        }
    // Ids outside the stack are refused, not read out of bounds.
    ids[0] = X;
    be->matmul_input(x.data(), rows, n_in);
    EXPECT_THROW(be->matmul_experts(G, ids.data(), rows, K, false, y.data()), Error);
}

TEST(MoeCpu, GroupedExpertMatmulsEqualPlainMatmuls) {
    check_expert_matmuls(GgmlType::Q4_0, 64, 24, 8, 2, 5);
    check_expert_matmuls(GgmlType::Q4_K, 256, 16, 16, 4, 7);
    check_expert_matmuls(GgmlType::Q8_0, 96, 8, 64, 8, 3);
    check_expert_matmuls(GgmlType::F32, 40, 12, 8, 2, 4);
    check_expert_matmuls(GgmlType::F16, 48, 12, 8, 3, 1);
}

TEST(MoeCpu, CombineIsTheWeightedSumInSlotOrder) {
    auto be = make_cpu_backend(2);
    const int rows = 3, K = 4, n = 33;
    const std::vector<float> y = randn(size_t(rows) * K * n, 21), w = randn(size_t(rows) * K, 22);
    std::vector<float> out(size_t(rows) * n);
    be->combine_experts(y.data(), w.data(), rows, K, n, out.data());
    for (int r = 0; r < rows; ++r)
        for (int i = 0; i < n; ++i) {
            float s = 0.f;
            for (int j = 0; j < K; ++j) s += w[size_t(r) * K + j] * y[(size_t(r) * K + j) * n + i];
            EXPECT_EQ(out[size_t(r) * n + i], s);
        }
}

}  // namespace
}  // namespace vega
