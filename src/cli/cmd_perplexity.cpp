// vega perplexity: llama.cpp's method. The file is tokenized once (with BOS);
// chunk i is tokens [i*ctx, (i+1)*ctx) with its first token replaced by BOS,
// evaluated from an empty cache; the predictions at positions ctx/2 .. ctx-2
// are scored. PPL = exp(mean NLL); the +/- is ppl * stderr of the NLL mean.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/limited_option.h"
#include "core/error.h"

namespace vega::cli {

namespace {

struct PplOptions {
    ModelOptions m;
    std::string text_file;
    int chunks = -1;
};

// -log softmax(logits)[target], in double.
double nll(const float* logits, int n, int target) {
    double mx = logits[0];
    for (int i = 1; i < n; ++i) mx = std::max(mx, double(logits[i]));
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
    return -(double(logits[target]) - mx - std::log(sum));
}

void perplexity(PplOptions o) {
    std::ifstream f(o.text_file, std::ios::binary);
    if (!f) fail("cannot read text file '{}'", o.text_file);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const int ctx = o.m.ctx > 0 ? o.m.ctx : 512;
    if (ctx < 4) fail("context size {} is too small for perplexity", ctx);
    o.m.ctx = ctx;
    o.m.batch = std::min(o.m.batch, ctx);
    Loaded l = load(o.m, true);
    const Tokenizer& tok = l.model->tokenizer();
    const double t0 = now_seconds();
    const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
    std::fprintf(stderr, "vega: tokenized %zu bytes into %zu tokens in %.2f s\n", text.size(), ids.size(), now_seconds() - t0);
    int n_chunks = int(ids.size() / size_t(ctx));
    if (n_chunks == 0) fail("{}: {} tokens is less than one chunk of {} (use a smaller -c)", o.text_file, ids.size(), ctx);
    if (o.chunks >= 0) n_chunks = std::min(n_chunks, o.chunks);
    std::fprintf(stderr, "vega: perplexity over %d chunks of %d tokens\n", n_chunks, ctx);

    const int first = ctx / 2;
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    const int n_vocab = l.session->n_vocab();
    std::vector<int32_t> chunk(static_cast<size_t>(ctx));
    const double t_eval0 = now_seconds();
    for (int c = 0; c < n_chunks; ++c) {
        std::copy(ids.begin() + size_t(c) * ctx, ids.begin() + size_t(c + 1) * ctx, chunk.begin());
        if (tok.add_bos() && tok.bos() >= 0) chunk[0] = tok.bos();
        const std::vector<float>& logits = l.session->eval(chunk, 0, 0, /*all_logits=*/true);
        for (int j = first; j < ctx - 1; ++j) {
            const double v = nll(logits.data() + size_t(j) * n_vocab, n_vocab, chunk[j + 1]);
            sum += v;
            sum2 += v * v;
            ++count;
        }
        std::printf("[%d]%.4f,", c + 1, std::exp(sum / double(count)));
        std::fflush(stdout);
    }
    const double mean = sum / double(count);
    const double ppl = std::exp(mean);
    const double var = sum2 / double(count) - mean * mean;
    const double err = var > 0 && count > 1 ? ppl * std::sqrt(var / double(count - 1)) : 0.0;
    std::printf("\n");
    std::fprintf(stderr, "vega: %lld predictions scored in %.2f s\n", (long long)count, now_seconds() - t_eval0);
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
}

}  // namespace

void register_perplexity(CLI::App& app) {
    auto o = std::make_shared<PplOptions>();
    CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a model on a text file (llama.cpp's method)");
    add_model_options(*cmd, o->m);
    cmd->add_option("-f,--file", o->text_file, "text file")->required()->check(CLI::ExistingFile);
    add_limited_option(*cmd, o->chunks, option_limits().ppl_chunks, "score at most this many chunks (default: all)");
    cmd->callback([o] { perplexity(*o); });
}

}  // namespace vega::cli
