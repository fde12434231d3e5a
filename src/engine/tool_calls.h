// Tool calls and reasoning in a chat reply (issue 29): which syntax a chat template
// teaches its model, the reply split into reasoning, content and calls (whole, or
// piece by piece while streaming), and the grammar that forces a valid call when the
// client requires one (tool_choice "required" or a named function).
//
// Formats parsed (docs/SERVER.md has the table):
//   Hermes     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one block per
//              call (Qwen2.5, Qwen3, QwQ, Hermes 2 Pro / 3, SmolLM3 and the chatml fallback)
//   Llama3Json {"name": "f", "parameters": {...}} as the whole reply, several separated by
//              ';' (Llama 3.1 / 3.2 / 3.3 JSON tool calling; "<|python_tag|>" stripped)
//   QwenXml    <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n
//              </tool_call> (Qwen3-Coder, Qwen3.5): a value is text for a string-typed
//              parameter, else JSON when it parses; a Hermes JSON body is read too
//   Glm        <tool_call>f\n<arg_key>p</arg_key>\n<arg_value>value</arg_value>\n</tool_call>
//              (GLM-4.5 / 4.6 / 4.7, poolside Laguna): values as QwenXml's
//   Mistral    [TOOL_CALLS]f[ARGS]{...} a call (Devstral, Mistral Small 3.2, Ministral 3), or
//              [TOOL_CALLS][{"name", "arguments"}, ...] (Nemo)
//   DeepSeek   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
//              (V3.1), or function<｜tool▁sep｜>f\n```json\n{...}\n``` (V3, R1 distills)
//   KimiK2     <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
//              <|tool_call_argument_begin|>{...}<|tool_call_end|>...
//   CommandR   <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}]
//              <|END_ACTION|> (Command R7B, whose <|START_THINKING|> block is reasoning), or
//              Action:\n```json\n[{"tool_name": "f", "parameters": {...}}]\n``` (Command R+)
//   Granite    <|tool_call|>[{"name": "f", "arguments": {...}}, ...] (granite 3.x)
//   Apriel     <tool_calls>[{"name": "f", "arguments": {...}}, ...]</tool_calls> (Apriel 1.5 / 1.6;
//              1.6's reasoning ends at "[BEGIN FINAL RESPONSE]")
//   NemotronV2 <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL>
//   FireFunction functools[{"name": "f", "arguments": {...}}, ...]
//   Pythonic   <|tool_call_start|>[f(a='x', n=3), ...]<|tool_call_end|> (LFM2, LFM2.5)
//   FunctionaryV31/V32, and in engine/tool_call_parsers.h and engine/harmony.h: Dsml
//              (DeepSeek V3.2 / V4), MiniMax (M2), Gemma4, Harmony (gpt-oss).
// These markers are special tokens: while tools are in play the server renders special
// tokens as text (GenRequest::render_special; reply_shows_special). A template that
// teaches none of these detects as None, and vega then reads and forces the Hermes syntax.
// Every non-Hermes parser also reads Hermes blocks: a forced call is written so.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace vega {

enum class ToolFormat {
    None, Hermes, Llama3Json, QwenXml, Glm, Mistral, DeepSeek, KimiK2, CommandR, Granite, Apriel,
    FunctionaryV31,  // <function=NAME>{...}</function>, <|python_tag|>code
    FunctionaryV32,  // >>>RECIPIENT\nBODY segments (the generation prompt ends with >>>)
    Dsml,     // DeepSeek V3.2 / V4: <｜DSML｜function_calls> (tool_calls) of <｜DSML｜invoke name="f"> blocks
    MiniMax,  // MiniMax M2: <minimax:tool_call> of <invoke name="f"> blocks
    Gemma4,   // <|tool_call>call:f{key:value}<tool_call|>; reasoning <|channel>thought ... <channel|>
    Harmony,  // gpt-oss: channels (engine/harmony.h); reasoning is the analysis channel
    NemotronV2,    // <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL> (NVIDIA Nemotron Nano v2)
    FireFunction,  // functools[{"name": "f", "arguments": {...}}, ...] (firefunction v2)
    Pythonic,      // <|tool_call_start|>[f(a='x', n=3)]<|tool_call_end|> (LFM2, LFM2.5)
};

