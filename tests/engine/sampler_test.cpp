// Sampler: greedy rule, truncation stages (checked against a plain sequential
// re-implementation written here), penalties arithmetic, seeding, and the
// empirical distribution against softmax.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"

namespace vega {
namespace {

// All truncation off: temperature only.
SamplerParams plain(float temp, uint64_t seed) {
    SamplerParams p;
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.f;
    p.min_p = 0.f;
    p.seed = seed;
    return p;
}

std::vector<float> random_logits(int n, uint64_t seed, float sd) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(0.f, sd);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(g);
    return v;
}

std::vector<double> softmax(const std::vector<float>& l, double temp) {
    double m = *std::max_element(l.begin(), l.end());
    std::vector<double> p(l.size());
    double s = 0;
    for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp((l[i] - m) / temp);
    for (auto& x : p) x /= s;
    return p;
}

std::vector<float> log_of(const std::vector<double>& probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(float(std::log(p)));
    return l;
}

std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int draws) {
    std::vector<int> h(logits.size(), 0);
    for (int i = 0; i < draws; ++i) h[size_t(s.sample(logits.data()))]++;
    return h;
}

double chi_square(const std::vector<int>& h, const std::vector<double>& p, int draws) {
    double chi = 0;
    for (size_t i = 0; i < h.size(); ++i) {
        const double e = p[i] * draws;
        chi += (h[i] - e) * (h[i] - e) / e;
    }
    return chi;
}

// The kept set as llama.cpp's chain defines it, applied stage by stage:
// sort, top-k, softmax, top-p prefix (at least 1), min-p relative to the max.
std::set<int> reference_kept(const std::vector<float>& l, int top_k, float top_p, float min_p) {
    std::vector<int> ids(l.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return l[a] > l[b]; });
    if (top_k > 0 && size_t(top_k) < ids.size()) ids.resize(size_t(top_k));
    if (top_p < 1.f) {
        std::vector<float> sub;
        for (int id : ids) sub.push_back(l[size_t(id)]);
        auto p = softmax(sub, 1.0);
        double cum = 0;
        size_t keep = ids.size();
        for (size_t i = 0; i < p.size(); ++i) {
            cum += p[i];
            if (cum >= top_p) { keep = i + 1; break; }
        }
        ids.resize(keep);
    }
    if (min_p > 0.f) {
        std::vector<float> sub;
        for (int id : ids) sub.push_back(l[size_t(id)]);
        auto p = softmax(sub, 1.0);
        std::vector<int> kept;
        for (size_t i = 0; i < ids.size(); ++i)
            if (p[i] >= min_p * p[0]) kept.push_back(ids[i]);
        ids = kept;
    }
    return {ids.begin(), ids.end()};
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTie) {
    SamplerParams p = plain(0.f, 1);
    Sampler s(p, 6);
    EXPECT_TRUE(s.is_greedy());
    std::vector<float> a = {1.f, 5.f, 3.f, 5.f, 2.f, -1.f};
    EXPECT_EQ(s.sample(a.data()), 1);
    std::vector<float> flat(6, 0.25f);
    EXPECT_EQ(s.sample(flat.data()), 0);
    std::vector<float> tail = {-3.f, -2.f, -2.f, -9.f, -1.f, -1.f};
    EXPECT_EQ(s.sample(tail.data()), 4);
    std::vector<float> with_nan = {NAN, 0.f, 2.f, NAN, 2.f, 1.f};
    EXPECT_EQ(s.sample(with_nan.data()), 2);
    // Greedy ignores truncation settings entirely.
    p.top_k = 3;
    p.top_p = 0.1f;
    p.min_p = 0.9f;
    Sampler s2(p, 6);
    EXPECT_EQ(s2.sample(a.data()), 1);
}

