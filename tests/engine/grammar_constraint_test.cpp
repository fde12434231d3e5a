// GrammarConstraint::allowed_mask (one walk of the vocabulary trie) against allows()
// asked token by token, on real vocabularies (SentencePiece 32k and byte-level BPE
// 128k, with multi-byte UTF-8 pieces) and a JSON Schema grammar, in states where few
// tokens are allowed (structure, numbers) and where most are (inside strings).
#include "engine/grammar_constraint.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/vocab_trie.h"
#include "gguf/gguf.h"
#include "grammar/json_schema.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"

namespace vega {
namespace {

TEST(GrammarConstraint, TrieMaskEqualsAskingEveryToken) {
    VEGA_REQUIRE_TEST_DATA();
    const auto schema = nlohmann::ordered_json::parse(
        R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},)"
        R"("tags":{"type":"array","items":{"enum":["ab","ü€"]}}},"required":["name","age","tags"]})");
    auto g = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(grammar::json_schema_to_gbnf(schema)));
    for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf"}) {
        auto f = gguf::File::open(test::data_file(std::string("vocab/") + vocab));
        auto tok = Tokenizer::from_gguf(*f);
        auto trie = std::make_shared<const VocabTrie>(*tok);
        EXPECT_GT(trie->nodes().size(), size_t(tok->n_vocab()) / 2) << vocab;
        for (const std::string prefix : {"", "{\"name\": \"", "{\"name\": \"abc", "{\"name\": \"abc\", \"age\": 1",
                                         "{\"name\": \"abc\", \"age\": 12, \"tags\": [\"", "{\"name\": \"abc\", \"age\": 12, "
                                                                                       "\"tags\": [\"ab\"]}"}) {
            GrammarConstraint c(g, *tok, trie);
            for (int32_t t : tok->encode(prefix, false, false)) {
                ASSERT_TRUE(c.allows(t)) << vocab << " prefix " << prefix << " token " << t;
                c.accept(t);
            }
            std::vector<uint8_t> mask(size_t(tok->n_vocab()), 2);
            ASSERT_TRUE(c.allowed_mask(mask.data()));
            int n_allowed = 0;
            for (int32_t t = 0; t < tok->n_vocab(); ++t) {
                ASSERT_EQ(mask[size_t(t)], c.allows(t) ? 1 : 0)
                    << vocab << " prefix '" << prefix << "' token " << t << " '" << tok->token_to_piece(t) << "'";
                n_allowed += mask[size_t(t)];
            }
            EXPECT_GT(n_allowed, 0) << vocab << " prefix '" << prefix << "'";
        }
    }
    // few_allowed (the sampler then takes the mask first): structure and numbers, not strings.
    {
        auto f = gguf::File::open(test::data_file("vocab/ggml-vocab-llama-bpe.gguf"));
        auto tok = Tokenizer::from_gguf(*f);
        auto trie = std::make_shared<const VocabTrie>(*tok);
        for (const auto& [prefix, few] : std::vector<std::pair<std::string, bool>>{
                 {"", true}, {"{\"name\": \"ab", false}, {"{\"name\": \"abc\", \"age\": 1", true}, {"{\"name\": \"abc\"", true}}) {
            GrammarConstraint c(g, *tok, trie);
            for (int32_t t : tok->encode(prefix, false, false)) c.accept(t);
            EXPECT_EQ(c.few_allowed(), few) << "'" << prefix << "'";
            EXPECT_FALSE(GrammarConstraint(g, *tok).few_allowed());  // (no trie: no cheap mask)
        }
    }
    // Without a trie there is no mask (the sampler asks token by token).
    auto f = gguf::File::open(test::data_file("vocab/ggml-vocab-llama-spm.gguf"));
    auto tok = Tokenizer::from_gguf(*f);
    GrammarConstraint c(g, *tok);
    std::vector<uint8_t> mask(size_t(tok->n_vocab()));
    EXPECT_FALSE(c.allowed_mask(mask.data()));
}

}  // namespace
}  // namespace vega
