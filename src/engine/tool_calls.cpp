#include "engine/tool_calls.h"

#include <cctype>
#include <map>
#include <stdexcept>

#include "engine/harmony.h"
#include "engine/tool_call_parsers.h"
#include "engine/tool_call_scan.h"
#include "grammar/json_schema.h"

namespace vega {

using json = nlohmann::ordered_json;

namespace {

using namespace tool_scan;

const std::string kThinkOpen = "<think>", kThinkClose = "</think>";
// Command R7B's thinking markers (its reasoning block, as <think> elsewhere).
const std::string kCohereThinkOpen = "<|START_THINKING|>", kCohereThinkClose = "<|END_THINKING|>";
const std::string kCohereAction = "<|START_ACTION|>", kCohereActionEnd = "<|END_ACTION|>", kCoherePlusAction = "Action:";
const std::string kGraniteCall = "<|tool_call|>";
const std::string kAprielCalls = "<tool_calls>", kAprielCallsEnd = "</tool_calls>";
const std::string kNemotronCalls = "<TOOLCALL>", kNemotronCallsEnd = "</TOOLCALL>", kFireFunctionCalls = "functools";
const std::string kFireFunctionHold = "functools[";  // (streaming holds content from here: "functools" alone is a word)
const std::string kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
const std::string kPythonTag = "<|python_tag|>";
const std::string kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]";
const std::string kDsCallsBegin = "<\uff5ctool\u2581calls\u2581begin\uff5c>", kDsCallBegin = "<\uff5ctool\u2581call\u2581begin\uff5c>",
                  kDsCallEnd = "<\uff5ctool\u2581call\u2581end\uff5c>", kDsSep = "<\uff5ctool\u2581sep\uff5c>";
const std::string kFunctionOpen = "<function=", kFunctionClose = "</function>";  // functionary v3.1
const std::string kRecipient = ">>>", kRecipientAll = "all\n";                    // functionary v3.2
const std::string kGemmaThinkOpen = "<|channel>thought\n", kGemmaThinkClose = "<channel|>";
// Apriel 1.6's generation prompt opens its reasoning with this line; the answer follows the marker.
const std::string kAprielThinkOpen = "Here are my reasoning steps:\n", kAprielThinkClose = "[BEGIN FINAL RESPONSE]";
const std::string kKimiSection = "<|tool_calls_section_begin|>", kKimiCallBegin = "<|tool_call_begin|>",
                  kKimiArgs = "<|tool_call_argument_begin|>", kKimiCallEnd = "<|tool_call_end|>";

// Where a reply's calls may begin, per format (streaming holds content back from there):
// the family's markers and Hermes's (a forced call is written that way).
std::vector<const std::string*> call_markers(ToolFormat f) {
    switch (f) {
        case ToolFormat::Mistral: return {&kMistralCalls, &kHermesOpen};
        case ToolFormat::DeepSeek: return {&kDsCallsBegin, &kHermesOpen};
        case ToolFormat::KimiK2: return {&kKimiSection, &kHermesOpen};
        case ToolFormat::CommandR: return {&kCohereAction, &kCoherePlusAction, &kHermesOpen};
        case ToolFormat::Granite: return {&kGraniteCall, &kHermesOpen};
        case ToolFormat::Apriel: return {&kAprielCalls, &kHermesOpen};
        case ToolFormat::NemotronV2: return {&kNemotronCalls, &kHermesOpen};
        case ToolFormat::FireFunction: return {&kFireFunctionHold, &kHermesOpen};
        case ToolFormat::Pythonic: return {&kPythonicOpen, &kHermesOpen};
        case ToolFormat::FunctionaryV31: return {&kFunctionOpen, &kPythonTag, &kHermesOpen};
        case ToolFormat::FunctionaryV32: return {&kRecipient, &kHermesOpen};
        case ToolFormat::Dsml: return {&kDsmlSyntax.open[0], &kDsmlSyntax.open[1], &kHermesOpen};
        case ToolFormat::MiniMax: return {&kMiniMaxSyntax.open[0], &kHermesOpen};
        case ToolFormat::Gemma4: return {&kGemmaCallOpen, &kHermesOpen};
        default: return {&kHermesOpen};
    }
}

// {"name": "f", key: {...}} (key "arguments", or for Llama 3 "parameters" or
// "arguments"; an arguments string holding an object is accepted) -> a call.
bool read_call(const std::string& text, std::initializer_list<const char*> keys, ToolCall* out) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return false;
    auto n = j.find("name");
    if (n == j.end() || !n->is_string() || n->get_ref<const std::string&>().empty()) return false;
    for (const char* k : keys) {
        auto a = j.find(k);
        if (a == j.end()) continue;
        json args = *a;
        if (args.is_string()) args = json::parse(a->get_ref<const std::string&>(), nullptr, false);
        if (args.is_discarded() || !args.is_object()) return false;
        out->name = n->get<std::string>();
        out->arguments = args.dump();
        return true;
    }
    return false;
}


