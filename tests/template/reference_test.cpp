// Every case of every templates/*.json reference (rendered by Python jinja2 3.1.6 the way
// transformers' apply_chat_template does): vega must produce `expected` byte for byte, or
// fail where the reference has `error`.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "template/chat_template.h"
#include "test_data.h"

namespace {

using json = nlohmann::ordered_json;

// The reference files; listed when the test binary starts (empty without VEGA_TEST_DATA).
std::vector<std::string> reference_files() {
    std::vector<std::string> out;
    std::string dir = vega::test::data_dir();
    if (dir.empty()) return {"(VEGA_TEST_DATA unset)"};
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(dir + "/templates", ec))
        if (e.path().extension() == ".json") out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    if (out.empty()) out.push_back("(no templates/*.json)");
    return out;
}

std::atomic<int> g_cases{0}, g_matched{0};

class TemplateReference : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateReference, RendersEveryCase) {
    VEGA_REQUIRE_TEST_DATA();
    ASSERT_EQ(GetParam().front() != '(', true) << "no reference templates found under " << vega::test::data_dir()
                                               << "/templates";
    std::string path = vega::test::data_file("templates/" + GetParam());
    json ref = json::parse(vega::test::read_file(path));
    std::unique_ptr<vega::ChatTemplate> tpl;
    try {
        tpl = std::make_unique<vega::ChatTemplate>(ref["template"].get<std::string>());
    } catch (const vega::Error& e) {
        FAIL() << GetParam() << ": does not parse: " << e.what();
    }
    vega::ChatTemplateOptions opt;
    opt.now = ref.value("now", "");
    for (auto& c : ref["cases"]) {
        json ctx = json::object();
        ctx["messages"] = c["messages"];
        if (c.contains("tools")) ctx["tools"] = c["tools"];
        ctx["add_generation_prompt"] = c["add_generation_prompt"];
        ctx["bos_token"] = c["bos_token"];
        ctx["eos_token"] = c["eos_token"];
        std::string name = c["name"].get<std::string>();
        ++g_cases;
        if (c.contains("error")) {
            try {
                std::string got = tpl->render(ctx, opt);
                ADD_FAILURE() << GetParam() << " / " << name << ": expected an error ("
                              << c["error"].get<std::string>() << "), got output:\n"
                              << got;
            } catch (const vega::Error&) {
                ++g_matched;
            }
            continue;
        }
        std::string expected = c["expected"].get<std::string>();
        try {
            std::string got = tpl->render(ctx, opt);
            if (got == expected) {
                ++g_matched;
            } else {
                size_t i = 0;
                while (i < got.size() && i < expected.size() && got[i] == expected[i]) ++i;
                ADD_FAILURE() << GetParam() << " / " << name << ": differs at byte " << i << "\n--- expected:\n"
                              << expected.substr(i > 80 ? i - 80 : 0, 240) << "\n--- got:\n"
                              << got.substr(i > 80 ? i - 80 : 0, 240);
            }
        } catch (const vega::Error& e) {
            ADD_FAILURE() << GetParam() << " / " << name << ": unexpected error: " << e.what();
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Templates, TemplateReference, ::testing::ValuesIn(reference_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             std::string n = info.param;
                             if (n.size() > 5 && n.substr(n.size() - 5) == ".json") n.resize(n.size() - 5);
                             for (char& ch : n)
                                 if (!isalnum((unsigned char)ch)) ch = '_';
                             return n;
                         });

// Prints the total once all reference tests have run.
class MatchCountPrinter : public ::testing::EmptyTestEventListener {
    void OnTestProgramEnd(const ::testing::UnitTest&) override {
        if (g_cases > 0)
            std::printf("[template reference] %d of %d cases match\n", g_matched.load(), g_cases.load());
    }
};

const bool kPrinterInstalled = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new MatchCountPrinter);
    return true;
}();

}  // namespace
