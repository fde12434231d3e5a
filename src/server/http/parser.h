// RequestParser: reads HTTP/1.0 and HTTP/1.1 requests from the bytes a connection
// has received, incrementally (a header trickled in byte by byte is scanned once),
// with a bound on every part: request line, header bytes and count, body size, chunk
// lines. What RFC 9112 says a server must refuse is refused (both Content-Length and
// Transfer-Encoding, differing Content-Lengths, obsolete line folding, whitespace
// before a header colon, an unknown transfer coding), each with the status and one
// line that names the problem.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/request.h"

namespace vega::http {

struct ParserLimits {
    size_t max_request_line = 8192;  // method, target and version (414 beyond)
    size_t max_header_bytes = 32768;  // every header line together (431 beyond)
    size_t max_headers = 100;         // header lines (431 beyond)
    size_t max_body = 8u << 20;       // body bytes after de-chunking (413 beyond)
};

class RequestParser {
public:
    explicit RequestParser(const ParserLimits& limits = {}) : lim_(limits) {}

    enum class Status { NeedMore, Done, Fail };
    struct Outcome {
        Status status = Status::NeedMore;
        int http_status = 0;  // Fail: the status to answer with (400, 413, 414, 431, 501, 505)
        std::string message;  // Fail: what was wrong
    };

    // buf: every byte received on the connection since the last finished request
    // (the caller appends to it and passes it again; the parser remembers how far it
    // got). Done: `out` holds the request and `consumed` its length in buf; the
    // parser is reset for the next request.
    Outcome feed(std::string_view buf, Request& out, size_t& consumed);

    // Some byte of a request (beyond the blank lines that may precede one) was seen.
    bool started() const { return phase_ != Phase::Start; }
    // The header block is complete and the body is being read.
    bool in_body() const { return phase_ == Phase::Body || phase_ == Phase::ChunkSize || phase_ == Phase::ChunkData ||
                                  phase_ == Phase::Trailer; }
    // The client sent "Expect: 100-continue" and waits for the go-ahead before its body.
    bool wants_continue() const { return expect_continue_; }
    void clear_continue() { expect_continue_ = false; }
    void reset();

private:
    enum class Phase { Start, Headers, Body, ChunkSize, ChunkData, Trailer };
    Outcome fail(int status, std::string msg);
    Outcome finished(Request& out, size_t& consumed);  // the request is whole: hand it out, reset
    Outcome line_too_long();                           // 414
    Outcome headers_too_large(const char* what);       // 431 ("headers" or "trailers")
    Outcome headers_done();  // the header block is whole: choose how the body is framed
    bool next_line(std::string_view buf, std::string_view& line);

    ParserLimits lim_;
    Phase phase_ = Phase::Start;
    size_t pos_ = 0;         // bytes of buf scanned so far
    size_t line_start_ = 0;  // where the line being scanned begins
    size_t header_bytes_ = 0, n_headers_ = 0;
    uint64_t remaining_ = 0;  // body or chunk bytes still to come
    bool expect_continue_ = false;
    Request req_;
};

}  // namespace vega::http
