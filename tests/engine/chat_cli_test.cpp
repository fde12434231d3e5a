// vega chat scripted through stdin: two turns; the second evaluates only the
// tokens its rendering adds to what the cache already holds.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

TEST(ChatCli, SecondTurnEvaluatesOnlyItsNewTokens) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string dir = temp_dir();
    const std::string tmpl = dir + "/chat.jinja", turns = dir + "/turns.txt";
    std::ofstream(tmpl) << "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
                           "{% if add_generation_prompt %}<|assistant|>{% endif %}";
    std::ofstream(turns) << "Once upon a time\n/clear\nOnce upon a time\nWhat did she do next?\n/exit\nnever read\n";
    const CmdResult r = run_vega("chat -m " + quote(data_file("models/stories260K.gguf")) +
                                 " --device cpu --temp 0 -n 16 -s 'Tell a story.' --chat-template-file " + quote(tmpl) +
                                 " < " + quote(turns));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::regex re(R"(\[turn (\d+): prompt (\d+) tokens, (\d+) evaluated, (\d+) from the cache; (\d+) generated)");
    std::vector<std::smatch> turns_seen;
    std::vector<std::array<int, 5>> t;
    for (std::sregex_iterator it(r.err.begin(), r.err.end(), re), end; it != end; ++it)
        t.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3]), std::stoi((*it)[4]), std::stoi((*it)[5])});
    ASSERT_EQ(t.size(), 3u) << r.err;  // three user turns; "never read" comes after /exit
    EXPECT_NE(r.err.find("conversation cleared"), std::string::npos);
    // Turn 1: nothing cached. Turn 2 (after /clear): the same prompt, so all but its last token come from the cache.
    EXPECT_EQ(t[0][3], 0);
    EXPECT_EQ(t[1][1], t[0][1]);
    EXPECT_EQ(t[1][2], 1);
    // Turn 3 re-renders turn 2 plus the new message: it evaluates only what is new.
    EXPECT_GT(t[2][1], t[1][1] + t[1][4]);
    EXPECT_GE(t[2][3], t[1][1]) << r.err;
    EXPECT_EQ(t[2][2] + t[2][3], t[2][1]);
    EXPECT_LT(t[2][2], t[2][1] - t[1][1]) << "turn 3 evaluated its whole prompt again";
    // The replies of turns 1 and 2 are the same greedy text.
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    ASSERT_GE(lines.size(), 2u);
    EXPECT_EQ(lines[0], lines[1]);
}

TEST(ChatCli, MissingTemplateFileIsAClearError) {
    VEGA_REQUIRE_TEST_DATA();
    const CmdResult r = run_vega("chat -m " + quote(data_file("models/stories260K.gguf")) +
                                 " --device cpu --chat-template-file /nonexistent/t.jinja < /dev/null");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot read chat template file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vega::test
