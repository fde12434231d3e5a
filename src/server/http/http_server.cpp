#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace vega::http {

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string peer_name(const sockaddr_storage& a) {
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (a.ss_family == AF_INET) {
        const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
        port = ntohs(s->sin_port);
        return std::string(host) + ":" + std::to_string(port);
    }
    if (a.ss_family == AF_INET6) {
        const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
        port = ntohs(s->sin6_port);
        return "[" + std::string(host) + "]:" + std::to_string(port);
    }
    return "?";
}

// A short answer written without waiting (the socket's buffer is empty or nearly
// so); whatever does not fit is dropped, since the connection closes next.
void send_now(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
        const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) off += size_t(n);
        else if (n < 0 && errno == EINTR) continue;
        else break;
    }
}

constexpr double kLingerSeconds = 2.0;       // reading and dropping input after an error answer
constexpr size_t kLingerMaxBytes = 1u << 20;  // ... or this much of it
constexpr double kAcceptPauseSeconds = 0.1;  // out of file descriptors: try accept again after this
constexpr size_t kSendBufferBytes = 256u << 10;  // per connection (the kernel doubles it for its bookkeeping)

}  // namespace

struct HttpServer::Conn {
    int fd = -1;
    std::string remote;
    std::string buf;  // received, not yet part of a finished request
    RequestParser parser;
    enum class State { Reading, Busy, Lingering } state = State::Reading;
    bool header_started = false;  // the deadline now counts the current request's headers
    bool body_started = false;    // ... its body
    double deadline = 0;
    bool peer_eof = false;  // the client shut its side: no more requests come
    bool registered = false;
    size_t dropped = 0;  // lingering: input read and dropped
    explicit Conn(const ParserLimits& l) : parser(l) {}
};

HttpServer::HttpServer(const HttpOptions& o, Handler handler, ErrorBody error_body, ErrorLog error_log)
    : opt_(o), handler_(std::move(handler)), error_body_(std::move(error_body)), error_log_(std::move(error_log)) {}

HttpServer::~HttpServer() {
    stop();
    for (auto& t : workers_)
        if (t.joinable()) t.join();
    for (auto& [fd, c] : conns_) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

int HttpServer::listen(const std::string& host, int port) {
    // Room for every connection: raise the soft open-file limit toward the hard one,
    // and use fewer connections where even that is too low.
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        const rlim_t want = rlim_t(opt_.max_connections) + 128;
        if (rl.rlim_cur < want) {
            rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
            opt_.max_connections = std::max(16, int(rl.rlim_cur) - 128);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port_s = std::to_string(port);
    if (int e = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_s.c_str(), &hints, &res); e != 0)
        fail("cannot listen on {}:{}: {}", host, port, gai_strerror(e));
    std::string why = "no address";
    for (addrinfo* a = res; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        // SO_REUSEADDR only: SO_REUSEPORT would let a second server bind the same
        // port silently and split the requests.
        int yes = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
            listen_fd_ = fd;
            break;
        }
        why = std::strerror(errno);
        ::close(fd);
    }
    freeaddrinfo(res);
    if (listen_fd_ < 0) fail("cannot listen on {}:{}: {} (address in use, or not an address of this machine)", host, port, why);
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    const int bound = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                              : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) fail("cannot create the server's event loop: {}", std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    return bound;
}

