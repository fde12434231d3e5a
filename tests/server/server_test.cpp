// vega serve against stories260K (CPU), through real HTTP on the loopback: the
// OpenAI response shapes, streamed text == non-streamed text, concurrency that
// changes nothing, a client hanging up, every error status, the API key, and a
// bounded load test (200 requests, 16 at a time).
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "run_vega.h"
#include "serve_process.h"
#include "test_data.h"

namespace vega::test {
namespace {

using json = nlohmann::json;

struct Reply {
    int status = -1;
    std::string body;
    json j;
};

Reply post(int port, const std::string& path, const std::string& body, const httplib::Headers& h = {}) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    Reply r;
    auto res = c.Post(path.c_str(), h, body, "application/json");
    if (!res) return r;
    r.status = res->status;
    r.body = res->body;
    r.j = json::parse(res->body, nullptr, false);
    return r;
}
Reply post(int port, const std::string& path, const json& body, const httplib::Headers& h = {}) {
    return post(port, path, body.dump(), h);
}
Reply get(int port, const std::string& path, const httplib::Headers& h = {}) {
    httplib::Client c("127.0.0.1", port);
    Reply r;
    auto res = c.Get(path.c_str(), h);
    if (!res) return r;
    r.status = res->status;
    r.body = res->body;
    r.j = json::parse(res->body, nullptr, false);
    return r;
}

// SSE: every `data:` event; done = the stream ended with [DONE].
struct Stream {
    int status = -1;
    std::vector<json> events;
    bool done = false;
};
Stream stream(int port, const std::string& path, json body) {
    body["stream"] = true;
    Reply r = post(port, path, body);
    Stream s;
    s.status = r.status;
    std::istringstream in(r.body);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        const std::string d = line.substr(6);
        if (d == "[DONE]") s.done = true;
        else s.events.push_back(json::parse(d));
    }
    return s;
}

std::string chat_text(const Reply& r) { return r.j["choices"][0]["message"]["content"].get<std::string>(); }

int64_t metric(int port, const std::string& name, const httplib::Headers& h = {}) {
    const Reply m = get(port, "/metrics", h);
    std::smatch k;
    const std::regex re("\n" + name + " ([0-9]+)");
    const std::string body = "\n" + m.body;
    return std::regex_search(body, k, re) ? std::stoll(k[1].str()) : -1;
}

