// Error reporting, limits against hostile templates, and the public API.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "template/chat_template.h"

namespace {

using json = nlohmann::ordered_json;

std::string render(const std::string& t, const json& ctx = json::object(), vega::ChatTemplateOptions opt = {}) {
    if (opt.now.empty()) opt.now = "2026-01-15T09:30:00";
    return vega::render_chat_template(t, ctx, opt);
}

// The message of the vega::Error that rendering t raises ("" if none).
std::string error_of(const std::string& t, const json& ctx = json::object(), vega::ChatTemplateOptions opt = {}) {
    try {
        render(t, ctx, opt);
    } catch (const vega::Error& e) {
        return e.what();
    }
    return "";
}

TEST(TemplateErrors, SyntaxErrorNamesTheLine) {
    std::string msg = error_of("line one\n{% if true %}\n{{ 1 + }}\n{% endif %}");
    EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
}

TEST(TemplateErrors, UnclosedBlockIsAnError) {
    std::string msg = error_of("{% for x in xs %}\n{{ x }}\n");
    EXPECT_NE(msg.find("endfor"), std::string::npos) << msg;
}

TEST(TemplateErrors, UnknownTagNamesTheTag) {
    std::string msg = error_of("a\n\n{% include 'x.j2' %}");
    EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("include"), std::string::npos) << msg;
}

TEST(TemplateErrors, RenderErrorNamesTheLine) {
    std::string msg = error_of("a\nb\n{{ user.name }}\n", json::object());
    EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'user' is undefined"), std::string::npos) << msg;
}

TEST(TemplateErrors, RaiseExceptionCarriesTheMessage) {
    std::string msg = error_of("{% if messages[0].role == 'system' %}\n{{ raise_exception('System role not supported') }}\n{% endif %}",
                               json{{"messages", json::array({json{{"role", "system"}}})}});
    EXPECT_NE(msg.find("System role not supported"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
}

TEST(TemplateErrors, MissingAttributeOnlyFailsWhenUsed) {
    json ctx = {{"d", json::object()}};
    EXPECT_EQ(render("[{{ d.missing }}]{{ d.missing is defined }}", ctx), "[]False");
    std::string msg = error_of("{{ d.missing.deeper }}", ctx);
    EXPECT_NE(msg.find("'dict object' has no attribute 'missing'"), std::string::npos) << msg;
}

TEST(TemplateErrors, SandboxRefusesMutation) {
    std::string msg = error_of("{% set xs = [] %}{% set _ = xs.append(1) %}");
    EXPECT_NE(msg.find("unsafe"), std::string::npos) << msg;
    EXPECT_NE(error_of("{{ ''.__class__ }}x{{ ''.__class__() }}"), "");
}

TEST(TemplateLimits, RecursionDepth) {
    vega::ChatTemplateOptions opt;
    opt.max_recursion_depth = 50;
    std::string msg = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", json::object(), opt);
    EXPECT_NE(msg.find("recursion"), std::string::npos) << msg;
    // The default limit is also safe (no stack overflow).
    EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "");
    // Legitimate recursion below the limit works.
    EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"), "54321");
}

TEST(TemplateLimits, LoopIterations) {
    vega::ChatTemplateOptions opt;
    opt.max_loop_iterations = 1000;
    std::string msg = error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", json::object(), opt);
    EXPECT_NE(msg.find("loop iterations"), std::string::npos) << msg;
    EXPECT_EQ(render("{% for i in range(10) %}{% for j in range(10) %}{% endfor %}{% endfor %}ok", json::object(), opt), "ok");
    EXPECT_NE(error_of("{{ range(100000000)|length }}"), "");
}

TEST(TemplateLimits, OutputSize) {
    vega::ChatTemplateOptions opt;
    opt.max_output_bytes = 1 << 16;
    std::string msg = error_of("{% for i in range(10000) %}0123456789{% endfor %}", json::object(), opt);
    EXPECT_NE(msg.find("limit"), std::string::npos) << msg;
    EXPECT_NE(error_of("{{ 'x' * 100000 }}", json::object(), opt), "");
    EXPECT_NE(error_of("{{ 'x' * 9223372036854775807 }}", json::object(), opt), "");
    EXPECT_NE(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                       json::object(), opt),
              "");
    EXPECT_NE(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                       json::object(), opt),
              "");
}

TEST(TemplateLimits, DeepNestingIsRefusedNotCrashing) {
    std::string parens = "{{ " + std::string(20000, '(') + "1" + std::string(20000, ')') + " }}";
    EXPECT_NE(error_of(parens).find("too deep"), std::string::npos);
    std::string ifs;
    for (int i = 0; i < 20000; ++i) ifs += "{% if true %}";
    EXPECT_NE(error_of(ifs).find("too deep"), std::string::npos);
    std::string nots = "{{ " + std::string(50000, '-') + "1 }}";
    EXPECT_NE(error_of(nots), "");
}

TEST(TemplateLimits, IntegerOverflowIsAnError) {
    EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}"), "");
    EXPECT_NE(error_of("{{ 2 ** 64 }}"), "");
    EXPECT_NE(error_of("{{ 99999999999999999999 }}"), "");
}

TEST(TemplateApi, ParseOnceRenderMany) {
    vega::ChatTemplate t("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                         "{% if add_generation_prompt %}<assistant>{% endif %}");
    json a = {{"messages", json::array({json{{"role", "user"}, {"content", "hi"}}})}, {"add_generation_prompt", true}};
    json b = {{"messages", json::array({json{{"role", "system"}, {"content", "s"}}, json{{"role", "user"}, {"content", "q"}}})},
              {"add_generation_prompt", false}};
    EXPECT_EQ(t.render(a), "<user>hi<assistant>");
    EXPECT_EQ(t.render(b), "<system>s<user>q");
    EXPECT_EQ(t.render(a), "<user>hi<assistant>");
}

TEST(TemplateApi, ParseErrorsAtConstruction) {
    EXPECT_THROW(vega::ChatTemplate("{% if %}"), vega::Error);
    EXPECT_THROW(vega::ChatTemplate("{{ 'unterminated }}"), vega::Error);
    EXPECT_THROW(vega::ChatTemplate("{# no end"), vega::Error);
}

TEST(TemplateApi, StrftimeNowReadsTheGivenTime) {
    vega::ChatTemplateOptions opt;
    opt.now = "2024-02-29T23:05:09";
    EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %A %b') }}", json::object(), opt), "2024-02-29 23:05:09 Thursday Feb");
    opt.now = "not a time";
    EXPECT_THROW(render("x", json::object(), opt), vega::Error);
    // Without a time: the current one (just check it renders a year).
    EXPECT_EQ(vega::render_chat_template("{{ strftime_now('%Y')|length }}", json::object()), "4");
}

TEST(TemplateApi, JsonInputKeepsTypesAndOrder) {
    json ctx = json::parse(R"({"d": {"z": 1, "a": 2.0, "m": [true, null, "s"]}, "big": 12345678901234})");
    EXPECT_EQ(render("{{ d }}|{{ d|tojson }}|{{ big }}", ctx),
              "{'z': 1, 'a': 2.0, 'm': [True, None, 's']}|{\"z\": 1, \"a\": 2.0, \"m\": [true, null, \"s\"]}|12345678901234");
}

TEST(TemplateApi, ContextMustBeAnObject) { EXPECT_THROW(vega::render_chat_template("x", json::array()), vega::Error); }

}  // namespace