TEST(Sampler, TopK1EqualsGreedy) {
    SamplerParams pk = plain(1.5f, 7);
    pk.top_k = 1;
    Sampler k1(pk, 300);
    Sampler greedy(plain(0.f, 7), 300);
    for (int row = 0; row < 200; ++row) {
        auto l = random_logits(300, 1000 + row, 1.f);
        if (row % 10 == 0) l[size_t(row)] = l[size_t(row) + 50] = 100.f;  // a tie: lower id must win
        const int expect = int(std::max_element(l.begin(), l.end()) - l.begin());
        EXPECT_EQ(k1.sample(l.data()), expect) << "row " << row;
        EXPECT_EQ(greedy.sample(l.data()), expect) << "row " << row;
    }
}

TEST(Sampler, SameSeedSameTokensAndResetReplays) {
    SamplerParams p;  // defaults: top-k 40, top-p .95, min-p .05, temp .8
    p.seed = 1234;
    p.repeat_penalty = 1.1f;
    const auto l = random_logits(1000, 5, 0.7f);
    Sampler a(p, 1000), b(p, 1000);
    EXPECT_EQ(a.seed(), 1234u);
    std::vector<int> ta, tb;
    for (int i = 0; i < 500; ++i) {
        ta.push_back(a.sample(l.data()));
        a.accept(ta.back());
        tb.push_back(b.sample(l.data()));
        b.accept(tb.back());
    }
    EXPECT_EQ(ta, tb);
    EXPECT_GT(std::set<int>(ta.begin(), ta.end()).size(), 5u);  // it really sampled
    a.reset();
    std::vector<int> tr;
    for (int i = 0; i < 500; ++i) {
        tr.push_back(a.sample(l.data()));
        a.accept(tr.back());
    }
    EXPECT_EQ(ta, tr);
}

TEST(Sampler, DifferentSeedsDiffer) {
    const std::vector<float> flat(100, 0.f);
    Sampler a(plain(1.f, 1), 100), b(plain(1.f, 2), 100);
    int same = 0;
    for (int i = 0; i < 400; ++i) same += a.sample(flat.data()) == b.sample(flat.data());
    EXPECT_LT(same, 30);  // expected 4 of 400 for independent uniform draws
    // seed 0 draws a random, non-zero seed.
    Sampler r1(plain(1.f, 0), 100), r2(plain(1.f, 0), 100);
    EXPECT_NE(r1.seed(), 0u);
    EXPECT_NE(r1.seed(), r2.seed());
}

TEST(Sampler, TopPExcludesTheTail) {
    // p = .5 .3 .15 .05: top-p .75 keeps {0,1} (0.5 < .75 <= 0.8).
    const auto l = log_of({0.5, 0.3, 0.15, 0.05});
    SamplerParams p = plain(1.f, 11);
    p.top_p = 0.75f;
    Sampler s(p, 4);
    auto h = histogram(s, l, 20000);
    EXPECT_EQ(h[2], 0);
    EXPECT_EQ(h[3], 0);
    EXPECT_NEAR(h[0] / 20000.0, 0.5 / 0.8, 0.02);  // renormalised over the kept pair
    // top-p 0 still keeps the best token.
    p.top_p = 0.f;
    Sampler s0(p, 4);
    h = histogram(s0, l, 2000);
    EXPECT_EQ(h[0], 2000);
}

TEST(Sampler, MinPExcludesBelowFractionOfMax) {
    // p_max = .4, min-p .2 -> threshold .08: keeps {0,1,2}.
    const auto l = log_of({0.4, 0.3, 0.1, 0.05, 0.07, 0.02, 0.06});
    SamplerParams p = plain(1.f, 12);
    p.min_p = 0.2f;
    Sampler s(p, 7);
    auto h = histogram(s, l, 20000);
    for (int i = 3; i < 7; ++i) EXPECT_EQ(h[size_t(i)], 0) << i;
    for (int i = 0; i < 3; ++i) EXPECT_GT(h[size_t(i)], 1000) << i;
}