void HttpServer::wake() {
    const uint64_t one = 1;
    if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpServer::drain() {
    {
        std::lock_guard<std::mutex> lk(m_);
        drain_ = true;
    }
    wake();
}

void HttpServer::stop() {
    {
        std::lock_guard<std::mutex> lk(m_);
        stop_ = true;
    }
    cv_.notify_all();
    wake();
}

void HttpServer::cut_busy() {
    std::lock_guard<std::mutex> lk(m_);
    cut_ = true;
    for (int fd : busy_fds_) ::shutdown(fd, SHUT_RDWR);
}

void HttpServer::set_events(Conn& c, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = c.fd;
    epoll_ctl(epoll_fd_, c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &ev);
    c.registered = true;
}

void HttpServer::close_conn(Conn& c) {
    const int fd = c.fd;
    if (c.registered) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    buffered_ -= c.buf.size();
    ::close(fd);
    conns_.erase(fd);  // c is gone
}

std::string HttpServer::error_response(int status, const std::string& message, const std::string& extra_headers) const {
    const auto [type, body] = error_body_(status, message);
    return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\nContent-Type: " + type +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers + "Connection: close\r\n\r\n" + body;
}

void HttpServer::reject(Conn& c, int status, const std::string& message) {
    if (error_log_) error_log_(c.remote, status, message);
    send_now(c.fd, error_response(status, message));
    linger(c);
}

void HttpServer::linger(Conn& c) {
    if (c.peer_eof) return close_conn(c);  // nothing more can come: close at once
    // A close() with unread input (a pipelined request that will not be answered, the
    // rest of a refused body) would reset the connection and could destroy the answer
    // before the client reads it: shut our side, read and drop the rest for a moment.
    ::shutdown(c.fd, SHUT_WR);
    buffered_ -= c.buf.size();
    c.buf.clear();
    c.buf.shrink_to_fit();
    c.state = Conn::State::Lingering;
    c.deadline = now_s() + kLingerSeconds;
    set_events(c, EPOLLIN | EPOLLRDHUP);
}

void HttpServer::accept_all() {
    for (;;) {
        sockaddr_storage a{};
        socklen_t len = sizeof a;
        const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // Out of descriptors: waiting connections stay in the backlog until some close.
                listen_paused_until_ = now_s() + kAcceptPauseSeconds;
                epoll_event ev{};
                ev.data.fd = listen_fd_;
                epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
            }
            return;
        }
        const std::string remote = peer_name(a);
        if (int(conns_.size()) >= opt_.max_connections) {
            const std::string msg = "too many open connections (the server's limit is " +
                                    std::to_string(opt_.max_connections) + "); retry later";
            if (error_log_) error_log_(remote, 503, msg);
            send_now(fd, error_response(503, msg, "Retry-After: 1\r\n"));
            ::close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // SSE pieces go out at once
        // A fixed send buffer instead of the kernel's autotuning (up to 4 MiB): bounds the
        // kernel memory a client that stops reading pins, and lets --timeout-write see
        // such a client before its whole answer (about 30k streamed tokens) is queued.
        int sndbuf = int(kSendBufferBytes);
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        auto c = std::make_unique<Conn>(opt_.limits);
        c->fd = fd;
        c->remote = remote;
        c->deadline = now_s() + opt_.header_timeout_s;  // a new connection has this long for its first request's headers
        c->header_started = true;
        set_events(*c, EPOLLIN | EPOLLRDHUP);
        conns_[fd] = std::move(c);
    }
}

