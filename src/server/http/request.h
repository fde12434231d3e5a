// One HTTP/1.x request as the connection layer hands it to a handler: method, target,
// headers and the whole body (already de-chunked), read and checked by RequestParser.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace vega::http {

struct Header {
    std::string name, value;  // name as sent; compare with iequals
};
using Headers = std::vector<Header>;

bool iequals(std::string_view a, std::string_view b);

struct Request {
    std::string method;  // "GET", "POST", ... (case-sensitive, as HTTP says)
    std::string target;  // as sent: "/v1/models?x=1"
    std::string path;    // the target without query (absolute-form "http://h/p" gives "/p")
    int version = 11;    // 10: HTTP/1.0, 11: HTTP/1.1
    Headers headers;
    std::string body;
    std::string remote;  // the peer, "127.0.0.1:51234"

    // The first header of that name (case-insensitive), or nullptr.
    const std::string* header(std::string_view name) const;
    // Whether the client allows another request on this connection: HTTP/1.1 unless
    // "Connection: close"; HTTP/1.0 only with "Connection: keep-alive".
    bool keep_alive() const;
};

// True when the comma-separated header list `value` holds `token` (case-insensitive):
// has_token("keep-alive, Upgrade", "upgrade").
bool has_token(std::string_view value, std::string_view token);

// The reason phrase of a status code ("Not Found"); "" for codes it does not know.
const char* reason_phrase(int status);

}  // namespace vega::http
