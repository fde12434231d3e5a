#include "server/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>

#include "core/error.h"
#include "server/api.h"
#include "engine/chat_prompt.h"
#include "server/engine_loop.h"

namespace vega::server {

namespace {

long unix_time() { return long(std::time(nullptr)); }
double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Generated text can hold bytes that are not UTF-8 (a model's byte tokens); JSON out
// replaces them with U+FFFD instead of failing.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& j) {
    res.status = status;
    res.set_content(dump(j), "application/json");
}
void send_error(httplib::Response& res, const ApiError& e) {
    send_json(res, e.status, error_body(e.status, e.what(), e.type, e.code));
}

}  // namespace

struct Server::Impl {
    const Model& model;
    Session& session;
    ServerOptions o;
    ChatPrompt chat;
    EngineLoop engine;
    httplib::Server http;
    std::atomic<int64_t> next_id{1};
    std::mutex metrics_m;
    std::map<std::pair<std::string, int>, int64_t> requests;  // (endpoint, status) -> count
    std::atomic<int64_t> cancelled{0};

    Impl(const Model& m, Session& s, const ServerOptions& opts, std::string* warning)
        : model(m), session(s), o(opts), chat(m, opts.chat_template, warning), engine(s, m.tokenizer(), opts.max_queue) {}

    void count(const std::string& endpoint, int status) {
        std::lock_guard<std::mutex> lk(metrics_m);
        ++requests[{endpoint, status}];
    }
    void log(const httplib::Request& req, int status, double ms, const std::string& extra) {
        if (o.log_requests)
            std::fprintf(stderr, "vega serve: %s %s %s -> %d, %.1f ms%s%s\n", req.remote_addr.c_str(), req.method.c_str(),
                         req.path.c_str(), status, ms, extra.empty() ? "" : ", ", extra.c_str());
    }

    // The prompt's tokens: the chat rendering (BOS added unless the template wrote
    // it) or the completion prompt (BOS as the model wants); special tokens parsed.
    std::vector<int32_t> prompt_tokens(const CompletionParams& p) const {
        const Tokenizer& tok = model.tokenizer();
        if (p.endpoint == Endpoint::Completion) return tok.encode(p.prompt, true, true);
        try {
            return chat.encode(tok, p.messages, p.tools, true);
        } catch (const Error& e) {
            throw ApiError(400, std::string("chat template: ") + e.what(), "invalid_request_error", "template_error");
        }
    }

