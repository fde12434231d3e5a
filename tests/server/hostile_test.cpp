// vega serve against hostile and unusual clients, over raw sockets (stories260K on
// the CPU): nested JSON in every field the server reads, clients that trickle their
// headers or body, half-closed sockets, HTTP/1.0 streams, pipelined requests,
// hang-ups of non-streamed requests, the connection cap, 405/OPTIONS/CORS, bad
// templates, and SIGTERM with requests in flight. Each ends in an HTTP answer or a
// closed connection, never a dead server.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "raw_http.h"
#include "run_vega.h"
#include "serve_process.h"
#include "test_data.h"

namespace vega::test {
namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// One request on its own connection; the first response.
RawResponse roundtrip(int port, const std::string& request, double seconds = 30) {
    RawConn c(port);
    if (!c.ok() || !c.send(request)) return {};
    c.read_until(seconds, [](const std::string& got) {
        const auto r = parse_responses(got);
        return !r.empty() && r[0].complete && (r[0].headers.count("content-length") || r[0].chunked);
    });
    const auto r = parse_responses(c.received());
    return r.empty() ? RawResponse{} : r[0];
}

int64_t metric(int port, const std::string& name) {
    const RawResponse r = roundtrip(port, http_get("/metrics"));
    std::smatch m;
    const std::string body = "\n" + r.body;
    return std::regex_search(body, m, std::regex("\n" + name + " ([0-9]+)")) ? std::stoll(m[1].str()) : -1;
}

bool healthy(int port) { return roundtrip(port, http_get("/health"), 5).status == 200; }

json completion(int max_tokens, bool stream = false) {
    return json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
                {"stream", stream}};
}

// Waits until /metrics shows `busy` busy slots; false after `seconds`.
bool wait_slots_busy(int port, int busy, double seconds = 10) {
    const auto t0 = clock_type::now();
    while (seconds_since(t0) < seconds) {
        if (metric(port, "vega_slots_busy") == busy) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
}

class Hostile : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (data_dir().empty()) return;
        srv_ = new ServeProcess(stories_serve_args("--parallel 2 -c 2048 --max-connections 400 --timeout-header 2 --timeout-body 2 "
                                           "--timeout-idle 2 --cors http://app.example --chat-template-file " +
                                           quote(chatml_template_file())));
    }
    static void TearDownTestSuite() {
        delete srv_;
        srv_ = nullptr;
    }
    void SetUp() override {
        VEGA_REQUIRE_TEST_DATA();
        ASSERT_TRUE(srv_ && srv_->ok()) << (srv_ ? srv_->log() : "");
    }
    void TearDown() override {
        if (srv_ && srv_->ok()) {
            EXPECT_TRUE(healthy(port())) << "the server is down after the test\n" << srv_->log();
        }
    }
    static int port() { return srv_->port(); }
    static ServeProcess* srv_;
};
ServeProcess* Hostile::srv_ = nullptr;

std::string nested(size_t depth, const std::string& inner = "1") {
    return std::string(depth, '[') + inner + std::string(depth, ']');
}
std::string nested_objects(size_t depth) {
    std::string s;
    s.reserve(depth * 6);
    for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
    s += "1";
    s.append(depth, '}');
    return s;
}

