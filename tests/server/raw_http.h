// Raw TCP clients for the server tests that an HTTP library cannot express: bytes
// trickled, half-closed sockets, pipelined requests, HTTP/1.0, hang-ups. A small
// response reader parses what comes back (Content-Length, chunked or close-delimited).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace vega::test {

class RawConn {
public:
    explicit RawConn(int port);  // connects to 127.0.0.1:port
    ~RawConn();
    RawConn(const RawConn&) = delete;
    RawConn& operator=(const RawConn&) = delete;

    bool ok() const { return fd_ >= 0; }
    int fd() const { return fd_; }
    bool send(const std::string& bytes);  // false when the server closed or reset
    void shut_write();                    // half-close: no more bytes from us
    void close();
    // Reads until `pred(received)` holds, EOF or `seconds`; returns what came.
    std::string read_until(double seconds, bool (*pred)(const std::string&) = nullptr);
    // True when the server closed the connection within `seconds` (EOF or reset).
    bool closed_within(double seconds);
    std::string& received() { return got_; }

private:
    int fd_ = -1;
    std::string got_;
};

struct RawResponse {
    int status = -1;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;       // de-chunked
    bool chunked = false;
    bool complete = false;  // the body's end was seen (length, last chunk, or EOF for close-delimited)
};

// Parses the responses at the front of `bytes` (pipelined ones in order), skipping
// 1xx interim responses. A close-delimited body runs to the end of `bytes`.
std::vector<RawResponse> parse_responses(const std::string& bytes);

// "POST path HTTP/1.x" with a JSON body and Content-Length.
std::string http_post(const std::string& path, const std::string& body, const char* version = "HTTP/1.1",
                      const std::string& extra_headers = "");
std::string http_get(const std::string& path, const char* version = "HTTP/1.1", const std::string& extra_headers = "");

}  // namespace vega::test
