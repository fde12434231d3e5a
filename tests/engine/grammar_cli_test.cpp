// `vega run --grammar / --grammar-file`: a random-weight model writes only text the
// grammar allows (it never would unconstrained), at temperature 1 and greedy, alone and
// with several prompts in flight; bad grammars are one-line errors naming line and column.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

const char* kPerson = R"(root ::= "{\"name\": \"" [a-z]{1,8} "\", \"age\": " [1-9] [0-9]? "}")";

std::string model() { return quote(data_file("models/stories260K.gguf")); }

// The generated text of a `vega run -q` (stdout is the prompt, the text, a newline).
std::string generated(const CmdResult& r, const std::string& prompt) {
    EXPECT_EQ(r.out.rfind(prompt, 0), 0u) << r.out;
    std::string t = r.out.substr(prompt.size());
    if (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
}

TEST(GrammarRun, AlternativesAtTemperatureOne) {
    VEGA_REQUIRE_TEST_DATA();
    int yes = 0, no = 0;
    for (int seed = 1; seed <= 8; ++seed) {
        const CmdResult r = run_vega("run -q -m " + model() + " -p 'Once upon a time' -n 16 --temp 1 --seed " +
                                     std::to_string(seed) + " --grammar '" + R"(root ::= " " ("yes" | "no") ".")" + "'");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const std::string t = generated(r, "Once upon a time");
        EXPECT_TRUE(t == " yes." || t == " no.") << "seed " << seed << ": '" << t << "'";
        yes += t == " yes.", no += t == " no.";
    }
    EXPECT_GT(yes, 0);  // both answers come up: the grammar filters, the draw still decides
    EXPECT_GT(no, 0);
}

TEST(GrammarRun, JsonObjectsParseAndFollowTheGrammar) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string gf = temp_dir() + "/person.gbnf";
    std::ofstream(gf) << kPerson << "\n";
    for (const char* sampling : {"--temp 1 --seed 11", "--temp 1 --seed 12 --top-k 0 --top-p 1 --min-p 0", "--temp 0"}) {
        const CmdResult r = run_vega("run -q -m " + model() + " -p Lily -n 60 " + sampling + " --grammar-file " + quote(gf));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const std::string t = generated(r, "Lily");
        const nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << sampling << ": not JSON: '" << t << "'";
        ASSERT_TRUE(j.is_object() && j.size() == 2) << t;
        const std::string name = j["name"];
        EXPECT_TRUE(!name.empty() && name.size() <= 8 && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos) << t;
        EXPECT_TRUE(j["age"].is_number_integer() && j["age"] >= 1 && j["age"] <= 99) << t;
    }
}

TEST(GrammarRun, EveryPromptInFlightFollowsTheGrammar) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string dir = temp_dir(), pf = dir + "/prompts.txt", gf = dir + "/person.gbnf";
    std::ofstream(pf) << "Lily\nTom\nThe dog\nOnce\nA big\n";
    std::ofstream(gf) << kPerson << "\n";
    const CmdResult r = run_vega("run -q -m " + model() + " --prompts-file " + quote(pf) +
                                 " --parallel 3 -n 60 --temp 1 --seed 3 --grammar-file " + quote(gf));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream out(r.out);
    int n = 0;
    for (std::string line; std::getline(out, line);) {
        const size_t b = line.find('{');
        ASSERT_NE(b, std::string::npos) << line;
        EXPECT_FALSE(nlohmann::json::parse(line.substr(b), nullptr, false).is_discarded()) << line;
        ++n;
    }
    EXPECT_EQ(n, 5) << r.out;
}

TEST(GrammarRun, JsonSchemaOption) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string schema = R"({"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":9},"b":{"enum":["x","y"]}},"required":["a","b"],"additionalProperties":false})";
    for (int seed = 1; seed <= 4; ++seed) {
        const CmdResult r = run_vega("run -q -m " + model() + " -p Lily -n 80 --temp 1 --seed " + std::to_string(seed) +
                                     " --json-schema '" + schema + "'");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const nlohmann::json j = nlohmann::json::parse(generated(r, "Lily"), nullptr, false);
        ASSERT_TRUE(j.is_object()) << r.out;
        EXPECT_TRUE(j["a"].is_number_integer() && j["a"] >= 1 && j["a"] <= 9) << r.out;
        EXPECT_TRUE(j["b"] == "x" || j["b"] == "y") << r.out;
        EXPECT_EQ(j.size(), 2u) << r.out;
    }
    const CmdResult bad = run_vega("run -q -m " + model() + " -p x -n 4 --json-schema '{\"type\":\"string\",\"pattern\":\"a\"}'");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("--json-schema: json schema: 'pattern' at #: not supported"), std::string::npos) << bad.err;
}

TEST(GrammarRun, BadGrammarsAreOneLineErrors) {
    VEGA_REQUIRE_TEST_DATA();
    CmdResult r = run_vega("run -q -m " + model() + " -p x -n 4 --grammar 'root ::= \"a\" b'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--grammar: line 1, column 14: rule 'b' is used but not defined"), std::string::npos) << r.err;
    r = run_vega("run -q -m " + model() + " -p x -n 4 --grammar-file " + quote(temp_dir() + "/missing.gbnf"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot read grammar file"), std::string::npos) << r.err;
    r = run_vega("run -q -m " + model() + " -p x -n 4 --grammar 'root ::= root \"a\"'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("left-recursive"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vega::test
