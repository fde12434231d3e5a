// Request bodies with random fields, types and values: parse_completion_request
// either accepts them or throws ApiError with status 400 and a message naming a
// field; it never throws anything else or crashes. Also raw bytes to the JSON
// parser the server uses.
#include <gtest/gtest.h>

#include <limits>
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
            static const char* keys[] = {"role", "content", "text", "type", "include_usage", "x",
                                         "function", "name", "parameters", "tool_calls"};
            json o = json::object();
            for (unsigned i = 0, n = rng() % 4; i < n; ++i) o[keys[rng() % 10]] = random_value(rng, depth + 1);
            return o;
        }
    }
}

TEST(ApiFuzz, RandomBodiesGiveParamsOr400) {
    static const char* fields[] = {"model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature",
                                   "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty",
                                   "repeat_penalty", "stream", "stream_options", "n", "tools", "ignore_eos",
                                   "tool_choice", "parallel_tool_calls"};
    constexpr unsigned kFields = sizeof(fields) / sizeof(fields[0]);
    std::mt19937 rng(20261123);
    int accepted = 0, rejected = 0;
    for (int it = 0; it < 20000; ++it) {
        json body = json::object();
        if (rng() % 3) body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
        if (rng() % 3) body["prompt"] = "hi";
        for (unsigned i = 0, n = rng() % 5; i < n; ++i) body[fields[rng() % kFields]] = random_value(rng, 0);
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

// Tools and tool_choice built from plausible and broken pieces: parameters or a 400,
// and a forced call always comes with its grammar.
TEST(ApiFuzz, ToolsAndToolChoiceGiveParamsOr400) {
    const json schemas[] = {
        json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})"),
        json::parse(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}})"),
        json::parse(R"({"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"enum": [1, 2]}}})"),
        json::parse(R"({"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}})"),
        json::parse(R"({"type": "string", "pattern": "^a"})"),
        json::parse(R"({"type": "object", "properties": {"s": {"$ref": "#/$defs/missing"}}})"),
        json::parse(R"({"type": 5})"),
        json(nullptr), json("text"), json::array(), json::object()};
    const char* names[] = {"f", "g", "", "get_weather"};
    std::mt19937 rng(29);
    int accepted = 0, rejected = 0, forced = 0;
    for (int it = 0; it < 3000; ++it) {
        json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
        json tools = json::array();
        for (unsigned i = 0, n = rng() % 4; i < n; ++i) {
            json fn = json::object();
            if (rng() % 8) fn["name"] = names[rng() % 4];
            if (rng() % 3) fn["parameters"] = schemas[rng() % 11];
            json t = {{"type", rng() % 10 ? json("function") : json(3)}, {"function", fn}};
            if (rng() % 12 == 0) t = random_value(rng, 0);
            tools.push_back(t);
        }
        if (rng() % 6) body["tools"] = tools;
        switch (rng() % 7) {
            case 0: break;
            case 1: body["tool_choice"] = "none"; break;
            case 2: body["tool_choice"] = "auto"; break;
            case 3: body["tool_choice"] = "required"; break;
            case 4: body["tool_choice"] = {{"type", "function"}, {"function", {{"name", names[rng() % 4]}}}}; break;
            case 5: body["tool_choice"] = random_value(rng, 0); break;
            default: body["tool_choice"] = {{"type", "function"}, {"function", random_value(rng, 0)}}; break;
        }
        if (rng() % 3 == 0) body["parallel_tool_calls"] = random_value(rng, 0);
        if (rng() % 10 == 0) body["response_format"] = {{"type", "json_object"}};
        try {
            const CompletionParams p = parse_completion_request(body, Endpoint::Chat, rng() % 2 ? ToolFormat::Hermes
                                                                                               : ToolFormat::Llama3Json);
            ++accepted;
            if (p.tool_choice == ToolChoice::Required || p.tool_choice == ToolChoice::Named) {
                ++forced;
                EXPECT_TRUE(p.grammar != nullptr) << body.dump();
            }
            if (p.tool_choice == ToolChoice::None) {
                EXPECT_TRUE(p.tools.is_null());
            }
        } catch (const ApiError& e) {
            ++rejected;
            EXPECT_EQ(e.status, 400) << body.dump();
        }
    }
    EXPECT_GT(accepted, 300);
    EXPECT_GT(rejected, 300);
    EXPECT_GT(forced, 40);
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

