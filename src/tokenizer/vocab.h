// The vocabulary shared by both tokenizer kinds: token strings, scores and
// attributes, special ids and flags, as llama.cpp derives them from GGUF
// metadata; plus the special-token partition and piece/detokenize rules.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vega::gguf { class File; }

namespace vega::tok {

// Token attribute bits (llama_token_attr).
enum : uint32_t {
    kAttrUndefined = 0,
    kAttrUnknown = 1u << 0,
    kAttrUnused = 1u << 1,
    kAttrNormal = 1u << 2,
    kAttrControl = 1u << 3,
    kAttrUserDefined = 1u << 4,
    kAttrByte = 1u << 5,
    kAttrLStrip = 1u << 7,  // eat whitespace left of the token when it is matched in text
    kAttrRStrip = 1u << 8,  // ... and right of it
};

enum class VocabKind { Spm, Bpe };

// Transparent hash so lookups by string_view do not allocate.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
    VocabKind kind = VocabKind::Spm;
    std::string model;  // tokenizer.ggml.model
    std::string pre;    // tokenizer.ggml.pre ("" if absent)
    std::vector<std::string> text;
    std::vector<float> score;
    std::vector<uint32_t> attr;
    TokenMap to_id;  // text -> id (the last id wins for duplicate strings)

    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
    bool add_bos = false, add_eos = false;
    bool add_space_prefix = false;  // SPM: a ' ' is put before text that starts a fragment
    bool clean_spaces = false;      // BPE decode: " ," -> "," etc.
    bool ignore_merges = false;     // BPE: whole-word tokens win over merges

    std::vector<int32_t> specials;  // control / user-defined / unknown ids, longest text first
    std::set<int32_t> eog;          // end-of-generation ids

    int32_t size() const { return int32_t(text.size()); }
    int32_t find(std::string_view s) const {
        auto it = to_id.find(s);
        return it == to_id.end() ? -1 : it->second;
    }
};

// Fills everything but the kind-specific models (BPE merges). `bpe_pre_*` are the
// defaults implied by tokenizer.ggml.pre for BPE vocabularies. Throws vega::Error.
void load_vocab(const gguf::File& f, Vocab& v, bool bpe_add_bos_default, bool bpe_clean_spaces, bool bpe_ignore_merges);

// A run of the input: a special token (token >= 0) or raw text [offset, offset+length).
struct Fragment {
    int32_t token = -1;
    size_t offset = 0, length = 0;
};
// llama.cpp's tokenizer_st_partition: splits `text` on the exact strings of the
// special tokens, longest first. Control and unknown tokens only count when
// `parse_special`; user-defined tokens always do.
std::vector<Fragment> partition_specials(const Vocab& v, std::string_view text, bool parse_special);

// The bytes of one token (llama_token_to_piece): control/unknown -> "" unless
// `special`; `lstrip` removes one leading space.
std::string token_piece(const Vocab& v, int32_t id, bool special, bool lstrip);

// llama_detokenize(remove_special=false, unparse_special=special).
std::string detokenize(const Vocab& v, const std::vector<int32_t>& ids, bool special);

}  // namespace vega::tok
