// The vocabulary's token pieces (bytes) as a trie, built once per model: a grammar
// walks it to find every token it allows in one pass, pruning a whole subtree at the
// first byte it refuses (GrammarConstraint::allowed_mask), instead of trying each of
// the vocabulary's 32k-150k tokens on its own.
#pragma once
#include <cstdint>
#include <vector>

namespace vega {

class Tokenizer;

class VocabTrie {
public:
    // The tokens a grammar may produce as text: not end-of-generation, not control,
    // unknown or unused, with a non-empty piece (GrammarConstraint::allows' rule);
    // and, apart, the end-of-generation tokens.
    explicit VocabTrie(const Tokenizer& tok);

    // Node i: its children (edges [child_begin, child_end), sorted by byte) and the
    // tokens whose piece ends here (tokens [token_begin, token_end)). Node 0 is the root.
    struct Node {
        uint32_t child_begin = 0, child_end = 0, token_begin = 0, token_end = 0;
    };
    struct Edge {
        uint8_t byte = 0;
        uint32_t node = 0;
    };
    const std::vector<Node>& nodes() const { return nodes_; }
    const std::vector<Edge>& edges() const { return edges_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::vector<int32_t>& eog_tokens() const { return eog_; }
    int32_t n_vocab() const { return n_vocab_; }

private:
    std::vector<Node> nodes_;
    std::vector<Edge> edges_;
    std::vector<int32_t> tokens_;
    std::vector<int32_t> eog_;
    int32_t n_vocab_ = 0;
};

}  // namespace vega