// Nesting from 10^3 to 10^6 levels in each field the server reads: a 400 that names
// the limit; a sane nesting still works.
TEST_F(Hostile, DeeplyNestedJsonInEveryFieldIsA400) {
    const std::string msgs_ok = R"([{"role":"user","content":"hi"}])";
    auto chat_with = [&](const std::string& field_json) {
        return R"({"max_tokens":2,"temperature":0,"messages":)" + msgs_ok + "," + field_json + "}";
    };
    for (size_t depth : {size_t(1000), size_t(10000), size_t(100000), size_t(1000000)}) {
        const std::string d = nested(depth);
        const std::vector<std::pair<std::string, std::string>> cases = {
            {"/v1/chat/completions", R"({"messages":)" + d + "}"},
            {"/v1/chat/completions", R"({"messages":[{"role":"user","content":)" + d + "}]}"},
            {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x","extra":)" + d + "}]}"},
            {"/v1/chat/completions", chat_with(R"("tools":[{"type":"function","function":{"name":"f","parameters":)" + d + "}}]")},
            {"/v1/chat/completions", chat_with(R"("stop":)" + d)},
            {"/v1/chat/completions", chat_with(R"("stream_options":)" + d)},
            {"/v1/chat/completions", chat_with(R"("model":)" + d)},
            {"/v1/chat/completions", chat_with(R"("unknown_field":)" + d)},
            {"/v1/completions", R"({"prompt":)" + d + "}"},
            {"/v1/completions", R"({"prompt":"x","logit_bias":)" + nested_objects(depth) + "}"},
            {"/v1/completions", d},
        };
        for (const auto& [path, body] : cases) {
            const RawResponse r = roundtrip(port(), http_post(path, body));
            ASSERT_EQ(r.status, 400) << path << " depth " << depth << ": " << body.substr(0, 80) << "\n" << r.body;
            EXPECT_NE(r.body.find("nests arrays and objects deeper than 128 levels"), std::string::npos) << r.body;
        }
    }
    // 50 levels inside a tool's parameters are fine.
    const std::string ok = R"({"type":"object","properties":{"a":)" + std::string(50, '[') + std::string(50, ']') + "}}";
    const RawResponse r = roundtrip(port(), http_post("/v1/chat/completions",
                                                     chat_with(R"("tools":[{"type":"function","function":{"name":"f","parameters":)" +
                                                               ok + "}}]")));
    EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(Hostile, NumbersOutOfRangeAreA400) {
    for (const char* v : {"1e999", "-1e999", "1e400"}) {
        const std::string body = std::string(R"({"prompt":"x","max_tokens":2,"temperature":)") + v + "}";
        const RawResponse r = roundtrip(port(), http_post("/v1/completions", body));
        EXPECT_EQ(r.status, 400) << v << ": " << r.body;
    }
    const RawResponse r = roundtrip(port(), http_post("/v1/completions", std::string("{\"prompt\":\"\xff\xfe\"}")));
    EXPECT_EQ(r.status, 400) << r.body;  // invalid UTF-8
}

// 200 connections that send their headers a line at a time: a normal request is
// answered within a second meanwhile, and the tricklers get 408 at the deadline.
TEST_F(Hostile, TricklingClientsHoldNoWorker) {
    std::vector<std::unique_ptr<RawConn>> slow;
    for (int i = 0; i < 200; ++i) {
        slow.push_back(std::make_unique<RawConn>(port()));
        ASSERT_TRUE(slow.back()->ok());
        slow.back()->send("POST /v1/completions HTTP/1.1\r\n");
    }
    for (int round = 0; round < 3; ++round) {
        for (auto& c : slow) c->send("X-Slow-" + std::to_string(round) + ": 1\r\n");
        const auto t0 = clock_type::now();
        const RawResponse r = roundtrip(port(), http_post("/v1/completions", completion(4).dump()));
        EXPECT_EQ(r.status, 200) << r.body;
        EXPECT_LT(seconds_since(t0), 1.0);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // --timeout-header 2: every trickler is answered 408 and closed.
    int timed_out = 0;
    for (auto& c : slow) {
        c->read_until(4, nullptr);
        const auto rs = parse_responses(c->received());
        if (!rs.empty() && rs[0].status == 408) ++timed_out;
    }
    EXPECT_EQ(timed_out, 200);
}

TEST_F(Hostile, TrickledBodyEndsAt408) {
    RawConn c(port());
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"));
    const auto t0 = clock_type::now();
    bool closed = false;
    for (int i = 0; i < 40 && !closed; ++i) {  // a byte every 200 ms, up to 8 s
        closed = !c.send(" ") || c.closed_within(0.2);
    }
    const double took = seconds_since(t0);
    EXPECT_TRUE(closed);
    EXPECT_LT(took, 4.0);  // --timeout-body 2
    const auto rs = parse_responses(c.received());
    ASSERT_FALSE(rs.empty()) << c.received();
    EXPECT_EQ(rs[0].status, 408);
}

TEST_F(Hostile, IdleKeepAliveConnectionsClose) {
    RawConn c(port());
    ASSERT_TRUE(c.send(http_get("/health")));
    c.read_until(5, [](const std::string& g) { return g.find("\"ok\"") != std::string::npos; });
    const auto t0 = clock_type::now();
    EXPECT_TRUE(c.closed_within(5));  // --timeout-idle 2
    EXPECT_GT(seconds_since(t0), 1.0);
    EXPECT_EQ(parse_responses(c.received()).size(), 1u);  // closed quietly: no second answer
}

// A client that sends its request and shuts its side gets the whole answer.
TEST_F(Hostile, HalfClosedClientsGetTheirAnswer) {
    for (const bool stream : {false, true}) {
        for (const std::string req : {http_post("/v1/completions", completion(20, stream).dump()), http_get("/health")}) {
            RawConn c(port());
            ASSERT_TRUE(c.send(req));
            c.shut_write();
            ASSERT_TRUE(c.closed_within(20));
            const auto rs = parse_responses(c.received());
            ASSERT_EQ(rs.size(), 1u) << c.received();
            EXPECT_EQ(rs[0].status, 200) << c.received();
            EXPECT_TRUE(rs[0].complete);
            if (req.rfind("POST", 0) != 0) continue;
            if (stream) {
                EXPECT_NE(rs[0].body.find("data: [DONE]"), std::string::npos) << rs[0].body;
            } else {
                const json j = json::parse(rs[0].body);
                EXPECT_EQ(j["usage"]["completion_tokens"], 20);
            }
        }
    }
}

// HTTP/1.0 has no chunked coding: a stream is close-delimited.
TEST_F(Hostile, Http10StreamsAreCloseDelimited) {
    RawConn c(port());
    ASSERT_TRUE(c.send(http_post("/v1/completions", completion(12, true).dump(), "HTTP/1.0")));
    ASSERT_TRUE(c.closed_within(20));
    const auto rs = parse_responses(c.received());
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].status, 200);
    EXPECT_EQ(rs[0].headers.count("transfer-encoding"), 0u) << c.received().substr(0, 300);
    EXPECT_EQ(rs[0].headers.count("content-length"), 0u);
    EXPECT_NE(rs[0].body.find("data: [DONE]"), std::string::npos);
    EXPECT_EQ(rs[0].body.find("\r\n"), std::string::npos) << "chunk framing in an HTTP/1.0 body";
    // A non-streamed HTTP/1.0 answer has a length and closes (no keep-alive asked).
    RawConn d(port());
    ASSERT_TRUE(d.send(http_post("/v1/completions", completion(4).dump(), "HTTP/1.0")));
    ASSERT_TRUE(d.closed_within(20));
    const auto ds = parse_responses(d.received());
    ASSERT_EQ(ds.size(), 1u);
    EXPECT_EQ(ds[0].status, 200);
    EXPECT_TRUE(ds[0].headers.count("content-length"));
}

