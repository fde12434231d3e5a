// Utf8Stream: complete UTF-8 only, partial sequences held back, invalid bytes passed.
#include <gtest/gtest.h>

#include "tok_test_util.h"

namespace vega::test {
namespace {

TEST(Utf8Stream, HoldsBackSplitCharacters) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\xC3"), "");
    EXPECT_EQ(s.push("\xA9"), "\xC3\xA9");  // é
    EXPECT_EQ(s.push("\xF0\x9F"), "");
    EXPECT_EQ(s.push("\x98"), "");
    EXPECT_EQ(s.push("\x81"), "\xF0\x9F\x98\x81");  // 😁
    EXPECT_EQ(s.push("ab\xE2\x82"), "ab");
    EXPECT_EQ(s.push("\xAC!"), "\xE2\x82\xAC!");  // €!
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Stream, PassesInvalidBytes) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\xFF"), "\xFF");
    EXPECT_EQ(s.push("\x80"), "\x80");
    EXPECT_EQ(s.push("x\xF8"), "x\xF8");
    // A lead byte that never gets its continuation is released with what follows.
    EXPECT_EQ(s.push("\xC3"), "");
    EXPECT_EQ(s.push("a"), "\xC3" "a");
    EXPECT_EQ(s.push("\xE2\x82"), "");
    EXPECT_EQ(s.flush(), "\xE2\x82");
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Stream, ByteTokensOfRealVocabulary) {
    VEGA_REQUIRE_TEST_DATA();
    const Tokenizer& tok = tokenizer_for("models/stories260K.gguf");
    // stories260K has no token for "é" or "日本": they become <0xNN> byte tokens.
    const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC";
    const auto ids = tok.encode(text, false, false);
    Utf8Stream s;
    std::string streamed;
    for (int32_t id : ids) {
        const std::string out = s.push(tok.token_to_piece(id));
        // every chunk handed out is complete UTF-8 on its own
        for (size_t i = 0; i < out.size();) {
            const uint8_t c = uint8_t(out[i]);
            const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            ASSERT_LE(i + n, out.size()) << "split character handed out";
            i += n;
        }
        streamed += out;
    }
    streamed += s.flush();
    EXPECT_EQ(streamed, " " + text);  // token_to_piece keeps the prefix space
    EXPECT_EQ(tok.decode(ids), text);
}

}  // namespace
}  // namespace vega::test
