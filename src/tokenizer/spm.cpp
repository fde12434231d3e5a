// SentencePiece-style tokenization (llama.cpp's llm_tokenizer_spm_session).
#include <queue>

#include "tokenizer/models.h"
#include "tokenizer/unicode.h"

namespace vega::tok {

SpmModel::SpmModel(const Vocab& v) : v_(v) {
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        int32_t id = v.find(name);
        if (id < 0) id = v.find(std::string(1, char(b)));
        byte_id_[b] = id >= 0 ? id : v.unk;
    }
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::vector<MergeSymbol> sym = utf8_symbols(text);

    struct Bigram {
        float score;
        int left, right;
        size_t size;  // bytes of the merged text, to detect stale entries
    };
    // Highest score on top; on equal scores the leftmost pair.
    auto lower = [](const Bigram& a, const Bigram& b) {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> queue(lower);
    auto try_add = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        const std::string_view s = text.substr(sym[l].off, sym[l].n + sym[r].n);
        const int32_t id = v_.find(s);
        if (id < 0) return;
        queue.push({v_.score[id], l, r, s.size()});
    };
    for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        MergeSymbol& L = sym[b.left];
        MergeSymbol& R = sym[b.right];
        if (L.n == 0 || R.n == 0 || L.n + R.n != b.size) continue;  // one side changed since
        merge_with_next(sym, b.left);
        try_add(L.prev, b.left);
        try_add(b.left, L.next);
    }

    // Every merged symbol is a token; a single character that is not falls back to bytes.
    for (int i = 0; i != -1; i = sym[i].next) {
        const std::string_view s = text.substr(sym[i].off, sym[i].n);
        const int32_t id = v_.find(s);
        if (id >= 0) {
            out.push_back(id);
        } else {
            for (char c : s)
                if (byte_id_[uint8_t(c)] >= 0) out.push_back(byte_id_[uint8_t(c)]);
        }
    }
}

}  // namespace vega::tok
