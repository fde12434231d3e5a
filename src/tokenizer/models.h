// The two subword algorithms, each applied to one raw-text fragment.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace vega::gguf { class File; }

namespace vega::tok {

// SentencePiece-style BPE over scores: `text` is already space-escaped ("▁").
// Adjacent symbols (initially UTF-8 characters) are merged greedily, highest
// token score first (leftmost on ties), via a priority queue over a linked list
// of symbols: O(n log n). Symbols that are not tokens fall back to <0xNN> bytes.
class SpmModel {
public:
    explicit SpmModel(const Vocab& v);
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    const Vocab& v_;
    std::array<int32_t, 256> byte_id_{};  // "<0xNN>" (or the 1-byte string) -> id; unk if neither
};

// Byte-level BPE: regex pre-tokenizer, GPT-2 byte encoding, then merges by rank
// (lowest first, leftmost on ties) inside each word.
class BpeModel {
public:
    BpeModel(const Vocab& v, const gguf::File& f, const std::vector<std::string>& regexes);
    void encode(std::string_view text, std::vector<int32_t>& out) const;
    size_t n_merges() const { return ranks_.size(); }

private:
    void encode_word(const std::string& word, std::vector<int32_t>& out) const;
    int32_t rank(std::string_view left, std::string_view right, std::string& key) const;

    const Vocab& v_;
    TokenMap ranks_;  // "left right" (the merges line) -> rank
    RegexSplitter splitter_;
};

}  // namespace vega::tok
