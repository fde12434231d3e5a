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

}  // namespace
}  // namespace vega
