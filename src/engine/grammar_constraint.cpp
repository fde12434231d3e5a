#include "engine/grammar_constraint.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace vega {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, const Tokenizer& tok)
    : g_(std::move(g)), tok_(tok), m_(*g_) {}

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
