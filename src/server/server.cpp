#include "server/server.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/error.h"
#include "engine/chat_prompt.h"
#include "engine/tool_calls.h"
#include "grammar/grammar.h"
#include "server/api.h"
#include "server/engine_loop.h"
#include "server/request_json.h"
#include "server/template_check.h"

namespace vega::server {

namespace {

long unix_time() { return long(std::time(nullptr)); }
double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Generated text can hold bytes that are not UTF-8 (a model's byte tokens); JSON out
// replaces them with U+FFFD instead of failing.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* error_type(int status) {
    if (status == 404) return "not_found_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

// False when the client is gone.
bool send_json(http::Responder& r, int status, const json& j) { return r.send(status, "application/json", dump(j)); }
void send_error(http::Responder& r, const ApiError& e) { send_json(r, e.status, error_body(e.status, e.what(), e.type, e.code)); }

// Equal strings in a time that does not depend on where they differ (API keys).
bool same_secret(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= (unsigned char)(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
    return diff == 0 && !b.empty();
}

// How often a waiting handler looks at its client (cancellation within ~this).
constexpr int kLivenessMs = 20;
// A streamed call's arguments go out in pieces of about this many bytes.
constexpr size_t kArgumentPiece = 32;

// The endpoints and the methods each takes (HEAD with every GET; OPTIONS everywhere).
struct Route {
    const char* path;
    const char* methods;  // the Allow header's value
};
constexpr Route kRoutes[] = {
    {"/v1/chat/completions", "POST, OPTIONS"},
    {"/v1/completions", "POST, OPTIONS"},
    {"/v1/models", "GET, HEAD, OPTIONS"},
    {"/health", "GET, HEAD, OPTIONS"},
    {"/metrics", "GET, HEAD, OPTIONS"},
};
const Route* find_route(const std::string& path) {
    for (const Route& r : kRoutes)
        if (path == r.path) return &r;
    return nullptr;
}

}  // namespace

struct Server::Impl {
    const Model& model;
    Session& session;
    ServerOptions o;
    ChatPrompt chat;
    EngineLoop engine;
    std::unique_ptr<http::HttpServer> http;
    std::atomic<int64_t> next_id{1};
    std::mutex metrics_m;
    std::map<std::pair<std::string, int>, int64_t> requests;  // (endpoint, status) -> count
    std::atomic<int64_t> cancelled{0};
    std::mutex id_m;
    std::mt19937_64 id_rng{std::random_device{}()};
    ToolFormat tool_format = ToolFormat::None;  // the syntax the chat template teaches (engine/tool_calls.h)
    bool thinks = false;                       // the template writes <think> blocks

    Impl(const Model& m, Session& s, const ServerOptions& opts, std::string* warning)
        : model(m), session(s), o(opts), chat(m, opts.chat_template, warning), engine(s, m.tokenizer(), opts.max_queue) {
        tool_format = detect_tool_format(chat.source());
        thinks = template_thinks(chat.source());
        http::HttpOptions ho = o.http;
        // Complete requests wait for workers: every slot and queued request may hold
        // one while it generates, and a few more answer /health, /metrics and errors.
        ho.workers = engine.stats().slots + o.max_queue + 8;
        http = std::make_unique<http::HttpServer>(
            ho, [this](const http::Request& q, http::Responder& r) { handle(q, r); },
            [](int status, const std::string& msg) {
                return std::make_pair(std::string("application/json"), dump(error_body(status, msg, error_type(status), "")));
            },
            [this](const std::string& remote, int status, const std::string& msg) {
                if (o.log_requests) std::fprintf(stderr, "vega serve: %s -> %d, %s\n", remote.c_str(), status, msg.c_str());
            });
    }

    void count(const std::string& endpoint, int status) {
        std::lock_guard<std::mutex> lk(metrics_m);
        ++requests[{endpoint, status}];
    }
    void log(const http::Request& req, int status, double ms, const std::string& extra) {
        if (o.log_requests)
            std::fprintf(stderr, "vega serve: %s %s %s -> %d, %.1f ms%s%s\n", req.remote.c_str(), req.method.c_str(),
                         req.path.c_str(), status, ms, extra.empty() ? "" : ", ", extra.c_str());
    }

    // The CORS origin to allow for this request ("" when none): the request's Origin
    // if --cors lists it (or "*").
    std::string cors_origin(const http::Request& req) const {
        const std::string* origin = req.header("Origin");
        if (!origin) return "";
        for (const std::string& a : o.cors_origins)
            if (a == "*" || a == *origin) return a == "*" ? "*" : *origin;
        return "";
    }

    // The prompt's tokens: the chat rendering (BOS added unless the template wrote
    // it) or the completion prompt (BOS as the model wants); special tokens parsed.
    // open_think: the rendering ends inside a think block (the reply starts in it).
    std::vector<int32_t> prompt_tokens(const CompletionParams& p, bool* open_think) const {
        const Tokenizer& tok = model.tokenizer();
        *open_think = false;
        if (p.endpoint == Endpoint::Completion) return tok.encode(p.prompt, true, true);
        try {
            const std::string text = chat.render(p.messages, p.tools, true);
            size_t e = text.size();
            while (e > 0 && (text[e - 1] == '\n' || text[e - 1] == ' ')) --e;
            std::string open = think_markers(tool_format).open;
            while (!open.empty() && (open.back() == '\n' || open.back() == ' ')) open.pop_back();
            *open_think = thinks && e >= open.size() && text.compare(e - open.size(), open.size(), open) == 0;
            return chat.tokens(tok, text);
        } catch (const Error& e) {
            throw ApiError(400, std::string("chat template: ") + e.what(), "invalid_request_error", "template_error");
        }
    }

    void handle(const http::Request& req, http::Responder& r) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string allow = cors_origin(req);
        if (!allow.empty()) {
            r.add_header("Access-Control-Allow-Origin", allow);
            if (allow != "*") r.add_header("Vary", "Origin");
        }
        const Route* route = find_route(req.path);
        if (req.method == "OPTIONS") {  // before the API key: browsers send no credentials in a preflight
            if (!route && req.path != "*") {
                send_error(r, ApiError(404, "unknown endpoint: OPTIONS " + req.path, "not_found_error", "not_found"));
                return log(req, 404, ms_since(t0), "");
            }
            r.add_header("Allow", route ? route->methods : "GET, HEAD, POST, OPTIONS");
            if (!allow.empty() && req.header("Access-Control-Request-Method")) {
                r.add_header("Access-Control-Allow-Methods", route ? route->methods : "GET, HEAD, POST, OPTIONS");
                const std::string* h = req.header("Access-Control-Request-Headers");
                r.add_header("Access-Control-Allow-Headers", h && !h->empty() ? *h : "Authorization, Content-Type");
                r.add_header("Access-Control-Max-Age", "600");
            }
            r.send(204, "", "");
            return log(req, 204, ms_since(t0), "");
        }
        if (!o.api_key.empty() && req.path != "/health") {
            const std::string* auth = req.header("Authorization");
            if (!auth || !same_secret(*auth, "Bearer " + o.api_key)) {
                r.add_header("WWW-Authenticate", "Bearer");
                send_error(r, ApiError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                       "invalid_request_error", "invalid_api_key"));
                return log(req, 401, ms_since(t0), "");
            }
        }
        if (!route) {
            send_error(r, ApiError(404, "unknown endpoint: " + req.method + " " + req.path, "not_found_error", "not_found"));
            return log(req, 404, ms_since(t0), "");
        }
        const std::string methods = route->methods;
        const bool get_like = req.method == "GET" || req.method == "HEAD";
        const bool allowed = (get_like && methods.find("GET") != std::string::npos) ||
                             (req.method == "POST" && methods.find("POST") != std::string::npos);
        if (!allowed) {
            r.add_header("Allow", methods);
            send_error(r, ApiError(405, req.method + " is not allowed on " + req.path + " (allowed: " + methods + ")",
                                   "invalid_request_error", "method_not_allowed"));
            return log(req, 405, ms_since(t0), "");
        }
        if (req.path == "/v1/chat/completions") return completion(req, r, Endpoint::Chat);
        if (req.path == "/v1/completions") return completion(req, r, Endpoint::Completion);
        if (req.path == "/v1/models") {
            json m{{"id", o.model_id}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "vega"}};
            send_json(r, 200, json{{"object", "list"}, {"data", json::array({m})}});
            return;
        }
        if (req.path == "/health") send_json(r, 200, json{{"status", "ok"}});
        else r.send(200, "text/plain; version=0.0.4", metrics_text());
    }