// Several requests in one write are all answered, in order.
TEST_F(Hostile, PipelinedRequestsAreAnsweredInOrder) {
    RawConn c(port());
    const std::string three = http_get("/health") + http_post("/v1/completions", completion(5).dump()) +
                              http_get("/v1/models") + http_post("/v1/completions", completion(3).dump(), "HTTP/1.1", "Connection: close\r\n");
    ASSERT_TRUE(c.send(three));
    ASSERT_TRUE(c.closed_within(20));
    const auto rs = parse_responses(c.received());
    ASSERT_EQ(rs.size(), 4u) << c.received();
    EXPECT_EQ(json::parse(rs[0].body)["status"], "ok");
    EXPECT_EQ(json::parse(rs[1].body)["usage"]["completion_tokens"], 5);
    EXPECT_EQ(json::parse(rs[2].body)["object"], "list");
    EXPECT_EQ(json::parse(rs[3].body)["usage"]["completion_tokens"], 3);
    // And pipelined with a half-close after them.
    RawConn h(port());
    ASSERT_TRUE(h.send(http_get("/health") + http_get("/v1/models")));
    h.shut_write();
    ASSERT_TRUE(h.closed_within(10));
    EXPECT_EQ(parse_responses(h.received()).size(), 2u);
}

// A non-streamed request whose client hangs up is cancelled within 100 ms.
TEST_F(Hostile, NonStreamedRequestIsCancelledWhenTheClientLeaves) {
    ASSERT_TRUE(wait_slots_busy(port(), 0));
    const int64_t cancelled0 = metric(port(), "vega_requests_cancelled_total");
    for (const bool stream : {false, true}) {
        RawConn c(port());
        ASSERT_TRUE(c.send(http_post("/v1/completions", completion(1900, stream).dump())));
        ASSERT_TRUE(wait_slots_busy(port(), 1));
        c.close();
        const auto t0 = clock_type::now();
        ASSERT_TRUE(wait_slots_busy(port(), 0, 5));
        EXPECT_LT(seconds_since(t0), 0.1) << (stream ? "stream" : "non-stream");
    }
    EXPECT_EQ(metric(port(), "vega_requests_cancelled_total") - cancelled0, 2);
}

