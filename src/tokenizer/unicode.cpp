// UTF-8 decoding/encoding (lenient, llama.cpp-compatible) and the GPT-2 byte map.
#include "tokenizer/unicode.h"

#include <array>

namespace vega::tok {

std::vector<uint32_t> decode_utf8(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    const size_t n = s.size();
    auto cont = [&](size_t i) { return i < n && (uint8_t(s[i]) & 0xC0) == 0x80; };
    size_t i = 0;
    while (i < n) {
        const uint8_t c = uint8_t(s[i]);
        if (c < 0x80) {
            out.push_back(c);
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && cont(i + 1)) {
            out.push_back(uint32_t(c & 0x1F) << 6 | (uint8_t(s[i + 1]) & 0x3F));
            i += 2;
        } else if ((c & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
            out.push_back(uint32_t(c & 0x0F) << 12 | uint32_t(uint8_t(s[i + 1]) & 0x3F) << 6 |
                          (uint8_t(s[i + 2]) & 0x3F));
            i += 3;
        } else if ((c & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
            out.push_back(uint32_t(c & 0x07) << 18 | uint32_t(uint8_t(s[i + 1]) & 0x3F) << 12 |
                          uint32_t(uint8_t(s[i + 2]) & 0x3F) << 6 | (uint8_t(s[i + 3]) & 0x3F));
            i += 4;
        } else {
            out.push_back(0xFFFD);  // stray continuation byte, bad lead byte or truncated sequence
            i += 1;
        }
    }
    return out;
}

namespace {

// GPT-2's table: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map to
// themselves; the other 68 bytes map, in byte order, to U+0100, U+0101, ...
struct ByteMap {
    std::array<uint32_t, 256> to_cpt{};
    std::array<int16_t, 512> to_byte{};  // every mapped code point is < 0x144
    ByteMap() {
        to_byte.fill(-1);
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_cpt[b] = keep ? uint32_t(b) : next++;
            to_byte[to_cpt[b]] = int16_t(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

}  // namespace

uint32_t byte_to_cpt(uint8_t b) { return byte_map().to_cpt[b]; }

int cpt_to_byte(uint32_t cpt) { return cpt < 512 ? byte_map().to_byte[cpt] : -1; }

std::string byte_encode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) append_utf8(out, byte_to_cpt(uint8_t(c)));
    return out;
}

}  // namespace vega::tok
