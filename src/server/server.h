// vega serve: an OpenAI-compatible HTTP server in front of one model.
//   POST /v1/chat/completions, /v1/completions; GET /v1/models, /health, /metrics;
//   OPTIONS everywhere (CORS preflight with --cors).
// Connections are read by the HTTP layer (server/http: deadlines, limits, pipelining);
// generation runs on the EngineLoop (continuous batching over the session's
// sequences); handlers only parse, tokenize, wait for text and write it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/session.h"
#include "model/model.h"
#include "server/http/http_server.h"

namespace vega::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                // 0: any free port (see Server::port())
    std::string api_key;            // non-empty: requests need "Authorization: Bearer <key>"
    int max_queue = 64;             // requests that may wait for a slot; beyond: 503
    std::string model_id;           // /v1/models id (default: the file name)
    std::string chat_template;      // override of the GGUF's template (text); empty: the model's
    bool log_requests = true;       // one line per request on stderr
    std::vector<std::string> cors_origins;  // origins answered with CORS headers ("*": any); empty: no CORS
    double shutdown_timeout_s = 10;  // on stop(): how long requests in flight may take to finish
    http::HttpOptions http;          // connection limits and deadlines (max body: http.limits.max_body)
};

class Server {
public:
    // The session's sequences are the slots. Throws vega::Error when the chat
    // template does not parse. Prints the template check (template_check.h).
    Server(const Model& model, Session& session, const ServerOptions& opts);
    ~Server();

    // Binds and serves until stop(); calls on_ready(port) once listening.
    // Throws vega::Error when the address cannot be bound.
    void run(const std::function<void(int port)>& on_ready = nullptr);
    // Graceful stop (SIGTERM): stops accepting, lets requests in flight finish for up
    // to shutdown_timeout_s, then ends the rest with an error (a 503, or an error
    // event on streams), and makes run() return. Blocks until then.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace vega::server