// <function=NAME>\n(<parameter=P>\nVALUE\n</parameter>\n)*</function>
bool read_xml_call(const std::string& body, const json& tools, ToolCall* out) {
    const std::string fo = "<function=", po = "<parameter=", pc = "</parameter>", fc = "</function>";
    if (!starts_with_at(body, 0, fo)) return false;
    const size_t ne = body.find('>', fo.size());
    if (ne == std::string::npos) return false;
    const std::string name = trim(body.substr(fo.size(), ne - fo.size()));
    if (name.empty()) return false;
    json args = json::object();
    size_t i = skip_space(body, ne + 1);
    while (starts_with_at(body, i, po)) {
        const size_t pe = body.find('>', i + po.size());
        if (pe == std::string::npos) return false;
        const std::string pname = trim(body.substr(i + po.size(), pe - i - po.size()));
        const size_t ve = body.find(pc, pe + 1);
        if (pname.empty() || ve == std::string::npos) return false;
        std::string v = body.substr(pe + 1, ve - pe - 1);
        if (!v.empty() && v.front() == '\n') v.erase(0, 1);
        if (!v.empty() && v.back() == '\n') v.pop_back();
        args[pname] = typed_value(tools, name, pname, v);
        i = skip_space(body, ve + pc.size());
    }
    if (!starts_with_at(body, i, fc) || skip_space(body, i + fc.size()) != body.size()) return false;
    out->name = name;
    out->arguments = args.dump();
    return true;
}

// NAME\n(<arg_key>K</arg_key>\s*<arg_value>V</arg_value>\s*)*
bool read_glm_call(const std::string& body, const json& tools, ToolCall* out) {
    const std::string ko = "<arg_key>", kc = "</arg_key>", vo = "<arg_value>", vc = "</arg_value>";
    const size_t first = body.find(ko);
    const std::string name = trim(body.substr(0, first));
    if (name.empty() || name.find_first_of("<>{}\n\"") != std::string::npos) return false;
    json args = json::object();
    size_t i = first == std::string::npos ? body.size() : first;
    while (starts_with_at(body, i, ko)) {
        const size_t ke = body.find(kc, i + ko.size());
        if (ke == std::string::npos) return false;
        const std::string key = trim(body.substr(i + ko.size(), ke - i - ko.size()));
        const size_t v = skip_space(body, ke + kc.size());
        if (key.empty() || !starts_with_at(body, v, vo)) return false;
        const size_t ve = body.find(vc, v + vo.size());
        if (ve == std::string::npos) return false;
        args[key] = typed_value(tools, name, key, body.substr(v + vo.size(), ve - v - vo.size()));
        i = skip_space(body, ve + vc.size());
    }
    if (i != body.size()) return false;
    out->name = name;
    out->arguments = args.dump();
    return true;
}

// Hermes's blocks, each body JSON (Hermes) or the family's form (QwenXml, Glm), whose
// parsers also read a JSON body (what a forced call writes).
ParsedCalls parse_blocks(const std::string& c, ToolFormat f, const json& tools) {
    ParsedCalls out;
    size_t p = c.find(kHermesOpen);
    if (p == std::string::npos) return out;
    out.before = c.substr(0, p);
    std::vector<ToolCall> calls;
    for (;;) {
        const size_t body = p + kHermesOpen.size();
        const size_t q = c.find(kHermesClose, body);
        if (q == std::string::npos) return {};  // unclosed: the reply stays text
        ToolCall tc;
        const std::string b = trim(c.substr(body, q - body));
        const bool json_body = !b.empty() && b[0] == '{';
        const bool ok = json_body                   ? read_call(b, {"arguments"}, &tc)
                        : f == ToolFormat::QwenXml ? read_xml_call(b, tools, &tc)
                        : f == ToolFormat::Glm     ? read_glm_call(b, tools, &tc)
                                                   : false;
        if (!ok) return {};
        calls.push_back(std::move(tc));
        const size_t next = skip_space(c, q + kHermesClose.size());
        if (starts_with_at(c, next, kHermesOpen)) {
            p = next;
            continue;
        }
        out.after = trim(c.substr(q + kHermesClose.size()));
        break;
    }
    out.calls = std::move(calls);
    return out;
}

// Mistral: [TOOL_CALLS]name[ARGS]{...} (v7+: Devstral, Mistral Small 3.2, Ministral 3), one
// marker a call, or [TOOL_CALLS][{"name", "arguments"}, ...] (Nemo).
ParsedCalls parse_mistral(const std::string& c) {
    ParsedCalls out;
    size_t p = c.find(kMistralCalls);
    if (p == std::string::npos) return out;
    out.before = c.substr(0, p);
    size_t i = p;
    while (starts_with_at(c, i, kMistralCalls)) {
        i = skip_space(c, i + kMistralCalls.size());
        if (i < c.size() && c[i] == '[') {  // a JSON list of calls
            size_t e = object_end(c, i);
            if (e == std::string::npos) return {};
            const json list = json::parse(c.substr(i, e - i), nullptr, false);
            if (list.is_discarded() || !list.is_array() || list.empty()) return {};
            for (const json& x : list) {
                ToolCall tc;
                if (!read_call(x.dump(), {"arguments"}, &tc)) return {};
                out.calls.push_back(std::move(tc));
            }
            i = skip_space(c, e);
            continue;
        }
        const size_t a = c.find(kMistralArgs, i);
        if (a == std::string::npos) return {};
        ToolCall tc;
        tc.name = trim(c.substr(i, a - i));
        size_t e = 0;
        if (tc.name.empty() || tc.name.find_first_of("[]{}\n") != std::string::npos ||
            !read_args(c, a + kMistralArgs.size(), &tc.arguments, &e))
            return {};
        out.calls.push_back(std::move(tc));
        i = skip_space(c, e);
    }
    out.after = trim(c.substr(std::min(i, c.size())));
    return out;
}