TEST(Sampler, CombinedTruncationMatchesSequentialChain) {
    for (int trial = 0; trial < 12; ++trial) {
        const int n = 64;
        const auto l = random_logits(n, 100 + trial, 1.5f);
        SamplerParams p = plain(1.f, 200 + trial);
        p.top_k = (trial % 3 == 0) ? 0 : 10 + trial;
        p.top_p = (trial % 4 == 1) ? 1.f : 0.6f + 0.03f * trial;
        p.min_p = (trial % 2) ? 0.f : 0.02f * (trial + 1);
        const auto kept = reference_kept(l, p.top_k, p.top_p, p.min_p);
        Sampler s(p, n);
        auto h = histogram(s, l, 8000);
        // The kept set renormalised: every token sampled must be in it, and
        // every kept token with >= 2% mass must show up.
        std::vector<float> kl;
        for (int id : kept) kl.push_back(l[size_t(id)]);
        auto kp = softmax(kl, 1.0);
        size_t j = 0;
        for (int id : kept) {
            if (kp[j++] >= 0.02) {
                EXPECT_GT(h[size_t(id)], 0) << "trial " << trial << " token " << id;
            }
        }
        for (int i = 0; i < n; ++i) {
            if (!kept.count(i)) {
                EXPECT_EQ(h[size_t(i)], 0) << "trial " << trial << " token " << i;
            }
        }
    }
}

TEST(Sampler, TopPOverALargeFlatVocabulary) {
    // top-p alone over 2000 similar logits keeps over a thousand tokens (the
    // partial sort has to widen several times); min-p > 1 keeps only the max.
    const int n = 2000;
    const auto l = random_logits(n, 31, 0.5f);
    SamplerParams p = plain(1.f, 32);
    p.top_p = 0.9f;
    const auto kept = reference_kept(l, 0, 0.9f, 0.f);
    ASSERT_GT(kept.size(), 1000u);
    Sampler s(p, n);
    auto h = histogram(s, l, 6000);
    size_t distinct = 0;
    for (int i = 0; i < n; ++i) {
        if (h[size_t(i)] > 0) ++distinct;
        if (!kept.count(i)) {
            EXPECT_EQ(h[size_t(i)], 0) << "token " << i;
        }
    }
    EXPECT_GT(distinct, kept.size() * 7 / 10);
    p.top_p = 1.f;
    p.min_p = 2.f;
    Sampler m(p, n);
    const int best = int(std::max_element(l.begin(), l.end()) - l.begin());
    for (int i = 0; i < 50; ++i) EXPECT_EQ(m.sample(l.data()), best);
}

TEST(Sampler, RepetitionPenaltyChangesArgmax) {
    SamplerParams p = plain(0.f, 1);
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 2;
    Sampler s(p, 8);
    std::vector<float> pos = {2.0f, 1.9f, -1.f, 0, 0, 0, 0, 0};
    EXPECT_EQ(s.sample(pos.data()), 0);
    s.accept(0);
    EXPECT_EQ(s.sample(pos.data()), 1);  // 2.0 / 1.1 = 1.818 < 1.9
    // Negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05.
    std::vector<float> neg = {-1.0f, -1.05f, -5.f, -5.f, -5.f, -5.f, -5.f, -5.f};
    EXPECT_EQ(s.sample(neg.data()), 1);
    // The window is 2: two more tokens push 0 out and its logit is untouched again.
    s.accept(5);
    s.accept(6);
    EXPECT_EQ(s.sample(pos.data()), 0);
    EXPECT_EQ(s.sample(neg.data()), 0);
    s.reset();
    s.accept(0);
    EXPECT_EQ(s.sample(pos.data()), 1);
}

