// `vega template -t TEMPLATE -i CASE.json` on a reference case: prints exactly the
// rendering; on a template error exits 1 with one line on stderr.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_vega.h"
#include "test_data.h"

namespace {

using json = nlohmann::ordered_json;
using vega::test::quote;

void write_file(const std::string& path, const std::string& data) {
    std::ofstream f(path, std::ios::binary);
    f << data;
}

// Writes the template and one case of a reference file; returns {template path, case path}.
std::pair<std::string, std::string> write_case(const json& ref, const json& c, const std::string& stem) {
    std::string dir = vega::test::temp_dir();
    std::string tpl = dir + "/" + stem + ".jinja", in = dir + "/" + stem + ".json";
    write_file(tpl, ref["template"].get<std::string>());
    json j = json::object();
    for (const char* k : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
        if (c.contains(k)) j[k] = c[k];
    j["now"] = ref["now"];
    write_file(in, j.dump());
    return {tpl, in};
}

TEST(TemplateCli, RendersAReferenceCaseExactly) {
    VEGA_REQUIRE_TEST_DATA();
    json ref = json::parse(vega::test::read_file(vega::test::data_file("templates/meta-llama-Llama-3.1-8B-Instruct.json")));
    int checked = 0;
    for (auto& c : ref["cases"]) {
        if (!c.contains("expected")) continue;
        auto [tpl, in] = write_case(ref, c, "llama31-" + c["name"].get<std::string>());
        auto r = vega::test::run_vega("template -t " + quote(tpl) + " -i " + quote(in));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, c["expected"].get<std::string>()) << c["name"];
        ++checked;
    }
    EXPECT_GT(checked, 0);
}

TEST(TemplateCli, TemplateErrorExitsOneWithOneLine) {
    VEGA_REQUIRE_TEST_DATA();
    json ref = json::parse(vega::test::read_file(vega::test::data_file("templates/google-gemma-2-2b-it.json")));
    for (auto& c : ref["cases"]) {
        if (!c.contains("error")) continue;
        auto [tpl, in] = write_case(ref, c, "gemma2-" + c["name"].get<std::string>());
        auto r = vega::test::run_vega("template -t " + quote(tpl) + " -i " + quote(in));
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_EQ(r.out, "");
        ASSERT_FALSE(r.err.empty());
        EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
        return;
    }
    FAIL() << "the gemma-2 reference has no error case";
}

TEST(TemplateCli, SyntaxErrorAndBadInput) {
    std::string dir = vega::test::temp_dir();
    write_file(dir + "/bad.jinja", "{% for m in messages %}\n{{ m.content }\n");
    write_file(dir + "/ok.jinja", "{{ messages[0].content }}");
    write_file(dir + "/case.json", R"({"messages": [{"role": "user", "content": "hi\n"}]})");
    write_file(dir + "/broken.json", "{not json");
    auto r = vega::test::run_vega("template -t " + quote(dir + "/bad.jinja") + " -i " + quote(dir + "/case.json"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
    r = vega::test::run_vega("template -t " + quote(dir + "/ok.jinja") + " -i " + quote(dir + "/case.json"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "hi\n");  // exactly the rendering: nothing added, nothing removed
    r = vega::test::run_vega("template -t " + quote(dir + "/ok.jinja") + " -i " + quote(dir + "/broken.json"));
    EXPECT_EQ(r.exit_code, 1);
}

// Hostile inputs end in one error line and exit 1, not a signal (see hostile_test.cpp).
TEST(TemplateCli, HostileInputIsAnErrorNotACrash) {
    std::string dir = vega::test::temp_dir();
    const int depth = 1000000;
    std::string deep = R"({"messages": [{"role": "user", "content": )" + std::string(depth, '[') +
                       std::string(depth, ']') + "}]}";
    write_file(dir + "/deep.json", deep);
    write_file(dir + "/ok.jinja", "{{ messages[0].content }}");
    std::string chain = "{{ 1";
    for (int i = 0; i < 100000; ++i) chain += "+1";
    write_file(dir + "/chain.jinja", chain + " }}");
    write_file(dir + "/case.json", R"({"messages": [{"role": "user", "content": "hi"}]})");
    struct Case {
        std::string tpl, in, what;
    } cases[] = {{"ok.jinja", "deep.json", "deeper than 512 levels"}, {"chain.jinja", "case.json", "max_parse_depth"}};
    for (auto& c : cases) {
        auto r = vega::test::run_vega("template -t " + quote(dir + "/" + c.tpl) + " -i " + quote(dir + "/" + c.in));
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_EQ(r.out, "");
        EXPECT_NE(r.err.find(c.what), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    }
}

}  // namespace
