// Tool calls in chat replies (engine/tool_calls.h): format detection on the real
// templates, the Hermes and Llama 3 parsers on text as those models write it (one and
// several calls, reasoning, content before a call, malformed calls kept as text), the
// streaming splitter (no byte of a marker leaks into content, and the pieces add up to
// the whole-reply split), the grammar of a required call (valid calls accepted,
// arguments against their schema), and OpenAI's tool round trip through every
// reference template.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "backend/backend_factory.h"
#include "engine/chat_prompt.h"
#include "engine/tool_call_parsers.h"
#include "engine/tool_calls.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "model/model.h"
#include "template/chat_template.h"
#include "test_data.h"

namespace vega {
namespace {

using json = nlohmann::ordered_json;

json template_file(const std::string& name) {
    return json::parse(test::read_file(test::data_file("templates/" + name)));
}

TEST(ToolCalls, DetectsTheFormatFromTheTemplate) {
    VEGA_REQUIRE_TEST_DATA();
    struct Want {
        const char* file;
        ToolFormat f;
        bool thinks;
    };
    for (const Want& w : {Want{"Qwen-Qwen3-0.6B.json", ToolFormat::Hermes, true},
                          Want{"Qwen-Qwen2.5-7B-Instruct.json", ToolFormat::Hermes, false},
                          Want{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.json", ToolFormat::Hermes, false},
                          Want{"Qwen-QwQ-32B.json", ToolFormat::Hermes, true},
                          Want{"meta-llama-Llama-3.1-8B-Instruct.json", ToolFormat::Llama3Json, false},
                          Want{"meta-llama-Llama-3.2-3B-Instruct.json", ToolFormat::Llama3Json, false},
                          Want{"meta-llama-Llama-3.3-70B-Instruct.json", ToolFormat::Llama3Json, false},
                          Want{"Qwen3-Coder.json", ToolFormat::QwenXml, false},
                          Want{"Qwen3.5-4B.json", ToolFormat::QwenXml, true},
                          Want{"GLM-4.6.json", ToolFormat::Glm, true},
                          Want{"poolside-Laguna-XS-2.1.json", ToolFormat::Glm, true},
                          Want{"ibm-granite-granite-4.0.json", ToolFormat::Hermes, false},
                          Want{"unsloth-Apriel-1.5.json", ToolFormat::Apriel, true},
                          Want{"Apriel-1.6-15b-Thinker-fixed.json", ToolFormat::Apriel, true},
                          Want{"unsloth-mistral-Devstral-Small-2507.json", ToolFormat::Mistral, false},
                          Want{"Mistral-Small-3.2-24B-Instruct-2506.json", ToolFormat::Mistral, false},
                          Want{"mistralai-Mistral-Nemo-Instruct-2407.json", ToolFormat::Mistral, false},
                          Want{"deepseek-ai-DeepSeek-V3.1.json", ToolFormat::DeepSeek, true},
                          Want{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.json", ToolFormat::DeepSeek, true},
                          Want{"deepseek-ai-DeepSeek-V3.2.json", ToolFormat::Dsml, true},
                          Want{"deepseek-ai-DeepSeek-V4-Flash-0731.json", ToolFormat::Dsml, true},
                          Want{"MiniMax-M2.json", ToolFormat::MiniMax, true},
                          Want{"google-gemma-4-31B-it.json", ToolFormat::Gemma4, true},
                          Want{"openai-gpt-oss-120b.json", ToolFormat::Harmony, false},
                          Want{"moonshotai-Kimi-K2.json", ToolFormat::KimiK2, false},
                          Want{"CohereForAI-c4ai-command-r7b-12-2024-tool_use.json", ToolFormat::CommandR, true},
                          Want{"CohereForAI-c4ai-command-r-plus-tool_use.json", ToolFormat::CommandR, false},
                          Want{"ibm-granite-granite-3.3-2B-Instruct.json", ToolFormat::Granite, true},
                          Want{"meetkai-functionary-medium-v3.1.json", ToolFormat::FunctionaryV31, false},
                          Want{"meetkai-functionary-medium-v3.2.json", ToolFormat::FunctionaryV32, false},
                          Want{"NVIDIA-Nemotron-Nano-v2.json", ToolFormat::NemotronV2, true},
                          Want{"fireworks-ai-llama-3-firefunction-v2.json", ToolFormat::FireFunction, false},
                          Want{"LFM2-8B-A1B.json", ToolFormat::Pythonic, false},
                          Want{"LFM2.5-8B-A1B.json", ToolFormat::Pythonic, true},
                          Want{"google-gemma-2-2b-it.json", ToolFormat::None, false}}) {
        const std::string t = template_file(w.file)["template"];
        EXPECT_EQ(detect_tool_format(t), w.f) << w.file;
        EXPECT_EQ(template_thinks(t), w.thinks) << w.file;
    }
    EXPECT_EQ(detect_tool_format(kChatmlTemplate), ToolFormat::Hermes);  // vega's fallback teaches Hermes
}

ReplySplitter::Final split(ToolFormat f, bool think, const std::string& text, bool open_think = false) {
    ReplySplitter s(f, think, open_think);
    s.add(text);
    return s.finish();
}

// Replies that are not (well-formed) calls: no calls, the whole reply content.
void expect_text(ToolFormat f, std::initializer_list<std::string> replies) {
    for (const std::string& text : replies) {
        const auto r = split(f, false, text);
        EXPECT_TRUE(r.calls.empty()) << text;
        EXPECT_EQ(r.content, text);
    }
}

TEST(ToolCalls, HermesRepliesAsQwenWritesThem) {
    // One call, as Qwen2.5 / Qwen3 write it.
    auto r = split(ToolFormat::Hermes, false,
                   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
    EXPECT_EQ(r.content, "");
    // Two calls, content before them, reasoning first (qwen3).
    r = split(ToolFormat::Hermes, true,
              "<think>\nThe user wants two cities.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
              "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
              "{\"city\": \"Oslo\", \"unit\": \"celsius\"}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(json::parse(r.calls[1].arguments)["city"], "Oslo");
    EXPECT_EQ(r.reasoning, "\nThe user wants two cities.\n");
    EXPECT_EQ(r.content, "Let me check.\n");
    // Arguments given as a JSON string (some fine-tunes): read as the object.
    r = split(ToolFormat::Hermes, false, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"x": 1})"));
    // Malformed: the whole reply stays text.
    expect_text(ToolFormat::Hermes, {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>",
                                     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}",  // never closed
                                     "<tool_call>\n{\"arguments\": {}}\n</tool_call>",     // no name
                                     "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>"});
    // No call: plain content, untouched; a think block that never closes is all reasoning.
    r = split(ToolFormat::Hermes, true, "Paris is sunny.");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "Paris is sunny.");
    r = split(ToolFormat::None, true, "<think>still thinking");
    EXPECT_EQ(r.reasoning, "still thinking");
    EXPECT_EQ(r.content, "");
    // The prompt opened the think block (QwQ, DeepSeek R1 templates): reasoning up to </think>.
    r = split(ToolFormat::None, true, "hmm, 2 + 2\n</think>\n\n4", true);
    EXPECT_EQ(r.reasoning, "hmm, 2 + 2\n");
    EXPECT_EQ(r.content, "4");
}

// Qwen3-Coder / Qwen3.5: XML calls; values typed by the tool's schema.
TEST(ToolCalls, QwenXmlReplies) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"},
        "mode": {"type": "integer"}, "tags": {"type": "array"}}}}}])");
    ReplySplitter s(ToolFormat::QwenXml, true);
    s.set_tools(tools);
    s.add("<think>\nwrite it\n</think>\n\nI will write the file.\n<tool_call>\n<function=write_file>\n<parameter=path>\n"
          "42\n</parameter>\n<parameter=content>\nint main() {\n  return a < b;\n}\n</parameter>\n<parameter=mode>\n644\n"
          "</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n</function>\n</tool_call>");
    const auto r = s.finish();
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "write_file");
    const json a = json::parse(r.calls[0].arguments);
    EXPECT_EQ(a["path"], "42");  // a string parameter stays text
    EXPECT_EQ(a["content"], "int main() {\n  return a < b;\n}");
    EXPECT_EQ(a["mode"], 644);
    EXPECT_EQ(a["tags"], json::parse(R"(["a", "b"])"));
    EXPECT_EQ(r.reasoning, "\nwrite it\n");
    EXPECT_EQ(r.content, "I will write the file.\n");
    // Two calls; a JSON body (what a forced call writes) is read too.
    auto two = split(ToolFormat::QwenXml, false,
                     "<tool_call>\n<function=now>\n</function>\n</tool_call>\n<tool_call>\n{\"name\": \"add\", "
                     "\"arguments\": {\"a\": 1}}\n</tool_call>");
    ASSERT_EQ(two.calls.size(), 2u);
    EXPECT_EQ(two.calls[0].arguments, "{}");
    EXPECT_EQ(two.calls[1].name, "add");
    // Malformed: text.
    expect_text(ToolFormat::QwenXml, {"<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
                                      "<tool_call>\n<function=f>\n</tool_call>",
                                      "<tool_call>\n<function=>\n</function>\n</tool_call>"});
}

