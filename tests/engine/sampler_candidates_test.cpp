// Device-side top-k sampling: sample_candidates() on the k best (as a backend's
// top_k op returns them) draws exactly the tokens sample() draws on the full row.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "core/error.h"
#include "engine/sampler.h"

namespace vega {
namespace {

TEST(SamplerCandidates, SameTokensAsFullRowForManyRowsAndSettings) {
    const int n_vocab = 3000;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> row(n_vocab);
    std::vector<int32_t> ids(Backend::kTopKMax), scratch;
    std::vector<float> vals(Backend::kTopKMax);
    struct Setting { int k; float top_p, min_p, temp; };
    for (Setting st : {Setting{40, 0.95f, 0.05f, 0.8f}, Setting{1, 1.f, 0.f, 1.f}, Setting{64, 1.f, 0.f, 1.5f},
                       Setting{8, 0.5f, 0.f, 0.7f}, Setting{20, 1.f, 0.2f, 1.f}}) {
        SamplerParams p;
        p.top_k = st.k;
        p.top_p = st.top_p;
        p.min_p = st.min_p;
        p.temperature = st.temp;
        p.seed = 99;
        Sampler full(p, n_vocab), cand(p, n_vocab);
        ASSERT_TRUE(cand.can_sample_candidates());
        int differing_rows = 0;
        for (int it = 0; it < 300; ++it) {
            for (auto& x : row) x = nd(rng);
            if (it % 7 == 0) row[5] = row[9] = row[17] = 30.f;  // exact ties at the top
            top_k_host(row.data(), 1, n_vocab, st.k, ids.data(), vals.data(), scratch);
            const int32_t a = full.sample(row.data());
            const int32_t b = cand.sample_candidates(ids.data(), vals.data(), st.k);
            ASSERT_EQ(a, b) << "k " << st.k << " iteration " << it;
            differing_rows += (a != ids[0]);
        }
        if (st.k > 1) {
            EXPECT_GT(differing_rows, 0) << "sampling never left the argmax; the check would be vacuous";
        }
    }
}

TEST(SamplerCandidates, RefusedWithPenalties) {
    SamplerParams p;
    p.repeat_penalty = 1.1f;
    Sampler s(p, 100);
    EXPECT_FALSE(s.can_sample_candidates());
    const int32_t ids[1] = {3};
    const float vals[1] = {1.f};
    EXPECT_THROW(s.sample_candidates(ids, vals, 1), Error);
}

TEST(BackendTopK, CpuMatchesSortWithTiesAndNan) {
    auto be = make_cpu_backend(1);
    const int rows = 3, n = 1000, k = 50;
    std::vector<float> l(size_t(rows) * n);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> few(0, 40);  // many exact ties
    for (auto& x : l) x = float(few(rng));
    l[7] = std::nanf("");
    l[1000 + 3] = 1e9f;
    std::vector<int32_t> ids(size_t(rows) * k);
    std::vector<float> vals(size_t(rows) * k);
    be->top_k(l.data(), rows, n, k, ids.data(), vals.data());
    for (int r = 0; r < rows; ++r) {
        std::vector<int> order(n);
        for (int i = 0; i < n; ++i) order[i] = i;
        auto key = [&](int i) { float v = l[size_t(r) * n + i]; return std::isnan(v) ? -INFINITY : v; };
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) > key(b); });
        for (int j = 0; j < k; ++j) {
            EXPECT_EQ(ids[size_t(r) * k + j], order[j]) << "row " << r << " rank " << j;
            EXPECT_EQ(vals[size_t(r) * k + j], key(order[j]));
        }
    }
    EXPECT_EQ(ids[k], 3);  // row 1's outlier first
    EXPECT_THROW(be->top_k(l.data(), 1, n, Backend::kTopKMax + 1, ids.data(), vals.data()), Error);
}


// The CPU's argmax and its maximum, as the GPU's: the lowest index of the largest value,
// NaN never chosen (also where it comes first), a row with nothing above -inf gives 0 and
// -inf. (A vocabulary split merges the shares' maxima: a NaN must not hide one.)
TEST(BackendArgmax, CpuSkipsNanAndGivesTheMaximum) {
    auto be = make_cpu_backend(1);
    const float nan = std::nanf(""), inf = INFINITY;
    const std::vector<float> l = {nan, 1, 9, 9,     // 2, 9: NaN first, a tie
                                  1, 2, nan, 9,     // 3, 9
                                  -inf, -inf, nan, nan,  // 0, -inf
                                  -3, -1, -2, -1};  // 1, -1
    std::vector<int32_t> ids(4, -7);
    std::vector<float> max(4, 0.f);
    be->argmax(l.data(), 4, 4, ids.data(), max.data());
    EXPECT_EQ(ids, (std::vector<int32_t>{2, 3, 0, 1}));
    EXPECT_EQ(max, (std::vector<float>{9, 9, -inf, -1}));
    std::vector<int32_t> only(4, -7);
    be->argmax(l.data(), 4, 4, only.data());  // without max_out
    EXPECT_EQ(only, ids);
}

}  // namespace
}  // namespace vega