    void completion(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string name = ep == Endpoint::Chat ? "chat" : "completions";
        CompletionParams p;
        std::vector<int32_t> prompt;
        try {
            json body;
            try {
                body = json::parse(req.body);
            } catch (const json::parse_error& e) {
                throw ApiError(400, std::string("the body is not valid JSON: ") + e.what(), "invalid_request_error",
                               "invalid_json");
            }
            p = parse_completion_request(body, ep);
            if (p.model.empty()) p.model = o.model_id;
            prompt = prompt_tokens(p);
            const int n_ctx = session.params().n_ctx;
            if (int(prompt.size()) >= n_ctx)
                throw ApiError(400,
                               "the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                                   std::to_string(n_ctx) + " (no room to generate)",
                               "invalid_request_error", "context_length_exceeded");
        } catch (const ApiError& e) {
            send_error(res, e);
            count(name, e.status);
            log(req, e.status, ms_since(t0), e.what());
            return;
        }
        GenRequest g;
        g.prompt = prompt;
        g.sampling = p.sampling;
        g.n_predict = p.max_tokens < 0 ? session.params().n_ctx : p.max_tokens;
        g.ignore_eos = p.ignore_eos;
        auto job = engine.submit(std::move(g), p.stop);
        if (!job) {
            send_error(res, ApiError(503, "the server is busy: every slot is taken and the queue is full; retry later",
                                     "server_error", "queue_full"));
            count(name, 503);
            log(req, 503, ms_since(t0), "queue full");
            return;
        }
        const std::string id = (ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
        const long created = unix_time();
        auto summary = [job](const char* reason) {
            return "prompt " + std::to_string(job->n_prompt) + " tokens (" + std::to_string(job->n_cached) +
                   " cached), generated " + std::to_string(job->n_generated) + ", " + reason;
        };
        auto usage = [job] {
            std::lock_guard<std::mutex> lk(job->m);
            return Usage{job->n_prompt, job->n_generated, job->n_cached};
        };
        if (!p.stream) {
            std::string text, piece;
            while (job->take(piece)) text += piece;
            if (!job->error.empty()) {
                send_error(res, ApiError(500, "generation failed: " + job->error, "server_error", "engine_error"));
                count(name, 500);
                log(req, 500, ms_since(t0), job->error);
                return;
            }
            const char* reason = job->reason == FinishReason::Length ? "length" : "stop";
            send_json(res, 200, completion_response(p, id, created, text, reason, usage()));
            count(name, 200);
            log(req, 200, ms_since(t0), summary(reason));
            return;
        }
        // SSE: the whole stream is written from one provider call.
        res.set_header("Cache-Control", "no-cache");
        // One stream per connection: node-fetch 2.7 (the openai v4 client) on Node 18 reports
        // "Premature close" for a chunked stream on a kept-alive socket.
        res.set_header("Connection", "close");
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, p, id, created, job, t0, req_line = req.remote_addr + " " + req.method + " " + req.path, name, usage,
             summary](size_t, httplib::DataSink& sink) {
              try {
                auto send = [&](const json& j) {
                    const std::string s = "data: " + dump(j) + "\n\n";
                    return sink.write(s.data(), s.size());
                };
                bool first = true, ok = true;
                std::string piece;
                while (ok && job->take(piece)) {
                    if (piece.empty()) continue;
                    ok = send(stream_chunk(p, id, created, piece, nullptr, first));
                    first = false;
                }
                if (!ok) {  // the client went away: free the slot
                    engine.cancel(job);
                    ++cancelled;
                    count(name, 499);
                    if (o.log_requests)
                        std::fprintf(stderr, "vega serve: %s -> client closed the stream, cancelled, %.1f ms\n",
                                     req_line.c_str(), ms_since(t0));
                    return false;
                }
                if (!job->error.empty()) {
                    send(json{{"error", error_body(500, "generation failed: " + job->error, "server_error", "engine_error")["error"]}});
                } else {
                    const char* reason = job->reason == FinishReason::Length ? "length" : "stop";
                    if (first && p.endpoint == Endpoint::Chat) send(stream_chunk(p, id, created, "", nullptr, true));
                    send(stream_chunk(p, id, created, "", reason, false));
                    if (p.include_usage) send(usage_chunk(p, id, created, usage()));
                    if (o.log_requests)
                        std::fprintf(stderr, "vega serve: %s -> 200 (stream), %.1f ms, %s\n", req_line.c_str(),
                                     ms_since(t0), summary(reason).c_str());
                }
                const std::string done = "data: [DONE]\n\n";
                sink.write(done.data(), done.size());
                sink.done();
                count(name, 200);
                return true;
              } catch (const std::exception& e) {  // never let a stream take the server down
                std::fprintf(stderr, "vega serve: %s -> stream failed: %s\n", req_line.c_str(), e.what());
                engine.cancel(job);
                count(name, 500);
                return false;
              }
            },
            [this, job](bool success) {
                if (!success) engine.cancel(job);  // connection lost before the end
            });
    }