json chat_body(const std::string& user, int max_tokens) {
    return json{{"model", "stories"},
                {"messages", json::array({{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", user}}})},
                {"max_tokens", max_tokens},
                {"temperature", 0}};
}

class Serve : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (data_dir().empty()) return;
        srv_ = new ServeProcess(stories_serve_args("--parallel 4 -c 256 --chat-template-file " + quote(chatml_template_file())));
    }
    static void TearDownTestSuite() {
        delete srv_;
        srv_ = nullptr;
    }
    void SetUp() override {
        VEGA_REQUIRE_TEST_DATA();
        ASSERT_TRUE(srv_ && srv_->ok()) << (srv_ ? srv_->log() : "");
    }
    static int port() { return srv_->port(); }
    static ServeProcess* srv_;
};
ServeProcess* Serve::srv_ = nullptr;

TEST_F(Serve, HealthModelsAndResponseShapes) {
    EXPECT_EQ(get(port(), "/health").j["status"], "ok");
    const Reply m = get(port(), "/v1/models");
    EXPECT_EQ(m.j["object"], "list");
    EXPECT_EQ(m.j["data"][0]["id"], "stories260K.gguf");

    const Reply c = post(port(), "/v1/chat/completions", chat_body("Once upon a time", 12));
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.j["object"], "chat.completion");
    EXPECT_EQ(c.j["model"], "stories");
    EXPECT_TRUE(c.j["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    EXPECT_GT(c.j["created"].get<int64_t>(), 1700000000);
    EXPECT_EQ(c.j["choices"][0]["message"]["role"], "assistant");
    EXPECT_FALSE(chat_text(c).empty());
    EXPECT_EQ(c.j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(c.j["usage"]["completion_tokens"], 12);
    EXPECT_EQ(c.j["usage"]["total_tokens"].get<int>(),
              c.j["usage"]["prompt_tokens"].get<int>() + c.j["usage"]["completion_tokens"].get<int>());

    const Reply t = post(port(), "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
    ASSERT_EQ(t.status, 200) << t.body;
    EXPECT_EQ(t.j["object"], "text_completion");
    EXPECT_EQ(t.j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(t.j["usage"]["prompt_tokens"], 5);  // BOS + 4 prompt tokens
    // Greedy completion text = what `vega run` generates for the same prompt.
    const CmdResult run = run_vega("run -m " + quote(data_file("models/stories260K.gguf")) +
                                   " --device cpu -p 'Once upon a time' -n 8 --temp 0 -q");
    ASSERT_EQ(run.exit_code, 0);
    EXPECT_EQ("Once upon a time" + t.j["choices"][0]["text"].get<std::string>() + "\n", run.out);
}

TEST_F(Serve, StreamedTextEqualsNonStreamedText) {
    for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
        const bool chat = std::string(path).find("chat") != std::string::npos;
        json body = chat ? chat_body("The little dog", 30) : json{{"prompt", "The little dog"}, {"max_tokens", 30}, {"temperature", 0}};
        const Reply whole = post(port(), path, body);
        ASSERT_EQ(whole.status, 200) << whole.body;
        body["stream_options"] = {{"include_usage", true}};
        const Stream s = stream(port(), path, body);
        ASSERT_EQ(s.status, 200);
        ASSERT_TRUE(s.done) << path;
        ASSERT_GE(s.events.size(), 3u);
        std::string text;
        const json* final_chunk = nullptr;
        for (const json& e : s.events) {
            EXPECT_EQ(e["object"], chat ? "chat.completion.chunk" : "text_completion");
            if (e["choices"].empty()) continue;  // the usage chunk
            const json& ch = e["choices"][0];
            if (!ch["finish_reason"].is_null()) final_chunk = &e;
            if (chat && ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
            if (!chat) text += ch["text"].get<std::string>();
        }
        if (chat) {
            EXPECT_EQ(s.events[0]["choices"][0]["delta"]["role"], "assistant");
        }
        ASSERT_NE(final_chunk, nullptr);
        EXPECT_EQ((*final_chunk)["choices"][0]["finish_reason"], "length");
        const json& usage = s.events.back();
        EXPECT_TRUE(usage["choices"].empty());
        EXPECT_EQ(usage["usage"]["completion_tokens"], 30);
        EXPECT_EQ(text, chat ? chat_text(whole) : whole.j["choices"][0]["text"].get<std::string>()) << path;
    }
}

TEST_F(Serve, StopStringsEndTheText) {
    const json body{{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}};
    const Reply full = post(port(), "/v1/completions", body);
    const std::string text = full.j["choices"][0]["text"];
    const size_t cut = text.find(" Lily");
    ASSERT_NE(cut, std::string::npos) << text;
    json stop = body;
    stop["stop"] = json::array({"zzz", " Lily"});
    const Reply r = post(port(), "/v1/completions", stop);
    EXPECT_EQ(r.j["choices"][0]["text"], text.substr(0, cut));
    EXPECT_EQ(r.j["choices"][0]["finish_reason"], "stop");
    const Stream s = stream(port(), "/v1/completions", stop);
    std::string streamed;
    for (const json& e : s.events) streamed += e["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(streamed, text.substr(0, cut));
}

std::string prompt_of(int i) {
    static const char* starts[] = {"Once upon a time", "The little dog", "Lily wanted to", "One day, a big",
                                   "Tom and Sue went", "The sun was", "A bird sat on", "There was a girl named"};
    return starts[i % 8];
}

TEST_F(Serve, ConcurrentRequestsReturnWhatEachReturnsAlone) {
    const int n = 16;
    std::vector<std::string> alone(n), together(n);
    auto body = [](int i) { return json{{"prompt", prompt_of(i)}, {"max_tokens", 16 + i}, {"temperature", 0}}; };
    for (int i = 0; i < n; ++i) alone[size_t(i)] = post(port(), "/v1/completions", body(i)).j["choices"][0]["text"];
    std::vector<std::thread> th;
    for (int i = 0; i < n; ++i)
        th.emplace_back([&, i] { together[size_t(i)] = post(port(), "/v1/completions", body(i)).j["choices"][0]["text"]; });
    for (auto& t : th) t.join();
    for (int i = 0; i < n; ++i) EXPECT_EQ(together[size_t(i)], alone[size_t(i)]) << "request " << i;
}

TEST_F(Serve, ChatHistoryReusesTheSlotCache) {
    const int64_t cached0 = metric(port(), "vega_prompt_tokens_cached_total");
    json body = chat_body("Once upon a time", 10);
    const Reply first = post(port(), "/v1/chat/completions", body);
    body["messages"].push_back({{"role", "assistant"}, {"content", chat_text(first)}});
    body["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
    const Reply second = post(port(), "/v1/chat/completions", body);
    ASSERT_EQ(second.status, 200);
    const int cached = second.j["usage"]["prompt_tokens_details"]["cached_tokens"];
    EXPECT_GT(cached, first.j["usage"]["prompt_tokens"].get<int>() - 2) << second.body;
    EXPECT_GE(metric(port(), "vega_prompt_tokens_cached_total") - cached0, cached);
}

// The `grammar` field (llama.cpp's server extension): a random-weight model's text
// follows it, streamed or not, at temperature 1; a bad grammar is a 400 naming line and
// column.
TEST_F(Serve, GrammarFieldConstrainsTheText) {
    const std::string g = R"(root ::= "{\"n\": " [1-9] [0-9]{0,2} ", \"w\": \"" [a-z]{1,6} "\"}")";
    for (int seed = 1; seed <= 4; ++seed) {
        json body = {{"prompt", "Lily"}, {"max_tokens", 40}, {"temperature", 1}, {"seed", seed}, {"grammar", g}};
        const Reply r = post(port(), "/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        const std::string text = r.j["choices"][0]["text"];
        const json j = json::parse(text, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << "seed " << seed << ": '" << text << "'";
        EXPECT_TRUE(j["n"].is_number_integer() && j["w"].is_string()) << text;
        EXPECT_EQ(r.j["choices"][0]["finish_reason"], "stop") << text;  // complete, then end of generation
        std::string streamed;
        for (const json& ev : stream(port(), "/v1/completions", body).events)
            for (const json& ch : ev["choices"]) streamed += ch["text"].get<std::string>();
        EXPECT_EQ(streamed, text) << "seed " << seed;
    }
    json chat = chat_body("Say a number", 20);
    chat["grammar"] = "root ::= [0-9]{3}";
    const Reply c = post(port(), "/v1/chat/completions", chat);
    ASSERT_EQ(c.status, 200) << c.body;
    const std::string digits = chat_text(c);
    EXPECT_EQ(digits.size(), 3u) << digits;
    EXPECT_EQ(digits.find_first_not_of("0123456789"), std::string::npos) << digits;
    json bad = chat_body("x", 3);
    bad["grammar"] = "root ::= \"a\" nowhere";
    const Reply e = post(port(), "/v1/chat/completions", bad);
    EXPECT_EQ(e.status, 400) << e.body;
    EXPECT_NE(e.body.find("'grammar': line 1, column 14: rule 'nowhere' is used but not defined"), std::string::npos)
        << e.body;
    bad["grammar"] = 5;
    EXPECT_EQ(post(port(), "/v1/chat/completions", bad).status, 400);
    // /metrics counts the constrained tokens and the rows the device's candidates did not serve.
    const int64_t constrained = metric(port(), "vega_grammar_tokens_total");
    const int64_t whole = metric(port(), "vega_grammar_whole_logits_rows_total");
    EXPECT_GE(constrained, int64_t(3 + 4 * 2 * 8)) << "(at least 8 tokens a completion, 3 digits)";
    EXPECT_GE(whole, 0);
    EXPECT_LE(whole, constrained);
    EXPECT_NE(get(port(), "/metrics").body.find("\nvega_grammar_seconds_total "), std::string::npos);
}

// response_format: json_schema answers parse and follow the schema at temperature 1 (a
// random-weight model writes such JSON only through the grammar); json_object answers
// are objects; a schema keyword the compiler refuses is a 400 naming it.
TEST_F(Serve, ResponseFormatJsonSchemaAndJsonObject) {
    const json schema = json::parse(R"({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 10}, "n": {"type": "integer", "minimum": 0, "maximum": 50},
        "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
        "required": ["name", "n", "ok"], "additionalProperties": false})");
    for (int seed = 1; seed <= 12; ++seed) {
        json body = chat_body("Describe a cat", 120);
        body["temperature"] = 1, body["seed"] = seed;
        body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "cat"}, {"strict", true}, {"schema", schema}}}};
        const Reply r = post(port(), "/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        const std::string text = chat_text(r);
        const json j = json::parse(text, nullptr, false);
        ASSERT_TRUE(j.is_object()) << "seed " << seed << ": '" << text << "'";
        EXPECT_TRUE(j["name"].is_string() && j["name"].get<std::string>().size() <= 10) << text;
        EXPECT_TRUE(j["n"].is_number_integer() && j["n"] >= 0 && j["n"] <= 50) << text;
        EXPECT_TRUE(j["ok"].is_boolean()) << text;
        for (const auto& [k, v] : j.items()) EXPECT_TRUE(k == "name" || k == "n" || k == "ok" || k == "tags") << text;
        if (j.contains("tags")) {
            EXPECT_LE(j["tags"].size(), 3u) << text;
            for (const json& t : j["tags"]) EXPECT_TRUE(t == "a" || t == "b") << text;
        }
    }
    json obj = chat_body("Say something", 60);
    obj["temperature"] = 1, obj["seed"] = 5;
    obj["response_format"] = {{"type", "json_object"}};
    const Reply o = post(port(), "/v1/chat/completions", obj);
    ASSERT_EQ(o.status, 200) << o.body;
    if (o.j["choices"][0]["finish_reason"] == "stop")  // (a long object may end at max_tokens)
        EXPECT_TRUE(json::parse(chat_text(o), nullptr, false).is_object()) << chat_text(o);
    json bad = chat_body("x", 3);
    bad["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "^a"}}}}}};
    const Reply e = post(port(), "/v1/chat/completions", bad);
    EXPECT_EQ(e.status, 400) << e.body;
    EXPECT_NE(e.body.find("'pattern' at #: not supported"), std::string::npos) << e.body;
    bad["response_format"] = {{"type", "yaml"}};
    EXPECT_EQ(post(port(), "/v1/chat/completions", bad).status, 400);
}

// Tools: tool_choice required / a named function give calls (finish_reason tool_calls)
// whose arguments follow the function's schema, at temperature 1 on a random-weight
// model (only the grammar makes such calls); streamed calls reassemble to the same call;
// none gives text; the OpenAI tool round trip renders; bad tools and choices are 400s.
json weather_tools() {
    return json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
          "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}, "b": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["a", "b"], "additionalProperties": false}}}])");
}

void expect_valid_call(const json& call, const std::string& what) {
    ASSERT_TRUE(call.is_object()) << what;
    EXPECT_EQ(call["type"], "function") << what;
    ASSERT_TRUE(call["id"].is_string()) << what;
    EXPECT_TRUE(std::regex_match(call["id"].get<std::string>(), std::regex("[A-Za-z0-9]{9}"))) << call.dump();
    const std::string name = call["function"]["name"];
    ASSERT_TRUE(call["function"]["arguments"].is_string()) << what;
    const json a = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(a.is_object()) << what << ": " << call.dump();
    if (name == "get_weather") {
        ASSERT_TRUE(a.contains("city") && a["city"].is_string()) << what << ": " << a.dump();
        EXPECT_LE(a["city"].get<std::string>().size(), 12u) << a.dump();
        if (a.contains("unit")) EXPECT_TRUE(a["unit"] == "celsius" || a["unit"] == "fahrenheit") << a.dump();
        for (const auto& [k, v] : a.items()) EXPECT_TRUE(k == "city" || k == "unit") << a.dump();
    } else {
        ASSERT_EQ(name, "add") << what;
        EXPECT_TRUE(a["a"].is_number_integer() && a["a"] >= 0 && a["a"] <= 99) << a.dump();
        EXPECT_TRUE(a["b"].is_number_integer() && a["b"] >= 0 && a["b"] <= 99) << a.dump();
        EXPECT_EQ(a.size(), 2u) << a.dump();
    }
}

TEST_F(Serve, ToolCallsRequiredNamedStreamedAndRoundTrip) {
    int checked = 0;
    for (int seed = 1; seed <= 8; ++seed) {
        // (stories260K writes a byte or two a token: a call is ~100 tokens; parallel calls
        // may go on past the 256-token context, so most requests ask for one call)
        json body = chat_body("Weather?", 200);
        body["temperature"] = 1, body["seed"] = seed;
        body["tools"] = weather_tools();
        body["tool_choice"] = seed % 2 ? json("required") : json{{"type", "function"}, {"function", {{"name", "add"}}}};
        body["parallel_tool_calls"] = seed > 6;
        const Reply r = post(port(), "/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        const json& ch = r.j["choices"][0];
        const std::string what = "seed " + std::to_string(seed) + ": " + r.body;
        if (ch["finish_reason"] == "length") continue;  // (a call cut by max_tokens is text)
        EXPECT_EQ(ch["finish_reason"], "tool_calls") << what;
        const json& calls = ch["message"]["tool_calls"];
        ASSERT_TRUE(calls.is_array() && !calls.empty()) << what;
        EXPECT_TRUE(ch["message"]["content"].is_null()) << what;
        if (seed <= 6) EXPECT_EQ(calls.size(), 1u) << what;
        for (const json& c : calls) {
            expect_valid_call(c, what);
            if (seed % 2 == 0) EXPECT_EQ(c["function"]["name"], "add") << what;
        }
        // Streamed: deltas by index reassemble to the same calls.
        const Stream st = stream(port(), "/v1/chat/completions", body);
        ASSERT_TRUE(st.done) << what;
        json got = json::array();
        std::string finish;
        for (const json& ev : st.events) {
            if (ev["choices"].empty()) continue;
            const json& d = ev["choices"][0]["delta"];
            if (!ev["choices"][0]["finish_reason"].is_null()) finish = ev["choices"][0]["finish_reason"];
            if (!d.contains("tool_calls")) continue;
            for (const json& t : d["tool_calls"]) {
                const size_t i = t["index"];
                while (got.size() <= i) got.push_back({{"function", {{"arguments", ""}}}});
                if (t.contains("id")) got[i]["id"] = t["id"], got[i]["type"] = t["type"], got[i]["function"]["name"] = t["function"]["name"];
                got[i]["function"]["arguments"] = got[i]["function"]["arguments"].get<std::string>() +
                                                  t["function"]["arguments"].get<std::string>();
            }
        }
        EXPECT_EQ(finish, "tool_calls") << what;
        ++checked;
        ASSERT_EQ(got.size(), calls.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) {
            expect_valid_call(got[i], what + " (streamed)");
            EXPECT_EQ(got[i]["function"]["name"], calls[i]["function"]["name"]);
            EXPECT_EQ(got[i]["function"]["arguments"], calls[i]["function"]["arguments"]);
        }
    }
    EXPECT_GE(checked, 5) << "too many replies cut by max_tokens";
    // none: the model does not see the tools; plain text.
    json none = chat_body("Weather?", 10);
    none["tools"] = weather_tools(), none["tool_choice"] = "none";
    const Reply n = post(port(), "/v1/chat/completions", none);
    ASSERT_EQ(n.status, 200) << n.body;
    EXPECT_TRUE(n.j["choices"][0]["message"]["content"].is_string());
    EXPECT_FALSE(n.j["choices"][0]["message"].contains("tool_calls"));
    // The round trip as the openai client sends it: null content, arguments a string.
    json trip = chat_body("x", 8);
    trip["tools"] = weather_tools();
    trip["messages"].push_back({{"role", "assistant"}, {"content", nullptr},
                                {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                                              {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}})}});
    trip["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"temp\": 18}"}});
    const Reply t = post(port(), "/v1/chat/completions", trip);
    EXPECT_EQ(t.status, 200) << t.body;
    // Refusals name the problem.
    auto expect_400 = [&](json b, const std::string& needle) {
        const Reply e = post(port(), "/v1/chat/completions", b);
        EXPECT_EQ(e.status, 400) << e.body;
        EXPECT_NE(e.body.find(needle), std::string::npos) << e.body;
    };
    json b = chat_body("x", 3);
    b["tool_choice"] = "required";
    expect_400(b, "no 'tools'");
    b["tools"] = weather_tools();
    b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
    expect_400(b, "'nope', which is not in 'tools'");
    b["tool_choice"] = "sometimes";
    expect_400(b, "'tool_choice' must be");
    b["tool_choice"] = "required";
    b["tools"][0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^P";
    expect_400(b, "'pattern'");
    b["tools"] = json::array({{{"type", "function"}, {"function", {{"description", "no name"}}}}});
    expect_400(b, "'tools[0].function.name'");
}

// logprobs: chat logprobs/top_logprobs and completions logprobs in OpenAI's shapes, one
// entry per generated token (the text is their concatenation), logprob <= 0, the
// alternatives sorted and holding the chosen token at temperature 0; streamed too.
TEST_F(Serve, LogprobsChatAndCompletions) {
    json body = chat_body("Once upon a time", 12);
    body["logprobs"] = true, body["top_logprobs"] = 3;
    const Reply r = post(port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json& content = r.j["choices"][0]["logprobs"]["content"];
    ASSERT_TRUE(content.is_array()) << r.body;
    EXPECT_EQ(content.size(), 12u);
    std::string joined;
    for (const json& t : content) {
        joined += t["token"].get<std::string>();
        EXPECT_LE(t["logprob"].get<double>(), 0.0);
        EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
        ASSERT_EQ(t["top_logprobs"].size(), 3u);
        for (size_t i = 1; i < 3; ++i) EXPECT_LE(t["top_logprobs"][i]["logprob"], t["top_logprobs"][i - 1]["logprob"]);
        EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]) << "temperature 0 takes the likeliest token";
        EXPECT_DOUBLE_EQ(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>());
    }
    EXPECT_EQ(joined, chat_text(r));
    const Stream st = stream(port(), "/v1/chat/completions", body);
    size_t n = 0;
    for (const json& ev : st.events)
        if (!ev["choices"].empty() && ev["choices"][0].contains("logprobs") && ev["choices"][0]["logprobs"].is_object())
            for (const json& t : ev["choices"][0]["logprobs"]["content"]) EXPECT_EQ(t["token"], content[n++]["token"]);
    EXPECT_EQ(n, content.size());
    // Off unless asked.
    EXPECT_TRUE(post(port(), "/v1/chat/completions", chat_body("x", 3)).j["choices"][0]["logprobs"].is_null());
    // Completions: logprobs N.
    const json comp = {{"prompt", "The little dog"}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 2}};
    const Reply c = post(port(), "/v1/completions", comp);
    ASSERT_EQ(c.status, 200) << c.body;
    const json& lp = c.j["choices"][0]["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 8u) << c.body;
    std::string text;
    for (size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(lp["text_offset"][i].get<size_t>(), text.size());
        text += lp["tokens"][i].get<std::string>();
        EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
        EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    }
    EXPECT_EQ(text, c.j["choices"][0]["text"]);
    // Refusals.
    json bad = chat_body("x", 3);
    bad["top_logprobs"] = 3;
    EXPECT_EQ(post(port(), "/v1/chat/completions", bad).status, 400);
    bad["logprobs"] = true, bad["top_logprobs"] = 21;
    EXPECT_EQ(post(port(), "/v1/chat/completions", bad).status, 400);
}

TEST_F(Serve, ErrorsUseOpenAiErrorObjects) {
    auto expect_error = [](const Reply& r, int status, const std::string& needle) {
        EXPECT_EQ(r.status, status) << r.body;
        ASSERT_TRUE(r.j.is_object() && r.j.contains("error")) << r.body;
        const json& e = r.j["error"];
        EXPECT_TRUE(e["message"].is_string());
        EXPECT_TRUE(e["type"].is_string());
        EXPECT_TRUE(e.contains("code"));
        EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << e.dump();
    };
    expect_error(post(port(), "/v1/chat/completions", std::string("{not json")), 400, "not valid JSON");
    expect_error(post(port(), "/v1/chat/completions", json{{"max_tokens", 3}}), 400, "'messages' is required");
    expect_error(post(port(), "/v1/completions", json::object()), 400, "'prompt' is required");
    expect_error(post(port(), "/v1/chat/completions", json{{"messages", "hi"}}), 400, "'messages' must be an array");
    json bad_temp = chat_body("x", 3);
    bad_temp["temperature"] = "hot";
    expect_error(post(port(), "/v1/chat/completions", bad_temp), 400, "'temperature' must be a number");
    json bad_n = chat_body("x", 3);
    bad_n["n"] = 2;
    expect_error(post(port(), "/v1/chat/completions", bad_n), 400, "n = 1");
    json bad_stop = chat_body("x", 3);
    bad_stop["stop"] = 5;
    expect_error(post(port(), "/v1/chat/completions", bad_stop), 400, "'stop'");
    std::string long_prompt;
    for (int i = 0; i < 300; ++i) long_prompt += " dog";
    expect_error(post(port(), "/v1/completions", json{{"prompt", long_prompt}}), 400, "context");
    expect_error(get(port(), "/v1/nothing"), 404, "unknown endpoint");
}

// The families whose replies are more than a marker around JSON, each with its real
// template (DeepSeek V3.2 and V4 DSML, MiniMax M2, gemma 4, gpt-oss harmony, LFM2.5's Python
// calls; Apriel 1.6, whose prompt opens its reasoning): a forced call
// (written in the Hermes form every parser reads) comes back as tool_calls, streamed and
// not, through the family's splitter with the reply rendered as the family needs (special
// tokens shown); a request without tools answers text; the tool round trip renders.
TEST(ServeTemplates, ForcedCallsThroughTheNewFamilies) {
    VEGA_REQUIRE_TEST_DATA();
    // (gpt-oss's template adds each tool's description to a string: one without is an error
    // there, as in jinja2)
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"],
        "additionalProperties": false}}}])");
    for (const char* name : {"deepseek-ai-DeepSeek-V3.2.json", "deepseek-ai-DeepSeek-V4-Flash-0731.json", "MiniMax-M2.json",
                             "google-gemma-4-31B-it.json", "openai-gpt-oss-120b.json", "Apriel-1.6-15b-Thinker-fixed.json",
                             "LFM2.5-8B-A1B.json"}) {
        const json t = json::parse(read_file(data_file(std::string("templates/") + name)));
        const std::string file = write_temp_file("family.jinja", t["template"].get<std::string>());
        ServeProcess srv(stories_serve_args("--parallel 1 -c 2048 --chat-template-file " + quote(file)));
        ASSERT_TRUE(srv.ok()) << name << "\n" << srv.log();
        json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
                     {"max_tokens", 120}, {"temperature", 1}, {"seed", 3}, {"tools", tools},
                     {"tool_choice", "required"}, {"parallel_tool_calls", false}};
        const Reply r = post(srv.port(), "/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << name << ": " << r.body;
        const json& ch = r.j["choices"][0];
        ASSERT_EQ(ch["finish_reason"], "tool_calls") << name << ": " << r.body;
        ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << name << ": " << r.body;
        const json& call = ch["message"]["tool_calls"][0];
        EXPECT_EQ(call["function"]["name"], "get_weather") << name;
        const json args = json::parse(call["function"]["arguments"].get<std::string>());
        EXPECT_TRUE(args["city"].is_string() && args["city"].get<std::string>().size() <= 8) << name << ": " << args.dump();
        std::string streamed_args, finish;
        for (const json& ev : stream(srv.port(), "/v1/chat/completions", body).events) {
            if (ev["choices"].empty()) continue;
            const json& c = ev["choices"][0];
            if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
            EXPECT_FALSE(c["delta"].contains("content") && c["delta"]["content"].is_string() &&
                         c["delta"]["content"].get<std::string>().find("<tool_call>") != std::string::npos)
                << name << ": " << ev.dump();
            for (const json& d : c["delta"].value("tool_calls", json::array()))
                streamed_args += d["function"]["arguments"].get<std::string>();
        }
        EXPECT_EQ(finish, "tool_calls") << name;
        EXPECT_EQ(streamed_args, call["function"]["arguments"].get<std::string>()) << name;
        json plain = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 12}, {"temperature", 0}};
        const Reply p = post(srv.port(), "/v1/chat/completions", plain);
        ASSERT_EQ(p.status, 200) << name << ": " << p.body;
        EXPECT_TRUE(p.j["choices"][0]["message"]["content"].is_string()) << name << ": " << p.body;
        json trip = plain;
        trip["tools"] = tools;
        trip["messages"].push_back({{"role", "assistant"}, {"content", nullptr},
                                    {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                                                  {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}})}});
        trip["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"temp\": 18}"}});
        const Reply tr = post(srv.port(), "/v1/chat/completions", trip);
        EXPECT_EQ(tr.status, 200) << name << ": " << tr.body;
    }
}