// GLM 4.5+ / Laguna: <arg_key>/<arg_value> pairs, values typed as QwenXml's.
TEST(ToolCalls, GlmReplies) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
    ReplySplitter s(ToolFormat::Glm, true);
    s.set_tools(tools);
    s.add("<think>cities</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
          "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
          "<arg_value>1984</arg_value>\n</tool_call>");
    const auto r = s.finish();
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris", "days": 3})"));
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"city": "1984"})"));  // a string parameter
    EXPECT_EQ(r.reasoning, "cities");
    const auto none = split(ToolFormat::Glm, false, "<tool_call>now\n</tool_call>");
    ASSERT_EQ(none.calls.size(), 1u);
    EXPECT_EQ(none.calls[0].arguments, "{}");
    expect_text(ToolFormat::Glm, {"<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>",
                                  "<tool_call>\n<arg_key>city</arg_key><arg_value>x</arg_value>\n</tool_call>"});
}

// Mistral, DeepSeek and Kimi K2: markers (special tokens, rendered as text for tool
// requests) around a name and JSON arguments; a Hermes block (a forced call) read too.
TEST(ToolCalls, MistralDeepSeekKimiReplies) {
    auto r = split(ToolFormat::Mistral, false,
                   "Sure. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]add[ARGS]{\"a\": 1, \"b\": 2}");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"a": 1, "b": 2})"));
    EXPECT_EQ(r.content, "Sure. ");
    r = split(ToolFormat::Mistral, false, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": [1]}, \"id\": \"abcdefghi\"}]");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"x": [1]})"));
    r = split(ToolFormat::Mistral, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form
    expect_text(ToolFormat::Mistral, {"[TOOL_CALLS]get_weather{\"city\": 1}", "[TOOL_CALLS]f[ARGS]{\"x\": ", "[TOOL_CALLS][ARGS]{}"});
    const std::string B = "<\uff5ctool\u2581calls\u2581begin\uff5c>", C = "<\uff5ctool\u2581call\u2581begin\uff5c>",
                      S = "<\uff5ctool\u2581sep\uff5c>", E = "<\uff5ctool\u2581call\u2581end\uff5c>",
                      Z = "<\uff5ctool\u2581calls\u2581end\uff5c>";
    r = split(ToolFormat::DeepSeek, true, "<think>hm</think>Checking." + B + C + "get_weather" + S + "{\"city\": \"Paris\"}" + E + C +
                                              "function" + S + "add\n```json\n{\"a\": 1}\n```" + E + Z);
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[1].name, "add");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"a": 1})"));
    EXPECT_EQ(r.content, "Checking.");
    EXPECT_EQ(r.reasoning, "hm");
    r = split(ToolFormat::DeepSeek, false, B + C + "get_weather" + S + "{\"city\": " + E + Z);
    EXPECT_TRUE(r.calls.empty());
    r = split(ToolFormat::KimiK2, false,
              "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
              "{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>"
              "{}<|tool_call_end|><|tool_calls_section_end|>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[1].name, "add");
    EXPECT_TRUE(tool_markers_special(ToolFormat::Mistral) && !tool_markers_special(ToolFormat::Hermes));
}