    void completion(const http::Request& req, http::Responder& r, Endpoint ep) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string name = ep == Endpoint::Chat ? "chat" : "completions";
        CompletionParams p;
        std::vector<int32_t> prompt;
        bool open_think = false;
        try {
            p = parse_completion_request(parse_request_json(req.body), ep, tool_format);
            if (p.model.empty()) p.model = o.model_id;
            prompt = prompt_tokens(p, &open_think);
            const int n_ctx = session.params().n_ctx;
            if (int(prompt.size()) >= n_ctx)
                throw ApiError(400,
                               "the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                                   std::to_string(n_ctx) + " (no room to generate)",
                               "invalid_request_error", "context_length_exceeded");
        } catch (const ApiError& e) {
            send_error(r, e);
            count(name, e.status);
            return log(req, e.status, ms_since(t0), e.what());
        }
        GenRequest g;
        g.prompt = prompt;
        g.sampling = p.sampling;
        g.n_predict = p.max_tokens < 0 ? session.params().n_ctx : p.max_tokens;
        g.ignore_eos = p.ignore_eos;
        g.grammar = p.grammar;
        // The prompt left a think block open: a constrained reply (a forced call, a JSON
        // response_format) closes it first, so that the answer is content, not reasoning.
        if (g.grammar && open_think)
            g.grammar = std::make_shared<const grammar::Grammar>(
                grammar::Grammar::after_literal(*g.grammar, think_markers(tool_format).close));
        g.logprobs = p.logprobs;
        g.render_special = ep == Endpoint::Chat && reply_shows_special(tool_format, !p.tools.is_null());
        auto job = engine.submit(std::move(g), p.stop);
        if (!job) {
            r.add_header("Retry-After", "1");
            send_error(r, ApiError(503, "the server is busy: every slot is taken and the queue is full; retry later",
                                   "server_error", "queue_full"));
            count(name, 503);
            return log(req, 503, ms_since(t0), "queue full");
        }
        const std::string id = (ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
        const long created = unix_time();
        auto summary = [&job](const char* reason) {
            return "prompt " + std::to_string(job->n_prompt) + " tokens (" + std::to_string(job->n_cached) +
                   " cached), generated " + std::to_string(job->n_generated) + ", " + reason;
        };
        auto usage = [&job] {
            std::lock_guard<std::mutex> lk(job->m);
            return Usage{job->n_prompt, job->n_generated, job->n_cached};
        };
        auto client_left = [&](const char* what) {
            engine.cancel(job);
            ++cancelled;
            count(name, 499);
            r.abort();
            if (o.log_requests)
                std::fprintf(stderr, "vega serve: %s %s %s -> client closed the connection%s, cancelled, %.1f ms\n",
                             req.remote.c_str(), req.method.c_str(), req.path.c_str(), what, ms_since(t0));
        };
        auto job_error = [&]() -> ApiError {
            if (job->shutdown) return ApiError(503, job->error, "server_error", "server_shutting_down");
            return ApiError(500, "generation failed: " + job->error, "server_error", "engine_error");
        };
        if (!p.stream) {
            // A half-closed client may still read: the probe commits the 200's headers.
            r.set_probe(200, "application/json", "");
            std::string text, piece;
            for (bool done = false; !done;) {
                done = job->take_for(piece, kLivenessMs);
                text += piece;
                if (!done && !r.alive()) return client_left("");
            }
            if (!job->error.empty()) {
                const ApiError e = job_error();
                send_error(r, e);
                count(name, e.status);
                return log(req, e.status, ms_since(t0), job->error);
            }
            const char* reason = job->reason == FinishReason::Length ? "length" : "stop";
            json body;
            std::vector<TokenLp> lps;
            job->take_logprobs(lps);
            if (ep == Endpoint::Chat) {
                ReplySplitter split = splitter(p, open_think);
                split.add(text);
                const ChatReply reply = chat_reply(split.finish());
                if (!reply.calls.empty()) reason = "tool_calls";
                body = chat_reply_response(p, id, created, reply, reason, usage());
            } else {
                body = completion_response(p, id, created, text, reason, usage());
            }
            if (p.logprobs >= 0) body["choices"][0]["logprobs"] = logprobs_json(p, lps);
            if (!send_json(r, 200, body)) return client_left("");
            count(name, 200);
            return log(req, 200, ms_since(t0), summary(reason));
        }
        // SSE over a chunked (HTTP/1.1) or close-delimited (HTTP/1.0) body.
        r.add_header("Cache-Control", "no-cache");
        // One stream per connection: node-fetch 2.7 (the openai v4 client) on Node 18 reports
        // "Premature close" for a chunked stream on a kept-alive socket.
        r.set_close();
        auto send = [&](const json& j) { return r.write("data: " + dump(j) + "\n\n"); };
        if (!r.begin(200, "text/event-stream")) return client_left(" (stream)");
        r.set_probe(200, "text/event-stream", ": ping\n\n");  // an SSE comment: clients ignore it
        bool first = true;
        std::string piece;
        const bool chat_ep = ep == Endpoint::Chat;
        // logprobs gathered and not yet sent; each chunk carries those taken before it.
        std::vector<TokenLp> pending;
        size_t text_offset = 0;
        auto with_lp = [&](json chunk) {
            if (p.logprobs < 0) return chunk;
            job->take_logprobs(pending);
            chunk["choices"][0]["logprobs"] = logprobs_json(p, pending, text_offset);
            for (const TokenLp& t : pending) text_offset += t.token.size();
            pending.clear();
            return chunk;
        };
        ReplySplitter split = splitter(p, open_think);
        // Chat: reasoning and content as they become safe to send (a possible tool call or
        // think marker is held back until it is known).
        auto send_parts = [&](const std::string& reasoning, const std::string& content) {
            if (!reasoning.empty()) {
                if (!send(with_lp(chat_delta_chunk(p, id, created, json{{"reasoning_content", reasoning}}, first))))
                    return false;
                first = false;
            }
            if (!content.empty()) {
                if (!send(with_lp(chat_delta_chunk(p, id, created, json{{"content", content}}, first)))) return false;
                first = false;
            }
            return true;
        };
        for (bool done = false; !done;) {
            done = job->take_for(piece, kLivenessMs);
            if (!piece.empty()) {
                if (chat_ep) {
                    split.add(piece);
                    const ReplySplitter::Delta d = split.take();
                    if (!send_parts(d.reasoning, d.content)) return client_left(" (stream)");
                } else {
                    if (!send(with_lp(stream_chunk(p, id, created, piece, nullptr, first)))) return client_left(" (stream)");
                    first = false;
                }
            }
            if (!done && !r.alive()) return client_left(" (stream)");
        }
        if (!job->error.empty()) {  // an error event, and no [DONE]: the answer is not complete
            const ApiError e = job_error();
            send(json{{"error", error_body(e.status, e.what(), e.type, e.code)["error"]}});
            r.finish();
            count(name, e.status);
            return log(req, e.status, ms_since(t0), std::string("(stream) ") + job->error);
        }
        const char* reason = job->reason == FinishReason::Length ? "length" : "stop";
        bool ok = true;
        if (chat_ep) {
            // The rest, then each call: its id and name, then its arguments in pieces (as
            // OpenAI streams them).
            const ChatReply reply = chat_reply(split.finish());
            ok = send_parts(reply.reasoning, reply.content);
            for (size_t i = 0; ok && i < reply.calls.size(); ++i) {
                const json head{{"index", i},
                                {"id", reply.call_ids[i]},
                                {"type", "function"},
                                {"function", {{"name", reply.calls[i].name}, {"arguments", ""}}}};
                ok = send(chat_delta_chunk(p, id, created, json{{"tool_calls", json::array({head})}}, first));
                first = false;
                const std::string& a = reply.calls[i].arguments;
                for (size_t at = 0; ok && at < a.size();) {
                    size_t n = std::min<size_t>(kArgumentPiece, a.size() - at);
                    while (at + n < a.size() && (static_cast<unsigned char>(a[at + n]) & 0xC0) == 0x80) ++n;  // whole UTF-8
                    const json part{{"index", i}, {"function", {{"arguments", a.substr(at, n)}}}};
                    ok = send(chat_delta_chunk(p, id, created, json{{"tool_calls", json::array({part})}}, false));
                    at += n;
                }
            }
            if (!reply.calls.empty()) reason = "tool_calls";
        }
        if (ok && first && p.endpoint == Endpoint::Chat) ok = send(stream_chunk(p, id, created, "", nullptr, true));
        if (ok && p.logprobs >= 0) {  // tokens whose text never became a delta (held back, or a stop string's)
            job->take_logprobs(pending);
            if (!pending.empty())
                ok = send(with_lp(chat_ep ? chat_delta_chunk(p, id, created, json::object(), false)
                                          : stream_chunk(p, id, created, "", nullptr, false)));
        }
        ok = ok && send(stream_chunk(p, id, created, "", reason, false));
        if (p.include_usage) ok = ok && send(usage_chunk(p, id, created, usage()));
        ok = ok && r.write("data: [DONE]\n\n") && r.finish();
        if (!ok) return client_left(" (stream)");
        count(name, 200);
        log(req, 200, ms_since(t0), "(stream) " + summary(reason));
    }