// Calls between begin and end markers: <begin>BODY<end> repeated (other text between them
// is ignored), each BODY read by `body`.
template <typename F>
ParsedCalls parse_marked(const std::string& c, const std::string& section, const std::string& begin,
                         const std::string& end, F body) {
    ParsedCalls out;
    const size_t s0 = c.find(section);
    if (s0 == std::string::npos) return out;
    out.before = c.substr(0, s0);
    size_t i = s0 + section.size();
    for (;;) {
        const size_t b = c.find(begin, i);
        if (b == std::string::npos) break;
        const size_t e = c.find(end, b + begin.size());
        if (e == std::string::npos) return {};
        ToolCall tc;
        if (!body(c.substr(b + begin.size(), e - b - begin.size()), &tc)) return {};
        out.calls.push_back(std::move(tc));
        i = e + end.size();
    }
    return out.calls.empty() ? ParsedCalls{} : out;
}

// DeepSeek V3.1: NAME<sep>{...}; V3 / R1: function<sep>NAME\n```json\n{...}\n```.
bool read_deepseek_call(const std::string& b, ToolCall* tc) {
    const size_t sep = b.find(kDsSep);
    if (sep == std::string::npos) return false;
    const std::string head = trim(b.substr(0, sep));
    std::string rest = b.substr(sep + kDsSep.size());
    size_t e = 0;
    if (head == "function") {
        const size_t nl = rest.find('\n');
        if (nl == std::string::npos) return false;
        tc->name = trim(rest.substr(0, nl));
        const size_t brace = rest.find('{', nl);
        if (brace == std::string::npos || !read_args(rest, brace, &tc->arguments, &e)) return false;
    } else {
        tc->name = head;
        if (!read_args(rest, 0, &tc->arguments, &e)) return false;
    }
    return !tc->name.empty();
}

// Kimi K2: functions.NAME:IDX<argument begin>{...}
bool read_kimi_call(const std::string& b, ToolCall* tc) {
    const size_t a = b.find(kKimiArgs);
    if (a == std::string::npos) return false;
    std::string id = trim(b.substr(0, a));
    if (id.rfind("functions.", 0) == 0) id = id.substr(10);
    const size_t colon = id.rfind(':');
    if (colon != std::string::npos) id = id.substr(0, colon);
    size_t e = 0;
    tc->name = id;
    return !id.empty() && read_args(b, a + kKimiArgs.size(), &tc->arguments, &e);
}

// A JSON list of calls at c[i] (after spaces): each element {NAME_KEY: "f", ARGS_KEY:
// {...} (or a string holding an object)}; `end` past the list.
bool read_call_list(const std::string& c, size_t i, const char* name_key, const char* args_key,
                    std::vector<ToolCall>* calls, size_t* end) {
    i = skip_space(c, i);
    if (i >= c.size() || c[i] != '[') return false;
    const size_t e = object_end(c, i);
    if (e == std::string::npos) return false;
    const json list = json::parse(c.substr(i, e - i), nullptr, false);
    if (list.is_discarded() || !list.is_array() || list.empty()) return false;
    for (const json& x : list) {
        if (!x.is_object() || !x.contains(name_key) || !x[name_key].is_string()) return false;
        json named = {{"name", x[name_key]}, {"arguments", x.contains(args_key) ? x[args_key] : json::object()}};
        ToolCall tc;
        if (!read_call(named.dump(), {"arguments"}, &tc)) return false;
        calls->push_back(std::move(tc));
    }
    *end = e;
    return true;
}

// Command R7B: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}},
// ...]<|END_ACTION|>; Command R+: Action:\n```json\n[{"tool_name", "parameters"}, ...]\n```.
ParsedCalls parse_command_r(const std::string& c) {
    ParsedCalls out;
    size_t p = c.find(kCohereAction);
    const bool plus = p == std::string::npos;
    if (plus) p = c.find(kCoherePlusAction);
    if (p == std::string::npos) return out;
    out.before = c.substr(0, p);
    size_t i = skip_space(c, p + (plus ? kCoherePlusAction : kCohereAction).size());
    const std::string fence = "```json", close_fence = "```";
    const bool fenced = starts_with_at(c, i, fence);
    if (fenced) i += fence.size();
    size_t e = 0;
    if (!read_call_list(c, i, "tool_name", "parameters", &out.calls, &e)) return {};
    e = skip_space(c, e);
    if (fenced) {
        if (!starts_with_at(c, e, close_fence)) return {};
        e = skip_space(c, e + close_fence.size());
    }
    if (!plus && starts_with_at(c, e, kCohereActionEnd)) e = skip_space(c, e + kCohereActionEnd.size());
    out.after = trim(c.substr(e));
    return out;
}

