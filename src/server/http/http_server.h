// HttpServer: vega serve's connection layer, built to face whatever reaches a public
// port. One event-loop thread (epoll) accepts connections and reads requests; only a
// complete request goes to a worker thread, so a client that trickles its headers or
// body holds a connection, never a worker:
//
//   accept ──> Reading (idle / header / body deadlines; 100-continue; pipelined bytes kept)
//                 │ a whole request                 │ a bad one, or a deadline missed
//                 v                                 v
//              Busy: a worker runs the handler   Lingering: the error is sent, our side
//                 │ response done                  is shut, the rest of the input read
//                 v                                and dropped for a moment, then closed
//              Reading again (keep-alive) or closed
//
// Bounds: open connections (beyond: 503 and close), bytes buffered over all
// connections, the parser's limits per request (ParserLimits), a deadline for the
// header block, one for the body, one for an idle keep-alive connection and one for
// every write. drain() stops accepting and closes idle connections while busy ones
// finish; stop() ends the loop.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http/parser.h"
#include "server/http/responder.h"

namespace vega::http {

struct HttpOptions {
    int max_connections = 1024;            // open at once; the next gets 503 and is closed
    double header_timeout_s = 10;          // from a request's first byte to the end of its headers
    double body_timeout_s = 20;            // from the end of the headers to the end of the body
    double idle_timeout_s = 10;            // a kept-alive connection waiting for its next request
    double write_timeout_s = 30;           // one write that the client does not read
    size_t max_buffered_bytes = 256u << 20;  // request bytes held over all connections (beyond: 503)
    int workers = 16;                      // handler threads
    ParserLimits limits;
};

class HttpServer {
public:
    using Handler = std::function<void(const Request&, Responder&)>;
    // The body of an error the connection layer answers itself (400, 408, 413, 431,
    // 503, ...): returns {content type, body}.
    using ErrorBody = std::function<std::pair<std::string, std::string>(int status, const std::string& message)>;
    // Called for each such error (logging), from the loop thread.
    using ErrorLog = std::function<void(const std::string& remote, int status, const std::string& message)>;

    HttpServer(const HttpOptions& o, Handler handler, ErrorBody error_body, ErrorLog error_log = nullptr);
    ~HttpServer();

    // Binds host:port (0: any free port) and listens; returns the port. Throws
    // vega::Error when the address cannot be bound.
    int listen(const std::string& host, int port);
    // Serves until stop(); returns once the loop and every worker have ended.
    void run();
    // Stops accepting: the listening socket closes, idle and half-read connections
    // close, busy ones close after their response. Thread-safe.
    void drain();
    // Handlers still running (requests in flight).
    int busy() const { return busy_.load(); }
    // Shuts every busy connection down (their writes fail at once), for a shutdown
    // whose grace period is over. Thread-safe.
    void cut_busy();
    // Ends run(). Thread-safe.
    void stop();

    // The open-file limit allows fewer connections than asked: the number used.
    int max_connections() const { return opt_.max_connections; }

private:
    struct Conn;
    struct Task {
        Conn* conn;
        Request req;
    };
    void loop();
    void worker();
    void wake();
    void accept_all();
    void on_readable(Conn& c);
    void process(Conn& c);          // parse what c holds: dispatch, wait, or fail
    void dispatch(Conn& c, Request&& req);
    void reject(Conn& c, int status, const std::string& message);  // answer, then linger
    void linger(Conn& c);  // close after an answer without resetting it (see Lingering)
    // A whole error answer the loop sends itself (status line, headers, error_body_), closing.
    std::string error_response(int status, const std::string& message, const std::string& extra_headers = "") const;
    void close_conn(Conn& c);
    void returned(Conn* c, bool close);  // a worker finished with c
    void check_deadlines(double now);
    void set_events(Conn& c, uint32_t events);

    HttpOptions opt_;
    Handler handler_;
    ErrorBody error_body_;
    ErrorLog error_log_;
    int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
    double listen_paused_until_ = 0;  // out of file descriptors: accept again later
    std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // loop thread only
    size_t buffered_ = 0;                                    // loop thread only
    bool drained_ = false;                                   // loop thread only: drain() was seen

    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Task> tasks_;                           // complete requests for the workers
    std::vector<std::pair<Conn*, bool>> returned_;     // (conn, close) back from the workers
    std::vector<int> busy_fds_;                        // fds of busy connections (cut_busy)
    bool stop_ = false, drain_ = false, cut_ = false;
    std::atomic<int> busy_{0};
    std::vector<std::thread> workers_;
};

}  // namespace vega::http
