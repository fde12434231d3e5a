// UTF-8 encoding of one code point, shared by the tokenizer and the chat templates, and
// the lead-byte rules the grammar code decodes with.
#pragma once
#include <string>

namespace vega {

// Appends the UTF-8 form of cp (1..4 bytes; values above 0x10FFFF still use the
// 4-byte pattern, so that decoders that keep such values round-trip).
inline void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | ((cp >> 18) & 0x07));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

// Bytes of the UTF-8 sequence that `lead` starts (1..4); 0 for a continuation byte or
// one of F8..FF, which start none.
inline int utf8_sequence_length(unsigned char lead) {
    return lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
}
// The code point bits a lead byte of an n-byte sequence carries.
inline char32_t utf8_lead_bits(unsigned char lead, int n) {
    return n == 1 ? lead : n == 2 ? (lead & 0x1F) : n == 3 ? (lead & 0x0F) : (lead & 0x07);
}

}  // namespace vega
