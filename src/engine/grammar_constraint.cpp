#include "engine/grammar_constraint.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace vega {

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
    return !piece.empty() && m_.allows(piece);
}

void GrammarConstraint::accept(int32_t t) {
    if (tok_.is_eog(t)) {
        if (!m_.can_end()) fail("grammar: end of generation before the grammar's text is complete");
        return;
    }
    if (!m_.accept(tok_.token_to_piece(t))) fail("grammar: token {} does not continue the grammar", t);
}

}  // namespace vega