    std::string metrics_text() {
        const EngineStats s = engine.stats();
        std::string out;
        auto metric = [&](const char* name, const char* type, const char* help, const std::string& lines) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + lines;
        };
        std::string req_lines;
        {
            std::lock_guard<std::mutex> lk(metrics_m);
            for (const auto& [k, n] : requests)
                req_lines += "vega_requests_total{endpoint=\"" + k.first + "\",status=\"" + std::to_string(k.second) +
                             "\"} " + std::to_string(n) + "\n";
        }
        metric("vega_requests_total", "counter", "Completion requests answered, by endpoint and status (499: client went away).", req_lines);
        auto one = [](const char* name, int64_t v) { return std::string(name) + " " + std::to_string(v) + "\n"; };
        metric("vega_requests_cancelled_total", "counter", "Requests cancelled because the client went away.",
               one("vega_requests_cancelled_total", cancelled.load()));
        metric("vega_prompt_tokens_total", "counter", "Prompt tokens evaluated.", one("vega_prompt_tokens_total", s.prompt_tokens));
        metric("vega_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.",
               one("vega_prompt_tokens_cached_total", s.cached_tokens));
        metric("vega_generated_tokens_total", "counter", "Tokens generated.", one("vega_generated_tokens_total", s.generated_tokens));
        metric("vega_decode_steps_total", "counter", "Forward calls (one per batched step).", one("vega_decode_steps_total", s.steps));
        metric("vega_queue_size", "gauge", "Requests waiting for the engine or a slot.", one("vega_queue_size", s.queued));
        metric("vega_slots_busy", "gauge", "Slots holding a request.", one("vega_slots_busy", s.slots_busy));
        metric("vega_slots_total", "gauge", "Slots (sequences decoded together).", one("vega_slots_total", s.slots));
        return out;
    }

    void routes() {
        http.set_payload_max_length(o.max_body_bytes);
        // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, which lets a
        // second server bind the same port silently and split the requests.
        http.set_socket_options([](socket_t sock) {
            int yes = 1;
            setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<char*>(&yes), sizeof yes);
        });
        const int threads = engine.stats().slots + o.max_queue + 8;
        http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (o.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
            if (req.get_header_value("Authorization") == "Bearer " + o.api_key)
                return httplib::Server::HandlerResponse::Unhandled;
            send_error(res, ApiError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                     "invalid_request_error", "invalid_api_key"));
            log(req, 401, 0.0, "");
            return httplib::Server::HandlerResponse::Handled;
        });
        http.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            send_error(res, ApiError(500, "internal error: " + what, "server_error", "internal_error"));
            log(req, 500, 0.0, what);
        });
        http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            std::string msg = "error " + std::to_string(res.status);
            if (res.status == 404) msg = "unknown endpoint: " + req.method + " " + req.path;
            if (res.status == 413)
                msg = "the request body is larger than the server's limit of " + std::to_string(o.max_body_bytes) + " bytes";
            send_json(res, res.status, error_body(res.status, msg, res.status == 404 ? "not_found_error" : "invalid_request_error", ""));
            log(req, res.status, 0.0, "");
            return httplib::Server::HandlerResponse::Handled;
        }));
        http.Post("/v1/chat/completions",
                  [this](const httplib::Request& q, httplib::Response& r) { completion(q, r, Endpoint::Chat); });
        http.Post("/v1/completions",
                  [this](const httplib::Request& q, httplib::Response& r) { completion(q, r, Endpoint::Completion); });
        http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            json m{{"id", o.model_id}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "vega"}};
            send_json(res, 200, json{{"object", "list"}, {"data", json::array({m})}});
        });
        http.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, json{{"status", "ok"}}); });
        http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics_text(), "text/plain; version=0.0.4");
        });
    }
};

Server::Server(const Model& model, Session& session, const ServerOptions& opts) {
    std::string warning;
    impl_ = std::make_unique<Impl>(model, session, opts, &warning);
    if (!warning.empty()) std::fprintf(stderr, "vega serve: warning: %s\n", warning.c_str());
    impl_->routes();
}

Server::~Server() = default;

void Server::run(const std::function<void(int)>& on_ready) {
    Impl& I = *impl_;
    int port = I.o.port;
    if (port == 0) port = I.http.bind_to_any_port(I.o.host.c_str());
    else if (!I.http.bind_to_port(I.o.host.c_str(), port)) port = -1;
    if (port < 0) fail("cannot listen on {}:{} (address in use, or not an address of this machine)", I.o.host, I.o.port);
    if (on_ready) on_ready(port);
    I.http.listen_after_bind();
}

void Server::stop() {
    impl_->engine.shutdown();  // waiting handlers return first, then the listener and its threads stop
    impl_->http.stop();
}

}  // namespace vega::server
