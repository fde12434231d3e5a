#include "server/http/parser.h"

#include <algorithm>

namespace vega::http {

namespace {

// RFC 9110 token characters (methods, header names).
bool is_tchar(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }
bool is_ctl(char c) { return (unsigned char)c < 0x20 || c == 0x7f; }

std::string_view trim_ows(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// A decimal with no sign, at most 19 digits (fits uint64_t); false otherwise.
bool parse_decimal(std::string_view s, uint64_t& v) {
    if (s.empty() || s.size() > 19) return false;
    v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + uint64_t(c - '0');
    }
    return true;
}

// A chunk size: hex digits (at most 15, so the sum with the body so far cannot
// overflow), then an optional ";extension" that is ignored.
bool parse_chunk_size(std::string_view line, uint64_t& v) {
    const size_t semi = line.find(';');
    std::string_view hex = trim_ows(line.substr(0, semi));
    if (hex.empty() || hex.size() > 15) return false;
    v = 0;
    for (char c : hex) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return false;
        v = v * 16 + uint64_t(d);
    }
    return true;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

bool has_token(std::string_view value, std::string_view token) {
    while (!value.empty()) {
        const size_t comma = value.find(',');
        if (iequals(trim_ows(value.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

const std::string* Request::header(std::string_view name) const {
    for (const Header& h : headers)
        if (iequals(h.name, name)) return &h.value;
    return nullptr;
}

bool Request::keep_alive() const {
    const std::string* c = header("Connection");
    if (version >= 11) return !(c && has_token(*c, "close"));
    return c && has_token(*c, "keep-alive");
}

const char* reason_phrase(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}

void RequestParser::reset() {
    phase_ = Phase::Start;
    pos_ = line_start_ = 0;
    header_bytes_ = n_headers_ = 0;
    remaining_ = 0;
    expect_continue_ = false;
    req_ = Request{};
}

RequestParser::Outcome RequestParser::fail(int status, std::string msg) {
    Outcome o;
    o.status = Status::Fail;
    o.http_status = status;
    o.message = std::move(msg);
    return o;
}

RequestParser::Outcome RequestParser::finished(Request& out, size_t& consumed) {
    out = std::move(req_);
    consumed = pos_;
    reset();
    Outcome o;
    o.status = Status::Done;
    return o;
}

RequestParser::Outcome RequestParser::line_too_long() {
    return fail(414, "the request line is longer than " + std::to_string(lim_.max_request_line) + " bytes");
}

RequestParser::Outcome RequestParser::headers_too_large(const char* what) {
    return fail(431, std::string("the request ") + what + " are larger than " + std::to_string(lim_.max_header_bytes) + " bytes");
}

bool RequestParser::next_line(std::string_view buf, std::string_view& line) {
    const size_t nl = buf.find('\n', pos_);
    if (nl == std::string_view::npos) {
        pos_ = buf.size();  // scanned: the next call looks only at new bytes
        return false;
    }
    line = buf.substr(line_start_, nl - line_start_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = line_start_ = nl + 1;
    return true;
}

RequestParser::Outcome RequestParser::headers_done() {
    const std::string* te = req_.header("Transfer-Encoding");
    uint64_t length = 0;
    bool have_length = false;
    for (const Header& h : req_.headers) {
        if (!iequals(h.name, "Content-Length")) continue;
        uint64_t v;
        if (!parse_decimal(h.value, v)) return fail(400, "Content-Length '" + h.value.substr(0, 32) + "' is not a number");
        if (have_length && v != length) return fail(400, "two Content-Length headers that differ");
        length = v;
        have_length = true;
    }
    if (te && have_length) return fail(400, "both Transfer-Encoding and Content-Length (refused: request smuggling)");
    if (const std::string* ex = req_.header("Expect")) {
        if (!iequals(trim_ows(*ex), "100-continue")) return fail(417, "unsupported Expect: '" + ex->substr(0, 64) + "'");
        expect_continue_ = req_.version >= 11;
    }
    if (te) {
        // Only "chunked", as the last (and here only) coding.
        if (!iequals(trim_ows(*te), "chunked"))
            return fail(501, "Transfer-Encoding '" + te->substr(0, 64) + "' is not supported (only chunked)");
        phase_ = Phase::ChunkSize;
        return Outcome{};
    }
    if (length > lim_.max_body)
        return fail(413, "the request body (" + std::to_string(length) + " bytes) is larger than the server's limit of " +
                             std::to_string(lim_.max_body) + " bytes");
    remaining_ = length;
    phase_ = Phase::Body;
    return Outcome{};
}

RequestParser::Outcome RequestParser::feed(std::string_view buf, Request& out, size_t& consumed) {
    for (;;) {
        switch (phase_) {
        case Phase::Start: {
            // A server should ignore blank lines before a request line (RFC 9112 2.2).
            while (pos_ < buf.size() && (buf[pos_] == '\r' || buf[pos_] == '\n')) ++pos_;
            if (pos_ > 256) return fail(400, "more than 256 blank bytes before the request line");
            if (pos_ == buf.size()) return Outcome{};
            line_start_ = pos_;
            phase_ = Phase::Headers;
            break;
        }
        case Phase::Headers: {
            std::string_view line;
            if (!next_line(buf, line)) {
                const size_t partial = buf.size() - line_start_;
                // A complete line is measured without its CR LF, so a partial one may hold
                // max_request_line bytes and the CR before the LF comes (the same request
                // must get the same answer whole or in pieces).
                const size_t cr = buf.back() == '\r' ? 1 : 0;
                if (req_.method.empty() && partial > lim_.max_request_line + cr)
                    return line_too_long();
                if (header_bytes_ + partial > lim_.max_header_bytes)
                    return headers_too_large("headers");
                return Outcome{};
            }
            if (req_.method.empty()) {  // the request line: METHOD SP target SP HTTP/x.y
                if (line.size() > lim_.max_request_line)
                    return line_too_long();
                const size_t s1 = line.find(' ');
                const size_t s2 = s1 == std::string_view::npos ? s1 : line.find(' ', s1 + 1);
                if (s2 == std::string_view::npos || line.find(' ', s2 + 1) != std::string_view::npos)
                    return fail(400, "malformed request line");
                const std::string_view method = line.substr(0, s1), target = line.substr(s1 + 1, s2 - s1 - 1),
                                       version = line.substr(s2 + 1);
                if (!is_token(method)) return fail(400, "malformed method in the request line");
                if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) { return is_ctl(c) || c == ' '; }))
                    return fail(400, "malformed request target");
                if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
                    version[5] > '9' || version[7] < '0' || version[7] > '9')
                    return fail(400, "malformed HTTP version");
                if (version[5] != '1' || (version[7] != '0' && version[7] != '1'))
                    return fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported (1.0 and 1.1 are)");
                req_.method = std::string(method);
                req_.target = std::string(target);
                req_.version = version[7] == '1' ? 11 : 10;
                std::string_view path = target;
                if (path.substr(0, 7) == "http://" || path.substr(0, 8) == "https://") {  // absolute-form
                    const size_t slash = path.find('/', path.find("//") + 2);
                    path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
                } else if (path != "*" && path.front() != '/') {
                    return fail(400, "the request target must be a path starting with '/'");
                }
                req_.path = std::string(path.substr(0, path.find('?')));
                break;
            }
            if (line.empty()) {  // the end of the header block
                if (Outcome o = headers_done(); o.status == Status::Fail) return o;
                break;
            }
            header_bytes_ += line.size() + 2;
            if (++n_headers_ > lim_.max_headers)
                return fail(431, "more than " + std::to_string(lim_.max_headers) + " header lines");
            if (header_bytes_ > lim_.max_header_bytes)
                return headers_too_large("headers");
            if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete header line folding");
            const size_t colon = line.find(':');
            if (colon == std::string_view::npos) return fail(400, "a header line without ':'");
            const std::string_view name = line.substr(0, colon);
            if (!is_token(name)) return fail(400, "malformed header name '" + std::string(name.substr(0, 64)) + "'");
            const std::string_view value = trim_ows(line.substr(colon + 1));
            if (std::any_of(value.begin(), value.end(), [](char c) { return is_ctl(c) && c != '\t'; }))
                return fail(400, "a control character in header '" + std::string(name) + "'");
            req_.headers.push_back({std::string(name), std::string(value)});
            break;
        }
        case Phase::Body: {
            if (buf.size() - pos_ < remaining_) return Outcome{};
            req_.body.assign(buf.substr(pos_, size_t(remaining_)));
            pos_ += size_t(remaining_);
            return finished(out, consumed);
        }
        case Phase::ChunkSize: {
            std::string_view line;
            if (!next_line(buf, line)) {
                if (buf.size() - line_start_ > 1024) return fail(400, "a chunk-size line longer than 1024 bytes");
                return Outcome{};
            }
            uint64_t n;
            if (!parse_chunk_size(line, n)) return fail(400, "malformed chunk size");
            if (n == 0) {
                phase_ = Phase::Trailer;
                break;
            }
            if (req_.body.size() + n > lim_.max_body)
                return fail(413, "the request body is larger than the server's limit of " + std::to_string(lim_.max_body) + " bytes");
            remaining_ = n;
            phase_ = Phase::ChunkData;
            break;
        }
        case Phase::ChunkData: {
            // The chunk's data, then CRLF (a bare LF is tolerated, as for lines).
            if (buf.size() - pos_ < remaining_ + 1) return Outcome{};
            const size_t end = pos_ + size_t(remaining_);
            size_t after;
            if (buf[end] == '\n') after = end + 1;
            else if (buf[end] == '\r') {
                if (end + 1 >= buf.size()) return Outcome{};
                if (buf[end + 1] != '\n') return fail(400, "a chunk not followed by CRLF");
                after = end + 2;
            } else return fail(400, "a chunk longer than its size");
            req_.body.append(buf.substr(pos_, size_t(remaining_)));
            pos_ = line_start_ = after;
            phase_ = Phase::ChunkSize;
            break;
        }
        case Phase::Trailer: {
            std::string_view line;
            if (!next_line(buf, line)) {
                if (header_bytes_ + (buf.size() - line_start_) > lim_.max_header_bytes)
                    return headers_too_large("trailers");
                return Outcome{};
            }
            if (!line.empty()) {  // trailer fields are read and dropped
                header_bytes_ += line.size() + 2;
                if (header_bytes_ > lim_.max_header_bytes)
                    return headers_too_large("trailers");
                break;
            }
            return finished(out, consumed);
        }
        }
    }
}

}  // namespace vega::http
