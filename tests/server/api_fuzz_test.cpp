// Request bodies with random fields, types and values: parse_completion_request
// either accepts them or throws ApiError with status 400 and a message naming a
// field; it never throws anything else or crashes. Also raw bytes to the JSON
// parser the server uses.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/api.h"

namespace vega::server {
namespace {

json random_value(std::mt19937& rng, int depth) {
    switch (rng() % (depth > 2 ? 6 : 8)) {
        case 0: return nullptr;
        case 1: return bool(rng() & 1);
        case 2: return int64_t(rng()) - (int64_t(1) << 31);
        case 3: return double(rng()) / 1e6 - 2000.0;
        case 4: return std::string(size_t(rng() % 5), char('a' + rng() % 26));
        case 5: return (rng() & 1) ? json(1e300) : json(-0.0);
        case 6: {
            json a = json::array();
            for (unsigned i = 0, n = rng() % 4; i < n; ++i) a.push_back(random_value(rng, depth + 1));
            return a;
        }
        default: {
            static const char* keys[] = {"role", "content", "text", "type", "include_usage", "x"};
            json o = json::object();
            for (unsigned i = 0, n = rng() % 4; i < n; ++i) o[keys[rng() % 6]] = random_value(rng, depth + 1);
            return o;
        }
    }
}

TEST(ApiFuzz, RandomBodiesGiveParamsOr400) {
    static const char* fields[] = {"model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature",
                                   "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty",
                                   "repeat_penalty", "stream", "stream_options", "n", "tools", "ignore_eos"};
    std::mt19937 rng(20261123);
    int accepted = 0, rejected = 0;
    for (int it = 0; it < 20000; ++it) {
        json body = json::object();
        if (rng() % 3) body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
        if (rng() % 3) body["prompt"] = "hi";
        for (unsigned i = 0, n = rng() % 5; i < n; ++i) body[fields[rng() % 19]] = random_value(rng, 0);
        const json whole = (rng() % 50 == 0) ? random_value(rng, 0) : body;
        for (Endpoint ep : {Endpoint::Chat, Endpoint::Completion}) {
            try {
                const CompletionParams p = parse_completion_request(whole, ep);
                ++accepted;
                EXPECT_TRUE(p.max_tokens >= -1);
                EXPECT_TRUE(p.sampling.temperature >= 0.f && p.sampling.temperature <= 2.f);
                if (ep == Endpoint::Chat) {
                    EXPECT_TRUE(p.messages.is_array() && !p.messages.empty());
                }
            } catch (const ApiError& e) {
                ++rejected;
                EXPECT_EQ(e.status, 400) << whole.dump();
                EXPECT_FALSE(std::string(e.what()).empty());
            }
        }
    }
    EXPECT_GT(accepted, 1000);
    EXPECT_GT(rejected, 1000);
}

TEST(ApiFuzz, RandomBytesAreParseErrorsNotCrashes) {
    std::mt19937 rng(7);
    const std::string seed = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stop":["a"]})";
    for (int it = 0; it < 20000; ++it) {
        std::string s = seed;
        for (unsigned i = 0, n = 1 + rng() % 4; i < n; ++i) s[rng() % s.size()] = char(rng());
        const json j = json::parse(s, nullptr, false);
        if (j.is_discarded()) continue;
        try {
            (void)parse_completion_request(j, Endpoint::Chat);
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400);
        }
        // Error bodies with any bytes still serialize (the server replaces bad UTF-8).
        (void)error_body(400, s, "invalid_request_error", "").dump(-1, ' ', false, json::error_handler_t::replace);
    }
}

}  // namespace
}  // namespace vega::server