// Command R7B (its thinking block is reasoning, the actions a JSON list between markers),
// Command R+ (a json block after "Action:"), granite 3.x (<|tool_call|> and a list), Apriel
// (<tool_calls> and a list), as
// those models write them; a Hermes block (a forced call) read too.
TEST(ToolCalls, CommandRAndGraniteReplies) {
    auto r = split(ToolFormat::CommandR, true,
                   "<|START_THINKING|>I will look up the weather in Paris, then add.<|END_THINKING|>"
                   "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": "
                   "{\"city\": \"Paris\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"add\", \"parameters\": "
                   "{\"a\": 1, \"b\": 2}}\n]<|END_ACTION|>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
    EXPECT_EQ(r.calls[1].name, "add");
    EXPECT_EQ(r.reasoning, "I will look up the weather in Paris, then add.");
    EXPECT_EQ(r.content, "");
    r = split(ToolFormat::CommandR, false,
              "I'll check.\nAction:\n```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n        \"parameters\": "
              "{\"city\": \"Paris\"}\n    }\n]\n```");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.content, "I'll check.\n");
    r = split(ToolFormat::CommandR, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form
    expect_text(ToolFormat::CommandR, {"<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {\"x\": ]<|END_ACTION|>",
                                       "<|START_ACTION|>[{\"name\": \"f\", \"parameters\": {}}]<|END_ACTION|>",
                                       "Action: take the train.", "Action:\n```json\n[{\"tool_name\": \"f\"}]\n"});
    r = split(ToolFormat::Granite, true,
              "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"add\", "
              "\"arguments\": \"{\\\"a\\\": 1}\"}]");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"a": 1})"));
    expect_text(ToolFormat::Granite, {"<|tool_call|>{\"name\": \"f\", \"arguments\": {}}", "<|tool_call|>[]"});
    EXPECT_TRUE(tool_markers_special(ToolFormat::CommandR) && tool_markers_special(ToolFormat::Granite));
    r = split(ToolFormat::Apriel, false,
              "Here are my reasoning steps: call it.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"get_weather\", "
              "\"arguments\": {\"city\": \"Paris\"}}]</tool_calls>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.content, "Here are my reasoning steps: call it.\n[BEGIN FINAL RESPONSE]\n");
    expect_text(ToolFormat::Apriel, {"<tool_calls>[{\"name\": \"f\", \"arguments\": 3}]</tool_calls>", "<tool_calls>"});
    // Apriel 1.6: the generation prompt ends with "Here are my reasoning steps:\n"; the
    // reply's reasoning ends at the final-response marker.
    r = split(ToolFormat::Apriel, true,
              "The user wants the weather.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"get_weather\", "
              "\"arguments\": {\"city\": \"Paris\"}}]</tool_calls>",
              /*open_think=*/true);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.reasoning, "The user wants the weather.\n");
    EXPECT_EQ(r.content, "");
    r = split(ToolFormat::Apriel, true, "Easy.\n[BEGIN FINAL RESPONSE]\nHello! I am Apriel.", /*open_think=*/true);
    EXPECT_EQ(r.reasoning, "Easy.\n");
    EXPECT_EQ(r.content, "Hello! I am Apriel.");
    EXPECT_EQ(think_markers(ToolFormat::Apriel).close, "[BEGIN FINAL RESPONSE]");
    // Nemotron Nano v2 and firefunction v2: a JSON list after their markers.
    r = split(ToolFormat::NemotronV2, true,
              "<think>\nNeed weather.\n</think>\n\n<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
              "{\"name\": \"add\", \"arguments\": {\"a\": 1}}]</TOOLCALL>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[1].name, "add");
    EXPECT_EQ(r.reasoning, "\nNeed weather.\n");
    EXPECT_EQ(r.content, "");
    r = split(ToolFormat::FireFunction, false, " functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Oslo"})"));
    expect_text(ToolFormat::NemotronV2, {"<TOOLCALL>[{\"name\": \"f\"", "<TOOLCALL>{\"name\": \"f\"}</TOOLCALL>"});
    expect_text(ToolFormat::FireFunction, {"Python's functools module caches.", "functools[{\"arguments\": {}}]"});
    r = split(ToolFormat::FireFunction, false, "Uses functools and functools[{\"name\": \"f\", \"arguments\": {}}]");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.content, "Uses functools and ");
}

// Functionary v3.1 (llama 3.1's <function=NAME>{...}</function>, <|python_tag|> code) and
// v3.2 (the reply continues the prompt's ">>>": "all\n" text, or NAME\n{...} calls, more
// segments after ">>>"), as the template teaches them; a Hermes block (a forced call) read too.
TEST(ToolCalls, FunctionaryReplies) {
    auto r = split(ToolFormat::FunctionaryV31, false,
                   "Let me check.<function=get_weather>{\"city\": \"Paris\"}</function><function=add>{\"a\": 1, "
                   "\"b\": 2}</function>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
    EXPECT_EQ(r.calls[1].name, "add");
    EXPECT_EQ(r.content, "Let me check.");
    r = split(ToolFormat::FunctionaryV31, false, "<|python_tag|>print(sum([1, 2]))");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "python");
    EXPECT_EQ(json::parse(r.calls[0].arguments)["code"], "print(sum([1, 2]))");
    r = split(ToolFormat::FunctionaryV31, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form
    expect_text(ToolFormat::FunctionaryV31, {"<function=get_weather>{\"city\": \"Paris\"}", "<function=>{}</function>",
                                             "<function=f>[1]</function>", "Use <function= to call."});

    r = split(ToolFormat::FunctionaryV32, false, "get_weather\n{\"city\": \"Paris\"}>>>add\n{\"a\": 1, \"b\": 2}");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"a": 1, "b": 2})"));
    EXPECT_EQ(r.content, "");
    r = split(ToolFormat::FunctionaryV32, false, "all\nI will look it up.>>>get_weather\n{\"city\": \"Paris\"}");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.content, "I will look it up.");
    r = split(ToolFormat::FunctionaryV32, false, "python\nimport math\nprint(math.pi)");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments)["code"], "import math\nprint(math.pi)");
    r = split(ToolFormat::FunctionaryV32, false, "all\nThe weather in Paris is sunny.");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "The weather in Paris is sunny.");  // (the recipient line is not content)
    r = split(ToolFormat::FunctionaryV32, false, "all\nIn Python, >>> print(1) prints 1.");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "In Python, >>> print(1) prints 1.");
    r = split(ToolFormat::FunctionaryV32, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form
    r = split(ToolFormat::FunctionaryV32, false, "get_weather\n{\"city\": ");  // malformed: text
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "get_weather\n{\"city\": ");
    EXPECT_FALSE(tool_markers_special(ToolFormat::FunctionaryV32));
}