    // The reply's splitter for this request: tool calls looked for when tools are in
    // play (in the template's syntax, Hermes when it teaches none); reasoning when the
    // template thinks.
    ReplySplitter splitter(const CompletionParams& p, bool open_think) const {
        // Without tools the format still splits its reasoning (its own markers); calls are
        // looked for only with tools (a template that teaches none: Hermes, as the fallback).
        const bool tools = !p.tools.is_null() && p.tool_choice != ToolChoice::None;
        const ToolFormat f = tools && tool_format == ToolFormat::None ? ToolFormat::Hermes : tool_format;
        ReplySplitter s(f, thinks, open_think, tools);
        s.set_tools(p.tools);
        return s;
    }
    // Call ids: 9 random letters and digits (Mistral's templates refuse any other form
    // when the call comes back in the history; OpenAI clients take any string).
    ChatReply chat_reply(ReplySplitter::Final f) {
        ChatReply r;
        r.reasoning = std::move(f.reasoning), r.content = std::move(f.content), r.calls = std::move(f.calls);
        static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        std::lock_guard<std::mutex> lk(id_m);
        for (size_t i = 0; i < r.calls.size(); ++i) {
            std::string id(9, 'a');
            for (char& c : id) c = kAlnum[id_rng() % 62];
            r.call_ids.push_back(id);
        }
        return r;
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
        metric("vega_grammar_tokens_total", "counter", "Tokens generated under a grammar (grammar, response_format, forced tool calls).",
               one("vega_grammar_tokens_total", s.grammar_tokens));
        metric("vega_grammar_whole_logits_rows_total", "counter",
               "Grammar rows whose device candidates the grammar refused, sampled from their whole logits.",
               one("vega_grammar_whole_logits_rows_total", s.grammar_whole_rows));
        metric("vega_grammar_seconds_total", "counter", "Engine time grammars cost: candidate checks, whole-row sampling, matcher steps.",
               std::string("vega_grammar_seconds_total ") + fmt::format("{:.6f}", s.grammar_seconds) + "\n");
        metric("vega_queue_size", "gauge", "Requests waiting for the engine or a slot.", one("vega_queue_size", s.queued));
        metric("vega_slots_busy", "gauge", "Slots holding a request.", one("vega_slots_busy", s.slots_busy));
        metric("vega_slots_total", "gauge", "Slots (sequences decoded together).", one("vega_slots_total", s.slots));
        metric("vega_http_requests_in_flight", "gauge", "HTTP requests being answered.",
               one("vega_http_requests_in_flight", http->busy()));
        return out;
    }
};

