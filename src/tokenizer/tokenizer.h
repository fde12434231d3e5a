// Tokenizers built from GGUF metadata (tokenizer.ggml.*): SentencePiece-style
// ("llama": scores, byte fallback) and byte-level BPE ("gpt2": merges plus a
// PCRE2 pre-tokenizer chosen by tokenizer.ggml.pre). Behaviour follows
// llama.cpp's llama_tokenize / llama_detokenize so ids match its references.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vega::gguf { class File; }

namespace vega {

enum class TokenAttr : uint8_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    // Throws vega::Error naming the missing/invalid key.
    static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& f);

    // add_special: prepend BOS (and append EOS) when the vocabulary asks for it.
    // parse_special: recognise control/user-defined token text inside `text`.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;
    // The bytes one token stands for (SPM: "▁" -> " ", <0xNN> -> byte; BPE: byte-decoded).
    // Control tokens give "" unless render_special.
    virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
    // Concatenated pieces; for SPM the leading space of the first piece is removed when
    // the vocabulary adds a space prefix (llama_detokenize behaviour).
    virtual std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const = 0;

    virtual int32_t n_vocab() const = 0;
    virtual int32_t bos() const = 0;  // -1 if none
    virtual int32_t eos() const = 0;  // -1 if none
    virtual bool add_bos() const = 0;
    virtual bool is_eog(int32_t id) const = 0;  // end of generation (eos, eot, ...)
    virtual const std::string& token_text(int32_t id) const = 0;  // raw vocab string

    // Additions (with defaults so that other implementations need not change):
    virtual int32_t eot() const { return -1; }    // end-of-turn id, -1 if none
    virtual bool add_eos() const { return false; }
    // The token's type after llama.cpp's fix-ups (tokens named like <|eot_id|> become Control).
    virtual TokenAttr token_attr(int32_t id) const { return TokenAttr::Normal; }
    virtual std::string kind() const { return {}; }  // "spm" or "bpe (<pre>)", for logs
};

// Streams token pieces as valid UTF-8: bytes of an incomplete code point are held
// back until the next piece completes it (flush() returns whatever is left).
class Utf8Stream {
public:
    std::string push(std::string_view piece);
    std::string flush();

private:
    std::string pending_;
};

}  // namespace vega
