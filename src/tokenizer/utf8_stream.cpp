// Utf8Stream: holds back the bytes of a code point split across token pieces.
#include "tokenizer/tokenizer.h"

namespace vega {

namespace {

// Bytes a well-formed sequence starting with `c` needs; 1 for ASCII and for
// bytes that cannot start one (those are passed through, never held).
size_t needed(uint8_t c) {
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 1;
}

}  // namespace

std::string Utf8Stream::push(std::string_view piece) {
    pending_.append(piece);
    const size_t n = pending_.size();
    // Look back over at most 3 trailing continuation bytes for the lead byte of
    // the last sequence; hold it back if it still lacks bytes.
    size_t keep = n;
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const uint8_t c = uint8_t(pending_[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte
        if (needed(c) > back) keep = n - back;
        break;
    }
    std::string out = pending_.substr(0, keep);
    pending_.erase(0, keep);
    return out;
}

std::string Utf8Stream::flush() {
    std::string out;
    out.swap(pending_);
    return out;
}

}  // namespace vega