// DeepSeek V3.2 / V4 (DSML) and MiniMax M2: <invoke name="f"> blocks of parameters, as
// those models write them (string="true" values as text, string="false" as JSON; MiniMax's
// values typed by the tool's schema), after reasoning and content; a forced Hermes call
// read too; malformed blocks answered as text.
TEST(ToolCalls, DsmlAndMiniMaxReplies) {
    const std::string D = "<\uff5cDSML\uff5c", E = "</\uff5cDSML\uff5c";
    const std::string v32 = "Let me check.\n\n" + D + "function_calls>\n" + D + "invoke name=\"get_weather\">\n" + D +
                            "parameter name=\"city\" string=\"true\">Paris</" + "\uff5cDSML\uff5cparameter>\n" + D +
                            "parameter name=\"days\" string=\"false\">3" + E + "parameter>\n" + D +
                            "parameter name=\"opts\" string=\"false\">{\"metric\": true, \"hours\": [6, 12]}" + E +
                            "parameter>\n" + E + "invoke>\n" + D + "invoke name=\"now\">\n" + E + "invoke>\n" + E +
                            "function_calls>";
    auto r = split(ToolFormat::Dsml, true, "The user wants the weather.</think>" + v32, /*open_think=*/true);
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments),
              json::parse(R"({"city": "Paris", "days": 3, "opts": {"metric": true, "hours": [6, 12]}})"));
    EXPECT_EQ(r.calls[1].name, "now");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::object());
    EXPECT_EQ(r.content, "Let me check.\n\n");
    EXPECT_EQ(r.reasoning, "The user wants the weather.");
    // V4 names the section tool_calls; a string value keeps its spaces and quotes.
    r = split(ToolFormat::Dsml, false,
              D + "tool_calls>\n" + D + "invoke name=\"echo\">\n" + D + "parameter name=\"text\" string=\"true\"> say \"hi\" " +
                  E + "parameter>\n" + E + "invoke>\n" + E + "tool_calls>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments)["text"], " say \"hi\" ");
    EXPECT_EQ(r.content, "");
    r = split(ToolFormat::Dsml, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form
    expect_text(ToolFormat::Dsml,
                {D + "function_calls>\n" + D + "invoke name=\"f\">\n" + D + "parameter name=\"x\" string=\"true\">1",
                 D + "function_calls>\n" + D + "invoke name=\"\">\n" + E + "invoke>\n" + E + "function_calls>",
                 D + "function_calls>\nnot an invoke\n" + E + "function_calls>"});

    const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
    ReplySplitter m(ToolFormat::MiniMax, true, /*open_think=*/true);
    m.set_tools(tools);
    m.add("The user wants the weather in Paris.\n</think>\n\nI will look it up.\n<minimax:tool_call>\n"
          "<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n"
          "</invoke>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">1984</parameter>\n</invoke>\n</minimax:tool_call>");
    const auto f = m.finish();
    ASSERT_EQ(f.calls.size(), 2u);
    EXPECT_EQ(json::parse(f.calls[0].arguments), json::parse(R"({"city": "Paris", "days": 3})"));
    EXPECT_EQ(json::parse(f.calls[1].arguments), json::parse(R"({"city": "1984"})"));  // a string, as the schema says
    EXPECT_EQ(f.content, "I will look it up.\n");
    EXPECT_EQ(f.reasoning, "The user wants the weather in Paris.\n");
    expect_text(ToolFormat::MiniMax, {"<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"x\">1</parameter>\n",
                                      "<minimax:tool_call>\n<invoke name=f>\n</invoke>\n</minimax:tool_call>"});
    EXPECT_TRUE(tool_markers_special(ToolFormat::Dsml) && tool_markers_special(ToolFormat::MiniMax));
}

// gemma 4: <|tool_call>call:f{key:value}<tool_call|> with <|"|> strings, bare keys, nested
// objects and lists, after a thought channel (reasoning); the <|tool_response> that ends
// such a turn is not content; malformed calls answered as text.
TEST(ToolCalls, Gemma4Replies) {
    auto r = split(ToolFormat::Gemma4, true,
                   "<|channel>thought\nThe user wants Paris weather.<channel|>Checking.<|tool_call>call:get_weather{city:<|\"|>"
                   "Paris, France<|\"|>,days:3,opts:{metric:true,tags:[<|\"|>a<|\"|>,<|\"|>b}<|\"|>],ratio:-0.5,none:null}}"
                   "<tool_call|><|tool_call>call:now{}<tool_call|><|tool_response>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments),
              json::parse(R"({"city": "Paris, France", "days": 3, "opts": {"metric": true, "tags": ["a", "b}"],
                              "ratio": -0.5, "none": null}})"));
    EXPECT_EQ(r.calls[1].name, "now");
    EXPECT_EQ(r.content, "Checking.");
    EXPECT_EQ(r.reasoning, "The user wants Paris weather.");
    // Thinking off: the prompt wrote an empty thought channel; the reply is the answer.
    r = split(ToolFormat::Gemma4, true, "It is sunny in Paris.");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "It is sunny in Paris.");
    EXPECT_EQ(r.reasoning, "");
    r = split(ToolFormat::Gemma4, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form
    expect_text(ToolFormat::Gemma4, {"<|tool_call>call:f{city:<|\"|>Paris}<tool_call|>", "<|tool_call>call:f{a:1",
                                     "<|tool_call>call:{a:1}<tool_call|>", "<|tool_call>call:f[1]<tool_call|>",
                                     "<|tool_call>call:f{a:1}"});
    json v;
    size_t end = 0;
    EXPECT_TRUE(read_gemma4_value("[1,<|\"|>x<|\"|>,{a:{b:[]}}]", 0, &v, &end));
    EXPECT_EQ(v, json::parse(R"([1, "x", {"a": {"b": []}}])"));
    std::string deep(200, '[');  // nesting beyond the reader's limit: refused, not a stack overflow
    EXPECT_FALSE(read_gemma4_value(deep + std::string(200, ']'), 0, &v, &end));
    EXPECT_TRUE(reply_shows_special(ToolFormat::Gemma4, false));
}