// Out-of-range and non-finite sampling values: 400 invalid_value with the message the
// CLI gives for the same option (engine/option_limits.h), spelled with the field name.
// (A body with 1e999 in it never gets here: the JSON parser refuses it.)
std::string refusal(const json& fields, const char* code = "invalid_value") {
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
    for (const auto& [k, v] : fields.items()) body[k] = v;
    try {
        (void)parse_completion_request(body, Endpoint::Chat);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, code) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << body.dump();
    return "";
}

TEST(ApiLimits, OutOfRangeSamplingValuesNameTheFieldAndRange) {
    EXPECT_EQ(refusal({{"top_p", 5}}), "'top_p' must be between 0 and 1 (got 5)");
    EXPECT_EQ(refusal({{"temperature", -0.5}}), "'temperature' must be between 0 and 2 (got -0.5)");
    EXPECT_EQ(refusal({{"top_k", -5}}), "'top_k' must be between 0 and 1073741824 (got -5)");
    EXPECT_EQ(refusal({{"min_p", -1}}), "'min_p' must be between 0 and 1 (got -1)");
    EXPECT_EQ(refusal({{"repeat_penalty", 0}}), "'repeat_penalty' must be between 0.01 and 10 (got 0)");
    EXPECT_EQ(refusal({{"frequency_penalty", 2.5}}), "'frequency_penalty' must be between -2 and 2 (got 2.5)");
    EXPECT_EQ(refusal({{"presence_penalty", -3}}), "'presence_penalty' must be between -2 and 2 (got -3)");
    EXPECT_EQ(refusal({{"max_tokens", -2}}), "'max_tokens' must be between -1 and 1073741824 (got -2)");
    EXPECT_EQ(refusal({{"max_completion_tokens", int64_t(1) << 40}}),
              "'max_completion_tokens' must be between -1 and 1073741824 (got 1099511627776)");
    // An unsigned value past int64 is refused as itself, not as the negative it would wrap to.
    EXPECT_EQ(refusal({{"top_k", uint64_t(-1)}}), "'top_k' must be between 0 and 1073741824 (got 1.8446744073709552e+19)");
    EXPECT_EQ(refusal({{"temperature", 1e300}}), "'temperature' must be between 0 and 2 (got 1e+300)");
}

TEST(ApiLimits, NonFiniteValuesAreRefused) {
    // Only a caller that builds the json in C++ can hold these (JSON text has no inf/nan).
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(refusal({{"temperature", inf}}), "'temperature' must be between 0 and 2 (got inf)");
    EXPECT_EQ(refusal({{"top_p", -inf}}), "'top_p' must be between 0 and 1 (got -inf)");
    EXPECT_EQ(refusal({{"min_p", nan}}), "'min_p' must be between 0 and 1 (got nan)");
    EXPECT_EQ(refusal({{"repeat_penalty", nan}}), "'repeat_penalty' must be between 0.01 and 10 (got nan)");
}

TEST(ApiLimits, WrongTypesAndGoodBounds) {
    EXPECT_EQ(refusal({{"top_p", "0.5"}}), "'top_p' must be a number");
    EXPECT_EQ(refusal({{"top_k", 1.5}}), "'top_k' must be an integer");
    EXPECT_EQ(refusal({{"n", 2}}, "unsupported_value"), "only n = 1 is supported");
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                 {"temperature", 2},   {"top_p", 0},          {"min_p", 1},           {"top_k", 0},
                 {"repeat_penalty", 0.01}, {"frequency_penalty", -2}, {"presence_penalty", 2}, {"max_tokens", -1}};
    const CompletionParams p = parse_completion_request(body, Endpoint::Chat);
    EXPECT_EQ(p.sampling.temperature, 2.f);
    EXPECT_EQ(p.sampling.top_p, 0.f);
    EXPECT_EQ(p.sampling.repeat_penalty, 0.01f);
    EXPECT_EQ(p.max_tokens, -1);  // -1, as when absent: until end of generation or the context is full
}

}  // namespace
}  // namespace vega::server
