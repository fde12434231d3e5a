// libFuzzer target for what vega serve does with the bytes a client sends before any
// model work: the HTTP request parser (src/server/http/parser.cpp), fed the input in
// pieces as a network delivers it, then each complete request's body through the
// bounded JSON parse and into the request structs (parse_completion_request), for both
// endpoints. Anything but a parser refusal or an ApiError is a finding, and so is a
// broken invariant: a request that consumes more than it was given, a body over the
// limit, or the whole-input and piecewise parses disagreeing.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/api.h"
#include "server/http/parser.h"
#include "server/request_json.h"

namespace {

using vega::http::Request;
using vega::http::RequestParser;

constexpr size_t kMaxBody = 1 << 16;

// A broken invariant: names it (the condition's text and line) before aborting.
void check_that(bool ok, const char* what, int line) {
    if (ok) return;
    std::fprintf(stderr, "http_fuzz.cpp:%d: invariant broken: %s\n", line, what);
    std::abort();
}
#define check(cond) check_that((cond), #cond, __LINE__)

void exercise(const Request& r) {
    check(r.body.size() <= kMaxBody);
    (void)r.keep_alive();
    (void)r.header("content-type");
    for (auto ep : {vega::server::Endpoint::Chat, vega::server::Endpoint::Completion}) {
        try {
            vega::server::json j = vega::server::parse_request_json(r.body, 32);
            (void)vega::server::parse_completion_request(j, ep);
        } catch (const vega::server::ApiError& e) {
            check(e.status == 400);
        }
    }
}

// Parses `data` as one connection's byte stream delivered in pieces (sizes from
// `cuts`); returns the requests and how the stream ended.
struct Run {
    std::vector<Request> requests;
    RequestParser::Status end = RequestParser::Status::NeedMore;
    int status = 0;
};
Run run(std::string_view data, std::string_view cuts) {
    vega::http::ParserLimits lim;
    lim.max_body = kMaxBody;
    lim.max_request_line = 1024;
    lim.max_header_bytes = 4096;
    lim.max_headers = 32;
    RequestParser p(lim);
    Run out;
    std::string buf;
    size_t pos = 0, cut = 0;
    while (pos < data.size()) {
        size_t n = cuts.empty() ? data.size() : 1 + size_t((unsigned char)cuts[cut++ % cuts.size()]) % 64;
        n = std::min(n, data.size() - pos);
        buf.append(data.substr(pos, n));
        pos += n;
        for (;;) {
            Request r;
            size_t used = 0;
            const RequestParser::Outcome o = p.feed(buf, r, used);
            if (o.status == RequestParser::Status::NeedMore) break;
            if (o.status == RequestParser::Status::Fail) {
                check(o.http_status >= 400 && o.http_status < 600 && !o.message.empty());
                out.end = o.status;
                out.status = o.http_status;
                return out;
            }
            check(used > 0 && used <= buf.size());
            buf.erase(0, used);
            out.requests.push_back(std::move(r));
        }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // First byte: how many of the following bytes are piece sizes; the rest is the stream.
    if (size == 0) return 0;
    const size_t n_cuts = std::min<size_t>(data[0] % 16, size - 1);
    const std::string_view cuts(reinterpret_cast<const char*>(data + 1), n_cuts);
    const std::string_view stream(reinterpret_cast<const char*>(data + 1 + n_cuts), size - 1 - n_cuts);
    const Run whole = run(stream, {});
    const Run pieces = run(stream, cuts);
    // Delivery in pieces must not change what was parsed.
    check(whole.requests.size() == pieces.requests.size());
    check(whole.end == pieces.end && whole.status == pieces.status);
    for (size_t i = 0; i < whole.requests.size(); ++i) {
        check(whole.requests[i].method == pieces.requests[i].method);
        check(whole.requests[i].target == pieces.requests[i].target);
        check(whole.requests[i].body == pieces.requests[i].body);
        exercise(whole.requests[i]);
    }
    return 0;
}
