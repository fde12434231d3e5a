// Byte-level BPE pre-tokenizer: splits text into words with a list of regexes
// (PCRE2, UTF + UCP). Like llama.cpp's unicode_regex_split, the first regex
// splits the whole text; each further regex splits every piece produced so far
// on its own (so lookaheads and `$` see the piece's end). Both the matches and
// the unmatched gaps between them become pieces.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vega::tok {

// The regex list llama.cpp uses for a tokenizer.ggml.pre value, plus the flags
// that value implies. Unknown names get the default list (known == false).
struct PreTokenizerSpec {
    std::vector<std::string> regexes;
    bool clean_spaces = true;    // llama_detokenize's clean_up_tokenization_spaces
    bool ignore_merges = false;  // a word that is already a token is not merged
    bool add_bos = false;        // default of tokenizer.ggml.add_bos_token
    bool known = true;
};
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);

class RegexSplitter {
public:
    explicit RegexSplitter(const std::vector<std::string>& regexes);  // throws vega::Error on a bad pattern
    ~RegexSplitter();
    RegexSplitter(const RegexSplitter&) = delete;
    RegexSplitter& operator=(const RegexSplitter&) = delete;

    // Words of `text` in order (their concatenation is `text`, with invalid UTF-8
    // replaced by U+FFFD as llama.cpp does). Not yet byte-encoded.
    std::vector<std::string> split(std::string_view text) const;

private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> re_;
};

}  // namespace vega::tok