// MARKER[{"name": "f", "arguments": {...}}, ...] and, when END is not empty, an
// optional END after the list: granite 3.x (<|tool_call|>), Apriel (<tool_calls> ...
// </tool_calls>), Nemotron Nano v2 (<TOOLCALL> ... </TOOLCALL>), firefunction v2 (functools).
ParsedCalls parse_call_list(const std::string& c, const std::string& marker, const std::string& end) {
    ParsedCalls out;
    const size_t p = c.find(marker);
    if (p == std::string::npos) return out;
    out.before = c.substr(0, p);
    size_t e = 0;
    if (!read_call_list(c, p + marker.size(), "name", "arguments", &out.calls, &e)) return {};
    e = skip_space(c, e);
    if (!end.empty() && starts_with_at(c, e, end)) e += end.size();
    out.after = trim(c.substr(e));
    return out;
}

// firefunction v2: functools[...] (the word alone is not a marker: Python's module).
ParsedCalls parse_firefunction(const std::string& c) {
    const size_t p = c.find(kFireFunctionHold);
    if (p == std::string::npos) return {};
    ParsedCalls r = parse_call_list(c.substr(p), kFireFunctionCalls, "");
    if (!r.calls.empty()) r.before = c.substr(0, p);
    return r;
}

// Functionary v3.1: <function=NAME>{...}</function> (one or more, content before them),
// or <|python_tag|> and code to its end: a call of "python" with {"code": CODE}.
ParsedCalls parse_functionary_v31(const std::string& c) {
    ParsedCalls out;
    const size_t f = c.find(kFunctionOpen), py = c.find(kPythonTag);
    const size_t p = std::min(f, py);
    if (p == std::string::npos) return out;
    out.before = c.substr(0, p);
    size_t i = p;
    while (starts_with_at(c, i, kFunctionOpen)) {
        const size_t ne = c.find('>', i + kFunctionOpen.size());
        if (ne == std::string::npos) return {};
        ToolCall tc;
        tc.name = trim(c.substr(i + kFunctionOpen.size(), ne - i - kFunctionOpen.size()));
        size_t e = 0;
        if (tc.name.empty() || tc.name.find_first_of("<>{}\n\"") != std::string::npos ||
            !read_args(c, ne + 1, &tc.arguments, &e))
            return {};
        e = skip_space(c, e);
        if (!starts_with_at(c, e, kFunctionClose)) return {};
        out.calls.push_back(std::move(tc));
        i = skip_space(c, e + kFunctionClose.size());
    }
    if (starts_with_at(c, i, kPythonTag)) {
        const std::string code = trim(c.substr(i + kPythonTag.size()));
        if (code.empty()) return {};
        out.calls.push_back({"python", json{{"code", code}}.dump()});
        i = c.size();
    }
    out.after = trim(c.substr(std::min(i, c.size())));
    return out.calls.empty() ? ParsedCalls{} : out;
}

// Functionary v3.2: the reply continues the prompt's ">>>": segments RECIPIENT\nBODY
// separated by ">>>"; "all" segments are content, the others calls of that function with
// BODY its JSON arguments ("python" may write bare code: {"code": BODY}). `before` keeps
// the first segment's raw text (with its "all\n") when it is content; `after` the content
// of "all" segments after the first call.
ParsedCalls parse_functionary_v32(const std::string& c) {
    std::vector<std::string> segs;
    for (size_t i = 0;;) {
        const size_t n = c.find(kRecipient, i);
        segs.push_back(c.substr(i, n == std::string::npos ? std::string::npos : n - i));
        if (n == std::string::npos) break;
        i = n + kRecipient.size();
    }
    ParsedCalls out;
    std::string after;
    for (size_t k = 0; k < segs.size(); ++k) {
        const std::string& s = segs[k];
        if (starts_with_at(s, 0, kRecipientAll)) {
            if (out.calls.empty()) {
                if (k != 0) return {};  // content between "all" segments before any call: not this form
                out.before = s;
            } else {
                if (!after.empty()) after += '\n';
                after.append(s, kRecipientAll.size(), std::string::npos);
            }
            continue;
        }
        const size_t nl = s.find('\n');
        if (nl == std::string::npos) return {};
        ToolCall tc;
        tc.name = trim(s.substr(0, nl));
        if (tc.name.empty() || tc.name.find_first_of("<>{}\" ") != std::string::npos) return {};
        const std::string body = trim(s.substr(nl + 1));
        size_t e = 0;
        if (read_args(body, 0, &tc.arguments, &e) && skip_space(body, e) == body.size()) {
        } else if (tc.name == "python" && !body.empty()) {
            tc.arguments = json{{"code", body}}.dump();
        } else {
            return {};
        }
        out.calls.push_back(std::move(tc));
    }
    if (out.calls.empty()) return {};
    out.after = trim(after);
    return out;
}

// A harmony reply's calls, its content as `before`.
ParsedCalls harmony_calls(const std::string& c) {
    const HarmonyReply h = read_harmony(c, true, true);
    if (!h.harmony || h.malformed || h.calls.empty()) return {};
    ParsedCalls out;
    out.calls = h.calls;
    out.before = h.content;
    return out;
}

ParsedCalls parse_llama3(const std::string& c) {
    size_t i = skip_space(c, 0);
    if (starts_with_at(c, i, kPythonTag)) i = skip_space(c, i + kPythonTag.size());
    if (i >= c.size() || c[i] != '{') return {};
    ParsedCalls out;
    for (;;) {
        const size_t e = object_end(c, i);
        if (e == std::string::npos) return {};
        ToolCall tc;
        if (!read_call(c.substr(i, e - i), {"parameters", "arguments"}, &tc)) return {};
        out.calls.push_back(std::move(tc));
        size_t k = skip_space(c, e);
        if (k < c.size() && c[k] == ';') k = skip_space(c, k + 1);
        if (k < c.size() && c[k] == '{') {
            i = k;
            continue;
        }
        out.after = trim(c.substr(k));
        break;
    }
    return out;
}

}  // namespace

