// Responder: how a handler answers one request on its connection, whole or streamed,
// and learns whether the client is still there.
//
// Streamed responses are chunked on HTTP/1.1 and close-delimited on HTTP/1.0 (which
// has no chunked coding). Every write has a deadline (a client that stops reading
// costs a worker at most that long). alive() tells a handler that waits (for tokens,
// for a slot) whether the client left: a reset connection is gone at once; a client
// that only half-closed (it sent its request, then shut its side down) may still read
// the answer, which TCP cannot tell from a full close until something is sent, so the
// first alive() after the half-close sends a probe (the response's headers, or bytes
// the handler says are harmless in its body) and a closed socket answers it with a
// reset that the next alive() sees.
#pragma once
#include <string>
#include <string_view>

#include "server/http/request.h"

namespace vega::http {

class Responder {
public:
    Responder(int fd, const Request& req, double write_timeout_s);

    // A header for whichever response is sent (CORS, Allow, ...).
    void add_header(std::string name, std::string value);
    // "Connection: close" on the response, and the connection closes after it.
    void set_close() { close_ = true; }

    // What alive() sends when the client half-closed: nothing committed yet, the
    // headers of a streamed response (status, content type) go out; already
    // streaming, `body_probe` (e.g. an SSE comment) is written. Not set: a half-close
    // is taken as the client waiting for its answer.
    void set_probe(int status, std::string content_type, std::string body_probe);

    // The whole response (HEAD: the headers alone). After a probe committed the
    // headers, a body with the same status completes the stream and any other status
    // aborts it. False when the client is gone.
    bool send(int status, std::string_view content_type, std::string_view body);

    // A streamed response: begin(), write() pieces, finish().
    bool begin(int status, std::string_view content_type);
    bool write(std::string_view data);
    bool finish();
    // Ends a streamed response unfinished: the connection closes without the last
    // chunk, so the client sees a cut message, never one that looks complete.
    void abort();

    // False once the client is known to be gone (see the header comment).
    bool alive();

    bool committed() const { return committed_; }   // the status line went out
    bool complete() const { return complete_; }     // the whole response went out
    bool gone() const { return gone_; }
    // The connection must close after this response (asked, HTTP/1.0 without
    // keep-alive, close-delimited, aborted, or the client gone).
    bool close_after() const { return close_ || gone_ || aborted_ || !complete_; }
    int status() const { return status_; }
    const Request& request() const { return req_; }

private:
    std::string head(int status, std::string_view content_type, const std::string& framing) const;
    bool send_all(std::string_view data);

    int fd_;
    const Request& req_;
    double write_timeout_s_;
    Headers extra_;
    bool close_ = false, committed_ = false, complete_ = false, aborted_ = false, gone_ = false;
    bool chunked_ = false, peer_eof_ = false, probed_ = false;
    int status_ = 0;
    int probe_status_ = 0;
    std::string probe_type_, probe_body_;
};

}  // namespace vega::http