TEST(ServeLimits, ApiKeyBodyLimitAndFullQueue) {
    VEGA_REQUIRE_TEST_DATA();
    ServeProcess s(stories_serve_args("--parallel 1 --max-queue 0 -c 2048 --api-key sekret --max-body 2000"));
    ASSERT_TRUE(s.ok()) << s.log();
    const json body{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}};
    EXPECT_EQ(post(s.port(), "/v1/completions", body).status, 401);
    const Reply wrong = post(s.port(), "/v1/completions", body, {{"Authorization", "Bearer nope"}});
    EXPECT_EQ(wrong.status, 401);
    EXPECT_EQ(wrong.j["error"]["code"], "invalid_api_key");
    EXPECT_EQ(get(s.port(), "/v1/models").status, 401);
    EXPECT_EQ(get(s.port(), "/health").status, 200);  // open, for load balancers
    const httplib::Headers key{{"Authorization", "Bearer sekret"}};
    EXPECT_EQ(post(s.port(), "/v1/completions", body, key).status, 200);
    const Reply big = post(s.port(), "/v1/completions", json{{"prompt", std::string(5000, 'a')}}, key);
    EXPECT_EQ(big.status, 413) << big.body;
    EXPECT_TRUE(big.j.contains("error")) << big.body;
    // One slot, no queue: while a long generation runs, another request gets 503.
    std::atomic<int> long_status{0};
    std::thread t([&] {
        long_status = post(s.port(), "/v1/completions",
                           json{{"prompt", "Once"}, {"max_tokens", 2000}, {"temperature", 0}, {"ignore_eos", true}}, key)
                          .status;
    });
    for (int i = 0; i < 400 && metric(s.port(), "vega_slots_busy", key) != 1; ++i)  // the long request holds the slot
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const Reply busy = post(s.port(), "/v1/completions", body, key);
    EXPECT_EQ(busy.status, 503) << busy.body;
    EXPECT_EQ(busy.j["error"]["code"], "queue_full");
    t.join();
    EXPECT_EQ(long_status.load(), 200);
}