// gpt-oss (harmony channels): the analysis channel is reasoning, final and commentary
// preambles are content, a message to functions.NAME is a call (the recipient before or
// after the channel; <|call|> ends generation, so the text stops at the arguments);
// malformed arguments and replies without harmony headers are text; without tools a call
// message is content.
TEST(ToolCalls, HarmonyReplies) {
    auto r = split(ToolFormat::Harmony, false,
                   "<|channel|>analysis<|message|>User asks for the weather. Use get_weather.<|end|><|start|>assistant"
                   "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
    EXPECT_EQ(r.reasoning, "User asks for the weather. Use get_weather.");
    EXPECT_EQ(r.content, "");
    r = split(ToolFormat::Harmony, false,
              "<|channel|>commentary<|message|>Checking the forecast.<|end|><|start|>assistant to=functions.get_weather"
              "<|channel|>commentary json<|message|>{\"city\": \"Oslo\", \"days\": 2}<|call|>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Oslo", "days": 2})"));
    EXPECT_EQ(r.content, "Checking the forecast.");
    r = split(ToolFormat::Harmony, false,
              "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>analysis<|message|>Answer now."
              "<|end|><|start|>assistant<|channel|>final<|message|>It is 18 C in Paris.");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.reasoning, "Easy.\nAnswer now.");
    EXPECT_EQ(r.content, "It is 18 C in Paris.");
    r = split(ToolFormat::Harmony, false,
              "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.f json<|message|>"
              "{\"city\": ");
    EXPECT_TRUE(r.calls.empty());  // malformed: its text is content
    EXPECT_EQ(r.content, "{\"city\": ");
    r = split(ToolFormat::Harmony, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"n\": 1}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form (written without a harmony header)
    r = split(ToolFormat::Harmony, false, "Plain text, no channel.");
    EXPECT_EQ(r.content, "Plain text, no channel.");
    ReplySplitter no_tools(ToolFormat::Harmony, false, false, /*calls=*/false);
    no_tools.add("<|channel|>commentary to=functions.f json<|message|>{\"a\": 1}");
    const auto f = no_tools.finish();
    EXPECT_TRUE(f.calls.empty());
    EXPECT_EQ(f.content, "{\"a\": 1}");
    EXPECT_TRUE(reply_shows_special(ToolFormat::Harmony, false));
    EXPECT_FALSE(reply_shows_special(ToolFormat::Hermes, true));
    EXPECT_TRUE(reply_shows_special(ToolFormat::Mistral, true) && !reply_shows_special(ToolFormat::Mistral, false));
}

// LFM2 / LFM2.5: a Python list of calls with keyword arguments (Python literals: quoted
// strings with escapes, numbers, True/False/None, lists, tuples, dicts).
TEST(ToolCalls, PythonicReplies) {
    auto r = split(ToolFormat::Pythonic, true,
                   "<think>Two calls.</think>Sure.<|tool_call_start|>[get_weather(city='Paris, \\'FR\\'', days=3, "
                   "metric=True, hours=[6, 12.5], extra={'a': None, \"b\": (1, 2)}), now()]<|tool_call_end|>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments),
              json::parse(R"({"city": "Paris, 'FR'", "days": 3, "metric": true, "hours": [6, 12.5],
                              "extra": {"a": null, "b": [1, 2]}})"));
    EXPECT_EQ(r.calls[1].name, "now");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::object());
    EXPECT_EQ(r.content, "Sure.");
    EXPECT_EQ(r.reasoning, "Two calls.");
    r = split(ToolFormat::Pythonic, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);  // the forced form
    expect_text(ToolFormat::Pythonic, {"<|tool_call_start|>[f('positional')]<|tool_call_end|>",
                                       "<|tool_call_start|>[f(a=undefined_name)]<|tool_call_end|>",
                                       "<|tool_call_start|>[f(a='open]<|tool_call_end|>", "<|tool_call_start|>f(a=1)",
                                       "<|tool_call_start|>[f(a=1)"});
    EXPECT_TRUE(tool_markers_special(ToolFormat::Pythonic));
}

