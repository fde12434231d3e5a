// Tokenization and detokenization against llama.cpp's model references
// (testdata/reference/*.json) and the perplexity text.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "tok_test_util.h"

namespace vega::test {
namespace {

nlohmann::json load_json(const std::string& rel) { return nlohmann::json::parse(read_file(data_file(rel))); }

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

TEST(TokenizerReference, Stories260KPromptWithBos) {
    VEGA_REQUIRE_TEST_DATA();
    const auto ref = load_json("reference/stories260K.json");
    const Tokenizer& tok = tokenizer_for("models/stories260K.gguf");
    EXPECT_TRUE(tok.add_bos());
    EXPECT_EQ(tok.bos(), 1);
    EXPECT_EQ(tok.encode(ref["prompt"].get<std::string>(), true, false), ids_of(ref["prompt_tokens"]));
    // Without add_special the same ids minus BOS.
    auto no_bos = ids_of(ref["prompt_tokens"]);
    no_bos.erase(no_bos.begin());
    EXPECT_EQ(tok.encode(ref["prompt"].get<std::string>(), false, false), no_bos);
}

TEST(TokenizerReference, Stories260KGeneratedTextDecodes) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("models/stories260K.gguf");
    const auto ref = load_json("reference/stories260K.json");
    EXPECT_EQ(tok.decode(ids_of(ref["generated_tokens"])), ref["generated_text"].get<std::string>());
    // The 200-token greedy text, byte for byte.
    const auto g = load_json("reference/stories260K.greedy200.json");
    const auto ids = ids_of(g["generated_tokens"]);
    ASSERT_EQ(ids.size(), 200u);
    EXPECT_EQ(tok.decode(ids), read_file(data_file("reference/stories260K.greedy200.txt")));
}

TEST(TokenizerReference, Llama2TinyRandomPromptAndText) {
    VEGA_REQUIRE_TEST_DATA();
    const auto ref = load_json("reference/llama-2-tiny-random.json");
    const Tokenizer& tok = tokenizer_for("models/llama-2-tiny-random.gguf");
    EXPECT_EQ(tok.n_vocab(), 32000);
    EXPECT_EQ(tok.encode("Hello, my name is", true, false), ids_of(ref["prompt_tokens"]));
    EXPECT_EQ(tok.decode(ids_of(ref["generated_tokens"])), ref["generated_text"].get<std::string>());
}

TEST(TokenizerReference, EveryStoriesVocabReferencePrompt) {
    VEGA_REQUIRE_TEST_DATA();
    // All synthetic models share stories260K's vocabulary; each reference records
    // llama.cpp's prompt ids and the detokenized greedy continuation.
    for (const char* stem : {"synth-llama-f32", "synth-llama-q4_0", "synth-qwen2-q8_0", "stories260K.kvf32"}) {
        const auto ref = load_json(std::string("reference/") + stem + ".json");
        const Tokenizer& tok = tokenizer_for("models/" + ref["model"].get<std::string>());
        EXPECT_EQ(tok.encode(ref["prompt"].get<std::string>(), true, false), ids_of(ref["prompt_tokens"])) << stem;
        if (ref.contains("generated_text"))
            EXPECT_EQ(tok.decode(ids_of(ref["generated_tokens"])), ref["generated_text"].get<std::string>()) << stem;
    }
}

TEST(TokenizerReference, PerplexityTextTokenCountAndSpeed) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("models/stories260K.gguf");
    const std::string text = read_file(data_file("text/wp200k.txt"));
    ASSERT_EQ(text.size(), 200000u);
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text, true, false);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ speed    ] wp200k.txt: %zu tokens in %.3f s\n", ids.size(), secs);
    // testdata/README.md: llama-perplexity tokenizes the file with BOS into 116377 tokens.
    EXPECT_EQ(ids.size(), 116377u);
    EXPECT_EQ(ids.front(), 1);
#ifdef NDEBUG
    EXPECT_LT(secs, 2.0) << "SPM encoding should be O(n log n)";
#endif
    // Byte fallback makes SPM lossless: decoding gives the text back. The space
    // prefix is dropped only when its piece comes first; after BOS (which renders
    // as nothing) it stays, as in llama_detokenize.
    const std::vector<int32_t> no_bos(ids.begin() + 1, ids.end());
    EXPECT_TRUE(tok.decode(no_bos) == text) << "decode(encode(text)) differs from the text";
    EXPECT_TRUE(tok.decode(ids) == " " + text) << "decode with BOS should keep the prefix space";
}

TEST(TokenizerReference, BpeRoundTripWithoutSpaceCleanup) {
    VEGA_REQUIRE_TEST_DATA();
    // deepseek vocabularies do not clean up spaces, so decode(encode(s)) == s.
    for (const char* rel : {"vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-deepseek-coder.gguf"}) {
        const Tokenizer& tok = tokenizer_for(rel);
        for (const std::string& s : split_vocab_inputs(read_file(data_file(std::string(rel) + ".inp"))))
            EXPECT_EQ(tok.decode(tok.encode(s, false, false)), s) << rel;
    }
}

}  // namespace
}  // namespace vega::test

namespace vega::test {
namespace {

TEST(TokenizerReference, BpeLongTextRoundTripAndSpeed) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string text = read_file(data_file("text/wp200k.txt"));
    for (const char* rel : {"vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-llama-bpe.gguf"}) {
        const Tokenizer& tok = tokenizer_for(rel);
        const auto t0 = std::chrono::steady_clock::now();
        const auto ids = tok.encode(text, false, false);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("[ speed    ] wp200k.txt with %s: %zu tokens in %.3f s\n", rel, ids.size(), secs);
        EXPECT_GT(ids.size(), 30000u);
        EXPECT_LT(ids.size(), 70000u);
        if (std::string(rel).find("deepseek") != std::string::npos)  // no space clean-up: lossless
            EXPECT_TRUE(tok.decode(ids) == text) << rel << ": decode(encode(text)) differs from the text";
    }
}

}  // namespace
}  // namespace vega::test
