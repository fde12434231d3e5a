#include "engine/vocab_trie.h"

#include <algorithm>
#include <string>

#include "tokenizer/tokenizer.h"

namespace vega {

VocabTrie::VocabTrie(const Tokenizer& tok) : n_vocab_(tok.n_vocab()) {
    struct Entry {
        std::string piece;
        int32_t id;
    };
    std::vector<Entry> entries;
    for (int32_t t = 0; t < n_vocab_; ++t) {
        if (tok.is_eog(t)) {
            eog_.push_back(t);
            continue;
        }
        const TokenAttr a = tok.token_attr(t);
        if (a == TokenAttr::Control || a == TokenAttr::Unknown || a == TokenAttr::Unused) continue;
        std::string p = tok.token_to_piece(t);
        if (!p.empty()) entries.push_back({std::move(p), t});
    }
    // Sorted pieces: the tokens under a prefix are one run, those ending at it first.
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.piece < b.piece || (a.piece == b.piece && a.id < b.id); });
    tokens_.reserve(entries.size());
    nodes_.reserve(entries.size() * 2 + 1);
    // Node for entries [lo, hi) sharing their first `depth` bytes; children built depth
    // first, their edges reserved together so a node's edges stay contiguous.
    struct Work {
        size_t lo, hi, depth;
        uint32_t node;
    };
    std::vector<Work> stack;
    nodes_.push_back({});
    stack.push_back({0, entries.size(), 0, 0});
    while (!stack.empty()) {
        const Work w = stack.back();
        stack.pop_back();
        size_t i = w.lo;
        Node& n = nodes_[w.node];
        n.token_begin = uint32_t(tokens_.size());
        for (; i < w.hi && entries[i].piece.size() == w.depth; ++i) tokens_.push_back(entries[i].id);
        n.token_end = uint32_t(tokens_.size());
        n.child_begin = uint32_t(edges_.size());
        std::vector<Work> children;
        while (i < w.hi) {
            const uint8_t b = uint8_t(entries[i].piece[w.depth]);
            size_t j = i + 1;
            while (j < w.hi && uint8_t(entries[j].piece[w.depth]) == b) ++j;
            const uint32_t child = uint32_t(nodes_.size());
            nodes_.push_back({});
            edges_.push_back({b, child});
            children.push_back({i, j, w.depth + 1, child});
            i = j;
        }
        nodes_[w.node].child_end = uint32_t(edges_.size());
        for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back(*it);
    }
}

}  // namespace vega