// Fuzz: replies made of every format's marker fragments, JSON and Python punctuation and
// text, cut at random, through every format's splitter: nothing throws or crashes, and the
// streamed pieces add up to the whole-reply split.
TEST(ToolCalls, RandomRepliesThroughEveryFormat) {
    const std::vector<std::string> bits = {
        "<tool_call>", "</tool_call>", "{\"name\": \"f\", \"arguments\": {", "}", "]", "[", "{", "\"", "'", "(", ")", ",",
        "=", ":", "<think>", "</think>", "[TOOL_CALLS]", "[ARGS]", "<|channel|>", "analysis", "final", "<|message|>",
        "<|end|>", "<|start|>assistant", " to=functions.f", "<|call|>", "<|tool_call>call:f{", "<tool_call|>",
        "<|\"|>", "<|channel>thought\n", "<channel|>", "<\uff5cDSML\uff5cfunction_calls>", "<\uff5cDSML\uff5cinvoke name=\"f\">",
        "<\uff5cDSML\uff5cparameter name=\"p\" string=\"false\">", "</\uff5cDSML\uff5cparameter>", "</\uff5cDSML\uff5cinvoke>",
        "<minimax:tool_call>", "<invoke name=\"f\">", "<parameter name=\"p\">", "</parameter>", "</invoke>",
        "<|tool_call_start|>[f(", "<|tool_call_end|>", "<TOOLCALL>", "</TOOLCALL>", "functools[", ">>>", "all\n",
        "<function=f>", "</function>", "<|python_tag|>", "True", "None", "3", "-1.5", "x", " ", "\n", "\xc3\xa9"};
    std::vector<ToolFormat> formats;
    for (int f = int(ToolFormat::None); f <= int(ToolFormat::Pythonic); ++f) formats.push_back(ToolFormat(f));
    std::mt19937 rng(11);
    for (int trial = 0; trial < 3000; ++trial) {
        std::string text;
        const int n = 1 + int(rng() % 24);
        for (int k = 0; k < n; ++k) text += bits[rng() % bits.size()];
        const ToolFormat fmt = formats[size_t(trial) % formats.size()];
        const bool think = rng() % 2, open_think = rng() % 4 == 0, calls = rng() % 4 != 0;
        ReplySplitter whole_s(fmt, think, open_think, calls);
        whole_s.add(text);
        ReplySplitter::Final whole;
        ASSERT_NO_THROW(whole = whole_s.finish()) << text;
        ReplySplitter s(fmt, think, open_think, calls);
        std::string reasoning, content;
        for (size_t i = 0; i < text.size();) {
            const size_t k = std::min(text.size() - i, size_t(1 + rng() % 7));
            s.add(text.substr(i, k));
            i += k;
            const auto d = s.take();
            reasoning += d.reasoning, content += d.content;
        }
        const auto f = s.finish();
        EXPECT_EQ(reasoning + f.reasoning, whole.reasoning) << tool_format_name(fmt) << ": " << text;
        EXPECT_EQ(content + f.content, whole.content) << tool_format_name(fmt) << ": " << text;
        EXPECT_EQ(f.calls.size(), whole.calls.size()) << tool_format_name(fmt) << ": " << text;
        for (const ToolCall& c : whole.calls) EXPECT_TRUE(json::parse(c.arguments, nullptr, false).is_object()) << text;
    }
}

TEST(ToolCalls, Llama3JsonReplies) {
    auto r = split(ToolFormat::Llama3Json, false, R"({"name": "get_weather", "parameters": {"city": "Paris"}})");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
    r = split(ToolFormat::Llama3Json, false,
              "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"}{;\"}}; {\"name\": \"b\", \"arguments\": {}}");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(json::parse(r.calls[0].arguments)["s"], "}{;");
    EXPECT_EQ(r.calls[1].name, "b");
    expect_text(ToolFormat::Llama3Json, {"The weather is fine.", "{\"name\": \"a\"}", "{\"name\": \"a\", \"parameters\": {"});
}

// Found by vega_tool_calls_fuzz (fuzz/tool_calls_fuzz.cpp), each a reply whose streamed
// pieces did not add up to the whole-reply split, or whose split threw.
TEST(ToolCalls, FuzzFindingsStreamAsTheyDoWhole) {
    auto streamed = [](ToolFormat fmt, bool think, const std::string& text, size_t piece) {
        ReplySplitter s(fmt, think);
        ReplySplitter::Final out;
        for (size_t i = 0; i < text.size(); i += piece) {
            s.add(text.substr(i, piece));
            const auto d = s.take();
            out.reasoning += d.reasoning, out.content += d.content;
        }
        const auto f = s.finish();
        out.reasoning += f.reasoning, out.content += f.content, out.calls = f.calls;
        return out;
    };
    // Text before and after a call: joined by a newline in the whole split; the streamed
    // split, whose part before was already sent, dropped the newline.
    {
        const std::string text = "Sure. [TOOL_CALLS]f[ARGS]{\"q\": 1} and more";
        const auto whole = split(ToolFormat::Mistral, false, text), s = streamed(ToolFormat::Mistral, false, text, 4);
        ASSERT_EQ(whole.calls.size(), 1u);
        EXPECT_EQ(whole.content, "Sure. \nand more");
        EXPECT_EQ(s.content, whole.content);
        ASSERT_EQ(s.calls.size(), 1u);
    }
    // Whitespace before a call: empty content in the whole split; streaming had already
    // sent it. Whitespace-only content now waits for a byte that is not whitespace.
    {
        const std::string text = " \n [TOOL_CALLS]f[ARGS]{\"q\": \"[TOOL\"}";
        const auto whole = split(ToolFormat::Mistral, false, text);
        ASSERT_EQ(whole.calls.size(), 1u);
        EXPECT_EQ(whole.content, "");
        for (size_t piece : {1, 2, 4})
            EXPECT_EQ(streamed(ToolFormat::Mistral, false, text, piece).content, "") << piece;
        EXPECT_EQ(streamed(ToolFormat::Hermes, false, "  \n Hi", 1).content, "  \n Hi");  // no call: all of it, at the end
    }
    // A call whose string holds bytes that are not UTF-8: json::dump's type_error escaped
    // the splitter. It is a malformed call now (as in the JSON families): no calls, the
    // reply is content.
    {
        const std::string text = "ok <|tool_call_start|>[f(q='a\xe7l', n=0)]<|tool_call_end|>";
        ReplySplitter::Final whole;
        ASSERT_NO_THROW(whole = split(ToolFormat::Pythonic, false, text));
        EXPECT_TRUE(whole.calls.empty());
        EXPECT_EQ(whole.content, text);
        EXPECT_EQ(streamed(ToolFormat::Pythonic, false, text, 3).content, text);
        EXPECT_EQ(split(ToolFormat::Pythonic, false, "<|tool_call_start|>[f(q='a\xc3\xa9l')]<|tool_call_end|>").calls.size(), 1u);
    }
    // functionary v3.2 without tools (calls not looked for): the "all\n" recipient line is
    // not content in the whole split, but streamed byte by byte "all" went out before its
    // newline arrived.
    {
        const std::string text = "all\nChecking >> now.";
        ReplySplitter whole_s(ToolFormat::FunctionaryV32, false, false, /*calls=*/false);
        whole_s.add(text);
        const auto whole = whole_s.finish();
        EXPECT_EQ(whole.content, "Checking >> now.");
        ReplySplitter s(ToolFormat::FunctionaryV32, false, false, /*calls=*/false);
        std::string content;
        for (char c : text) {
            s.add(std::string(1, c));
            content += s.take().content;
        }
        EXPECT_EQ(content + s.finish().content, whole.content);
    }
}

