// The GBNF parser and the grammar matcher: what parses (and the errors, with line and
// column, for what does not), what a grammar accepts and rejects byte by byte, tokens
// that end inside a UTF-8 character, and the bounds that keep hostile grammars cheap.
#include <gtest/gtest.h>

#include <string>

#include "grammar/grammar.h"

namespace vega::grammar {
namespace {

// Whether the whole text matches (fed in one piece, then at the end).
bool matches(const Grammar& g, std::string_view text) {
    Matcher m(g);
    return m.accept(text) && m.can_end();
}
bool matches(std::string_view gbnf, std::string_view text) { return matches(Grammar::parse(gbnf), text); }

std::string parse_error(std::string_view gbnf) {
    try {
        Grammar::parse(gbnf);
    } catch (const GrammarError& e) {
        return e.what();
    }
    return "";
}

TEST(Grammar, LiteralsClassesAndAlternatives) {
    EXPECT_TRUE(matches(R"(root ::= "yes" | "no")", "yes"));
    EXPECT_TRUE(matches(R"(root ::= "yes" | "no")", "no"));
    EXPECT_FALSE(matches(R"(root ::= "yes" | "no")", "ye"));
    EXPECT_FALSE(matches(R"(root ::= "yes" | "no")", "yess"));
    EXPECT_TRUE(matches(R"(root ::= [a-c0-9] [^x])", "b7"));
    EXPECT_FALSE(matches(R"(root ::= [a-c0-9] [^x])", "bx"));
    EXPECT_TRUE(matches(R"(root ::= . .)", "\xC3\xA9z"));  // any character: é then z
    EXPECT_TRUE(matches("root ::= \"\\n\\t\\\\\\\"\\x41\\u00e9\"", "\n\t\\\"A\xC3\xA9"));
}

TEST(Grammar, Repetitions) {
    const Grammar g = Grammar::parse(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,3} "f"{2,})");
    EXPECT_TRUE(matches(g, "bddeff"));
    EXPECT_TRUE(matches(g, "aaabbbcddeeefff"));
    EXPECT_FALSE(matches(g, "ddeff"));      // b+ needs one
    EXPECT_FALSE(matches(g, "bdeff"));      // d{2}
    EXPECT_FALSE(matches(g, "bddeeeeff"));  // e{1,3}
    EXPECT_FALSE(matches(g, "bddef"));      // f{2,}
    // A repeated multi-character literal repeats all of it.
    EXPECT_TRUE(matches(R"(root ::= "ab"{2})", "abab"));
    EXPECT_FALSE(matches(R"(root ::= "ab"{2})", "abb"));
    // A long repetition does not grow the matcher's stacks (tail calls).
    const Grammar star = Grammar::parse(R"(root ::= [a-z]*)");
    Matcher m(star);
    for (int k = 0; k < 10000; ++k) ASSERT_TRUE(m.accept("q"));
    EXPECT_TRUE(m.can_end());
    EXPECT_LE(m.n_stacks(), 2u);
}

// The JSON grammar as llama.cpp's grammars/json.gbnf writes it (multi-line rules,
// groups over several lines, comments).
const char* kJson = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

// A grammar behind a fixed text (a constrained reply that must first close the think
// block the prompt opened): the literal, up to two spaces or newlines, then the grammar.
TEST(Grammar, AfterALiteral) {
    const Grammar g = Grammar::after_literal(Grammar::parse(R"(root ::= "{" [0-9]+ "}")"), "</think>");
    EXPECT_TRUE(matches(g, "</think>{12}"));
    EXPECT_TRUE(matches(g, "</think>\n\n{7}"));
    EXPECT_FALSE(matches(g, "</think>\n\n\n{7}"));  // (at most two)
    EXPECT_FALSE(matches(g, "{12}"));
    EXPECT_FALSE(matches(g, "</think>"));
    EXPECT_FALSE(matches(g, "</thin>{1}"));
    EXPECT_FALSE(matches(g, "</think>x{1}"));
    const Grammar u = Grammar::after_literal(Grammar::parse(R"(root ::= "a")"), "\xc3\xa9\xe2\x82\xac");
    EXPECT_TRUE(matches(u, "\xc3\xa9\xe2\x82\xac a"));
    EXPECT_THROW(Grammar::after_literal(u, "\xc3"), GrammarError);
}

// A string's body is a loop (a character the same stacks take gives the same state back);
// a bounded repetition is not; the stacks that take a character, as a mask.
TEST(Grammar, LoopsAndStacksTaking) {
    const Grammar g = Grammar::parse(R"(root ::= "\"" [^"\\]* "\"" | "\"" [a-c]{0,3} "!")");
    Matcher m(g);
    ASSERT_TRUE(m.accept("\"a"));
    EXPECT_FALSE(m.loops_on(U'x'));  // 'x' ends the bounded branch: not the same state
    ASSERT_TRUE(m.accept("x"));
    EXPECT_TRUE(m.loops_on(U'y'));
    EXPECT_NE(m.stacks_taking(U'x'), 0u);
    EXPECT_EQ(m.stacks_taking(U'\\'), 0u);
    EXPECT_NE(m.stacks_taking(U'"'), m.stacks_taking(U'x'));  // the closing quote: another stack
    const Grammar b = Grammar::parse(R"(root ::= [a-c]{0,3} "!")");
    Matcher n(b);
    ASSERT_TRUE(n.accept("a"));
    EXPECT_FALSE(n.loops_on(U'b'));  // one fewer left each time
    const Grammar any = Grammar::parse(R"(root ::= [^x]*)");
    Matcher pending(any);
    ASSERT_TRUE(pending.accept("\xc3"));  // inside a 2-byte character
    EXPECT_EQ(pending.stacks_taking(U'a'), Matcher::kUnknown);
    EXPECT_FALSE(pending.loops_on(U'a'));
}

TEST(Grammar, JsonGrammar) {
    const Grammar g = Grammar::parse(kJson);
    EXPECT_TRUE(matches(g, R"({"a": [1, 2.5, -3e4], "b": {"c": "x\n\u00e9"}, "d": true, "e": null})"));
    EXPECT_TRUE(matches(g, "{}"));
    EXPECT_FALSE(matches(g, R"({"a": })"));
    EXPECT_FALSE(matches(g, R"({"a" 1})"));
    EXPECT_FALSE(matches(g, R"([1, 2])"));  // root is an object
    // Piece by piece, as tokens arrive: a prefix is alive but cannot end.
    Matcher m(g);
    for (std::string_view piece : {"{\"na", "me\": \"", "Ann", "\"}"}) ASSERT_TRUE(m.accept(piece)) << piece;
    EXPECT_TRUE(m.can_end());
    Matcher p(g);
    ASSERT_TRUE(p.accept("{\"x\": 1"));
    EXPECT_FALSE(p.can_end());
    EXPECT_TRUE(p.allows(", \"y\": 2}"));
    EXPECT_FALSE(p.allows("]"));
    EXPECT_TRUE(p.accept("}"));  // allows() left p as it was
    EXPECT_TRUE(p.can_end());
}

TEST(Grammar, TokensEndingInsideACharacter) {
    const Grammar g = Grammar::parse(R"(root ::= "caf" [\u00e0-\u00ff] "!")");
    Matcher m(g);
    ASSERT_TRUE(m.accept("caf\xC3"));  // é's first byte: some allowed character starts with it
    EXPECT_FALSE(m.can_end());
    EXPECT_TRUE(m.accept("\xA9!"));
    EXPECT_TRUE(m.can_end());
    Matcher n(g);
    EXPECT_FALSE(n.accept("caf\xE2"));  // starts a 3-byte character: none allowed
    EXPECT_TRUE(n.dead());
    Matcher bad(g);
    EXPECT_FALSE(bad.accept("caf\xC3z"));  // not a continuation byte
    EXPECT_FALSE(matches(g, "caf\xA9!"));  // a stray continuation byte
}

// Only shortest-form UTF-8: an overlong encoding is not another spelling of a character
// (a model picking byte tokens C1 BB must not get '{' past a grammar), and neither are
// surrogates or code points above U+10FFFF.
TEST(Grammar, InvalidUtf8IsRefused) {
    const Grammar any = Grammar::parse("root ::= .*");
    const Grammar brace = Grammar::parse(R"(root ::= "{")");
    EXPECT_FALSE(matches(brace, "\xC1\xBB"));      // overlong '{'
    EXPECT_FALSE(Matcher(brace).allows("\xC1"));    // refused at its first byte
    EXPECT_FALSE(matches(any, "\xE0\x80\x80"));    // overlong U+0000
    EXPECT_FALSE(Matcher(any).allows("\xE0\x80"));  // no shortest form starts so
    EXPECT_FALSE(matches(any, "\xED\xA0\x80"));    // a surrogate
    EXPECT_FALSE(matches(any, "\xF4\x90\x80\x80"));  // above U+10FFFF
    EXPECT_FALSE(matches(any, "\xF8\x88\x80\x80\x80"));
    EXPECT_TRUE(matches(any, "\xF0\x9F\x98\x80 \xE2\x82\xAC \xC3\xA9"));  // U+1F600, euro, e-acute
    EXPECT_NE(parse_error("root ::= \"\xC1\xBB\"\n").find("invalid UTF-8"), std::string::npos);
}

TEST(Grammar, ErrorsNameLineAndColumn) {
    EXPECT_EQ(parse_error("root ::= foo\n"), "line 1, column 10: rule 'foo' is used but not defined");
    EXPECT_EQ(parse_error("a ::= \"x\"\n"), "the grammar has no rule 'root'");
    EXPECT_EQ(parse_error("root ::= \"abc\n"), "line 1, column 14: unterminated string literal");
    EXPECT_EQ(parse_error("root ::= [a-\n"), "line 1, column 13: unterminated character class");
    EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\"\n"), "line 2, column 1: rule 'root' is defined twice");
    EXPECT_EQ(parse_error("root ::= * \"a\"\n"), "line 1, column 10: '*' repeats nothing");
    EXPECT_EQ(parse_error("root ::= \"\\q\"\n"), "line 1, column 11: unknown escape '\\q'");
    EXPECT_EQ(parse_error("root = \"a\"\n"), "line 1, column 6: expected '::=' after rule name 'root'");
    EXPECT_EQ(parse_error("root ::= (\"a\"\n"), "line 2, column 1: expected ')'");
    EXPECT_EQ(parse_error("root ::= \"a\"{3,2}\n"), "line 1, column 18: {m,n} with n below m");
    EXPECT_EQ(parse_error("root ::= [z-a]\n"), "line 1, column 14: character range end below its start");
    EXPECT_NE(parse_error("root ::= \"a\"{5000}\n").find("repetition count above 1000"), std::string::npos);
}

TEST(Grammar, LeftRecursionIsRefused) {
    EXPECT_EQ(parse_error("root ::= root \"a\" | \"b\"\n"), "rule 'root' is left-recursive");
    // Through a rule that can be empty first.
    EXPECT_EQ(parse_error("root ::= e x\nx ::= root | \"a\"\ne ::= \"\" | \"b\"\n").find("left-recursive") != std::string::npos,
              true);
    // Right recursion is fine.
    EXPECT_TRUE(matches("root ::= \"a\" root | \"b\"\n", "aaab"));
}

TEST(Grammar, GeneratedRulesPrint) {
    const std::string s = Grammar::parse(R"(root ::= ("a" | [b-d])+)").to_string();
    EXPECT_NE(s.find("root ::="), std::string::npos) << s;
    EXPECT_NE(s.find("[b-d]"), std::string::npos) << s;
}

}  // namespace
}  // namespace vega::grammar