// The format a chat template's text teaches (None: no syntax vega recognises).
ToolFormat detect_tool_format(const std::string& template_text);
const char* tool_format_name(ToolFormat f);
// Whether the format's markers are special tokens (the reply's text must show them).
bool tool_markers_special(ToolFormat f);
// Whether a chat reply in this format is rendered with its special tokens: for a request
// with tools when the call markers are special; for every request when the reasoning
// markers are (gemma 4, harmony).
bool reply_shows_special(ToolFormat f, bool tools);
// The markers of the format's reasoning block: <think> and </think>, Command R7B's
// <|START_THINKING|> and <|END_THINKING|>, gemma 4's "<|channel>thought\n" and <channel|>,
// Apriel's "Here are my reasoning steps:\n" (1.6 ends its generation prompt with it) and
// "[BEGIN FINAL RESPONSE]".
// (Harmony's analysis channel is read by engine/harmony.h.)
struct ThinkMarkers {
    std::string open, close;
};
ThinkMarkers think_markers(ToolFormat f);
// Whether the template writes reasoning between <think> and </think> (qwen3, QwQ,
// DeepSeek R1 and others; Command R7B's <|START_THINKING|> block, gemma 4's thought
// channel, Apriel's final-response marker): the reply's leading think block is then
// reasoning.
bool template_thinks(const std::string& template_text);

struct ToolCall {
    std::string name;
    std::string arguments;  // a JSON object, as text (OpenAI's function.arguments)
};

// A reply split as it is generated. add() the pieces; take() returns what may be sent
// now (never a byte that could turn out to belong to a think marker or a tool call);
// finish() returns the rest and the calls. Without take(), finish() alone splits a
// whole reply.
class ReplySplitter {
public:
    // format None: no tool calls are looked for. think: a leading think block
    // (think_markers(format)) is reasoning. open_think: the prompt ended inside a think
    // block (templates that write "<think>" into the generation prompt): the reply is
    // reasoning up to the close marker. calls = false: the format's reasoning is split but
    // no calls are looked for (a request without tools). Harmony splits its channels.
    ReplySplitter(ToolFormat format, bool think, bool open_think = false, bool calls = true);

    // The request's tools (OpenAI's array): QwenXml reads parameter values by their types.
    void set_tools(nlohmann::ordered_json tools) { tools_ = std::move(tools); }
    void add(const std::string& piece) { text_ += piece; }
    struct Delta {
        std::string reasoning, content;
    };
    Delta take();
    struct Final {
        std::string reasoning, content;  // the parts not yet taken
        std::vector<ToolCall> calls;     // empty when the reply has none, or a marked call is malformed
    };
    Final finish();

private:
    struct Regions {
        size_t r_begin = 0, r_end = 0;  // reasoning bytes of text_
        size_t c_begin = 0;             // content from here to the end
        bool settled = false;           // the think block (or its absence) is known
        bool after_think = false;       // content follows a closed think block
    };
    Regions regions(bool final) const;
    size_t content_hold(size_t c_begin) const;  // where content must stop while streaming
    size_t content_prefix(size_t c_begin) const;  // bytes at c_begin that are not content (functionary v3.2's "all\n")

    Delta take_harmony();
    Final finish_harmony();
    // The calls in `content` (when calls are looked for) and the content around them, past
    // its first `skip` bytes (already taken, or not content), into f.
    void split_content(const std::string& content, size_t skip, Final* f) const;

    ToolFormat format_;
    bool think_, open_think_, calls_;
    std::string think_open_, think_close_;  // the format's think markers
    nlohmann::ordered_json tools_;
    std::string text_;
    size_t r_sent_ = 0, c_sent_ = 0;  // bytes of each region already taken (or skipped)
    bool c_started_ = false;          // a content byte has been taken
};

// Calls in `content` (the reply after any reasoning): with every marked call well formed,
// the calls and the content around them (whitespace-only: empty); else no calls.
struct ParsedCalls {
    std::vector<ToolCall> calls;
    std::string before, after;  // content before the first call, after the last
};
ParsedCalls parse_tool_calls(ToolFormat format, const std::string& content,
                             const nlohmann::ordered_json& tools = nullptr);

// Checks OpenAI's tools array: each element {"type": "function" (or no type),
// "function": {"name": a non-empty string, "parameters": an object, null or absent}}.
// Throws std::invalid_argument naming the element ('tools[i]...').
void check_tools(const nlohmann::ordered_json& tools);

// GBNF for a reply that is one call (or, with parallel, one or more) in the format's
// syntax, of any function of `tools` (OpenAI's tools array) or only of `only` when it is
// not empty, each call's arguments following that function's parameters schema. Every
// format but Llama3Json uses the Hermes syntax (their parsers read it too). Throws grammar::SchemaError for a schema the compiler cannot
// honour, std::invalid_argument for malformed tools or an unknown `only`.
std::string tool_call_gbnf(ToolFormat format, const nlohmann::ordered_json& tools, const std::string& only,
                           bool parallel);

// OpenAI-shaped messages made renderable by chat templates as their vendors wrote them:
// an assistant message's null content becomes "", and each tool call's arguments, a
// JSON string on the wire, becomes the object it encodes (what templates apply tojson
// to) when `object_arguments`.
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages, bool object_arguments);

}  // namespace vega
