// vega run: generate text from a prompt, streaming it to stdout; timings on stderr.
// With --prompts-file, every line of the file is a prompt and --parallel N of them
// are in flight at once (continuous batching through the Scheduler).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/limited_option.h"
#include "core/error.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace vega::cli {

namespace {

struct RunOptions {
    ModelOptions m;
    std::string prompt;
    std::string prompt_file;
    int n_predict = 128;
    SamplerParams sp;
    bool ignore_eos = false;
    bool special = false;
    std::string ids_out;
    bool quiet = false;
    std::string prompts_file;
    int parallel = 1;
    std::string grammar, grammar_file;  // GBNF text, or a file of it
    std::string json_schema;            // a JSON Schema the output must satisfy
};

// The --grammar / --grammar-file / --json-schema grammar (null without one); errors
// name the source (and the line and column, or the schema keyword).
std::shared_ptr<const grammar::Grammar> load_grammar(const RunOptions& o) {
    if (!o.json_schema.empty()) {
        const auto schema = nlohmann::ordered_json::parse(o.json_schema, nullptr, false);
        if (schema.is_discarded()) fail("--json-schema: not valid JSON");
        try {
            return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(grammar::json_schema_to_gbnf(schema)));
        } catch (const grammar::GrammarError& e) {
            fail("--json-schema: {}", e.what());
        }
    }
    if (o.grammar.empty() && o.grammar_file.empty()) return nullptr;
    std::string text = o.grammar, where = "--grammar";
    if (!o.grammar_file.empty()) {
        std::ifstream f(o.grammar_file, std::ios::binary);
        if (!f) fail("cannot read grammar file '{}'", o.grammar_file);
        text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        where = o.grammar_file;
    }
    try {
        return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(text));
    } catch (const grammar::GrammarError& e) {
        fail("{}: {}", where, e.what());
    }
}

// Tokens a prompt of n_prompt tokens may generate: -n, or with -n -1 what the context
// leaves after it (the Scheduler also stops at the context's end). Fails when the prompt
// and -n (at least one token) do not fit; `which` names the prompt in the message.
int generation_budget(const std::string& which, size_t n_prompt, int n_predict, int n_ctx) {
    if (n_predict < 0 && int(n_prompt) < n_ctx) return n_ctx - int(n_prompt);
    if (n_predict < 0) fail("{} ({} tokens) fills the context size {} (use -c)", which, n_prompt, n_ctx);
    if (int(n_prompt) + n_predict > n_ctx)
        fail("{} ({} tokens) + -n {} exceeds the context size {} (use -c)", which, n_prompt, n_predict, n_ctx);
    return n_predict;
}

std::string join_ids(const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
    return s;
}

