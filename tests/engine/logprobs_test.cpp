// token_logprobs: a log-softmax (sums to 1 in probability), the chosen token's value,
// the n best sorted with ties to the lower id, NaN logits as -inf, limits clamped.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/logprobs.h"

namespace vega {
namespace {

TEST(Logprobs, LogSoftmaxOfTheLogits) {
    const std::vector<float> x = {1.f, 3.f, 3.f, -2.f, NAN, 0.5f};
    const TokenLogprobs r = token_logprobs(x.data(), int(x.size()), 5, 4);
    double z = 0.0;
    for (float v : x)
        if (v == v) z += std::exp(double(v));
    EXPECT_NEAR(r.logprob, 0.5 - std::log(z), 1e-6);
    ASSERT_EQ(r.top.size(), 4u);
    EXPECT_EQ(r.top[0].first, 1);  // tie between 1 and 2: the lower id first
    EXPECT_EQ(r.top[1].first, 2);
    EXPECT_EQ(r.top[2].first, 0);
    EXPECT_EQ(r.top[3].first, 5);
    EXPECT_FLOAT_EQ(r.top[0].second, r.top[1].second);
    for (size_t i = 1; i < r.top.size(); ++i) EXPECT_LE(r.top[i].second, r.top[i - 1].second);
    double p = 0.0;
    for (int i = 0; i < int(x.size()); ++i) {
        const float l = token_logprobs(x.data(), int(x.size()), i, 0).logprob;
        EXPECT_LE(l, 0.f);
        if (x[size_t(i)] != x[size_t(i)]) EXPECT_TRUE(std::isinf(l));
        else p += std::exp(double(l));
    }
    EXPECT_NEAR(p, 1.0, 1e-6);
    EXPECT_EQ(token_logprobs(x.data(), int(x.size()), 0, 100).top.size(), x.size());  // at most the vocabulary
    EXPECT_TRUE(token_logprobs(x.data(), int(x.size()), 0, 0).top.empty());
}

}  // namespace
}  // namespace vega