// Streaming: the reply in random pieces; the deltas plus finish() equal the whole-reply
// split, and no content delta holds a byte of a tool call.
TEST(ToolCalls, StreamedPiecesAddUpAndHoldCallsBack) {
    const std::vector<std::pair<ToolFormat, std::string>> replies = {
        {ToolFormat::Hermes,
         "<think>\nplan: call it\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"<tool\"}}\n"
         "</tool_call>"},
        {ToolFormat::Hermes, "Just text, with a < and <tool and <tool_ca in it."},
        {ToolFormat::Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", "
                             "\"arguments\": {\"n\": 1}}\n</tool_call>"},
        {ToolFormat::Llama3Json, "{\"name\": \"f\", \"parameters\": {\"n\": 2}}"},
        {ToolFormat::Llama3Json, "Plain answer {not a call}."},
        {ToolFormat::QwenXml, "Checking.\n<tool_call>\n<function=f>\n<parameter=q>\nx\n</parameter>\n</function>\n</tool_call>"},
        {ToolFormat::Mistral, "Sure [maybe]. [TOOL_CALLS]f[ARGS]{\"q\": \"[TOOL\"}"},
        {ToolFormat::KimiK2, "ok <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
                             "<|tool_call_end|><|tool_calls_section_end|>"},
        {ToolFormat::Mistral, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
        {ToolFormat::CommandR, "<|START_THINKING|>plan<|END_THINKING|>Sure. <|START_ACTION|>[{\"tool_call_id\": \"0\", "
                               "\"tool_name\": \"f\", \"parameters\": {\"q\": \"<|START\"}}]<|END_ACTION|>"},
        {ToolFormat::CommandR, "Plan.\nAction:\n```json\n[{\"tool_name\": \"f\", \"parameters\": {}}]\n```"},
        {ToolFormat::Granite, "ok <|tool_call|>[{\"name\": \"f\", \"arguments\": {\"n\": 1}}]"},
        {ToolFormat::Apriel, "Sure <tool <tool_calls>[{\"name\": \"f\", \"arguments\": {}}]</tool_calls>"},
        {ToolFormat::FunctionaryV31, "Checking <fun <function=f>{\"q\": \"<function=\"}</function>"},
        {ToolFormat::FunctionaryV32, "all\nChecking >> now.>>>f\n{\"q\": \">>>\"}"},
        {ToolFormat::FunctionaryV32, "f\n{\"n\": 1}>>>all\ndone"},
        {ToolFormat::FunctionaryV32, "all\nJust text."},
        {ToolFormat::Dsml, "<think>plan</think>Sure <\uff5cDSML <\uff5cDSML\uff5cfunction_calls>\n<\uff5cDSML\uff5cinvoke "
                           "name=\"f\">\n<\uff5cDSML\uff5cparameter name=\"q\" string=\"true\"><tool</\uff5cDSML\uff5c"
                           "parameter>\n</\uff5cDSML\uff5cinvoke>\n</\uff5cDSML\uff5cfunction_calls>"},
        {ToolFormat::MiniMax, "<think>\nplan\n</think>\n\nok <minimax <minimax:tool_call>\n<invoke name=\"f\">\n"
                              "<parameter name=\"q\">x</parameter>\n</invoke>\n</minimax:tool_call>"},
        {ToolFormat::Gemma4, "<|channel>thought\nplan<channel|>ok <|tool <|tool_call>call:f{q:<|\"|><|tool_call><|\"|>}"
                             "<tool_call|><|tool_response>"},
        {ToolFormat::Gemma4, "<|channel>thou"},
        {ToolFormat::Harmony, "<|channel|>analysis<|message|>plan <|en <|end|><|start|>assistant<|channel|>commentary"
                              "<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.f "
                              "<|constrain|>json<|message|>{\"q\": \"<|call\"}<|call|>"},
        {ToolFormat::Harmony, "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b"
                              "<|end|><|start|>assistant<|channel|>final<|message|>The answer <|ret is 4.<|return|>"},
        {ToolFormat::Harmony, "<|chan but plain"},
        {ToolFormat::Harmony, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
        {ToolFormat::NemotronV2, "<think>x</think>ok <TOOL <TOOLCALL>[{\"name\": \"f\", \"arguments\": {}}]</TOOLCALL>"},
        {ToolFormat::FireFunction, "Uses functools and functools[{\"name\": \"f\", \"arguments\": {\"n\": 1}}]"},
        {ToolFormat::Pythonic, "<think>x</think>ok <|tool <|tool_call_start|>[f(q='<|tool_call_end|>')]<|tool_call_end|>"},
    };
    std::mt19937 rng(7);
    for (const auto& [fmt, text] : replies) {
        const auto whole = split(fmt, true, text);
        for (int trial = 0; trial < 20; ++trial) {
            ReplySplitter s(fmt, true);
            std::string reasoning, content;
            for (size_t i = 0; i < text.size();) {
                const size_t n = std::min(text.size() - i, size_t(1 + rng() % 6));
                s.add(text.substr(i, n));
                i += n;
                const auto d = s.take();
                reasoning += d.reasoning;
                content += d.content;
                if (!whole.calls.empty()) {
                    EXPECT_EQ(d.content.find("<tool_call>"), std::string::npos) << text;
                    EXPECT_EQ(d.content.find("{\"name\""), std::string::npos) << text;
                }
                EXPECT_EQ(d.reasoning.find("</think"), std::string::npos) << text;
                for (const char* marker : {"<\uff5cDSML\uff5c", "<minimax:", "<|tool_call>", "<channel|>", "<|end|>",
                                           "<|message|>", "<|return|>"})
                    EXPECT_EQ((d.content + d.reasoning).find(marker), std::string::npos) << marker << " in " << text;
            }
            const auto f = s.finish();
            EXPECT_EQ(reasoning + f.reasoning, whole.reasoning) << text;
            EXPECT_EQ(content + f.content, whole.content) << text;
            ASSERT_EQ(f.calls.size(), whole.calls.size()) << text;
            for (size_t i = 0; i < f.calls.size(); ++i) EXPECT_EQ(f.calls[i].arguments, whole.calls[i].arguments);
        }
    }
}

json weather_tools() {
    return json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
          "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        "properties": {"a": {"$ref": "#/$defs/num"}, "b": {"$ref": "#/$defs/num"}}, "required": ["a", "b"],
        "$defs": {"num": {"type": "integer"}}}}},
      {"type": "function", "function": {"name": "now"}}])");
}

