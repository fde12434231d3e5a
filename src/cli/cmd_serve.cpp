// vega serve: the OpenAI-compatible HTTP server (src/server). --parallel N slots
// decode together (continuous batching); -c is the context of each slot.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <pthread.h>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/limited_option.h"
#include "core/error.h"
#include "server/server.h"

namespace vega::cli {

namespace {

struct ServeOptions {
    ModelOptions m;
    server::ServerOptions s;
    int parallel = 4;
    std::string template_file;
    bool quiet = false;
};

std::string file_name(const std::string& path) {
    const size_t k = path.find_last_of('/');
    return k == std::string::npos ? path : path.substr(k + 1);
}

void serve(ServeOptions o) {
    if (!o.template_file.empty()) {
        std::ifstream f(o.template_file, std::ios::binary);
        if (!f) fail("cannot read chat template file '{}'", o.template_file);
        o.s.chat_template.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    o.s.log_requests = !o.quiet;
    // SIGINT/SIGTERM are taken by one thread (sigwait) that stops the server; every
    // other thread, created after this, inherits the blocked mask. SIGPIPE (a client
    // that hung up) must not end the process.
    std::signal(SIGPIPE, SIG_IGN);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    Loaded l = load(o.m, !o.quiet, o.parallel);
    if (o.s.model_id.empty()) o.s.model_id = file_name(l.model_path);
    server::Server srv(*l.model, *l.session, o.s);
    // The first SIGINT/SIGTERM starts the graceful stop (Server::stop: requests in flight
    // get --shutdown-timeout); a second one ends the process at once. SIGUSR1 comes from
    // this thread when run() has returned.
    sigaddset(&stop_signals, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::thread waiter([&] {
        std::thread stopper;
        for (int sig = 0;;) {
            sigwait(&stop_signals, &sig);
            if (sig == SIGUSR1) break;
            if (stopper.joinable()) {
                std::fprintf(stderr, "vega serve: second signal %d, exiting now\n", sig);
                std::_Exit(1);
            }
            std::fprintf(stderr, "vega serve: signal %d, stopping (requests in flight get %.1f s; a second signal exits now)\n",
                         sig, o.s.shutdown_timeout_s);
            stopper = std::thread([&] { srv.stop(); });
        }
        if (stopper.joinable()) stopper.join();
    });
    try {
        srv.run([&](int port) {
            std::fprintf(stderr, "vega serve: %s, %d slots of %d tokens, listening on http://%s:%d\n",
                         o.s.model_id.c_str(), o.parallel, l.session->params().n_ctx, o.s.host.c_str(), port);
            std::fflush(stderr);
        });
    } catch (...) {
        pthread_kill(waiter.native_handle(), SIGUSR1);
        waiter.join();
        throw;
    }
    pthread_kill(waiter.native_handle(), SIGUSR1);
    waiter.join();
}

}  // namespace

void register_serve(CLI::App& app) {
    auto o = std::make_shared<ServeOptions>();
    CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat and text completions)");
    add_model_options(*cmd, o->m);
    cmd->add_option("--host", o->s.host, "address to listen on")->capture_default_str();
    cmd->add_option("--port", o->s.port, "port (0: any free port, printed at start)")->capture_default_str()->check(CLI::Range(0, 65535));
    add_limited_option(*cmd, o->parallel, option_limits().parallel, "slots: requests decoded together (continuous batching)")
        ->capture_default_str();
    cmd->add_option("--api-key", o->s.api_key, "require 'Authorization: Bearer KEY' on every request but /health");
    cmd->add_option("--max-queue", o->s.max_queue, "requests that may wait for a slot (beyond: 503)")
        ->capture_default_str()
        ->check(CLI::Range(0, 100000));
    cmd->add_option("--max-body", o->s.http.limits.max_body, "largest request body in bytes (beyond: 413)")
        ->capture_default_str()
        ->check(CLI::Range(size_t(1), size_t(1) << 30));
    cmd->add_option("--max-connections", o->s.http.max_connections,
                    "open connections at once (beyond: 503 and close; nginx worker_connections)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    cmd->add_option("--timeout-header", o->s.http.header_timeout_s,
                    "seconds a client has for a request's line and headers (beyond: 408; nginx client_header_timeout)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--timeout-body", o->s.http.body_timeout_s,
                    "seconds a client has for a request's body (beyond: 408; nginx client_body_timeout)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--timeout-idle", o->s.http.idle_timeout_s,
                    "seconds a kept-alive connection may wait for its next request (nginx keepalive_timeout)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--timeout-write", o->s.http.write_timeout_s,
                    "seconds one write may wait for a client that does not read (nginx send_timeout)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--shutdown-timeout", o->s.shutdown_timeout_s,
                    "on SIGTERM/SIGINT: seconds requests in flight may take to finish before they end with an error")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    cmd->add_option("--cors", o->s.cors_origins,
                    "answer browsers from this origin with CORS headers and preflights (repeat or comma-separate; '*' for any; "
                    "default: none)")
        ->delimiter(',');
    cmd->add_option("--chat-template-file", o->template_file, "Jinja chat template to use instead of the model's");
    cmd->add_option("--alias", o->s.model_id, "model id in responses and /v1/models (default: the file name)");
    cmd->add_flag("-q,--quiet", o->quiet, "no request log on stderr");
    cmd->callback([o] { serve(*o); });
}

}  // namespace vega::cli
