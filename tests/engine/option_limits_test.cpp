// The shared table of option ranges (engine/option_limits.h): one check, two spellings
// of the option's name (CLI flag, request field), the same range in both.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "core/error.h"
#include "engine/option_limits.h"

namespace vega {
namespace {

const OptionLimits& L = option_limits();
constexpr auto kFlag = OptionSpelling::Flag;
constexpr auto kField = OptionSpelling::Field;

TEST(OptionLimits, OneMessageInBothSpellings) {
    EXPECT_EQ(option_error(L.top_p, 5, kFlag), "'--top-p' must be between 0 and 1 (got 5)");
    EXPECT_EQ(option_error(L.top_p, 5, kField), "'top_p' must be between 0 and 1 (got 5)");
    EXPECT_EQ(option_error(L.temperature, -0.5, kFlag), "'--temp' must be between 0 and 2 (got -0.5)");
    EXPECT_EQ(option_error(L.temperature, -0.5, kField), "'temperature' must be between 0 and 2 (got -0.5)");
    EXPECT_EQ(option_error(L.repeat_penalty, 0, kField), "'repeat_penalty' must be between 0.01 and 10 (got 0)");
    // Options with a short and a long flag name both.
    EXPECT_EQ(option_error(L.ctx_size, -5, kFlag), "'-c/--ctx-size' must be between 0 and 1048576 (got -5)");
    EXPECT_EQ(option_error(L.n_predict, -5, kFlag), "'-n/--n-predict' must be between -1 and 1073741824 (got -5)");
    EXPECT_EQ(option_error(L.n_predict, -5, kField), "'max_tokens' must be between -1 and 1073741824 (got -5)");
}

TEST(OptionLimits, NonFiniteValuesAreRefusedLikeOthers) {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(option_error(L.temperature, inf, kFlag), "'--temp' must be between 0 and 2 (got inf)");
    EXPECT_EQ(option_error(L.temperature, -inf, kField), "'temperature' must be between 0 and 2 (got -inf)");
    EXPECT_EQ(option_error(L.min_p, nan, kField), "'min_p' must be between 0 and 1 (got nan)");
    EXPECT_EQ(option_error(L.top_k, nan, kField), "'top_k' must be between 0 and 1073741824 (got nan)");
    EXPECT_EQ(option_error(L.frequency_penalty, 1e300, kField),
              "'frequency_penalty' must be between -2 and 2 (got 1e+300)");
}

TEST(OptionLimits, BoundsAreInclusiveAndIntegersStayWhole) {
    EXPECT_EQ(option_error(L.top_p, 0, kFlag), "");
    EXPECT_EQ(option_error(L.top_p, 1, kFlag), "");
    EXPECT_EQ(option_error(L.presence_penalty, -2, kField), "");
    EXPECT_EQ(option_error(L.repeat_penalty, 0.01, kField), "");
    EXPECT_EQ(option_error(L.n_predict, -1, kFlag), "");
    EXPECT_EQ(option_error(L.top_k, 1.5, kField), "'top_k' must be an integer between 0 and 1073741824 (got 1.5)");
    EXPECT_EQ(option_range(L.top_p), "[0, 1]");
    EXPECT_EQ(option_range(L.parallel), "[1, 256]");
}

TEST(OptionLimits, ThreadsAreBoundedByTheMachine) {
    const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    EXPECT_EQ(hardware_threads(), hw);
    EXPECT_EQ(option_error(L.threads, 0, kFlag), "");  // 0: all cores
    EXPECT_EQ(option_error(L.threads, hw, kFlag), "");
    const std::string e = option_error(L.threads, 10000, kFlag);
    EXPECT_EQ(e.rfind("'-t/--threads' must be between 0 and " + std::to_string(hw) + " (got 10000): this machine has " +
                          std::to_string(hw) + " hardware thread",
                      0),
              0u)
        << e;
    EXPECT_NE(option_error(L.threads, -1, kFlag), "");
}

TEST(OptionLimits, EveryEntryHasANameAndASaneRange) {
    for (const OptionLimit* l : {&L.temperature, &L.top_k, &L.top_p, &L.min_p, &L.repeat_penalty, &L.repeat_last_n,
                                 &L.frequency_penalty, &L.presence_penalty, &L.n_predict, &L.max_completion_tokens,
                                 &L.n_choices, &L.ctx_size, &L.batch_size, &L.threads, &L.parallel, &L.bench_n_prompt,
                                 &L.bench_n_gen, &L.bench_batch_seqs, &L.bench_depth, &L.bench_reps, &L.ppl_chunks}) {
        EXPECT_TRUE(l->flags || l->field);
        EXPECT_TRUE(std::isfinite(l->lo) && std::isfinite(l->hi) && l->lo <= l->hi) << option_range(*l);
        // Integer bounds print as integers, never as a long double expansion.
        if (l->integer) EXPECT_LT(option_range(*l).size(), 30u) << option_range(*l);
    }
}

TEST(OptionLimits, CheckOptionThrowsTheMessage) {
    EXPECT_NO_THROW(check_option(L.parallel, 4, kFlag));
    try {
        check_option(L.parallel, 0, kFlag);
        FAIL() << "no throw";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "'--parallel' must be between 1 and 256 (got 0)");
    }
}

}  // namespace
}  // namespace vega