TEST_F(Hostile, MethodsOptionsAndCors) {
    RawResponse r = roundtrip(port(), http_get("/v1/completions"));
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.headers["allow"], "POST, OPTIONS");
    r = roundtrip(port(), http_post("/health", "{}"));
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.headers["allow"], "GET, HEAD, OPTIONS");
    r = roundtrip(port(), "DELETE /v1/models HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.status, 405);
    r = roundtrip(port(), http_get("/nothing"));
    EXPECT_EQ(r.status, 404);
    // HEAD: the headers of the GET, no body.
    RawConn h(port());
    ASSERT_TRUE(h.send("HEAD /health HTTP/1.1\r\nConnection: close\r\n\r\n"));
    ASSERT_TRUE(h.closed_within(5));
    EXPECT_NE(h.received().find("200 OK"), std::string::npos);
    EXPECT_EQ(h.received().find("\"ok\""), std::string::npos);
    // Preflight from the allowed origin.
    r = roundtrip(port(), "OPTIONS /v1/chat/completions HTTP/1.1\r\nOrigin: http://app.example\r\n"
                         "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type\r\n\r\n");
    EXPECT_EQ(r.status, 204);
    EXPECT_EQ(r.headers["access-control-allow-origin"], "http://app.example");
    EXPECT_EQ(r.headers["access-control-allow-headers"], "authorization, content-type");
    EXPECT_NE(r.headers["access-control-allow-methods"].find("POST"), std::string::npos);
    // A request from it carries the header; one from elsewhere does not.
    r = roundtrip(port(), http_get("/health", "HTTP/1.1", "Origin: http://app.example\r\n"));
    EXPECT_EQ(r.headers["access-control-allow-origin"], "http://app.example");
    r = roundtrip(port(), http_get("/health", "HTTP/1.1", "Origin: http://evil.example\r\n"));
    EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
    r = roundtrip(port(), "OPTIONS /v1/models HTTP/1.1\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: GET\r\n\r\n");
    EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
}

TEST_F(Hostile, MalformedRequestsGetTheirStatus) {
    EXPECT_EQ(roundtrip(port(), "HELLO\r\n\r\n").status, 400);
    EXPECT_EQ(roundtrip(port(), "GET / HTTP/3.0\r\n\r\n").status, 505);
    EXPECT_EQ(roundtrip(port(), "GET /health HTTP/1.1\r\nX: " + std::string(40000, 'a') + "\r\n\r\n").status, 431);
    EXPECT_EQ(roundtrip(port(), "GET /" + std::string(10000, 'a') + " HTTP/1.1\r\n\r\n").status, 414);
    EXPECT_EQ(roundtrip(port(), "POST /v1/completions HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n").status, 400);
    EXPECT_EQ(roundtrip(port(), "POST /v1/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n").status, 413);
    // A chunked body and Expect: 100-continue are read like any other.
    const std::string body = completion(3).dump();
    char size[16];
    std::snprintf(size, sizeof size, "%zx", body.size());
    RawResponse r = roundtrip(port(), "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size) +
                                         "\r\n" + body + "\r\n0\r\n\r\n");
    EXPECT_EQ(r.status, 200) << r.body;
    RawConn c(port());
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n"));
    c.read_until(5, [](const std::string& g) { return g.find("100 Continue") != std::string::npos; });
    ASSERT_NE(c.received().find("HTTP/1.1 100 Continue"), std::string::npos);
    ASSERT_TRUE(c.send(body));
    c.read_until(20, [](const std::string& g) {
        const auto rs = parse_responses(g);
        return !rs.empty() && rs[0].complete;
    });
    const auto rs = parse_responses(c.received());
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].status, 200);
}

