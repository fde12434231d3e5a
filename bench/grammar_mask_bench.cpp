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
}