void HttpServer::on_readable(Conn& c) {
    char tmp[65536];
    for (int i = 0; i < 16; ++i) {  // at most 1 MiB per wake, so one sender cannot hog the loop
        const ssize_t n = ::recv(c.fd, tmp, sizeof tmp, MSG_DONTWAIT);
        if (n > 0) {
            if (c.state == Conn::State::Lingering) {
                c.dropped += size_t(n);
                if (c.dropped > kLingerMaxBytes) return close_conn(c);
                continue;
            }
            if (buffered_ + size_t(n) > opt_.max_buffered_bytes)
                return reject(c, 503, "the server holds too much unread request data; retry later");
            c.buf.append(tmp, size_t(n));
            buffered_ += size_t(n);
            if (size_t(n) < sizeof tmp) break;
            continue;
        }
        if (n == 0) {
            if (c.state == Conn::State::Lingering) return close_conn(c);
            c.peer_eof = true;
            set_events(c, 0);  // EOF stays readable: stop asking, errors still arrive
            break;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return close_conn(c);  // reset
    }
    if (c.state == Conn::State::Reading) process(c);
}

void HttpServer::process(Conn& c) {
    Request req;
    size_t consumed = 0;
    const RequestParser::Outcome o = c.parser.feed(c.buf, req, consumed);
    if (o.status == RequestParser::Status::Done) {
        c.buf.erase(0, consumed);
        buffered_ -= consumed;
        req.remote = c.remote;
        return dispatch(c, std::move(req));
    }
    if (o.status == RequestParser::Status::Fail) return reject(c, o.http_status, o.message);
    if (c.parser.wants_continue()) {  // the client waits for this before sending its body
        c.parser.clear_continue();
        send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    const double now = now_s();
    if (c.parser.started() && !c.header_started) {
        c.header_started = true;
        c.deadline = now + opt_.header_timeout_s;
    }
    if (c.parser.in_body() && !c.body_started) {
        c.body_started = true;
        c.deadline = now + opt_.body_timeout_s;
    }
    if (c.peer_eof) close_conn(c);  // the client will send no more: this request cannot complete
}

void HttpServer::dispatch(Conn& c, Request&& req) {
    c.state = Conn::State::Busy;
    if (c.registered) {
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
        c.registered = false;
    }
    ++busy_;
    {
        std::lock_guard<std::mutex> lk(m_);
        tasks_.push_back({&c, std::move(req)});
        busy_fds_.push_back(c.fd);
        if (cut_) ::shutdown(c.fd, SHUT_RDWR);
    }
    cv_.notify_one();
}

void HttpServer::returned(Conn* cp, bool close) {
    Conn& c = *cp;
    if (close || drained_) return linger(c);
    c.state = Conn::State::Reading;
    c.header_started = c.body_started = false;
    c.deadline = now_s() + opt_.idle_timeout_s;
    if (!c.peer_eof) set_events(c, EPOLLIN | EPOLLRDHUP);
    if (!c.buf.empty() || c.peer_eof) process(c);  // a pipelined request may be here already
}

void HttpServer::check_deadlines(double now) {
    std::vector<int> late;
    for (auto& [fd, c] : conns_)
        if (c->state != Conn::State::Busy && c->deadline < now) late.push_back(fd);
    for (int fd : late) {
        Conn& c = *conns_.at(fd);
        if (c.state == Conn::State::Lingering || (!c.parser.started() && c.buf.empty())) {
            close_conn(c);  // idle, or done lingering
        } else if (c.body_started) {
            reject(c, 408, "the request body did not arrive within " + std::to_string(int(opt_.body_timeout_s)) + " s");
        } else {
            reject(c, 408, "the request headers did not arrive within " + std::to_string(int(opt_.header_timeout_s)) + " s");
        }
    }
}

void HttpServer::loop() {
    epoll_event evs[256];
    double last_scan = 0;
    for (;;) {
        const int n = epoll_wait(epoll_fd_, evs, 256, 50);
        bool stop = false, drain = false;
        std::vector<std::pair<Conn*, bool>> back;
        {
            std::lock_guard<std::mutex> lk(m_);
            stop = stop_;
            drain = drain_;
            back.swap(returned_);
        }
        if (stop) break;
        for (int i = 0; i < n; ++i) {
            const int fd = evs[i].data.fd;
            if (fd == wake_fd_) {
                uint64_t v;
                (void)!::read(wake_fd_, &v, sizeof v);
                continue;
            }
            if (fd == listen_fd_) {
                if (!drained_) accept_all();
                continue;
            }
            auto it = conns_.find(fd);
            if (it == conns_.end() || it->second->state == Conn::State::Busy) continue;
            Conn& c = *it->second;
            if ((evs[i].events & (EPOLLERR | EPOLLHUP)) && !(evs[i].events & EPOLLIN)) {
                close_conn(c);
                continue;
            }
            on_readable(c);
        }
        for (auto [c, close] : back) returned(c, close);
        const double now = now_s();
        if (drain && !drained_) {  // stop accepting; what is not being answered closes
            drained_ = true;
            epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
            ::close(listen_fd_);
            listen_fd_ = -1;
            std::vector<int> idle;
            for (auto& [fd, c] : conns_)
                if (c->state == Conn::State::Reading) idle.push_back(fd);
            for (int fd : idle) close_conn(*conns_.at(fd));
        }
        if (listen_paused_until_ > 0 && now >= listen_paused_until_ && listen_fd_ >= 0) {
            listen_paused_until_ = 0;
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.fd = listen_fd_;
            epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
        }
        if (now - last_scan >= 0.05) {
            last_scan = now;
            check_deadlines(now);
        }
    }
}

void HttpServer::worker() {
    for (;;) {
        Task t;
        {
            std::unique_lock<std::mutex> lk(m_);
            cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
            if (tasks_.empty()) return;
            t = std::move(tasks_.front());
            tasks_.pop_front();
        }
        Conn& c = *t.conn;
        bool close = true;
        {
            Responder r(c.fd, t.req, opt_.write_timeout_s);
            {
                std::lock_guard<std::mutex> lk(m_);
                if (drain_) r.set_close();
            }
            auto internal = [&](const std::string& what) {
                if (!r.committed()) {
                    const auto [type, body] = error_body_(500, what);
                    r.set_close();
                    r.send(500, type, body);
                } else {
                    r.abort();
                }
            };
            try {
                handler_(t.req, r);
                if (!r.committed()) internal("internal error: the handler sent no response");
                else if (!r.complete()) r.abort();
            } catch (const std::exception& e) {
                internal(std::string("internal error: ") + e.what());
            } catch (...) {
                internal("internal error");
            }
            close = r.close_after();
        }
        --busy_;
        {
            std::lock_guard<std::mutex> lk(m_);
            busy_fds_.erase(std::find(busy_fds_.begin(), busy_fds_.end(), c.fd));
            returned_.push_back({&c, close});
        }
        wake();
    }
}

void HttpServer::run() {
    if (listen_fd_ < 0) fail("HttpServer::run before listen");
    for (int i = 0; i < std::max(1, opt_.workers); ++i) workers_.emplace_back([this] { worker(); });
    loop();
    stop();
    for (auto& t : workers_) t.join();
    workers_.clear();
    for (auto& [fd, c] : conns_) ::close(fd);
    conns_.clear();
    buffered_ = 0;
}

}  // namespace vega::http
