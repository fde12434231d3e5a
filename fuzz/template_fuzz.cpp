// libFuzzer target for the chat-template engine (src/template/). An input is a template,
// optionally followed by a NUL byte and a JSON object used as the render context (without
// one, a small conversation is used). It is parsed and rendered with small limits; any
// outcome but success or vega::Error (a crash, a sanitizer report, another exception, a
// timeout or running out of memory) is a finding.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/json_parse.h"
#include "template/chat_template.h"

namespace {

using json = nlohmann::ordered_json;

const json& default_context() {
    static const json ctx = json::parse(R"({
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4", "tool_calls": [
                {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
            {"role": "tool", "content": "4"},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
        ],
        "tools": [{"type": "function", "function": {"name": "add", "description": "adds",
                   "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
        "add_generation_prompt": true,
        "bos_token": "<s>",
        "eos_token": "</s>"
    })");
    return ctx;
}

// Small limits: each input must finish in milliseconds, and the limits themselves are what
// is being tested.
vega::ChatTemplateOptions small_limits() {
    vega::ChatTemplateOptions o;
    o.now = "2026-01-15T09:30:00";
    o.max_output_bytes = 1 << 16;
    o.max_recursion_depth = 40;
    o.max_loop_iterations = 20000;
    o.max_parse_depth = 64;
    o.max_value_depth = 64;
    o.max_steps = 300000;
    o.max_stack_bytes = 1 << 20;
    return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string in(reinterpret_cast<const char*>(data), size);
    size_t nul = in.find('\0');
    std::string source = in.substr(0, nul);
    static const vega::ChatTemplateOptions opt = small_limits();
    json ctx = default_context();
    if (nul != std::string::npos) {
        std::string text = in.substr(nul + 1);
        try {
            json j = vega::parse_json_bounded<json>(text, opt.max_value_depth, "the context");
            if (j.is_object()) ctx = std::move(j);
        } catch (const vega::JsonError&) {
            return 0;  // too deep or not JSON: refused as vega template does
        }
    }
    try {
        vega::ChatTemplate t(source, opt);
        t.render(ctx, opt);
    } catch (const vega::Error&) {
    }
    return 0;
}
