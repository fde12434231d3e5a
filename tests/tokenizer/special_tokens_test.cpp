// Special tokens: parse_special on/off, user-defined tokens, BOS/EOS flags,
// end-of-generation ids, pieces of control and byte tokens, and load errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tok_test_util.h"

namespace vega::test {
namespace {

bool contains(const std::vector<int32_t>& v, int32_t id) { return std::find(v.begin(), v.end(), id) != v.end(); }

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

TEST(TokenizerSpecial, Llama3ControlTokenNeedsParseSpecial) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("vocab/ggml-vocab-llama-bpe.gguf");
    ASSERT_EQ(tok.token_text(128000), "<|begin_of_text|>");
    const std::string text = "<|begin_of_text|>hi";
    const auto hi = tok.encode("hi", false, false);
    ASSERT_FALSE(hi.empty());

    EXPECT_EQ(tok.encode(text, false, true), cat({128000}, hi));
    const auto literal = tok.encode(text, false, false);
    EXPECT_FALSE(contains(literal, 128000));
    EXPECT_GT(literal.size(), 3u);
    EXPECT_EQ(tok.decode(literal), text);  // the literal text comes back unchanged

    // llama-bpe adds BOS (llama.cpp's default for this pre-tokenizer), no EOS.
    EXPECT_TRUE(tok.add_bos());
    EXPECT_FALSE(tok.add_eos());
    EXPECT_EQ(tok.encode("hi", true, false), cat({128000}, hi));
    EXPECT_EQ(tok.encode(text, true, true), cat({128000, 128000}, hi));

    // Control tokens render only on request.
    EXPECT_EQ(tok.token_to_piece(128000), "");
    EXPECT_EQ(tok.token_to_piece(128000, true), "<|begin_of_text|>");
    EXPECT_EQ(tok.decode(cat({128000}, hi)), "hi");
    EXPECT_EQ(tok.decode(cat({128000}, hi), true), "<|begin_of_text|>hi");
    EXPECT_EQ(tok.token_attr(128000), TokenAttr::Control);
}

TEST(TokenizerSpecial, Llama3EndOfGeneration) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("vocab/ggml-vocab-llama-bpe.gguf");
    EXPECT_EQ(tok.bos(), 128000);
    EXPECT_EQ(tok.eos(), 128001);
    EXPECT_EQ(tok.eot(), 128009);  // found by its name <|eot_id|>
    EXPECT_TRUE(tok.is_eog(128001));
    EXPECT_TRUE(tok.is_eog(128009));
    EXPECT_FALSE(tok.is_eog(128000));
    EXPECT_FALSE(tok.is_eog(tok.encode("hi", false, false)[0]));
}

TEST(TokenizerSpecial, Gpt2HasNoDefaultBos) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("vocab/ggml-vocab-gpt-2.gguf");
    EXPECT_FALSE(tok.add_bos());
    EXPECT_EQ(tok.encode("Hello", true, false), tok.encode("Hello", false, false));
    EXPECT_TRUE(tok.is_eog(50256));  // <|endoftext|>
    EXPECT_EQ(tok.encode("<|endoftext|>", false, true), std::vector<int32_t>{50256});
    EXPECT_FALSE(contains(tok.encode("<|endoftext|>", false, false), 50256));
}

TEST(TokenizerSpecial, SpmControlTokenAndSpacePrefix) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("models/stories260K.gguf");
    const auto hello = tok.encode("hello", false, false);
    // After a special token the text gets the SentencePiece space prefix again.
    EXPECT_EQ(tok.encode("<s>hello", false, true), cat({1}, hello));
    const auto literal = tok.encode("<s>hello", false, false);
    EXPECT_FALSE(contains(literal, 1));
    EXPECT_EQ(tok.decode(literal), "<s>hello");
    EXPECT_TRUE(tok.is_eog(2));
    EXPECT_FALSE(tok.is_eog(1));
    EXPECT_EQ(tok.encode("", true, false), std::vector<int32_t>{1});
    EXPECT_TRUE(tok.encode("", false, false).empty());
}

TEST(TokenizerSpecial, SpmPieces) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("models/stories260K.gguf");
    ASSERT_EQ(tok.token_text(13), "<0x0A>");
    EXPECT_EQ(tok.token_to_piece(13), "\n");
    EXPECT_EQ(tok.token_attr(13), TokenAttr::Byte);
    EXPECT_EQ(tok.token_to_piece(0), "");  // <unk> renders like a control token
    EXPECT_EQ(tok.token_to_piece(0, true), "<unk>");
    const std::string once = tok.token_text(403);
    ASSERT_EQ(once, "\xE2\x96\x81Once");
    EXPECT_EQ(tok.token_to_piece(403), " Once");
    // decode drops the space of the first piece only; BOS (rendering as "") counts as first.
    EXPECT_EQ(tok.decode({403, 403}), "Once Once");
    EXPECT_EQ(tok.decode({1, 403}), " Once");
    EXPECT_THROW(tok.decode({512}), Error);
}