// Reads the first SSE event of a long stream over a raw socket, then hangs up.
TEST(ServeLimits, ClientHangingUpFreesItsSlot) {
    VEGA_REQUIRE_TEST_DATA();
    ServeProcess s(stories_serve_args("--parallel 1 -c 8192"));
    ASSERT_TRUE(s.ok()) << s.log();
    const std::string body =
        json{{"prompt", "Once upon a time"}, {"max_tokens", 8000}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}}.dump();
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(s.port()));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(write(fd, req.data(), req.size()), ssize_t(req.size()));
    std::string got;
    char buf[4096];
    while (got.find("data: ") == std::string::npos) {
        const ssize_t n = read(fd, buf, sizeof buf);
        ASSERT_GT(n, 0);
        got.append(buf, size_t(n));
    }
    close(fd);
    // The slot is freed and the request counted as cancelled, long before 8000 tokens.
    int64_t busy = -1, cancelled = -1;
    for (int i = 0; i < 100 && !(busy == 0 && cancelled == 1); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        busy = metric(s.port(), "vega_slots_busy");
        cancelled = metric(s.port(), "vega_requests_cancelled_total");
    }
    EXPECT_EQ(busy, 0);
    EXPECT_EQ(cancelled, 1);
    EXPECT_LT(metric(s.port(), "vega_generated_tokens_total"), 8000);
    // The one slot serves the next request.
    const Reply next = post(s.port(), "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}});
    EXPECT_EQ(next.status, 200) << next.body;
}