TEST(Sampler, FrequencyAndPresenceArithmetic) {
    SamplerParams p = plain(0.f, 1);
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    p.repeat_last_n = 64;
    Sampler s(p, 8);
    for (int t : {3, 3, 3, 5, 5}) s.accept(t);
    std::vector<float> l(8);
    for (int i = 0; i < 8; ++i) l[size_t(i)] = 1.f + 0.1f * i;
    auto got = l;
    s.apply_penalties(got.data());
    for (int i = 0; i < 8; ++i) {
        float e = l[size_t(i)];
        if (i == 3) e = 1.3f - 3 * 0.25f - 0.5f;
        if (i == 5) e = 1.5f - 2 * 0.25f - 0.5f;
        EXPECT_FLOAT_EQ(got[size_t(i)], e) << i;
    }
    // With a repetition penalty too (divide first, then subtract), and a window of 3:
    // the window holds [3, 5, 5], so count(3) = 1, count(5) = 2.
    p.repeat_penalty = 2.f;
    p.repeat_last_n = 3;
    Sampler w(p, 8);
    for (int t : {3, 3, 3, 5, 5}) w.accept(t);
    got = l;
    w.apply_penalties(got.data());
    EXPECT_FLOAT_EQ(got[3], 1.3f / 2 - 1 * 0.25f - 0.5f);
    EXPECT_FLOAT_EQ(got[5], 1.5f / 2 - 2 * 0.25f - 0.5f);
    EXPECT_FLOAT_EQ(got[7], l[7]);
    // Unbounded window (repeat_last_n < 0) counts everything; 0 disables penalties.
    p.repeat_last_n = -1;
    p.repeat_penalty = 1.f;
    Sampler u(p, 8);
    for (int i = 0; i < 100; ++i) u.accept(2);
    got = l;
    u.apply_penalties(got.data());
    EXPECT_FLOAT_EQ(got[2], 1.2f - 100 * 0.25f - 0.5f);
    p.repeat_last_n = 0;
    Sampler off(p, 8);
    off.accept(2);
    got = l;
    off.apply_penalties(got.data());
    EXPECT_EQ(got, l);
    // Penalties flow into sampling: 7 is best, but after two uses 6 wins greedily.
    s.reset();
    EXPECT_EQ(s.sample(l.data()), 7);
    s.accept(7);
    EXPECT_EQ(s.sample(l.data()), 6);  // 1.7 - 0.25 - 0.5 = 0.95 < 1.6
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
    const int n = 16, draws = 20000;
    const auto l = random_logits(n, 77, 1.0f);
    // chi-square, 15 degrees of freedom: P(chi2 > 37.7) = 0.001.
    const double crit = 37.7;
    for (double temp : {1.0, 0.5}) {
        Sampler s(plain(float(temp), 99), n);
        auto h = histogram(s, l, draws);
        EXPECT_LT(chi_square(h, softmax(l, temp), draws), crit) << "temp " << temp;
        // The statistic has power: the same counts against the wrong temperature fail.
        EXPECT_GT(chi_square(h, softmax(l, temp == 1.0 ? 0.5 : 1.0), draws), crit) << "temp " << temp;
    }
}

TEST(Sampler, RejectsBadInput) {
    EXPECT_THROW(Sampler(SamplerParams{}, 0), Error);
    SamplerParams p;
    p.repeat_penalty = 0.f;
    EXPECT_THROW(Sampler(p, 10), Error);
    p = SamplerParams{};
    p.temperature = NAN;
    EXPECT_THROW(Sampler(p, 10), Error);
    Sampler s(SamplerParams{}, 10);
    EXPECT_THROW(s.accept(10), Error);
    EXPECT_THROW(s.accept(-1), Error);
    std::vector<float> all_masked(10, -INFINITY);
    EXPECT_THROW(s.sample(all_masked.data()), Error);
}


// A constraint (a grammar) that allows a fixed set of ids.
struct AllowSet : TokenConstraint {
    std::set<int32_t> ok;
    mutable int asked = 0;
    bool allows(int32_t t) const override { return ++asked, ok.count(t) > 0; }
};

TEST(SamplerConstraint, GreedyTakesTheBestAllowedAndAsksLittle) {
    const int n = 5000;
    std::vector<float> l(n);
    for (int i = 0; i < n; ++i) l[size_t(i)] = float(n - i) * 0.01f;  // id 0 best
    SamplerParams p;
    p.temperature = 0.f;
    Sampler s(p, n);
    AllowSet c;
    c.ok = {7, 3000, 4000};
    EXPECT_EQ(s.sample(l.data(), &c), 7);
    EXPECT_LE(c.asked, 256);  // the first window only
    c.ok = {4999};
    c.asked = 0;
    EXPECT_EQ(s.sample(l.data(), &c), 4999);  // found in a later window
    c.ok = {};
    EXPECT_EQ(s.sample(l.data(), &c), -1);  // nothing allowed
}

