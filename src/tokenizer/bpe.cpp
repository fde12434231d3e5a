// Byte-level BPE tokenization (llama.cpp's llm_tokenizer_bpe_session).
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/models.h"
#include "tokenizer/unicode.h"

namespace vega::tok {

BpeModel::BpeModel(const Vocab& v, const gguf::File& f, const std::vector<std::string>& regexes)
    : v_(v), splitter_(regexes) {
    const gguf::Value* merges = f.find("tokenizer.ggml.merges");
    if (!merges) fail("{}: metadata key 'tokenizer.ggml.merges' is missing (needed by a gpt2 tokenizer)", f.path());
    if (merges->type != gguf::ValueType::ARRAY || merges->elem_type != gguf::ValueType::STRING)
        fail("{}: metadata key 'tokenizer.ggml.merges' is not an array of strings", f.path());
    ranks_.reserve(merges->arr.size());
    for (size_t i = 0; i < merges->arr.size(); ++i) {
        // "first second", split at the first space after position 0; the first
        // occurrence of a pair keeps its rank.
        const std::string& m = merges->arr[i].str;
        if (m.find(' ', 1) == std::string::npos) continue;
        ranks_.try_emplace(m, int32_t(i));
    }
}

int32_t BpeModel::rank(std::string_view left, std::string_view right, std::string& key) const {
    key.assign(left);
    key += ' ';
    key += right;
    auto it = ranks_.find(key);
    return it == ranks_.end() ? -1 : it->second;
}

void BpeModel::encode_word(const std::string& word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (v_.ignore_merges) {
        const int32_t id = v_.find(word);
        if (id >= 0) {
            out.push_back(id);
            return;
        }
    }
    std::vector<MergeSymbol> sym = utf8_symbols(word);
    struct Bigram {
        int32_t rank;
        int left, right;
        std::string text;  // merged text, to detect stale entries
    };
    // Lowest rank on top; on equal ranks the leftmost pair.
    auto lower = [](const Bigram& a, const Bigram& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    };
    std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> queue(lower);
    std::string key;
    auto piece = [&](int i) { return std::string_view(word).substr(sym[i].off, sym[i].n); };
    auto try_add = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        const int32_t rk = rank(piece(l), piece(r), key);
        if (rk < 0) return;
        queue.push({rk, l, r, word.substr(sym[l].off, sym[l].n + sym[r].n)});
    };
    for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        MergeSymbol& L = sym[b.left];
        MergeSymbol& R = sym[b.right];
        if (L.n == 0 || R.n == 0) continue;
        if (L.n + R.n != b.text.size() || word.compare(L.off, L.n + R.n, b.text) != 0) continue;  // stale
        merge_with_next(sym, b.left);
        try_add(L.prev, b.left);
        try_add(b.left, L.next);
    }

    for (int i = 0; i != -1; i = sym[i].next) {
        const std::string_view s = piece(i);
        const int32_t id = v_.find(s);
        if (id >= 0) {
            out.push_back(id);
        } else {  // not a token: single bytes of the encoded text, where those are tokens
            for (char c : s) {
                const int32_t b = v_.find(std::string_view(&c, 1));
                if (b >= 0) out.push_back(b);
            }
        }
    }
}

void BpeModel::encode(std::string_view text, std::vector<int32_t>& out) const {
    // Words repeat a lot in running text: memoise their ids for this call.
    std::unordered_map<std::string, std::vector<int32_t>> cache;
    for (const std::string& w : splitter_.split(text)) {
        std::string enc = byte_encode(w);
        auto it = cache.find(enc);
        if (it == cache.end()) {
            std::vector<int32_t> ids;
            encode_word(enc, ids);
            it = cache.emplace(std::move(enc), std::move(ids)).first;
        }
        out.insert(out.end(), it->second.begin(), it->second.end());
    }
}

}  // namespace vega::tok
