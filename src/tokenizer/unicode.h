// UTF-8 helpers with llama.cpp's lenient rules, and GPT-2's byte <-> unicode map
// used by byte-level BPE vocabularies (every byte is written as one printable
// code point, e.g. ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A).
#pragma once
#include "core/utf8.h"
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vega::tok {

// Length of the UTF-8 sequence that starts with `lead`, judged by its high nibble
// only: continuation and invalid bytes count as 1 (the symbol splitting of both
// SentencePiece and BPE merges in llama.cpp works this way).
inline size_t utf8_len(uint8_t lead) {
    static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLen[lead >> 4];
}

// One UTF-8 character of a word in a doubly linked list of merge candidates
// (the SPM and BPE merge loops): bytes [off, off+n) of the word; n == 0 once
// merged into its left neighbour.
struct MergeSymbol {
    int prev, next;
    size_t off, n;
};
// The word split into characters, linked left to right (a truncated trailing
// sequence is one symbol of the bytes left).
inline std::vector<MergeSymbol> utf8_symbols(std::string_view word) {
    std::vector<MergeSymbol> sym;
    sym.reserve(word.size());
    for (size_t off = 0; off < word.size();) {
        const size_t n = std::min(utf8_len(uint8_t(word[off])), word.size() - off);
        const int idx = int(sym.size());
        sym.push_back({idx - 1, off + n == word.size() ? -1 : idx + 1, off, n});
        off += n;
    }
    return sym;
}

// Merges symbol `left` with its right neighbour (which leaves the list).
inline void merge_with_next(std::vector<MergeSymbol>& sym, int left) {
    MergeSymbol& L = sym[size_t(left)];
    MergeSymbol& R = sym[size_t(L.next)];
    L.n += R.n;
    R.n = 0;
    L.next = R.next;
    if (R.next >= 0) sym[size_t(R.next)].prev = left;
}

// Code points of `s`. Overlong forms and surrogates are decoded as written; a byte
// that cannot start a complete sequence becomes U+FFFD and decoding resumes at
// the next byte.
std::vector<uint32_t> decode_utf8(std::string_view s);

// append_utf8(out, cpt): core/utf8.h (values above 0x10FFFF keep the 4-byte pattern,
// so decode_utf8 -> append_utf8 round-trips every input).

// GPT-2 byte-level encoding: the code point that stands for byte `b`, and back
// (-1 when `cpt` stands for no byte).
uint32_t byte_to_cpt(uint8_t b);
int cpt_to_byte(uint32_t cpt);

// Bytes -> their byte-level BPE spelling (UTF-8 of the mapped code points).
std::string byte_encode(std::string_view bytes);

}  // namespace vega::tok
