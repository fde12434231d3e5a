#include "server/http/responder.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

namespace vega::http {

namespace {
double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Responder::Responder(int fd, const Request& req, double write_timeout_s)
    : fd_(fd), req_(req), write_timeout_s_(write_timeout_s) {
    close_ = !req.keep_alive();
}

void Responder::add_header(std::string name, std::string value) { extra_.push_back({std::move(name), std::move(value)}); }

void Responder::set_probe(int status, std::string content_type, std::string body_probe) {
    probe_status_ = status;
    probe_type_ = std::move(content_type);
    probe_body_ = std::move(body_probe);
}

bool Responder::send_all(std::string_view data) {
    if (gone_) return false;
    const double deadline = now_s() + write_timeout_s_;
    while (!data.empty()) {
        const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            data.remove_prefix(size_t(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            const double left = deadline - now_s();
            if (left <= 0) break;  // the client stopped reading
            pollfd p{fd_, POLLOUT, 0};
            if (::poll(&p, 1, int(left * 1000) + 1) < 0 && errno != EINTR) break;
            if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) break;
            continue;
        }
        break;  // EPIPE, ECONNRESET, ...
    }
    if (!data.empty()) gone_ = true;
    return !gone_;
}

std::string Responder::head(int status, std::string_view content_type, const std::string& framing) const {
    std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    if (!content_type.empty()) h += "Content-Type: " + std::string(content_type) + "\r\n";
    h += framing;
    for (const Header& x : extra_) h += x.name + ": " + x.value + "\r\n";
    if (close_) h += "Connection: close\r\n";
    else if (req_.version < 11) h += "Connection: keep-alive\r\n";
    h += "\r\n";
    return h;
}

bool Responder::send(int status, std::string_view content_type, std::string_view body) {
    if (committed_) {  // a probe sent the headers of a streamed answer
        if (status == status_ && !complete_) return write(body) && finish();
        abort();
        return false;
    }
    committed_ = true;
    status_ = status;
    const bool no_body = status == 204 || status == 304 || status < 200;
    std::string out = head(status, content_type, no_body ? "" : "Content-Length: " + std::to_string(body.size()) + "\r\n");
    if (!no_body && req_.method != "HEAD") out.append(body);
    complete_ = send_all(out);
    return complete_;
}

bool Responder::begin(int status, std::string_view content_type) {
    if (committed_) return !gone_;
    committed_ = true;
    status_ = status;
    chunked_ = req_.version >= 11;
    if (!chunked_) close_ = true;  // HTTP/1.0: the body ends where the connection does
    return send_all(head(status, content_type, chunked_ ? "Transfer-Encoding: chunked\r\n" : ""));
}

bool Responder::write(std::string_view data) {
    if (!committed_ || complete_ || aborted_) return false;
    if (data.empty() || req_.method == "HEAD") return !gone_;  // an empty chunk would end the body
    if (!chunked_) return send_all(data);
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string out = size;
    out.append(data);
    out += "\r\n";
    return send_all(out);
}

bool Responder::finish() {
    if (!committed_ || aborted_) return false;
    if (complete_) return true;
    if (chunked_ && req_.method != "HEAD" && !send_all("0\r\n\r\n")) return false;
    complete_ = !gone_;
    return complete_;
}

void Responder::abort() {
    aborted_ = true;
    close_ = true;
}

bool Responder::alive() {
    if (gone_) return false;
    pollfd p{fd_, POLLRDHUP, 0};  // POLLERR and POLLHUP (a reset, both sides shut) come unasked
    if (::poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
        gone_ = true;
        return false;
    }
    if ((p.revents & POLLRDHUP) && !peer_eof_) {
        peer_eof_ = true;  // the client sends nothing more; whether it still reads, a probe tells
        if (probe_status_ != 0 && !probed_) {
            probed_ = true;
            if (!committed_) return begin(probe_status_, probe_type_);
            if (!probe_body_.empty()) return write(probe_body_);
        }
    }
    return !gone_;
}

}  // namespace vega::http
