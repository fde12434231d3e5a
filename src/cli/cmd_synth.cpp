// vega synth: write a random-weight model of a named shape, for benchmarks
// without downloads.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "model/synth.h"

namespace vega::cli {

namespace {

struct SynthOptions {
    std::string shape = "tiny";
    std::string type = "Q4_0";
    std::string out;
    uint64_t seed = 1;
    int layers = 0;  // 0: the shape's own layer count
    int tp_share = 0;  // 0: the whole model; n: one device's share under tensor parallel over n
};

void synth(const SynthOptions& o) {
    SynthShape shape = find_synth_shape(o.shape);
    if (o.layers > 0) shape.n_layer = std::min(shape.n_layer, o.layers);  // never more blocks than the shape's
    if (o.tp_share > 0) shape = tensor_parallel_share(shape, o.tp_share);
    const SynthFormat format = parse_synth_format(o.type);
    int last = -1;
    write_synth_model(shape, format, o.out, o.seed, [&](float f) {
        const int pct = int(f * 100);
        if (pct != last) std::fprintf(stderr, "\rvega: writing %s (%s, %s) %3d%%", o.out.c_str(), o.shape.c_str(),
                                      o.type.c_str(), pct);
        last = pct;
    });
    std::fprintf(stderr, "\nvega: wrote %s\n", o.out.c_str());
}

}  // namespace

void register_synth(CLI::App& app) {
    auto o = std::make_shared<SynthOptions>();
    CLI::App* cmd = app.add_subcommand("synth", "write a random-weight model of a named shape");
    std::string shapes, table = "Shapes:\n";
    for (const auto& s : synth_shapes()) {
        shapes += (shapes.empty() ? "" : ", ") + s.name;
        std::string ffn = s.moe() ? fmt::format("{} experts ({} used per token) of FFN {}", s.n_expert,
                                                s.n_expert_used, s.n_ff_exp)
                                  : fmt::format("FFN {}", s.n_ff);
        table += fmt::format("  {:<17} {:<8} {} layers, n_embd {}, {} heads ({} KV) of {}, {}, vocab {}, ctx {}\n",
                             s.name, s.arch, s.n_layer, s.n_embd, s.n_head, s.n_head_kv, s.head_size(), ffn,
                             s.n_vocab, s.n_ctx);
    }
    cmd->add_option("--shape", o->shape, "model shape: " + shapes)->capture_default_str();
    cmd->add_option("--type", o->type,
                    "weight type: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K Q4_K_M Q5_K_M IQ4_NL "
                    "IQ4_XS MXFP4")
        ->capture_default_str();
    cmd->footer(table +
                "Q4_K_M/Q5_K_M follow llama-quantize: output Q6_K; attn_v, ffn_down and ffn_down_exps Q6_K on\n"
                "half the layers; the MoE router (ffn_gate_inp) stays F32 (see src/model/synth.h).");
    cmd->add_option("-o,--output", o->out, "output GGUF path")->required();
    cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
    cmd->add_option("--layers", o->layers,
                    "keep only the first N blocks, at most the shape's own (every matrix keeps its full shape; "
                    "for quick sweeps)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--tp-share", o->tp_share,
                    "write one device's share under tensor parallel over N devices instead (dense shapes): 1/N of "
                    "the heads, KV heads and FFN rows, the embedding and output whole; its decode on one GPU is a "
                    "rank's step with free all-reduces, the ceiling of --split-mode tensor")
        ->check(CLI::Range(1, 64));
    cmd->callback([o] { synth(*o); });
}

}  // namespace vega::cli