void run(const RunOptions& o) {
    std::string prompt = o.prompt;
    if (!o.prompt_file.empty()) {
        std::ifstream f(o.prompt_file, std::ios::binary);
        if (!f) fail("cannot read prompt file '{}'", o.prompt_file);
        prompt.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    Loaded l = load(o.m, !o.quiet);
    const Tokenizer& tok = l.model->tokenizer();
    Session& s = *l.session;
    std::vector<int32_t> prompt_ids = tok.encode(prompt, /*add_special=*/true, o.special);
    if (prompt_ids.empty()) fail("the prompt is empty and the vocabulary adds no BOS token");
    const int n_ctx = s.params().n_ctx;
    const int n_predict = generation_budget("prompt", prompt_ids.size(), o.n_predict, n_ctx);

    // One request through the Scheduler, which decides what leaves the device (argmax
    // or top-k candidates when the sampler allows it, else whole rows), as it does
    // for --prompts-file and the server.
    Scheduler sched(s, tok);
    GenRequest req;
    req.prompt = prompt_ids;
    req.sampling = o.sp;
    req.n_predict = n_predict;
    req.ignore_eos = o.ignore_eos;
    req.grammar = load_grammar(o);
    sched.submit(std::move(req));

    std::vector<int32_t> generated;
    Utf8Stream out;
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
    const double t0 = now_seconds();
    double t_first = t0;  // the prompt pass ends with the first token
    sched.run(
        [&](int, int32_t t) {
            if (generated.empty()) t_first = now_seconds();
            generated.push_back(t);
            if (!o.ignore_eos && tok.is_eog(t)) return true;  // ends the request; no text
            std::string piece = tok.token_to_piece(t);
            // With no prompt text the first piece's word-boundary space is an artifact (as in llama_detokenize).
            if (generated.size() == 1 && prompt.empty() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
            std::fputs(out.push(piece).c_str(), stdout);
            std::fflush(stdout);
            return true;
        },
        nullptr);
    std::fputs(out.flush().c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    const double t_prompt = t_first - t0, t_gen = now_seconds() - t_first;

    if (!o.ids_out.empty()) {
        std::ofstream f(o.ids_out, std::ios::binary);
        if (!f) fail("cannot write '{}'", o.ids_out);
        f << join_ids(prompt_ids) << "\n" << join_ids(generated) << "\n";
    }
    if (!o.quiet) {
        // The first generated token comes from the prompt pass; the rest from decode steps.
        const int n_steps = std::max<int>(0, int(generated.size()) - 1);
        std::fprintf(stderr, "\nvega: load %.2f s | prompt %zu tokens, %.2f tokens/s | generation %d tokens, %.2f tokens/s\n",
                     l.load_seconds, prompt_ids.size(), double(prompt_ids.size()) / t_prompt, n_steps,
                     n_steps > 0 ? double(n_steps) / t_gen : 0.0);
    }
}

// Every non-blank line of prompts_file is a prompt; `parallel` sequences are in
// flight at once and a waiting prompt joins as soon as one finishes. Results are
// printed in input order (each as soon as it and all before it are done); the
// ids file gets one line per prompt: prompt ids, a tab, generated ids.
void run_many(const RunOptions& o) {
    std::ifstream f(o.prompts_file, std::ios::binary);
    if (!f) fail("cannot read prompts file '{}'", o.prompts_file);
    std::vector<std::string> prompts;
    for (std::string line; std::getline(f, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") != std::string::npos) prompts.push_back(line);
    }
    if (prompts.empty()) fail("prompts file '{}' has no non-blank line", o.prompts_file);
    Loaded l = load(o.m, !o.quiet, o.parallel);
    const Tokenizer& tok = l.model->tokenizer();
    Session& s = *l.session;
    const int n_ctx = s.params().n_ctx;
    Scheduler sched(s, tok);
    const std::shared_ptr<const grammar::Grammar> grammar = load_grammar(o);
    std::vector<std::vector<int32_t>> prompt_ids(prompts.size()), generated(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
        prompt_ids[i] = tok.encode(prompts[i], /*add_special=*/true, o.special);
        if (prompt_ids[i].empty()) fail("prompt {} is empty and the vocabulary adds no BOS token", i + 1);
        const int n_predict = generation_budget(fmt::format("prompt {}", i + 1), prompt_ids[i].size(), o.n_predict, n_ctx);
        GenRequest r;
        r.prompt = prompt_ids[i];
        r.sampling = o.sp;
        // Same --seed for every prompt: each line samples as it would when run alone.
        r.n_predict = n_predict;
        r.ignore_eos = o.ignore_eos;
        r.grammar = grammar;
        const int id = sched.submit(std::move(r));
        if (id != int(i)) fail("internal: request ids out of order");
    }
    std::vector<char> done(prompts.size(), 0);
    size_t printed = 0;
    auto print_ready = [&] {
        for (; printed < prompts.size() && done[printed]; ++printed) {
            std::string text = prompts[printed];
            for (int32_t t : generated[printed])
                if (o.ignore_eos || !tok.is_eog(t)) text += tok.token_to_piece(t);
            std::fprintf(stdout, "%s\n", text.c_str());
            std::fflush(stdout);
        }
    };
    const double t0 = now_seconds();
    sched.run([&](int id, int32_t t) { generated[size_t(id)].push_back(t); return true; },
              [&](int id, FinishReason) {
                  done[size_t(id)] = 1;
                  print_ready();
              });
    const double dt = now_seconds() - t0;
    if (!o.ids_out.empty()) {
        std::ofstream out(o.ids_out, std::ios::binary);
        if (!out) fail("cannot write '{}'", o.ids_out);
        for (size_t i = 0; i < prompts.size(); ++i) out << join_ids(prompt_ids[i]) << "\t" << join_ids(generated[i]) << "\n";
    }
    if (!o.quiet) {
        const SchedulerStats& st = sched.stats();
        std::fprintf(stderr,
                     "\nvega: load %.2f s | %zu prompts, %d in parallel | %lld prompt tokens, %lld generated in %lld "
                     "steps | %.2f s, %.2f generated tokens/s\n",
                     l.load_seconds, prompts.size(), o.parallel, (long long)st.prompt_tokens, (long long)st.generated,
                     (long long)st.steps, dt, dt > 0 ? double(st.generated) / dt : 0.0);
    }
}

}  // namespace

void register_run(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
    add_model_options(*cmd, o->m);
    auto* p = cmd->add_option("-p,--prompt", o->prompt, "prompt text");
    auto* pf = cmd->add_option("-f,--file", o->prompt_file, "read the prompt from a file");
    auto* pm = cmd->add_option("--prompts-file", o->prompts_file,
                               "generate for every non-blank line of this file (see --parallel); results in input order");
    p->excludes(pf);
    pm->excludes(p)->excludes(pf);
    const OptionLimits& lim = option_limits();
    add_limited_option(*cmd, o->parallel, lim.parallel, "with --prompts-file: sequences in flight at once")
        ->capture_default_str();
    add_limited_option(*cmd, o->n_predict, lim.n_predict, "tokens to generate (-1: until end of generation or the context is full)")
        ->capture_default_str();
    add_sampling_options(*cmd, o->sp);
    cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating after end-of-generation tokens");
    cmd->add_flag("--special", o->special, "parse special-token text in the prompt");
    auto* g = cmd->add_option("--grammar", o->grammar,
                              "constrain the output to this GBNF grammar (llama.cpp's format; rule 'root')");
    auto* gf = cmd->add_option("--grammar-file", o->grammar_file, "the same, from a .gbnf file")->excludes(g);
    cmd->add_option("--json-schema", o->json_schema,
                    "constrain the output to JSON valid under this JSON Schema (text; see docs for the keywords)")
        ->excludes(g)
        ->excludes(gf);
    cmd->add_option("--ids-out", o->ids_out,
                    "write prompt ids and generated ids to this file (two lines; with --prompts-file one line per "
                    "prompt: prompt ids, a tab, generated ids)");
    cmd->add_flag("-q,--quiet", o->quiet, "no progress or timing on stderr");
    cmd->callback([o] {
        if (!o->prompts_file.empty()) return run_many(*o);
        if (o->parallel != 1) fail("--parallel needs --prompts-file");
        run(*o);
    });
}

}  // namespace vega::cli
