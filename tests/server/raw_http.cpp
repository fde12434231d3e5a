#include "raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>

namespace vega::test {

namespace {
double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower((unsigned char)c));
    return s;
}
}  // namespace

RawConn::RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

RawConn::~RawConn() { close(); }

void RawConn::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

bool RawConn::send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

void RawConn::shut_write() { ::shutdown(fd_, SHUT_WR); }

std::string RawConn::read_until(double seconds, bool (*pred)(const std::string&)) {
    const double end = now_s() + seconds;
    char buf[65536];
    while (!(pred && pred(got_))) {
        const double left = end - now_s();
        if (left <= 0) break;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, int(left * 1000) + 1) <= 0) continue;
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) break;
        got_.append(buf, size_t(n));
    }
    return got_;
}

bool RawConn::closed_within(double seconds) {
    const double end = now_s() + seconds;
    char buf[4096];
    for (;;) {
        const double left = end - now_s();
        if (left <= 0) return false;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, int(left * 1000) + 1) <= 0) continue;
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) return true;
        got_.append(buf, size_t(n));
    }
}

std::vector<RawResponse> parse_responses(const std::string& bytes) {
    std::vector<RawResponse> out;
    size_t pos = 0;
    while (pos < bytes.size()) {
        const size_t head_end = bytes.find("\r\n\r\n", pos);
        if (head_end == std::string::npos) break;
        RawResponse r;
        const std::string head = bytes.substr(pos, head_end - pos);
        size_t line_end = head.find("\r\n");
        const std::string status_line = head.substr(0, line_end);
        if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) break;
        r.status = std::atoi(status_line.c_str() + 9);
        while (line_end != std::string::npos) {
            const size_t next = head.find("\r\n", line_end + 2);
            const std::string line = head.substr(line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
            const size_t colon = line.find(':');
            if (colon != std::string::npos) {
                std::string v = line.substr(colon + 1);
                while (!v.empty() && v.front() == ' ') v.erase(0, 1);
                r.headers[lower(line.substr(0, colon))] = v;
            }
            line_end = next;
        }
        pos = head_end + 4;
        if (r.status >= 100 && r.status < 200) continue;  // interim
        if (r.status == 204 || r.status == 304) {
            r.complete = true;
            out.push_back(r);
            continue;
        }
        if (r.headers.count("transfer-encoding") && lower(r.headers["transfer-encoding"]) == "chunked") {
            r.chunked = true;
            for (;;) {
                const size_t le = bytes.find("\r\n", pos);
                if (le == std::string::npos) break;
                const size_t n = std::strtoul(bytes.substr(pos, le - pos).c_str(), nullptr, 16);
                if (n == 0) {
                    if (bytes.compare(le + 2, 2, "\r\n") == 0) {
                        r.complete = true;
                        pos = le + 4;
                    } else {
                        pos = bytes.size();
                    }
                    break;
                }
                if (le + 2 + n + 2 > bytes.size()) {
                    r.body += bytes.substr(le + 2, n);
                    pos = bytes.size();
                    break;
                }
                r.body += bytes.substr(le + 2, n);
                pos = le + 2 + n + 2;
            }
        } else if (r.headers.count("content-length")) {
            const size_t n = std::strtoul(r.headers["content-length"].c_str(), nullptr, 10);
            r.body = bytes.substr(pos, n);
            r.complete = r.body.size() == n;
            pos = std::min(bytes.size(), pos + n);
        } else {  // close-delimited: the rest
            r.body = bytes.substr(pos);
            r.complete = true;
            pos = bytes.size();
        }
        out.push_back(r);
    }
    return out;
}

std::string http_post(const std::string& path, const std::string& body, const char* version, const std::string& extra) {
    return "POST " + path + " " + version + "\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string http_get(const std::string& path, const char* version, const std::string& extra) {
    return "GET " + path + " " + version + "\r\nHost: 127.0.0.1\r\n" + extra + "\r\n";
}

}  // namespace vega::test