// Beyond --max-connections, a connection gets 503 at once; the others still work.
TEST(HostileLimits, ConnectionCapAnswers503) {
    VEGA_REQUIRE_TEST_DATA();
    ServeProcess s(stories_serve_args("--parallel 1 --max-connections 8"));
    ASSERT_TRUE(s.ok()) << s.log();
    std::vector<std::unique_ptr<RawConn>> held;
    for (int i = 0; i < 8; ++i) held.push_back(std::make_unique<RawConn>(s.port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    RawConn extra(s.port());
    ASSERT_TRUE(extra.closed_within(5));
    const auto rs = parse_responses(extra.received());
    ASSERT_EQ(rs.size(), 1u) << extra.received();
    EXPECT_EQ(rs[0].status, 503);
    EXPECT_NE(rs[0].body.find("too many open connections"), std::string::npos);
    // A held connection is served.
    ASSERT_TRUE(held[0]->send(http_get("/health", "HTTP/1.1", "Connection: close\r\n")));
    ASSERT_TRUE(held[0]->closed_within(5));
    EXPECT_EQ(parse_responses(held[0]->received()).at(0).status, 200);
}

// A client that stops reading its stream holds its slot only until a write has waited
// --timeout-write: then the request is cancelled and the slot freed.
TEST(HostileLimits, AClientThatStopsReadingIsCancelledAfterTheWriteTimeout) {
    VEGA_REQUIRE_TEST_DATA();
    ServeProcess s(stories_serve_args("--parallel 1 -c 16384 --timeout-write 1 --cors '*'"));
    ASSERT_TRUE(s.ok()) << s.log();
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int small = 2048;  // a small receive window, so the server's writes block soon
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(s.port()));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const std::string req = http_post("/v1/completions", completion(16000, true).dump());
    ASSERT_EQ(::send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
    ASSERT_TRUE(wait_slots_busy(s.port(), 1));
    const auto t0 = clock_type::now();
    EXPECT_TRUE(wait_slots_busy(s.port(), 0, 30)) << "the slot is still held by a client that reads nothing";
    EXPECT_LT(seconds_since(t0), 30.0);
    EXPECT_EQ(metric(s.port(), "vega_requests_cancelled_total"), 1);
    ::close(fd);
    // --cors *: any origin gets the header.
    RawResponse r = roundtrip(s.port(), http_get("/health", "HTTP/1.1", "Origin: http://any.example\r\n"));
    EXPECT_EQ(r.headers["access-control-allow-origin"], "*");
}

// A template that fails is reported at start, before listening, and a chat request
// through it is a 400, not a crash. Templates that recurse or raise are included.
TEST(HostileLimits, BadTemplatesAreReportedAtStartAndAnswered400) {
    VEGA_REQUIRE_TEST_DATA();
    const std::vector<std::pair<std::string, std::string>> templates = {
        {"raises on system", "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
                             "{% endif %}{{ m.content }}{% endfor %}"},
        {"recursive macro", "{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}"},
        {"recursive loop", "{% for m in [messages] recursive %}{{ loop([messages]) }}{% endfor %}"},
        {"int division", "{{ (-9223372036854775807 - 1) // -1 }}{{ messages[0].content }}"},
    };
    for (const auto& [name, text] : templates) {
        ServeProcess s(stories_serve_args("--parallel 1 --chat-template-file " + quote(write_temp_file("bad.jinja", text))));
        ASSERT_TRUE(s.ok()) << name << "\n" << s.log();
        const std::string log = s.log();
        EXPECT_NE(log.find("the chat template fails"), std::string::npos) << name << "\n" << log;
        const json body{{"messages", json::array({{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "hi"}}})},
                        {"max_tokens", 2}};
        const RawResponse r = roundtrip(s.port(), http_post("/v1/chat/completions", body.dump()));
        EXPECT_EQ(r.status, 400) << name << ": " << r.body;
        EXPECT_TRUE(healthy(s.port())) << name;
    }
}

// SIGTERM: requests in flight finish (200, complete); past --shutdown-timeout the
// rest end with an error (503, or an error event and no [DONE] on a stream).
TEST(HostileLimits, SigtermDrainsThenEndsTheRestWithAnError) {
    VEGA_REQUIRE_TEST_DATA();
    {
        ServeProcess s(stories_serve_args("--parallel 2 -c 2048 --shutdown-timeout 20"));
        ASSERT_TRUE(s.ok()) << s.log();
        RawConn c(s.port());
        ASSERT_TRUE(c.send(http_post("/v1/completions", completion(300).dump())));
        ASSERT_TRUE(wait_slots_busy(s.port(), 1));
        s.terminate();
        c.read_until(30, [](const std::string& g) {
            const auto rs = parse_responses(g);
            return !rs.empty() && rs[0].complete;
        });
        const auto rs = parse_responses(c.received());
        ASSERT_EQ(rs.size(), 1u) << c.received();
        EXPECT_EQ(rs[0].status, 200);
        EXPECT_EQ(json::parse(rs[0].body)["usage"]["completion_tokens"], 300);
        EXPECT_TRUE(s.wait_exit(10)) << s.log();
    }
    {
        ServeProcess s(stories_serve_args("--parallel 2 -c 16384 --shutdown-timeout 0.3"));
        ASSERT_TRUE(s.ok()) << s.log();
        RawConn whole(s.port()), streamed(s.port());
        ASSERT_TRUE(whole.send(http_post("/v1/completions", completion(16000).dump())));
        ASSERT_TRUE(streamed.send(http_post("/v1/completions", completion(16000, true).dump())));
        ASSERT_TRUE(wait_slots_busy(s.port(), 2));
        const auto t0 = clock_type::now();
        s.terminate();
        ASSERT_TRUE(whole.closed_within(10));
        ASSERT_TRUE(streamed.closed_within(10));
        EXPECT_TRUE(s.wait_exit(10)) << s.log();
        EXPECT_LT(seconds_since(t0), 5.0);
        const auto w = parse_responses(whole.received());
        ASSERT_EQ(w.size(), 1u) << whole.received();
        EXPECT_EQ(w[0].status, 503) << w[0].body;
        EXPECT_NE(w[0].body.find("shutting down"), std::string::npos);
        const auto st = parse_responses(streamed.received());
        ASSERT_EQ(st.size(), 1u);
        EXPECT_EQ(st[0].status, 200);
        EXPECT_NE(st[0].body.find("\"error\""), std::string::npos) << st[0].body.substr(st[0].body.size() > 300 ? st[0].body.size() - 300 : 0);
        EXPECT_EQ(st[0].body.find("[DONE]"), std::string::npos);
        // Nothing is accepted any more.
        RawConn late(s.port());
        EXPECT_FALSE(late.ok() && late.send(http_get("/health")) && !late.closed_within(1));
    }
    {  // A second signal during the grace period ends the process at once.
        ServeProcess s(stories_serve_args("--parallel 1 -c 16384 --shutdown-timeout 60"));
        ASSERT_TRUE(s.ok()) << s.log();
        RawConn c(s.port());
        ASSERT_TRUE(c.send(http_post("/v1/completions", completion(16000).dump())));
        ASSERT_TRUE(wait_slots_busy(s.port(), 1));
        s.terminate();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const auto t0 = clock_type::now();
        s.terminate();
        EXPECT_FALSE(s.wait_exit(5));
        EXPECT_EQ(s.exit_status(), 1) << s.log();
        EXPECT_LT(seconds_since(t0), 2.0);
        EXPECT_NE(s.log().find("second signal"), std::string::npos) << s.log();
    }
}

}  // namespace
}  // namespace vega::test
