#include "engine/grammar_constraint.h"

#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace vega {

namespace {

// The code points of a whole, shortest-form UTF-8 text into cps (at most max); -1 when it
// is not (a piece ending inside a character, an overlong form, a surrogate) or longer.
int decode_utf8(const std::string& s, char32_t* cps, int max) {
    constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    int n = 0;
    for (size_t i = 0; i < s.size();) {
        const unsigned char b = static_cast<unsigned char>(s[i]);
        const int len = utf8_sequence_length(b);
        if (len == 0 || i + size_t(len) > s.size() || n == max) return -1;
        char32_t cp = utf8_lead_bits(b, len);
        for (int k = 1; k < len; ++k) {
            const unsigned char c = static_cast<unsigned char>(s[i + size_t(k)]);
            if ((c >> 6) != 2) return -1;
            cp = (cp << 6) | (c & 0x3F);
        }
        if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
        cps[n++] = cp;
        i += size_t(len);
    }
    return n;
}

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, const Tokenizer& tok,
                                     std::shared_ptr<const VocabTrie> trie)
    : g_(std::move(g)), tok_(tok), trie_(std::move(trie)), m_(*g_) {
    if (trie_ && trie_->n_vocab() != tok.n_vocab())
        fail("grammar: the vocabulary trie has {} tokens, the tokenizer {}", trie_->n_vocab(), tok.n_vocab());
}

bool GrammarConstraint::allowed_mask(uint8_t* mask) const {
    if (!trie_) return false;
    std::fill(mask, mask + trie_->n_vocab(), uint8_t(0));
    if (m_.can_end())
        for (int32_t t : trie_->eog_tokens()) mask[t] = 1;
    if (!m_.dead()) walk(0, m_, mask);
    return true;
}

bool GrammarConstraint::few_allowed() const { return trie_ && m_.next_char_options() <= kFewChars; }

// Tokens ending at `node` are allowed (m has taken their bytes); a child is walked
// when m takes its byte (pieces are fed byte by byte, as accept() takes them).
void GrammarConstraint::walk(uint32_t node, const grammar::Matcher& m, uint8_t* mask) const {
    const VocabTrie::Node& n = trie_->nodes()[node];
    if (node != 0)
        for (uint32_t i = n.token_begin; i < n.token_end; ++i) mask[trie_->tokens()[i]] = 1;
    for (uint32_t e = n.child_begin; e < n.child_end; ++e) {
        const VocabTrie::Edge& edge = trie_->edges()[e];
        grammar::Matcher next = m;
        const char b = char(edge.byte);
        if (next.accept(std::string_view(&b, 1))) walk(edge.node, next, mask);
    }
}

bool GrammarConstraint::allows(int32_t t) const {
    if (tok_.is_eog(t)) return m_.can_end();
    const TokenAttr a = tok_.token_attr(t);
    if (a == TokenAttr::Control || a == TokenAttr::Unknown || a == TokenAttr::Unused) return false;
    const std::string piece = tok_.token_to_piece(t);
    if (piece.empty()) return false;
    // A loop state (a string's body): a piece whose every character the same stacks
    // take, stacks that loop on it, is allowed without running the matcher. Pieces that
    // end inside a character, or are not shortest-form UTF-8, take the matcher.
    char32_t cps[64];
    const int n = decode_utf8(piece, cps, 64);
    if (n > 0) {
        const uint64_t taking = m_.stacks_taking(cps[0]);
        if (taking == 0) return false;
        if (taking != grammar::Matcher::kUnknown) {
            bool same = true;
            for (int i = 1; i < n && same; ++i) same = m_.stacks_taking(cps[i]) == taking;
            if (same && loops(taking, cps[0])) return true;
        }
    }
    return m_.allows(piece);
}

bool GrammarConstraint::loops(uint64_t taking, char32_t c) const {
    for (const auto& [mask, yes] : loops_)
        if (mask == taking) return yes;
    const bool yes = m_.loops_on(c);
    loops_.emplace_back(taking, yes);
    return yes;
}

void GrammarConstraint::accept(int32_t t) {
    if (tok_.is_eog(t)) {
        if (!m_.can_end()) fail("grammar: end of generation before the grammar's text is complete");
        return;
    }
    loops_.clear();
    if (!m_.accept(tok_.token_to_piece(t))) fail("grammar: token {} does not continue the grammar", t);
}

}  // namespace vega