ToolFormat detect_tool_format(const std::string& t) {
    if (t.find("<|channel|>") != std::string::npos && t.find("<|message|>") != std::string::npos)
        return ToolFormat::Harmony;  // gpt-oss
    if (t.find("\uff5cDSML\uff5c") != std::string::npos) return ToolFormat::Dsml;  // DeepSeek V3.2, V4
    if (t.find(kMiniMaxSyntax.open[0]) != std::string::npos) return ToolFormat::MiniMax;
    if (t.find(kGemmaCallOpen) != std::string::npos) return ToolFormat::Gemma4;
    if (t.find("<function=") != std::string::npos && t.find("<parameter=") != std::string::npos)
        return ToolFormat::QwenXml;  // Qwen3-Coder, Qwen3.5
    if (t.find("<arg_key>") != std::string::npos) return ToolFormat::Glm;    // GLM 4.5+, Laguna
    if (t.find(kFunctionOpen) != std::string::npos && t.find(kFunctionClose) != std::string::npos)
        return ToolFormat::FunctionaryV31;  // functionary v3.1 (llama 3.1's <function=NAME> form)
    if (t.find(">>>all") != std::string::npos) return ToolFormat::FunctionaryV32;  // (then a \n escape in its source)
    if (t.find(kMistralCalls) != std::string::npos) return ToolFormat::Mistral;
    if (t.find(kDsCallBegin) != std::string::npos) return ToolFormat::DeepSeek;  // V3, R1, V3.1
    if (t.find(kKimiSection) != std::string::npos) return ToolFormat::KimiK2;
    // Command R7B writes its calls after <|START_ACTION|>, Command R+ after "Action:" in a
    // json block; both as {"tool_name", "parameters"} lists.
    if (t.find(kCohereAction) != std::string::npos ||
        (t.find(kCoherePlusAction) != std::string::npos && t.find("\"tool_name\"") != std::string::npos))
        return ToolFormat::CommandR;
    if (t.find(kGraniteCall) != std::string::npos) return ToolFormat::Granite;  // granite 3.x
    if (t.find(kAprielCalls) != std::string::npos) return ToolFormat::Apriel;  // Apriel 1.5 / 1.6
    if (t.find(kNemotronCalls) != std::string::npos) return ToolFormat::NemotronV2;
    if (t.find("functools[") != std::string::npos) return ToolFormat::FireFunction;
    if (t.find(kPythonicOpen) != std::string::npos || t.find("<|tool_list_start|>") != std::string::npos)
        return ToolFormat::Pythonic;  // LFM2 (its template shows only the tool list), LFM2.5
    if (t.find(kHermesOpen) != std::string::npos) return ToolFormat::Hermes;
    if (t.find(kPythonTag) != std::string::npos || t.find("respond with a JSON for a function call") != std::string::npos)
        return ToolFormat::Llama3Json;
    return ToolFormat::None;
}

const char* tool_format_name(ToolFormat f) {
    switch (f) {
        case ToolFormat::Hermes: return "hermes (<tool_call> JSON)";
        case ToolFormat::Llama3Json: return "llama 3 JSON";
        case ToolFormat::QwenXml: return "qwen XML (<function=...>)";
        case ToolFormat::Glm: return "GLM (<arg_key>/<arg_value>)";
        case ToolFormat::Mistral: return "mistral ([TOOL_CALLS])";
        case ToolFormat::DeepSeek: return "deepseek (tool call markers)";
        case ToolFormat::KimiK2: return "kimi k2 (tool call sections)";
        case ToolFormat::CommandR: return "command r (actions)";
        case ToolFormat::Granite: return "granite 3 (<|tool_call|> list)";
        case ToolFormat::Apriel: return "apriel (<tool_calls> list)";
        case ToolFormat::FunctionaryV31: return "functionary v3.1 (<function=NAME>)";
        case ToolFormat::FunctionaryV32: return "functionary v3.2 (>>>recipient segments)";
        case ToolFormat::Dsml: return "deepseek DSML (<invoke name=...> blocks)";
        case ToolFormat::MiniMax: return "minimax (<minimax:tool_call> invoke blocks)";
        case ToolFormat::Gemma4: return "gemma 4 (<|tool_call>call:NAME{...})";
        case ToolFormat::Harmony: return "gpt-oss harmony (channels)";
        case ToolFormat::NemotronV2: return "nemotron (<TOOLCALL> list)";
        case ToolFormat::FireFunction: return "firefunction (functools list)";
        case ToolFormat::Pythonic: return "pythonic (<|tool_call_start|>[f(a=1)])";
        case ToolFormat::None: break;
    }
    return "none recognised (hermes assumed)";
}

bool tool_markers_special(ToolFormat f) {
    return f == ToolFormat::Mistral || f == ToolFormat::DeepSeek || f == ToolFormat::KimiK2 || f == ToolFormat::CommandR ||
           f == ToolFormat::Granite || f == ToolFormat::Dsml || f == ToolFormat::MiniMax || f == ToolFormat::Gemma4 ||
           f == ToolFormat::Harmony || f == ToolFormat::NemotronV2 || f == ToolFormat::Pythonic;
}