// SIGTERM while a long stream runs, with no grace period: the stream ends at once
// with an error event (no [DONE]: it is not a complete answer) and the server exits.
TEST(ServeLimits, SigtermDuringAStreamStopsPromptly) {
    VEGA_REQUIRE_TEST_DATA();
    ServeProcess s(stories_serve_args("--parallel 1 -c 16384 --shutdown-timeout 0"));
    ASSERT_TRUE(s.ok()) << s.log();
    Stream got;
    std::atomic<bool> returned{false};
    std::thread reader([&] {
        got = stream(s.port(), "/v1/completions",
                     json{{"prompt", "Once upon a time"}, {"max_tokens", 16000}, {"temperature", 0}, {"ignore_eos", true}});
        returned = true;
    });
    for (int i = 0; i < 400 && metric(s.port(), "vega_slots_busy") != 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(s.stop_within(3.0)) << s.log();
    reader.join();
    EXPECT_TRUE(returned.load());
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
    EXPECT_NE(s.log().find("stopping"), std::string::npos) << s.log();
    EXPECT_FALSE(got.done);
    ASSERT_FALSE(got.events.empty());
    EXPECT_TRUE(got.events.back().contains("error")) << got.events.back().dump();
}

TEST(ServeLimits, APortInUseIsAClearError) {
    VEGA_REQUIRE_TEST_DATA();
    ServeProcess s(stories_serve_args("--parallel 1"));
    ASSERT_TRUE(s.ok()) << s.log();
    const CmdResult r = run_vega("serve " + stories_serve_args("--host 127.0.0.1 --port " + std::to_string(s.port())));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:" + std::to_string(s.port())), std::string::npos) << r.err;
}

// A random-vocabulary model emits byte tokens that are not UTF-8: responses stay
// valid JSON (U+FFFD in place of bad bytes) and the server stays up.
TEST(ServeLimits, TextThatIsNotUtf8StillGivesJson) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string model = temp_dir() + "/tiny-random.gguf";
    ASSERT_EQ(run_vega("synth --shape tiny --type Q8_0 -o " + quote(model)).exit_code, 0);
    ServeProcess s("-m " + quote(model) + " --device cpu -t 2 -q --parallel 2");
    ASSERT_TRUE(s.ok()) << s.log();
    for (int seed = 1; seed <= 6; ++seed) {
        const json body{{"prompt", "hi"}, {"max_tokens", 64}, {"temperature", 1.5}, {"seed", seed}, {"ignore_eos", true}};
        const Reply r = post(s.port(), "/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        ASSERT_FALSE(r.j.is_discarded()) << r.body;
        EXPECT_EQ(post(s.port(), "/v1/completions", body).j["choices"][0]["text"], r.j["choices"][0]["text"]);
        const Stream st = stream(s.port(), "/v1/completions", body);
        EXPECT_EQ(st.status, 200);
        EXPECT_TRUE(st.done) << "seed " << seed;
    }
    EXPECT_EQ(get(s.port(), "/health").status, 200);
}

// 200 requests, 16 at a time, over 8 prompts: every answer is its prompt's
// answer (nothing lost, nothing mixed up), then the server is idle.
TEST_F(Serve, LoadTestLosesAndMixesNothing) {
    std::vector<std::string> expect(8);
    auto body = [](int i) { return json{{"prompt", prompt_of(i)}, {"max_tokens", 12}, {"temperature", 0}}; };
    for (int i = 0; i < 8; ++i) expect[size_t(i)] = post(port(), "/v1/completions", body(i)).j["choices"][0]["text"];
    std::atomic<int> next{0}, ok{0}, wrong{0}, failed{0};
    std::vector<std::thread> th;
    for (int w = 0; w < 16; ++w)
        th.emplace_back([&] {
            for (int i; (i = next++) < 200;) {
                const Reply r = post(port(), "/v1/completions", body(i));
                if (r.status != 200) ++failed;
                else if (r.j["choices"][0]["text"] != expect[size_t(i % 8)]) ++wrong;
                else ++ok;
            }
        });
    for (auto& t : th) t.join();
    EXPECT_EQ(ok.load(), 200);
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(failed.load(), 0);
    // The engine loop publishes its slot count after the step that answered: a reply can
    // reach the client first. Idle within 5 s, or a slot was never freed.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (metric(port(), "vega_slots_busy") != 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(metric(port(), "vega_slots_busy"), 0);
    EXPECT_EQ(metric(port(), "vega_queue_size"), 0);
}

}  // namespace
}  // namespace vega::test
