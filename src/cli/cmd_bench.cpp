// vega bench: llama-bench-style prompt processing (pp) and token generation
// (tg) tests. Each test runs -r times after one warm-up; the table shows mean
// ± standard deviation in tokens/s and the weight bandwidth that rate implies
// (bytes of the weights read per forward call x calls/s), also as a share of
// the read bandwidth measured at start-up (vega probe's global_read_dwordx4).
//
// tg runs Session::decode_greedy one token at a time; on a backend that records
// graphs the session replays one captured decode step (the forward pass and the
// device argmax) per token: only token ids cross the bus.
//
// -B 1,4,16: tg with B sequences decoded together (one forward call per step over
// B rows, as llama-batched-bench): aggregate t/s = B x steps/s, per-stream t/s =
// steps/s. -d 0,4096: each test runs with every sequence's cache first filled to
// that depth (as llama-bench -d); pp at depth d evaluates positions d..d+p-1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/limited_option.h"
#include "core/error.h"
#include "engine/session.h"
#ifdef VEGA_HAVE_GPU
#include "backend/gpu/gpu_backend.h"
#include "backend/gpu/probe.h"
#endif

namespace vega::cli {

namespace {

struct BenchOptions {
    ModelOptions m;
    std::vector<int> n_prompt{512};
    std::vector<int> n_gen{128};
    std::vector<int> n_seqs{1};   // -B: sequences per tg step
    std::vector<int> depths{0};   // -d: cache depth before each test
    int reps = 5;
    std::string output = "md";
    bool no_graph = false;
    uint64_t seed = 1234;
};

struct Stats {
    double mean = 0, sd = 0;
};
Stats stats(const std::vector<double>& v) {
    Stats s;
    if (v.empty()) return s;
    for (double x : v) s.mean += x;
    s.mean /= double(v.size());
    if (v.size() > 1) {
        for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
        s.sd = std::sqrt(s.sd / double(v.size() - 1));
    }
    return s;
}


struct Row {
    std::string test;
    int n;                  // tokens per test (all sequences)
    int seqs;               // sequences per step (tg) or 1 (pp)
    int depth;              // cache depth before the test
    std::vector<double> tps;  // aggregate tokens/s per repetition
    double bytes_per_call;  // weight bytes read per forward call
    int calls;              // forward calls per test
};

void bench(const BenchOptions& o) {
    int max_p = 0, max_g = 0, max_b = 1, max_d = 0;
    for (int p : o.n_prompt) max_p = std::max(max_p, p);
    for (int g : o.n_gen) max_g = std::max(max_g, g);
    for (int b : o.n_seqs) max_b = std::max(max_b, b);  // every list item was checked against the limits while parsing
    for (int d : o.depths) max_d = std::max(max_d, d);
    ModelOptions mo = o.m;
    const int need_ctx = max_d + std::max(max_p, max_g) + 1;
    if (mo.ctx <= 0) mo.ctx = need_ctx;
    if (mo.ctx < need_ctx) fail("-c {} is too small: depth {} + {} tokens need {}", mo.ctx, max_d, std::max(max_p, max_g), need_ctx);
    mo.batch = std::max({mo.batch, max_p, max_b});
    const bool quiet = o.output == "json";
    Loaded l = load(mo, !quiet, max_b);
    Backend& be = l.backend();
    const Model& model = *l.model;
    Session& s = *l.session;

    // The roofline: vega probe's global read study (16-byte loads over 1 GiB), what a
    // decode step does with its weights. Tensor parallel's devices read their shares at
    // once: the sum of theirs (a layer split's read one after the other: the first's).
    double read_gbs = 0;
    const bool together = model.split_mode() == SplitMode::kTensor;
#ifdef VEGA_HAVE_GPU
    for (const ModelStage& st : model.stages()) {
        const int dev = st.backend->device_index();
        if (dev < 0) {
            read_gbs = 0;  // (a CPU rank: no roofline)
            break;
        }
        read_gbs += gpu::probe::read_bandwidth_gbs(dev);
        if (!together) break;
    }
#endif
    if (!quiet) {
        std::fprintf(stderr, "vega: backend %s\n", be.name().c_str());
        if (read_gbs > 0)
            std::fprintf(stderr, "vega: read bandwidth %.0f GB/s (vega probe's global_read_dwordx4%s)\n", read_gbs,
                         together ? fmt::format(", {} devices together", model.stages().size()).c_str() : "");
    }

    // Weight bytes one forward call reads: every matrix once; the embedding table
    // contributes one row per token (negligible) unless it is also the output.
    double wbytes = double(model.weight_bytes());
    if (const auto* te = model.file().tensor("token_embd.weight"); te && !model.hparams().tied_output)
        wbytes -= double(te->n_bytes);
    double n_params = 0;
    for (const auto& t : model.file().tensors()) n_params += double(t.n_elements());

    std::mt19937 rng(uint32_t(o.seed));
    std::uniform_int_distribution<int32_t> tok(3, model.hparams().n_vocab - 1);
    std::vector<Row> rows;

    std::vector<int> depths = o.depths;
    std::sort(depths.begin(), depths.end());
    int filled = 0;  // every sequence's cache holds random tokens at positions [0, filled)
    for (int d : depths) {
        // Fill positions [filled, d) of every sequence, n_batch tokens per call.
        if (d > filled) {
            if (!quiet) std::fprintf(stderr, "vega: filling %d sequence(s) to depth %d\n", max_b, d);
            std::vector<BatchToken> fill;
            for (int q = 0; q < max_b; ++q)
                for (int i = filled; i < d; ++i) fill.push_back({tok(rng), i, q, false, /*prompt=*/true});
            fill.back().want_logits = true;  // the session returns one row; nothing is computed for the others
            s.decode(fill);
            filled = d;
        }
        const std::string at = d > 0 ? " @ d" + std::to_string(d) : "";
        for (int p : o.n_prompt) {
            if (p <= 0) continue;
            std::vector<BatchToken> b(static_cast<size_t>(p));
            for (int i = 0; i < p; ++i) b[size_t(i)] = {tok(rng), d + i, 0, i + 1 == p, /*prompt=*/true};
            Row r{"pp" + std::to_string(p) + at, p, 1, d, {}, wbytes * std::ceil(double(p) / double(s.params().n_batch)), 1};
            s.decode(b);  // warm-up
            for (int rep = 0; rep < o.reps; ++rep) {
                const double t0 = now_seconds();
                s.decode(b);
                r.tps.push_back(double(p) / (now_seconds() - t0));
            }
            rows.push_back(r);
        }
        s.set_use_graphs(!o.no_graph);
        for (int B : o.n_seqs) {
            for (int g : o.n_gen) {
                if (g <= 0) continue;
                Row r{"tg" + std::to_string(g) + at, g * B, B, d, {}, wbytes, g};
                // B sequences, each continuing its own greedy chain from position d.
                std::vector<BatchToken> step(static_cast<size_t>(B));
                auto run_once = [&] {
                    for (int q = 0; q < B; ++q) step[size_t(q)] = {tok(rng), d, q, true};
                    for (int i = 0; i < g; ++i) {
                        const std::vector<int32_t>& next = s.decode_greedy(step);
                        for (int q = 0; q < B; ++q) step[size_t(q)] = {next[size_t(q)], d + i + 1, q, true};
                    }
                };
                run_once();  // warm-up
                for (int rep = 0; rep < o.reps; ++rep) {
                    const double t0 = now_seconds();
                    run_once();
                    r.tps.push_back(double(g) * B / (now_seconds() - t0));
                }
                rows.push_back(r);
            }
        }
        s.set_use_graphs(true);
    }

    std::string backend = be.name();
    if (model.stages().size() > 1) {  // a split: every device, and how
        backend.clear();
        for (const ModelStage& st : model.stages())
            backend += (backend.empty() ? "" : " + ") + st.backend->name();
        backend += model.split_mode() == SplitMode::kTensor ? " [tensor parallel]" : " [layer split]";
    }
    backend += s.use_graphs() ? " [graph]" : "";
    if (o.output == "json") {
        nlohmann::json out = nlohmann::json::array();
        for (const Row& r : rows) {
            const Stats st = stats(r.tps);
            const double gbs = r.bytes_per_call * r.calls / r.n * st.mean / 1e9;
            out.push_back({{"model", model.describe()},
                           {"model_size", model.weight_bytes()},
                           {"model_n_params", n_params},
                           {"backend", backend},
                           {"test", r.test},
                           {"n_tokens", r.n},
                           {"n_seqs", r.seqs},
                           {"n_depth", r.depth},
                           {"per_stream_ts", st.mean / r.seqs},
                           {"reps", r.tps.size()},
                           {"avg_ts", st.mean},
                           {"stddev_ts", st.sd},
                           {"samples_ts", r.tps},
                           {"weight_gbs", gbs},
                           {"read_bw_gbs", read_gbs},
                           {"bw_share", read_gbs > 0 ? gbs / read_gbs : 0.0}});
        }
        std::printf("%s\n", out.dump(2).c_str());
        return;
    }
    std::printf("| model | size | params | backend | B | test | t/s | per stream t/s | weight GB/s | %% of read BW |\n");
    std::printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
    for (const Row& r : rows) {
        const Stats st = stats(r.tps);
        const double gbs = r.bytes_per_call * r.calls / r.n * st.mean / 1e9;
        std::printf("| %s | %.2f GiB | %.2f B | %s | %d | %s | %.2f ± %.2f | %.2f | %.0f | %s |\n",
                    model.describe().c_str(), double(model.weight_bytes()) / double(1ull << 30), n_params / 1e9,
                    backend.c_str(), r.seqs, r.test.c_str(), st.mean, st.sd, st.mean / r.seqs, gbs,
                    read_gbs > 0 ? fmt::format("{:.1f}%", 100.0 * gbs / read_gbs).c_str() : "-");
    }
}

}  // namespace

void register_bench(CLI::App& app) {
    auto* o = new BenchOptions;  // lives as long as the app
    auto* cmd = app.add_subcommand("bench", "llama-bench-style prompt (pp) and generation (tg) throughput");
    add_model_options(*cmd, o->m);
    const OptionLimits& lim = option_limits();
    add_limited_option(*cmd, o->n_prompt, lim.bench_n_prompt, "prompt lengths to test (0 = none)")
        ->capture_default_str()
        ->delimiter(',');
    add_limited_option(*cmd, o->n_gen, lim.bench_n_gen, "generation lengths to test (0 = none)")
        ->capture_default_str()
        ->delimiter(',');
    add_limited_option(*cmd, o->n_seqs, lim.bench_batch_seqs,
                       "tg: sequences decoded together per step (aggregate and per-stream t/s)")
        ->capture_default_str()
        ->delimiter(',');
    add_limited_option(*cmd, o->depths, lim.bench_depth,
                       "cache depth (tokens already in every sequence's cache) before each test")
        ->capture_default_str()
        ->delimiter(',');
    add_limited_option(*cmd, o->reps, lim.bench_reps, "timed repetitions per test")->capture_default_str();
    cmd->add_option("-o,--output", o->output, "md or json")->check(CLI::IsMember({"md", "json"}))->capture_default_str();
    cmd->add_flag("--json", [o](int64_t) { o->output = "json"; }, "same as -o json");
    cmd->add_flag("--no-graph", o->no_graph, "tg without graph replay (every token runs the forward op by op)");
    cmd->add_option("--seed", o->seed, "seed of the random prompt tokens")->capture_default_str();
    cmd->callback([o] { bench(*o); });
}

}  // namespace vega::cli