TEST(TokenizerSpecial, Phi3UserDefinedAndStrip) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("vocab/ggml-vocab-phi-3.gguf");
    ASSERT_EQ(tok.token_text(2), "</s>");
    ASSERT_EQ(tok.token_text(32007), "<|end|>");
    ASSERT_EQ(tok.token_text(32010), "<|user|>");
    // "</s>" is user-defined in this vocabulary: matched even without parse_special,
    // and (phi-3 rule) the whitespace right of it is eaten.
    EXPECT_EQ(tok.encode("a</s> b", false, false),
              cat(cat(tok.encode("a", false, false), {2}), tok.encode("b", false, false)));
    // Control tokens only with parse_special; they strip whitespace to their right too.
    EXPECT_EQ(tok.encode("<|user|>\nhi<|end|>", false, true), cat(cat({32010}, tok.encode("hi", false, false)), {32007}));
    EXPECT_FALSE(contains(tok.encode("<|user|>\nhi<|end|>", false, false), 32010));
    EXPECT_TRUE(tok.is_eog(32000));  // eos <|endoftext|>
    EXPECT_TRUE(tok.is_eog(32007));  // <|end|>
    EXPECT_FALSE(tok.is_eog(32010));
}

// A four-token SPM vocabulary built in memory: merges follow scores, not order.
TEST(TokenizerSynthetic, SpmMergesByScore) {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "llama");
    const std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c",
                                           "ab", "bc", "\xE2\x96\x81" "a"};
    w.set_string_array("tokenizer.ggml.tokens", toks);
    w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -5, -5, -5, -5, -1, -0.5f, -2});
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1, 1});
    const auto bytes = w.to_bytes();
    auto f = gguf::File::parse(bytes.data(), bytes.size());
    auto tok = Tokenizer::from_gguf(*f);
    // "▁abc": candidates ▁a (-2), ab (-1), bc (-0.5); bc wins, then ▁a; "▁abc" is no token.
    EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{9, 8}));
    // "▁ab": ab (-1) beats ▁a (-2) -> ▁ + ab.
    EXPECT_EQ(tok->encode("ab", true, false), (std::vector<int32_t>{1, 3, 7}));
    // No byte tokens: an unknown character becomes <unk>.
    EXPECT_EQ(tok->encode("a\xC3\xA9", false, false), (std::vector<int32_t>{9, 0, 0}));
    EXPECT_EQ(tok->decode({9, 8}), "abc");
}

// End of generation by token name: gpt-oss's <|return|> and <|call|> end it and its
// <|end|> does not (it only ends the analysis message before the answer); without those
// two, <|end|> does (phi-3). gemma 4's <turn|> and <|tool_response>.
TEST(TokenizerSynthetic, HarmonyAndGemma4EndOfGeneration) {
    auto load = [](const std::vector<std::string>& extra) {
        gguf::Writer w;
        w.set_string("tokenizer.ggml.model", "llama");
        std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "a"};
        std::vector<float> scores = {0, 0, 0, -1};
        std::vector<int32_t> types = {2, 3, 3, 1};
        for (const std::string& t : extra) toks.push_back(t), scores.push_back(0), types.push_back(3);
        w.set_string_array("tokenizer.ggml.tokens", toks);
        w.set_f32_array("tokenizer.ggml.scores", scores);
        w.set_i32_array("tokenizer.ggml.token_type", types);
        const auto bytes = w.to_bytes();
        auto f = gguf::File::parse(bytes.data(), bytes.size());
        return Tokenizer::from_gguf(*f);
    };
    auto harmony = load({"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"});
    EXPECT_FALSE(harmony->is_eog(7));  // <|end|>
    EXPECT_TRUE(harmony->is_eog(8));   // <|return|>
    EXPECT_TRUE(harmony->is_eog(9));   // <|call|>
    EXPECT_FALSE(harmony->is_eog(4) || harmony->is_eog(5) || harmony->is_eog(6));
    EXPECT_TRUE(harmony->is_eog(2));   // eos </s>
    auto phi = load({"<|end|>", "<|user|>"});
    EXPECT_TRUE(phi->is_eog(4));
    EXPECT_FALSE(phi->is_eog(5));
    auto gemma = load({"<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>", "<|tool_response>"});
    EXPECT_TRUE(gemma->is_eog(5));
    EXPECT_TRUE(gemma->is_eog(8));
    EXPECT_FALSE(gemma->is_eog(4) || gemma->is_eog(6) || gemma->is_eog(7));
}

TEST(TokenizerSynthetic, LoadErrorsNameTheKey) {
    auto expect_error = [](const gguf::Writer& w, const std::string& needle) {
        const auto bytes = w.to_bytes();
        auto f = gguf::File::parse(bytes.data(), bytes.size());
        try {
            Tokenizer::from_gguf(*f);
            ADD_FAILURE() << "no error; expected one mentioning " << needle;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    gguf::Writer none;
    none.set_string("general.architecture", "llama");
    expect_error(none, "tokenizer.ggml.model");
    gguf::Writer bert;
    bert.set_string("tokenizer.ggml.model", "bert");
    bert.set_string_array("tokenizer.ggml.tokens", {"a"});
    expect_error(bert, "tokenizer.ggml.model");
    gguf::Writer no_tokens;
    no_tokens.set_string("tokenizer.ggml.model", "llama");
    expect_error(no_tokens, "tokenizer.ggml.tokens");
    gguf::Writer bad_scores;
    bad_scores.set_string("tokenizer.ggml.model", "llama");
    bad_scores.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    bad_scores.set_f32_array("tokenizer.ggml.scores", {0});
    expect_error(bad_scores, "tokenizer.ggml.scores");
    gguf::Writer no_merges;
    no_merges.set_string("tokenizer.ggml.model", "gpt2");
    no_merges.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    expect_error(no_merges, "tokenizer.ggml.merges");
}

}  // namespace
}  // namespace vega::test