Server::Server(const Model& model, Session& session, const ServerOptions& opts) {
    std::string warning;
    impl_ = std::make_unique<Impl>(model, session, opts, &warning);
    if (!warning.empty()) std::fprintf(stderr, "vega serve: warning: %s\n", warning.c_str());
    const TemplateCheck tc = check_chat_template(impl_->chat);
    if (!tc.failures.empty())
        std::fprintf(stderr, "vega serve: warning: the chat template fails %s: %s%s\n",
                     tc.basic_fails ? "even for one user message (every chat request will be answered 400)"
                                    : "for some conversations",
                     tc.failures.c_str(), opts.chat_template.empty() ? " (--chat-template-file gives another)" : "");
    else if (opts.log_requests)
        std::fprintf(stderr, "vega serve: the chat template renders all %d probe conversations\n", tc.probes);
    // What chat replies are split into (engine/tool_calls.h), so an operator knows.
    if (opts.log_requests)
        std::fprintf(stderr, "vega serve: tool calls read as %s%s\n", tool_format_name(impl_->tool_format),
                     impl_->thinks ? "; <think> blocks become reasoning_content" : "");
}

Server::~Server() = default;

void Server::run(const std::function<void(int)>& on_ready) {
    Impl& I = *impl_;
    const int port = I.http->listen(I.o.host, I.o.port);
    if (I.http->max_connections() < I.o.http.max_connections)
        std::fprintf(stderr, "vega serve: warning: the open-file limit allows %d connections, not %d (ulimit -n)\n",
                     I.http->max_connections(), I.o.http.max_connections);
    if (on_ready) on_ready(port);
    I.http->run();
}

void Server::stop() {
    Impl& I = *impl_;
    using clock = std::chrono::steady_clock;
    auto wait_idle = [&](double seconds) {
        const auto end = clock::now() + std::chrono::duration<double>(seconds);
        while (I.http->busy() > 0 && clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return I.http->busy() == 0;
    };
    I.http->drain();  // no new connections; requests in flight go on
    if (!wait_idle(I.o.shutdown_timeout_s)) {
        if (I.o.log_requests)
            std::fprintf(stderr, "vega serve: %d requests still running after %.1f s: ending them with an error\n",
                         I.http->busy(), I.o.shutdown_timeout_s);
        I.engine.shutdown();  // every job ends unfinished; handlers answer 503 / an error event
        if (!wait_idle(2.0)) {
            I.http->cut_busy();  // clients that do not read their error
            wait_idle(2.0);
        }
    }
    I.engine.shutdown();
    I.http->stop();
}

}  // namespace vega::server
