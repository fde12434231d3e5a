// gemma 4 tool calls: <|tool_call>call:NAME{key:VALUE,...}<tool_call|> (see
// tool_call_parsers.h). The template writes the arguments in this form too (its
// format_argument macro): strings between <|"|> quotes, keys bare.
#include "engine/tool_call_parsers.h"
#include "engine/tool_call_scan.h"

namespace vega {

using namespace tool_scan;

const std::string kGemmaCallOpen = "<|tool_call>call:";

namespace {

const std::string kGemmaCallClose = "<tool_call|>", kGemmaQuote = "<|\"|>", kGemmaToolResponse = "<|tool_response>";
constexpr int kMaxDepth = 64;  // nesting a reply may use (deeper: malformed)

bool read_value(const std::string& s, size_t i, json* out, size_t* end, int depth);

// A key at s[i]: <|"|>text<|"|> or bare text up to ':'; `end` past the ':'.
bool read_key(const std::string& s, size_t i, std::string* key, size_t* end) {
    i = skip_space(s, i);
    if (starts_with_at(s, i, kGemmaQuote)) {
        const size_t q = s.find(kGemmaQuote, i + kGemmaQuote.size());
        if (q == std::string::npos) return false;
        *key = s.substr(i + kGemmaQuote.size(), q - i - kGemmaQuote.size());
        i = skip_space(s, q + kGemmaQuote.size());
    } else {
        const size_t c = s.find_first_of(":,{}[]<\n", i);
        if (c == std::string::npos) return false;
        *key = trim(s.substr(i, c - i));
        i = c;
    }
    if (key->empty() || i >= s.size() || s[i] != ':') return false;
    *end = i + 1;
    return true;
}

// {key:VALUE,...} or [VALUE,...] at s[i] (the opening bracket); `end` past the close.
bool read_container(const std::string& s, size_t i, json* out, size_t* end, int depth) {
    const bool object = s[i] == '{';
    const char close = object ? '}' : ']';
    *out = object ? json::object() : json::array();
    i = skip_space(s, i + 1);
    if (i < s.size() && s[i] == close) {
        *end = i + 1;
        return true;
    }
    for (;;) {
        json v;
        if (object) {
            std::string key;
            if (!read_key(s, i, &key, &i) || !read_value(s, i, &v, &i, depth + 1)) return false;
            (*out)[key] = std::move(v);
        } else {
            if (!read_value(s, i, &v, &i, depth + 1)) return false;
            out->push_back(std::move(v));
        }
        i = skip_space(s, i);
        if (i < s.size() && s[i] == ',') {
            ++i;
            continue;
        }
        if (i < s.size() && s[i] == close) {
            *end = i + 1;
            return true;
        }
        return false;
    }
}

bool read_value(const std::string& s, size_t i, json* out, size_t* end, int depth) {
    if (depth > kMaxDepth) return false;
    i = skip_space(s, i);
    if (i >= s.size()) return false;
    if (starts_with_at(s, i, kGemmaQuote)) {
        const size_t q = s.find(kGemmaQuote, i + kGemmaQuote.size());
        if (q == std::string::npos) return false;
        *out = s.substr(i + kGemmaQuote.size(), q - i - kGemmaQuote.size());
        *end = q + kGemmaQuote.size();
        return true;
    }
    if (s[i] == '{' || s[i] == '[') return read_container(s, i, out, end, depth);
    // A bare scalar up to the next separator: a number, true, false or null as JSON,
    // anything else as its text.
    size_t e = i;
    while (e < s.size() && s[e] != ',' && s[e] != '}' && s[e] != ']' && s[e] != '<') ++e;
    const std::string word = trim(s.substr(i, e - i));
    if (word.empty()) return false;
    json j = json::parse(word, nullptr, false);
    *out = j.is_discarded() || j.is_object() || j.is_array() ? json(word) : j;
    *end = e;
    return true;
}

}  // namespace

bool read_gemma4_value(const std::string& s, size_t i, json* out, size_t* end) { return read_value(s, i, out, end, 0); }

ParsedCalls parse_gemma4_calls(const std::string& c) {
    size_t p = c.find(kGemmaCallOpen);
    if (p == std::string::npos) return {};
    ParsedCalls out;
    out.before = c.substr(0, p);
    size_t i = p;
    while (starts_with_at(c, i, kGemmaCallOpen)) {
        i += kGemmaCallOpen.size();
        const size_t brace = c.find('{', i);
        if (brace == std::string::npos) return {};
        ToolCall tc;
        tc.name = trim(c.substr(i, brace - i));
        if (tc.name.empty() || tc.name.find_first_of("<>\"\n ") != std::string::npos) return {};
        json args;
        if (!read_value(c, brace, &args, &i, 0) || !args.is_object()) return {};
        i = skip_space(c, i);
        if (!starts_with_at(c, i, kGemmaCallClose)) return {};
        tc.arguments = args.dump();
        out.calls.push_back(std::move(tc));
        i = skip_space(c, i + kGemmaCallClose.size());
    }
    if (starts_with_at(c, i, kGemmaToolResponse)) i += kGemmaToolResponse.size();
    out.after = trim(c.substr(i));
    return out;
}

}  // namespace vega