bool reply_shows_special(ToolFormat f, bool tools) {
    return (tools && tool_markers_special(f)) || f == ToolFormat::Gemma4 || f == ToolFormat::Harmony;
}

ThinkMarkers think_markers(ToolFormat f) {
    if (f == ToolFormat::CommandR) return {kCohereThinkOpen, kCohereThinkClose};
    if (f == ToolFormat::Gemma4) return {kGemmaThinkOpen, kGemmaThinkClose};
    if (f == ToolFormat::Apriel) return {kAprielThinkOpen, kAprielThinkClose};
    return {kThinkOpen, kThinkClose};
}

bool template_thinks(const std::string& t) {
    return t.find(kThinkOpen) != std::string::npos || t.find(kCohereThinkOpen) != std::string::npos ||
           t.find("<|channel>thought") != std::string::npos || t.find(kAprielThinkClose) != std::string::npos;
}

// ---- ReplySplitter ----

ReplySplitter::ReplySplitter(ToolFormat format, bool think, bool open_think, bool calls)
    : format_(format), think_(think || open_think), open_think_(open_think), calls_(calls && format != ToolFormat::None),
      think_open_(think_markers(format).open), think_close_(think_markers(format).close) {}

ReplySplitter::Regions ReplySplitter::regions(bool final) const {
    Regions g;
    if (!think_) {
        g.settled = true;
        return g;
    }
    size_t r_begin = 0;
    if (!open_think_) {
        const size_t i = skip_space(text_, 0);
        const size_t rest = text_.size() - i;
        if (!starts_with_at(text_, i, think_open_)) {
            // Too short to tell: hold everything (while streaming).
            if (!final && (i == text_.size() || (rest < think_open_.size() && think_open_.compare(0, rest, text_, i, rest) == 0))) {
                g.c_begin = text_.size();
                return g;
            }
            g.settled = true;  // no think block: all content
            return g;
        }
        r_begin = i + think_open_.size();
    }
    g.settled = true;
    g.r_begin = r_begin;
    const size_t close = text_.find(think_close_, r_begin);
    if (close == std::string::npos) {  // still reasoning (or never closed: all of it reasoning)
        g.r_end = text_.size() - (final ? 0 : partial_suffix(text_, r_begin, think_close_));
        g.c_begin = text_.size();
        return g;
    }
    g.r_end = close;
    g.c_begin = close + think_close_.size();
    g.after_think = true;
    return g;
}

size_t ReplySplitter::content_hold(size_t c_begin) const {
    if (format_ == ToolFormat::FunctionaryV32) {
        // The leading "all\n" recipient line is never content (content_prefix), with or
        // without calls: while the reply may still turn out to start with it, nothing.
        const size_t n = std::min(text_.size() - c_begin, kRecipientAll.size());
        if (n < kRecipientAll.size() && text_.compare(c_begin, n, kRecipientAll, 0, n) == 0) return c_begin;
    }
    if (!calls_ || format_ == ToolFormat::None) return text_.size();
    if (format_ == ToolFormat::Llama3Json) {
        // A reply that starts (after spaces) with '{' or the python tag may be a call:
        // hold it whole.
        const size_t i = skip_space(text_, c_begin);
        if (i == text_.size()) return c_begin;
        const size_t rest = text_.size() - i;
        if (text_[i] == '{' || kPythonTag.compare(0, std::min(rest, kPythonTag.size()), text_, i,
                                                  std::min(rest, kPythonTag.size())) == 0)
            return c_begin;
        return text_.size();
    }
    if (format_ == ToolFormat::FunctionaryV32) {
        // Content only in a leading "all" segment: until its "all\n" is complete, or where
        // the reply is a call, nothing.
        if (text_.size() - c_begin < kRecipientAll.size() || !starts_with_at(text_, c_begin, kRecipientAll))
            return c_begin;
    }
    // Every other format (harmony's too, for a plain reply: a forced Hermes call): content
    // stops where one of its call markers starts, or may yet start.
    size_t hold = text_.size();
    for (const std::string* m : call_markers(format_)) {
        const size_t p = text_.find(*m, c_begin);
        hold = std::min(hold, p != std::string::npos ? p : text_.size() - partial_suffix(text_, c_begin, *m));
    }
    return hold;
}

size_t ReplySplitter::content_prefix(size_t c_begin) const {
    // functionary v3.2: the recipient line of a leading "all" segment is not content.
    return format_ == ToolFormat::FunctionaryV32 && starts_with_at(text_, c_begin, kRecipientAll) ? kRecipientAll.size() : 0;
}

