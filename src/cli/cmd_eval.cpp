// vega eval: teacher-forced logits for a recorded token sequence. Line 1 of the
// tokens file is evaluated as one batch, then line 2 one token at a time; every
// row of logits is written as raw little-endian float32 [n_rows][n_vocab].
// --routes-out/--routes-in record and replay a mixture of experts' routing
// (model/route_trace.h), to compare devices where router logits nearly tie.
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "model/route_trace.h"

namespace vega::cli {

namespace {

struct EvalOptions {
    ModelOptions m;
    std::string tokens_file;
    std::string logits_out;
    std::string routes_out, routes_in;
    bool quiet = false;
};

std::vector<int32_t> parse_ids(const std::string& line, const std::string& file, int line_no) {
    std::vector<int32_t> ids;
    std::istringstream ss(line);
    std::string w;
    while (ss >> w) {
        char* end = nullptr;
        const long v = std::strtol(w.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v > INT32_MAX) fail("{}:{}: '{}' is not a token id", file, line_no, w);
        ids.push_back(int32_t(v));
    }
    return ids;
}

void eval(const EvalOptions& o) {
    std::ifstream in(o.tokens_file);
    if (!in) fail("cannot read tokens file '{}'", o.tokens_file);
    std::string l1, l2;
    std::getline(in, l1);
    std::getline(in, l2);
    const std::vector<int32_t> prompt = parse_ids(l1, o.tokens_file, 1);
    const std::vector<int32_t> cont = parse_ids(l2, o.tokens_file, 2);
    if (prompt.empty()) fail("{}: line 1 (the prompt ids) is empty", o.tokens_file);

    Loaded l = load(o.m, !o.quiet);
    Session& s = *l.session;
    const int n_vocab = s.n_vocab();
    for (int32_t t : prompt)
        if (t >= n_vocab) fail("{}: token id {} is out of range for a vocabulary of {}", o.tokens_file, t, n_vocab);
    for (int32_t t : cont)
        if (t >= n_vocab) fail("{}: token id {} is out of range for a vocabulary of {}", o.tokens_file, t, n_vocab);

    std::optional<RouteTrace> routes;
    if (!o.routes_out.empty()) routes = RouteTrace::recorder();
    if (!o.routes_in.empty()) routes = RouteTrace::load(o.routes_in);
    if (routes) s.set_route_trace(&*routes);

    std::ofstream out(o.logits_out, std::ios::binary);
    if (!out) fail("cannot write '{}'", o.logits_out);
    const std::vector<float>& rows = s.eval(prompt, 0, 0, /*all_logits=*/true);
    out.write(reinterpret_cast<const char*>(rows.data()), std::streamsize(rows.size() * sizeof(float)));
    int pos = int(prompt.size());
    for (int32_t t : cont) {
        const std::vector<float>& r = s.eval({t}, pos++, 0, false, /*prompt=*/false);  // fed back as generated
        out.write(reinterpret_cast<const char*>(r.data()), std::streamsize(r.size() * sizeof(float)));
    }
    if (!out) fail("error writing '{}'", o.logits_out);
    if (routes) {
        s.set_route_trace(nullptr);
        if (routes->recording()) routes->save(o.routes_out);
        routes->check_all_replayed();
        // stdout: scripts read this line (scripts/gpu_sweep.sh).
        std::printf("routes: %s\n", routes->summary().c_str());
    }
    if (!o.quiet) std::fprintf(stderr, "vega: wrote %zu rows of %d logits to %s\n", prompt.size() + cont.size(), n_vocab,
                               o.logits_out.c_str());
}

}  // namespace

void register_eval(CLI::App& app) {
    auto o = std::make_shared<EvalOptions>();
    CLI::App* cmd = app.add_subcommand("eval", "write the logits of every position of a token sequence");
    add_model_options(*cmd, o->m);
    cmd->add_option("--tokens-file", o->tokens_file, "two lines of ids: prompt (one batch), then continuation (one at a time)")
        ->required();
    cmd->add_option("--logits-out", o->logits_out, "output: raw float32 [rows][n_vocab]")->required();
    auto* rout = cmd->add_option("--routes-out", o->routes_out,
                                 "mixture of experts: write the experts every routed layer chose (text)");
    cmd->add_option("--routes-in", o->routes_in,
                    "mixture of experts: use the experts recorded by --routes-out instead of this device's own top k "
                    "(CPU only), and print how far they are from its own choice")
        ->excludes(rout);
    cmd->add_flag("-q,--quiet", o->quiet, "no progress on stderr");
    cmd->callback([o] { eval(*o); });
}

}  // namespace vega::cli