bool accepts(const std::string& gbnf, const std::string& text) {
    const grammar::Grammar g = grammar::Grammar::parse(gbnf);
    grammar::Matcher m(g);
    return m.accept(text) && m.can_end();
}

TEST(ToolCalls, RequiredCallGrammar) {
    const json tools = weather_tools();
    const std::string any = tool_call_gbnf(ToolFormat::Hermes, tools, "", true);
    const std::string c1 = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const std::string c2 = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>";
    const std::string c3 = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    EXPECT_TRUE(accepts(any, c1));
    EXPECT_TRUE(accepts(any, c2));
    EXPECT_TRUE(accepts(any, c3));
    EXPECT_TRUE(accepts(any, c1 + "\n" + c2));  // parallel
    EXPECT_FALSE(accepts(any, "Sure!"));
    EXPECT_FALSE(accepts(any, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(accepts(any, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));  // city required
    EXPECT_FALSE(accepts(any, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": 2}}\n</tool_call>"));
    EXPECT_FALSE(accepts(any, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"K\"}}\n</tool_call>"));
    const std::string one = tool_call_gbnf(ToolFormat::Hermes, tools, "", false);
    EXPECT_TRUE(accepts(one, c1));
    EXPECT_FALSE(accepts(one, c1 + "\n" + c2));
    const std::string named = tool_call_gbnf(ToolFormat::Hermes, tools, "add", true);
    EXPECT_TRUE(accepts(named, c2));
    EXPECT_FALSE(accepts(named, c1));
    const std::string llama = tool_call_gbnf(ToolFormat::Llama3Json, tools, "get_weather", false);
    EXPECT_TRUE(accepts(llama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}"));
    EXPECT_FALSE(accepts(llama, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"));
    // What the grammar accepts, the parser reads back.
    const auto r = split(ToolFormat::Hermes, false, c1 + "\n" + c2);
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[1].name, "add");
    // Errors name the problem.
    EXPECT_THROW(tool_call_gbnf(ToolFormat::Hermes, tools, "missing", true), std::invalid_argument);
    EXPECT_THROW(tool_call_gbnf(ToolFormat::Hermes, json::array(), "", true), std::invalid_argument);
    json pattern = weather_tools();
    pattern[0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^[A-Z]";
    try {
        tool_call_gbnf(ToolFormat::Hermes, pattern, "", true);
        ADD_FAILURE() << "a pattern keyword compiled";
    } catch (const grammar::SchemaError& e) {
        EXPECT_EQ(e.keyword, "pattern");
    }
}

// The tool_result conversation as OpenAI clients send it: the assistant's content null
// and its arguments a JSON string.
json openai_round_trip(const json& reference_messages) {
    json m = reference_messages;
    for (json& x : m)
        if (x.contains("tool_calls")) {
            x["content"] = nullptr;
            for (json& tc : x["tool_calls"]) tc["function"]["arguments"] = tc["function"]["arguments"].dump();
        }
    return m;
}

// Every reference template: the OpenAI-shaped round trip, adapted (template_messages),
// renders exactly the reference's tool_result case wherever the reference renders it; and
// ChatPrompt (which also retries with string arguments) renders it without an error there
// and for functionary v3.2, whose template concatenates the arguments as a string.
TEST(ToolCalls, OpenAiRoundTripRendersThroughEveryTemplate) {
    VEGA_REQUIRE_TEST_DATA();
    auto backend = make_cpu_backend(1);
    auto model = Model::load(test::data_file("models/stories260K.gguf"), *backend, nullptr);
    int compared = 0;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(test::data_file("templates")))
        if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
        const json ref = template_file(name);
        const json* tc = nullptr;
        for (const json& c : ref["cases"])
            if (c["name"] == "tool_result") tc = &c;
        ASSERT_NE(tc, nullptr) << name;
        const json wire = openai_round_trip((*tc)["messages"]);
        if (tc->contains("expected")) {
            ChatTemplate t(ref["template"].get<std::string>());
            ChatTemplateOptions opt;
            opt.now = ref.value("now", "");
            json ctx = json::object();
            ctx["messages"] = template_messages(wire, true);
            if (tc->contains("tools")) ctx["tools"] = (*tc)["tools"];
            ctx["add_generation_prompt"] = (*tc)["add_generation_prompt"];
            ctx["bos_token"] = (*tc)["bos_token"];
            ctx["eos_token"] = (*tc)["eos_token"];
            EXPECT_EQ(t.render(ctx, opt), (*tc)["expected"].get<std::string>()) << name;
            ++compared;
        }
        if (tc->contains("expected") || name == "meetkai-functionary-medium-v3.2.json") {
            const ChatPrompt chat(*model, ref["template"].get<std::string>(), nullptr);
            try {
                const std::string out = chat.render(wire, tc->value("tools", json()), true);
                EXPECT_NE(out.find("Paris"), std::string::npos) << name << ": the call's arguments are not rendered";
            } catch (const Error& e) {
                ADD_FAILURE() << name << ": " << e.what();
            }
        }
    }
    EXPECT_GE(compared, 35);
    // The chatml fallback renders the round trip in the Hermes form vega parses.
    const ChatPrompt chatml(*model, kChatmlTemplate, nullptr);
    const json tools = weather_tools();
    const std::string out = chatml.render(openai_round_trip(template_file("Qwen-Qwen3-0.6B.json")["cases"][6]["messages"]),
                                          tools, true);
    EXPECT_NE(out.find("<tools>\n{\"type\": \"function\""), std::string::npos) << out;
    EXPECT_NE(out.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("<tool_response>\n{\"temp\": 18}\n</tool_response>"), std::string::npos) << out;
    // Without tools, chatml is unchanged.
    EXPECT_EQ(chatml.render(json::array({{{"role", "user"}, {"content", "hi"}}}), nullptr, true),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace vega
