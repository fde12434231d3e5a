// The cost of grammar-constrained sampling per token on a real vocabulary, with and
// without the vocabulary trie (GrammarConstraint::allowed_mask), against unconstrained
// sampling: 60 steps of random logits (N(0, 3), a random model's), each sampled token
// fed to the grammar, for top-k 40 / off and greedy / temperature 1. Prints ms per token
// and the start of the text (the same with and without the trie: the mask changes the
// cost, never the draw).
//   build/bench/vega_grammar_mask_bench VOCAB.gguf 'JSON SCHEMA'
// (target vega_grammar_mask_bench, not built by default)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar_constraint.h"
#include "engine/sampler.h"
#include "engine/vocab_trie.h"
#include "gguf/gguf.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"

using namespace vega;

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s VOCAB.gguf 'JSON SCHEMA'\n", argv[0]);
        return 2;
    }
    auto file = gguf::File::open(argv[1]);
    auto tok = Tokenizer::from_gguf(*file);
    auto g = std::make_shared<const grammar::Grammar>(
        grammar::Grammar::parse(grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(argv[2]))));
    const auto b0 = std::chrono::steady_clock::now();
    auto trie = std::make_shared<const VocabTrie>(*tok);
    const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count();
    std::printf("vocabulary %d tokens, trie %zu nodes built in %.1f ms\n", tok->n_vocab(), trie->nodes().size(), build_ms);
    const int n = tok->n_vocab();
    enum Mode { kUnconstrained, kTokenByToken, kTrie };
    for (int top_k : {40, 0})
        for (float temp : {0.f, 1.f})
            for (Mode mode : {kUnconstrained, kTokenByToken, kTrie}) {
                SamplerParams p;
                p.top_k = top_k, p.temperature = temp, p.seed = 5;
                Sampler s(p, n);
                GrammarConstraint c(g, *tok, mode == kTrie ? trie : nullptr);
                std::mt19937 rng(1);
                std::normal_distribution<float> nd(0.f, 3.f);
                std::vector<float> logits(static_cast<size_t>(n));
                double total_ms = 0;
                int steps = 0;
                std::string text;
                for (; steps < 60; ++steps) {
                    for (auto& x : logits) x = nd(rng);
                    const auto t0 = std::chrono::steady_clock::now();
                    const int32_t t = s.sample(logits.data(), mode == kUnconstrained ? nullptr : &c);
                    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                    if (t < 0 || tok->is_eog(t)) break;
                    if (mode != kUnconstrained) c.accept(t);
                    s.accept(t);
                    text += tok->token_to_piece(t);
                }
                const char* name = mode == kUnconstrained ? "unconstrained" : mode == kTrie ? "trie" : "token by token";
                std::printf("top_k %2d temp %.0f %-14s: %2d tokens, %7.2f ms/token  %s\n", top_k, temp, name, steps,
                            total_ms / std::max(steps, 1), text.substr(0, 40).c_str());
            }
    // The scheduler's candidate path (a grammar row served by the device's top-64): the
    // grammar asked about the candidates best first until top-k 40 are allowed, then the
    // matcher's step; whole rows where fewer are allowed are not timed here.
    {
        GrammarConstraint c(g, *tok, trie);
        std::mt19937 rng(1);
        std::normal_distribution<float> nd(0.f, 3.f);
        std::vector<float> logits(static_cast<size_t>(n));
        std::vector<int32_t> ids(static_cast<size_t>(n));
        double check_us = 0, accept_us = 0;
        int served = 0, asked = 0, steps = 0;
        for (; steps < 200; ++steps) {
            for (auto& x : logits) x = nd(rng);
            for (int32_t i = 0; i < n; ++i) ids[size_t(i)] = i;
            std::partial_sort(ids.begin(), ids.begin() + 64, ids.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
            const auto t0 = std::chrono::steady_clock::now();
            int allowed = 0, first = -1;
            for (int j = 0; j < 64 && allowed < 40; ++j, ++asked)
                if (c.allows(ids[size_t(j)])) first = first < 0 ? ids[size_t(j)] : first, ++allowed;
            check_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            if (allowed < 40) {  // (a whole row would serve it: take the mask's first allowed token)
                std::vector<uint8_t> mask(static_cast<size_t>(n));
                c.allowed_mask(mask.data());
                first = int(std::find(mask.begin(), mask.end(), 1) - mask.begin());
                if (first >= n) break;
            } else {
                ++served;
            }
            if (tok->is_eog(first)) break;
            const auto t1 = std::chrono::steady_clock::now();
            c.accept(first);
            accept_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
        }
        std::printf("candidates (top-64, 40 wanted): %d steps, %d served, %.2f us a check (%d asked), %.2f us an accept\n",
                    steps, served, check_us / std::max(asked, 1), asked, accept_us / std::max(steps, 1));
    }
}
