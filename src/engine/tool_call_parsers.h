// The tool-call readers of the families whose syntax is more than a marker around JSON
// (engine/tool_calls.cpp dispatches to them): <invoke name="f"> blocks (DeepSeek V3.2 /
// V4's DSML, MiniMax M2), gemma 4's call:f{key:value} form. gpt-oss's harmony channels
// are engine/harmony.h.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tool_calls.h"

namespace vega {

// A section of calls, each an invoke block of parameters:
//   OPEN INVOKE"f">  PARAM"p" [string="true|false"]>VALUE END_PARAM ... END_INVOKE ... CLOSE
// A value marked string="true" is text, string="false" JSON; an unmarked one is typed by
// the tool's schema (text for a string parameter, else JSON when it parses).
struct InvokeSyntax {
    std::vector<std::string> open, close;  // the section's markers; open[i] pairs with close[i]
    std::string invoke, end_invoke;        // `<invoke name="`, `</invoke>`
    std::string param, end_param;          // `<parameter name="`, `</parameter>`
};
extern const InvokeSyntax kDsmlSyntax;     // <｜DSML｜function_calls> (V3.2) or <｜DSML｜tool_calls> (V4)
extern const InvokeSyntax kMiniMaxSyntax;  // <minimax:tool_call>

// Calls in `content`: the first section and any that follow it (a section left open at
// the end of the reply is read to its end). No calls when a block is malformed.
ParsedCalls parse_invoke_calls(const std::string& content, const InvokeSyntax& syntax,
                               const nlohmann::ordered_json& tools);

// gemma 4: <|tool_call>call:NAME{key:VALUE,...}<tool_call|>, one block a call (a
// <|tool_response> after them is the turn's end). VALUE: <|"|>text<|"|>, a number, true,
// false, null, {key:VALUE,...} or [VALUE,...].
extern const std::string kGemmaCallOpen;
ParsedCalls parse_gemma4_calls(const std::string& content);
// One gemma 4 value at s[i] as JSON; `end` past it. False when malformed.
bool read_gemma4_value(const std::string& s, size_t i, nlohmann::ordered_json* out, size_t* end);

// LFM2 / LFM2.5: <|tool_call_start|>[f(key=VALUE, ...), ...]<|tool_call_end|>, VALUE a Python
// literal ('text' or "text", numbers, True, False, None, lists, tuples, dicts).
extern const std::string kPythonicOpen;
ParsedCalls parse_pythonic_calls(const std::string& content);

}  // namespace vega
