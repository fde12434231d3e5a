// core/env.h: the VEGA_* switches parse one way, and a malformed value is an error that
// names the variable (an A/B run must not silently measure the default).
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/env.h"

namespace vega {
namespace {

constexpr const char* kVar = "VEGA_TEST_ENV_SWITCH";

TEST(Env, FlagsIntegersAndPairs) {
    unsetenv(kVar);
    EXPECT_TRUE(env::flag(kVar, true));
    EXPECT_FALSE(env::flag(kVar, false));
    EXPECT_EQ(env::integer(kVar, 12), 12);
    int a = 1, b = 2;
    EXPECT_FALSE(env::int_pair(kVar, a, b));
    EXPECT_EQ(a, 1);
    setenv(kVar, "", 1);  // empty: as unset
    EXPECT_TRUE(env::flag(kVar, true));
    for (const char* off : {"0", "false", "off", "no"}) {
        setenv(kVar, off, 1);
        EXPECT_FALSE(env::flag(kVar, true)) << off;
    }
    for (const char* on : {"1", "true", "on", "yes"}) {
        setenv(kVar, on, 1);
        EXPECT_TRUE(env::flag(kVar, false)) << on;
    }
    setenv(kVar, "-7", 1);
    EXPECT_EQ(env::integer(kVar, 0), -7);
    setenv(kVar, "2,4", 1);
    EXPECT_TRUE(env::int_pair(kVar, a, b));
    EXPECT_EQ(a, 2);
    EXPECT_EQ(b, 4);
    unsetenv(kVar);
}

TEST(Env, MalformedValuesNameTheVariable) {
    auto message = [](auto&& fn) {
        try {
            fn();
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    setenv(kVar, "maybe", 1);
    EXPECT_NE(message([] { env::flag(kVar, true); }).find("VEGA_TEST_ENV_SWITCH='maybe'"), std::string::npos);
    setenv(kVar, "12x", 1);
    EXPECT_NE(message([] { env::integer(kVar, 0); }).find("is not an integer"), std::string::npos);
    setenv(kVar, "2;4", 1);
    int a = 0, b = 0;
    EXPECT_NE(message([&] { env::int_pair(kVar, a, b); }).find("is not two integers"), std::string::npos);
    setenv(kVar, "2,4x", 1);
    EXPECT_NE(message([&] { env::int_pair(kVar, a, b); }).find("is not two integers"), std::string::npos);
    unsetenv(kVar);
}

TEST(Env, IntegersInARangeSayTheRange) {
    unsetenv(kVar);
    EXPECT_EQ(env::integer_in(kVar, 3, 1, 16, "replays"), 3);
    setenv(kVar, "16", 1);
    EXPECT_EQ(env::integer_in(kVar, 3, 1, 16, "replays"), 16);
    setenv(kVar, "1", 1);
    EXPECT_EQ(env::integer_in(kVar, 3, 1, 16, "replays"), 1);
    for (const char* bad : {"0", "17", "-3", "4x", "x"}) {
        setenv(kVar, bad, 1);
        std::string what = "(no error)";
        try {
            env::integer_in(kVar, 3, 1, 16, "replays");
        } catch (const std::invalid_argument& e) {
            what = e.what();
        }
        EXPECT_NE(what.find(kVar), std::string::npos) << bad << ": " << what;
        EXPECT_NE(what.find("(replays, 1..16)"), std::string::npos) << bad << ": " << what;
    }
    setenv(kVar, "17", 1);
    try {
        env::integer_in(kVar, 3, 1, 16, "replays");
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("=17 is out of range"), std::string::npos) << e.what();
    }
    unsetenv(kVar);
}

}  // namespace
}  // namespace vega