ReplySplitter::Delta ReplySplitter::take() {
    if (format_ == ToolFormat::Harmony) return take_harmony();
    const Regions g = regions(false);
    Delta d;
    if (g.r_end > g.r_begin + r_sent_) {
        d.reasoning = text_.substr(g.r_begin + r_sent_, g.r_end - g.r_begin - r_sent_);
        r_sent_ = g.r_end - g.r_begin;
    }
    if (!g.settled || g.c_begin >= text_.size()) return d;
    const size_t hold = content_hold(g.c_begin);
    size_t from = g.c_begin + std::max(c_sent_, content_prefix(g.c_begin));
    if (g.after_think && !c_started_)  // the blank lines after </think> are not content
        while (from < hold && is_space(text_[from])) ++from;
    if (calls_ && format_ != ToolFormat::None && !c_started_) {
        // Content that is only whitespace so far waits: should a call follow, the whole
        // split drops it (whitespace-only content around calls is empty), and streamed
        // pieces must add up to the whole split.
        if (from <= hold && skip_space(text_, from) >= hold) return d;
    }
    if (hold > from) {
        d.content = text_.substr(from, hold - from);
        c_started_ = true;
        c_sent_ = hold - g.c_begin;
    } else if (from > g.c_begin + c_sent_) {
        c_sent_ = from - g.c_begin;  // (blank lines skipped)
    }
    return d;
}

ReplySplitter::Final ReplySplitter::finish() {
    if (format_ == ToolFormat::Harmony) return finish_harmony();
    const Regions g = regions(true);
    Final f;
    if (g.r_end > g.r_begin + r_sent_) f.reasoning = text_.substr(g.r_begin + r_sent_, g.r_end - g.r_begin - r_sent_);
    std::string content = g.c_begin < text_.size() ? text_.substr(g.c_begin) : std::string();
    size_t skip = std::max(c_sent_, content_prefix(g.c_begin));
    if (g.after_think && !c_started_) skip = skip_space(content, skip);
    split_content(content, skip, &f);
    return f;
}

void ReplySplitter::split_content(const std::string& content, size_t skip, Final* f) const {
    const ParsedCalls pc = calls_ ? parse_tool_calls(format_, content, tools_) : ParsedCalls{};
    if (pc.calls.empty()) {
        f->content = skip < content.size() ? content.substr(skip) : std::string();
        return;
    }
    f->calls = pc.calls;
    std::string rest = skip < pc.before.size() ? pc.before.substr(skip) : std::string();
    // The text before the calls and after them are joined by a newline whether or not the
    // part before was already streamed (take()): streamed pieces add up to the whole split.
    if (!pc.after.empty()) rest += (pc.before.empty() ? "" : "\n") + pc.after;
    f->content = trim(rest).empty() ? std::string() : rest;
}

// Harmony: the channels' reasoning and content as read so far, past what was taken. A
// reply that is not harmony (a forced call writes Hermes JSON) is content, held back from
// a call marker as the other formats' content is.
ReplySplitter::Delta ReplySplitter::take_harmony() {
    const HarmonyReply h = read_harmony(text_, false, calls_);
    Delta d;
    if (!h.harmony) {
        const size_t hold = content_hold(0);
        if (hold > c_sent_) d.content = text_.substr(c_sent_, hold - c_sent_), c_sent_ = hold;
        return d;
    }
    if (h.reasoning.size() > r_sent_) d.reasoning = h.reasoning.substr(r_sent_), r_sent_ = h.reasoning.size();
    if (h.content.size() > c_sent_) d.content = h.content.substr(c_sent_), c_sent_ = h.content.size();
    return d;
}

ReplySplitter::Final ReplySplitter::finish_harmony() {
    const HarmonyReply h = read_harmony(text_, true, calls_);
    Final f;
    if (!h.harmony) {
        split_content(text_, c_sent_, &f);
        return f;
    }
    if (h.reasoning.size() > r_sent_) f.reasoning = h.reasoning.substr(r_sent_);
    if (h.content.size() > c_sent_) f.content = h.content.substr(c_sent_);
    f.calls = h.calls;
    return f;
}

namespace {
ParsedCalls parse_calls_of(ToolFormat format, const std::string& content, const json& tools);
}

// A call whose strings are not UTF-8 (model bytes that do not form characters) is
// malformed, as in the families whose calls are JSON text (the JSON parser refuses such
// strings): no calls, the reply stays content. The families that build a call's arguments
// from their own syntax learn it when the arguments are written (json::dump's
// type_error 316; found by vega_tool_calls_fuzz: it escaped the splitter).
ParsedCalls parse_tool_calls(ToolFormat format, const std::string& content, const json& tools) {
    try {
        return parse_calls_of(format, content, tools);
    } catch (const json::type_error& e) {
        if (e.id != 316) throw;
        return {};
    }
}