TEST(SamplerConstraint, DrawsOnlyAllowedTokensWithTheChainsOddsAmongThem) {
    const int n = 300;
    std::vector<float> l(n, -5.f);
    l[10] = 2.f, l[20] = 2.f, l[30] = 3.f;  // 30 is the best but not allowed
    SamplerParams p;
    p.temperature = 1.f, p.top_k = 0, p.top_p = 1.f, p.min_p = 0.f, p.seed = 9;
    Sampler s(p, n);
    AllowSet c;
    c.ok = {10, 20, 250};
    std::map<int32_t, int> seen;
    for (int k = 0; k < 2000; ++k) seen[s.sample(l.data(), &c)]++;
    EXPECT_EQ(seen.count(30), 0u);
    for (const auto& [t, cnt] : seen) EXPECT_TRUE(c.ok.count(t)) << t;
    // 10 and 20 equally likely (same logit), 250 about e^-7 as likely as each.
    EXPECT_NEAR(double(seen[10]) / 2000, 0.5, 0.05);
    EXPECT_NEAR(double(seen[20]) / 2000, 0.5, 0.05);
    EXPECT_LT(seen[250], 10);
    // With top-k 1 only the best allowed token remains (10: the lower id of the tie).
    SamplerParams q = p;
    q.top_k = 1;
    Sampler t(q, n);
    for (int k = 0; k < 20; ++k) EXPECT_EQ(t.sample(l.data(), &c), 10);
}

// The same set, also as a mask at once (as a grammar with the vocabulary trie answers).
struct MaskedSet : AllowSet {
    mutable int masks = 0;
    bool allowed_mask(uint8_t* mask) const override {
        ++masks;
        for (int32_t t = 0; t < n; ++t) mask[t] = ok.count(t) ? 1 : 0;
        return true;
    }
    int32_t n = 0;
};

// A constraint that says few tokens are allowed: the sampler takes its mask first.
struct FewSet : MaskedSet {
    bool few_allowed() const override { return true; }
};

// allowed_mask changes the cost, never the draw: the same tokens with and without it
// (and with it taken first, as for a constraint with few_allowed), greedy and sampled,
// with and without top-k, for sets from sparse (where the mask is taken) to dense (where
// the first window suffices), -inf logits included.
TEST(SamplerConstraint, MaskGivesTheSameTokensAsAskingTokenByToken) {
    const int n = 20000;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.f, 2.f);
    for (int every : {1, 3, 50, 2000, 19999})
        for (int top_k : {0, 1, 40})
            for (float temp : {0.f, 0.7f}) {
                AllowSet plain_c;
                MaskedSet masked_c;
                FewSet few_c;
                masked_c.n = few_c.n = n;
                for (int t = 0; t < n; t += every) plain_c.ok.insert(t), masked_c.ok.insert(t), few_c.ok.insert(t);
                SamplerParams p;
                p.temperature = temp, p.top_k = top_k, p.top_p = 0.95f, p.min_p = 0.f, p.seed = 11;
                Sampler a(p, n), b(p, n), c(p, n);
                std::vector<float> l(n);
                for (int step = 0; step < 8; ++step) {
                    for (auto& x : l) x = nd(rng);
                    l[size_t(step)] = -INFINITY;
                    const int32_t ta = a.sample(l.data(), &plain_c), tb = b.sample(l.data(), &masked_c);
                    ASSERT_EQ(ta, tb) << "every " << every << " top_k " << top_k << " temp " << temp << " step " << step;
                    ASSERT_EQ(c.sample(l.data(), &few_c), ta) << "mask first: every " << every << " top_k " << top_k;
                    ASSERT_TRUE(plain_c.ok.count(ta)) << ta;
                }
                EXPECT_EQ(few_c.asked, 0) << "every " << every;  // the mask answered everything
                EXPECT_EQ(few_c.masks, 8);
                // Sparse sets are found through the mask, not by asking thousands of tokens.
                if (every >= 2000) EXPECT_GT(masked_c.masks, 0) << "every " << every;
                if (every >= 2000) EXPECT_LT(masked_c.asked, 8 * 300) << "every " << every;
            }
}

}  // namespace
}  // namespace vega
