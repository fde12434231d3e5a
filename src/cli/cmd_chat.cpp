// vega chat: a multi-turn chat in the terminal. The conversation is rendered with
// the model's chat template every turn and kept in the KV cache: a turn evaluates
// only the tokens its rendering does not share with what the cache holds (the
// Scheduler's prefix reuse). /clear starts over, /exit (or end of input) quits;
// Ctrl-C stops the reply being written, not the program. With stdin not a
// terminal, every line is a user turn (scripted chats).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/limited_option.h"
#include "core/error.h"
#include "engine/scheduler.h"
#include "engine/chat_prompt.h"

namespace vega::cli {

namespace {

struct ChatOptions {
    ModelOptions m;
    std::string system;
    std::string template_file;
    int n_predict = -1;  // per reply; -1: until end of generation or the context is full
    SamplerParams sp;
    bool quiet = false;
};

std::atomic<bool> g_interrupt{false};
extern "C" void on_sigint(int) { g_interrupt = true; }

void chat(const ChatOptions& o) {
    std::string tmpl;
    if (!o.template_file.empty()) {
        std::ifstream f(o.template_file, std::ios::binary);
        if (!f) fail("cannot read chat template file '{}'", o.template_file);
        tmpl.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const bool tty = isatty(fileno(stdin));
    Loaded l = load(o.m, !o.quiet, 1);
    const Tokenizer& tok = l.model->tokenizer();
    std::string warning;
    ChatPrompt prompt(*l.model, tmpl, &warning);
    if (!warning.empty() && !o.quiet) std::fprintf(stderr, "vega chat: warning: %s\n", warning.c_str());
    Scheduler sched(*l.session, tok);
    const int n_ctx = l.session->params().n_ctx;

    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    auto reset = [&] {
        messages = nlohmann::ordered_json::array();
        if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
    };
    reset();
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, nullptr);
    if (tty && !o.quiet)
        std::fprintf(stderr, "vega chat: type a message; /clear starts over, /exit quits, Ctrl-C stops a reply\n");
    int turn = 0;
    for (std::string line;;) {
        if (tty) std::fputs("> ", stdout), std::fflush(stdout);
        g_interrupt = false;
        if (!std::getline(std::cin, line)) {
            if (tty && g_interrupt) {  // Ctrl-C at the prompt: a fresh line, keep going
                std::cin.clear();
                std::fputs("\n", stdout);
                continue;
            }
            break;
        }
        if (line == "/exit" || line == "/quit") break;
        if (line == "/clear") {
            reset();
            if (!o.quiet) std::fprintf(stderr, "vega chat: conversation cleared\n");
            continue;
        }
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        messages.push_back({{"role", "user"}, {"content", line}});
        GenRequest r;
        r.prompt = prompt.encode(tok, messages, nullptr, true);
        if (int(r.prompt.size()) >= n_ctx) {
            messages.erase(messages.end() - 1);
            std::fprintf(stderr, "vega chat: the conversation (%zu tokens) no longer fits the context of %d tokens; "
                                 "/clear to start over, or use a larger -c\n", r.prompt.size(), n_ctx);
            if (!tty) fail("the conversation does not fit the context ({} tokens, -c {})", r.prompt.size(), n_ctx);
            continue;
        }
        r.sampling = o.sp;
        r.n_predict = o.n_predict < 0 ? n_ctx : o.n_predict;
        const int64_t evaluated0 = sched.stats().prompt_tokens;
        const int id = sched.submit(r);
        std::string reply;
        Utf8Stream out;
        int n_gen = 0;
        FinishReason why = FinishReason::Stop;
        const double t0 = now_seconds();
        sched.run(
            [&](int, int32_t t) {
                if (g_interrupt) return false;
                if (tok.is_eog(t)) return true;
                ++n_gen;
                const std::string piece = out.push(tok.token_to_piece(t));
                reply += piece;
                std::fputs(piece.c_str(), stdout);
                std::fflush(stdout);
                return true;
            },
            [&](int, FinishReason f) { why = f; });
        (void)id;
        const std::string tail = out.flush();
        reply += tail;
        std::fputs((tail + "\n").c_str(), stdout);
        std::fflush(stdout);
        messages.push_back({{"role", "assistant"}, {"content", reply}});
        ++turn;
        if (!o.quiet) {
            const int64_t evaluated = sched.stats().prompt_tokens - evaluated0;
            std::fprintf(stderr, "[turn %d: prompt %zu tokens, %lld evaluated, %lld from the cache; %d generated, %.1f t/s%s]\n",
                         turn, r.prompt.size(), (long long)evaluated, (long long)(int64_t(r.prompt.size()) - evaluated),
                         n_gen, n_gen / std::max(1e-9, now_seconds() - t0),
                         g_interrupt ? ", stopped" : why == FinishReason::Length ? ", length limit" : "");
        }
    }
}

}  // namespace

void register_chat(CLI::App& app) {
    auto o = std::make_shared<ChatOptions>();
    CLI::App* cmd = app.add_subcommand("chat", "interactive multi-turn chat (reads turns from stdin when it is not a terminal)");
    add_model_options(*cmd, o->m);
    cmd->add_option("-s,--system", o->system, "system prompt");
    cmd->add_option("--chat-template-file", o->template_file, "Jinja chat template to use instead of the model's");
    add_limited_option(*cmd, o->n_predict, option_limits().n_predict, "most tokens per reply (-1: until the model ends it)")
        ->capture_default_str();
    add_sampling_options(*cmd, o->sp);
    cmd->add_flag("-q,--quiet", o->quiet, "no progress or per-turn counts on stderr");
    cmd->callback([o] { chat(*o); });
}

}  // namespace vega::cli