namespace {
ParsedCalls parse_calls_of(ToolFormat format, const std::string& content, const json& tools) {
    ParsedCalls own;  // the family's own syntax; every family but Llama 3 also reads Hermes (a forced call)
    switch (format) {
        case ToolFormat::None: return {};
        case ToolFormat::Llama3Json: return parse_llama3(content);
        case ToolFormat::Hermes:
        case ToolFormat::QwenXml:
        case ToolFormat::Glm: return parse_blocks(content, format, tools);  // (their blocks read Hermes JSON too)
        case ToolFormat::Mistral: own = parse_mistral(content); break;
        case ToolFormat::DeepSeek: own = parse_marked(content, kDsCallsBegin, kDsCallBegin, kDsCallEnd, read_deepseek_call); break;
        case ToolFormat::KimiK2: own = parse_marked(content, kKimiSection, kKimiCallBegin, kKimiCallEnd, read_kimi_call); break;
        case ToolFormat::CommandR: own = parse_command_r(content); break;
        case ToolFormat::Granite: own = parse_call_list(content, kGraniteCall, ""); break;
        case ToolFormat::Apriel: own = parse_call_list(content, kAprielCalls, kAprielCallsEnd); break;
        case ToolFormat::FunctionaryV31: own = parse_functionary_v31(content); break;
        case ToolFormat::FunctionaryV32: own = parse_functionary_v32(content); break;
        case ToolFormat::Dsml: own = parse_invoke_calls(content, kDsmlSyntax, tools); break;
        case ToolFormat::MiniMax: own = parse_invoke_calls(content, kMiniMaxSyntax, tools); break;
        case ToolFormat::Gemma4: own = parse_gemma4_calls(content); break;
        case ToolFormat::NemotronV2: own = parse_call_list(content, kNemotronCalls, kNemotronCallsEnd); break;
        case ToolFormat::FireFunction: own = parse_firefunction(content); break;
        case ToolFormat::Pythonic: own = parse_pythonic_calls(content); break;
        case ToolFormat::Harmony: own = harmony_calls(content); break;
    }
    if (!own.calls.empty()) return own;
    return parse_blocks(content, ToolFormat::Hermes, tools);  // a forced call (Hermes form)
}
}  // namespace

// ---- the grammar of a required call ----

void check_tools(const json& tools) {
    if (!tools.is_array()) throw std::invalid_argument("'tools' must be an array");
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& x = tools[i];
        const std::string at = "tools[" + std::to_string(i) + "]";
        const bool typed = x.is_object() && (!x.contains("type") || x["type"] == "function");
        if (!typed || !x.contains("function") || !x["function"].is_object())
            throw std::invalid_argument("'" + at + "' must be {\"type\": \"function\", \"function\": {...}}");
        const json& fn = x["function"];
        if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get_ref<const std::string&>().empty())
            throw std::invalid_argument("'" + at + ".function.name' must be a non-empty string");
        if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object())
            throw std::invalid_argument("'" + at + ".function.parameters' must be an object (a JSON schema)");
    }
}

std::string tool_call_gbnf(ToolFormat format, const json& tools, const std::string& only, bool parallel) {
    if (!tools.is_array() || tools.empty()) throw std::invalid_argument("no tools to call");
    check_tools(tools);
    const bool llama = format == ToolFormat::Llama3Json;
    const char* arg_key = llama ? "parameters" : "arguments";
    json alts = json::array();
    json defs = json::object();
    std::map<std::string, std::string> def_owner;
    bool found = only.empty();
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& fn = tools[i]["function"];  // (shape checked above)
        const std::string at = "tools[" + std::to_string(i) + "]";
        const std::string name = fn["name"];
        if (!only.empty() && name != only) continue;
        found = true;
        json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : json{{"type", "object"}};
        // Local $defs move to the combined schema's root, where "#/$defs/NAME" resolves.
        for (const char* key : {"$defs", "definitions"}) {
            if (!params.contains(key)) continue;
            if (!params[key].is_object()) throw std::invalid_argument("'" + at + ".function.parameters." + key + "' must be an object");
            for (const auto& [k, v] : params[key].items()) {
                const std::string ref = std::string(key) + "/" + k;
                auto prev = def_owner.find(ref);
                if (prev != def_owner.end() && defs[key][k] != v)
                    throw std::invalid_argument("tools '" + prev->second + "' and '" + name + "' define " + key + "/" + k +
                                                " differently");
                defs[key][k] = v;
                def_owner[ref] = name;
            }
            params.erase(key);
        }
        json props = json::object();
        props["name"] = json{{"const", name}};
        props[arg_key] = params;
        alts.push_back(json{{"type", "object"},
                            {"properties", props},
                            {"required", json::array({"name", arg_key})},
                            {"additionalProperties", false}});
    }
    if (!found) throw std::invalid_argument("tool_choice names function '" + only + "', which is not in 'tools'");
    json schema = alts.size() == 1 ? alts[0] : json{{"anyOf", alts}};
    for (const auto& [k, v] : defs.items()) schema[k] = v;
    const grammar::SchemaRules r = grammar::json_schema_rules(schema);
    std::string g;
    if (llama) {
        g = "root ::= tool-call" + std::string(parallel ? " ( \"; \" tool-call )*" : "") + "\n";
        g += "tool-call ::= " + r.value + "\n";
    } else {
        g = "root ::= tool-call" + std::string(parallel ? " ( \"\\n\" tool-call )*" : "") + "\n";
        g += "tool-call ::= \"<tool_call>\\n\" " + r.value + " \"\\n</tool_call>\"\n";
    }
    return g + r.rules;
}

// ---- messages for templates ----

json template_messages(const json& messages, bool object_arguments) {
    json out = messages;
    if (!out.is_array()) return out;
    for (json& m : out) {
        if (!m.is_object() || m.value("role", "") != "assistant" || !m.contains("tool_calls")) continue;
        if (!m.contains("content") || m["content"].is_null()) m["content"] = "";
        if (!object_arguments || !m["tool_calls"].is_array()) continue;
        for (json& tc : m["tool_calls"]) {
            if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object()) continue;
            json& fn = tc["function"];
            if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
            json a = json::parse(fn["arguments"].get_ref<const std::string&>(), nullptr, false);
            if (!a.is_discarded() && a.is_object()) fn["arguments"] = std::move(a);
        }
    }
    return out;
}

}  // namespace vega
