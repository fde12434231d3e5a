// A grammar as a sampling constraint (engine/sampler.h): a token is allowed when its
// bytes can continue the text generated so far under the grammar; an end-of-generation
// token when the text may end there. Control, unknown and unused tokens never are.
// One per request (it holds the matcher's state); the grammar is shared.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "engine/vocab_trie.h"
#include "grammar/grammar.h"

namespace vega {

class Tokenizer;

class GrammarConstraint final : public TokenConstraint {
public:
    // trie (optional, shared by every request of a model): the vocabulary, for allowed_mask.
    GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, const Tokenizer& tok,
                      std::shared_ptr<const VocabTrie> trie = nullptr);
    bool allows(int32_t token) const override;
    // The whole vocabulary's allows() by one walk of the trie: a subtree is left at the
    // first byte the grammar refuses. False without a trie.
    bool allowed_mask(uint8_t* mask) const override;
    // The next character has at most kFewChars options (structure, digits, a key's quote)
    // and there is a trie: the mask walks only their subtrees.
    bool few_allowed() const override;
    static constexpr size_t kFewChars = 32;
    // Records a sampled token (it must be allowed: throws vega::Error otherwise).
    void accept(int32_t token);
    // The text so far is complete under the grammar.
    bool can_end() const { return m_.can_end(); }

private:
    void walk(uint32_t node, const grammar::Matcher& m, uint8_t* mask) const;
    // Whether the matcher loops on the characters that the stacks in `taking` take
    // (Matcher::loops_on, asked once per mask and matcher state).
    bool loops(uint64_t taking, char32_t c) const;

    std::shared_ptr<const grammar::Grammar> g_;
    const Tokenizer& tok_;
    std::shared_ptr<const VocabTrie> trie_;
    grammar::Matcher m_;
    mutable std::vector<std::pair<uint64_t, bool>> loops_;  // loops() answers for this state
};

}  // namespace vega
