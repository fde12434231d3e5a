// Grammars for constrained sampling (issue 29): GBNF text (the format of llama.cpp's
// `grammar` field and .gbnf files) parsed into rules, and a matcher that follows the
// grammar over UTF-8 bytes, so that a sampler can ask whether a token's bytes may come
// next. The matcher is a pushdown recogniser: its state is the set of stacks of
// positions the text so far can be in; every stack's top is a character set to match
// next (an empty stack: the text may end here). Grammar text is untrusted (a request
// field): parse errors name line and column, and sizes are bounded.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vega::grammar {

struct GrammarError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Grammar::parse's refusal of a rule that can reach itself before matching any text
// (the matcher could never advance past it): `rule` names the rule found on the loop.
struct LeftRecursionError : GrammarError {
    explicit LeftRecursionError(const std::string& r) : GrammarError("rule '" + r + "' is left-recursive"), rule(r) {}
    std::string rule;
};

// Code point ranges (inclusive), or their complement. Matches code points, never a
// partial UTF-8 sequence.
struct CharSet {
    std::vector<std::pair<char32_t, char32_t>> ranges;
    bool negated = false;
    bool contains(char32_t c) const;
    // Whether some code point in [lo, hi] is in the set.
    bool intersects(char32_t lo, char32_t hi) const;
};

// One element of a rule's alternative: a character set, a rule, or the end of the
// alternative (every alternative ends with one: the flat layout below).
struct Element {
    enum class Kind : uint8_t { End, Chars, Rule };
    Kind kind = Kind::End;
    uint32_t index = 0;  // Chars: into Grammar::sets; Rule: into Grammar::rules
};

struct Rule {
    std::string name;               // generated rules (groups, repetitions): "<parent>.<n>"
    std::vector<uint32_t> alts;     // where each alternative starts in Grammar::elements
};

struct Grammar {
    std::vector<Rule> rules;
    std::vector<CharSet> sets;
    std::vector<Element> elements;  // every alternative, each ended by an End element
    uint32_t root = 0;

    // Parses GBNF. Throws GrammarError ("line L, column C: what") for syntax errors, an
    // undefined or missing root rule, a rule used but not defined, left recursion, or a
    // grammar past the size limits (kMaxRules rules, kMaxElements elements).
    static Grammar parse(std::string_view text, std::string_view root = "root");
    // `g` behind a fixed text: `literal` (UTF-8), then up to two spaces or newlines, then
    // what g accepts. (A reply constrained while the prompt left a think block open first closes it.)
    static Grammar after_literal(const Grammar& g, std::string_view literal);
    // Index of a rule by name; -1 when absent.
    int find_rule(std::string_view name) const;
    // GBNF-like text for the grammar, generated rules included (their names hold a '.',
    // so it does not parse back): a debugging aid.
    std::string to_string() const;
};

constexpr size_t kMaxRules = 20000;
constexpr size_t kMaxElements = 200000;
constexpr size_t kMaxRepeat = 1000;   // upper bound of x{m,n}
constexpr size_t kMaxStacks = 4096;   // matcher states kept (beyond: the grammar is ambiguous
                                      // enough to blow up; the matcher refuses the text)

// Follows one grammar over a text given as UTF-8 bytes, in pieces (tokens). Copyable:
// a sampler tries a token on a copy.
class Matcher {
public:
    explicit Matcher(const Grammar& g);  // g must outlive the matcher (and its copies)
    explicit Matcher(Grammar&&) = delete;

    // Feeds bytes; false when the grammar cannot continue with them (the matcher is
    // then dead and stays so). A piece may end inside a UTF-8 sequence: its first bytes
    // are kept until the code point completes (accepted if some allowed character can
    // start with them).
    bool accept(std::string_view bytes);
    // Whether `bytes` could be fed now (on a copy; this matcher is unchanged).
    bool allows(std::string_view bytes) const;
    // The text may end here: some stack is empty and no UTF-8 sequence is pending.
    bool can_end() const;
    // How many code points the next character may be (the stack tops' sets together,
    // counted with overlaps; a complement counts as the whole of Unicode); inside a
    // pending UTF-8 sequence, the whole of Unicode too.
    size_t next_char_options() const;
    bool dead() const { return stacks_.empty(); }
    size_t n_stacks() const { return stacks_.size(); }
    // Which stacks take the code point c next, as a mask (stack i: bit i; 0: none).
    // kUnknown when there are more than 64 stacks or a UTF-8 sequence is pending.
    static constexpr uint64_t kUnknown = ~uint64_t(0);
    uint64_t stacks_taking(char32_t c) const;
    // Whether feeding c gives this matcher's state back (a loop: a string's body, say).
    // Then every character the same stacks take does too (what follows a character
    // depends only on which stacks took it), so a text of such characters is allowed.
    bool loops_on(char32_t c) const;

private:
    using Stack = std::vector<uint32_t>;  // positions in Grammar::elements; top = back
    void expand(Stack s, std::vector<Stack>& out, int depth) const;
    bool advance(char32_t c);
    bool pending_ok() const;

    const Grammar* g_;
    std::vector<Stack> stacks_;
    // A UTF-8 sequence begun but not complete: its bytes so far and the length it needs.
    uint8_t partial_[4] = {0, 0, 0, 0};
    int partial_len_ = 0, partial_need_ = 0;
};

}  // namespace vega::grammar
