// Pythonic tool calls (LFM2, LFM2.5): <|tool_call_start|>[f(a='x', n=3), g()]<|tool_call_end|>
// (see tool_call_parsers.h). Arguments are keyword arguments with Python literals.
#include "engine/tool_call_parsers.h"
#include "engine/tool_call_scan.h"
#include "core/utf8.h"

namespace vega {

using namespace tool_scan;

const std::string kPythonicOpen = "<|tool_call_start|>", kPythonicClose = "<|tool_call_end|>";

namespace {

constexpr int kMaxDepth = 64;

bool read_literal(const std::string& s, size_t& i, json* out, int depth);

// A quoted string at s[i] ('...' or "..."), its backslash escapes decoded.
bool read_string(const std::string& s, size_t& i, json* out) {
    const char q = s[i++];
    std::string v;
    while (i < s.size() && s[i] != q) {
        char c = s[i++];
        if (c == '\n') return false;
        if (c == '\\') {
            if (i >= s.size()) return false;
            const char e = s[i++];
            switch (e) {
                case 'n': c = '\n'; break;
                case 't': c = '\t'; break;
                case 'r': c = '\r'; break;
                case '0': c = '\0'; break;
                case 'u': {
                    if (i + 4 > s.size()) return false;
                    const json hex = json::parse("\"\\u" + s.substr(i, 4) + "\"", nullptr, false);
                    if (hex.is_discarded()) return false;
                    v += hex.get<std::string>();
                    i += 4;
                    continue;
                }
                default: c = e;  // \\ \' \" and the rest stand for themselves
            }
        }
        v += c;
    }
    if (i >= s.size()) return false;
    ++i;
    *out = v;
    return true;
}

// [v, ...], (v, ...) -> array; {k: v, ...} -> object (keys: strings).
bool read_container(const std::string& s, size_t& i, json* out, int depth) {
    const char open = s[i++];
    const char close = open == '[' ? ']' : open == '(' ? ')' : '}';
    *out = open == '{' ? json::object() : json::array();
    for (bool first = true;; first = false) {
        i = skip_space(s, i);
        if (i < s.size() && s[i] == close) return ++i, true;
        if (!first) {
            if (i >= s.size() || s[i] != ',') return false;
            i = skip_space(s, i + 1);
            if (i < s.size() && s[i] == close) return ++i, true;  // a trailing comma
        }
        json v;
        if (open == '{') {
            json key;
            if (!read_literal(s, i, &key, depth + 1) || !key.is_string()) return false;
            i = skip_space(s, i);
            if (i >= s.size() || s[i] != ':') return false;
            ++i;
            if (!read_literal(s, i, &v, depth + 1)) return false;
            (*out)[key.get<std::string>()] = std::move(v);
        } else {
            if (!read_literal(s, i, &v, depth + 1)) return false;
            out->push_back(std::move(v));
        }
    }
}

bool read_literal(const std::string& s, size_t& i, json* out, int depth) {
    if (depth > kMaxDepth) return false;
    i = skip_space(s, i);
    if (i >= s.size()) return false;
    const char c = s[i];
    if (c == '\'' || c == '"') return read_string(s, i, out);
    if (c == '[' || c == '(' || c == '{') return read_container(s, i, out, depth);
    size_t e = i;
    while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '.' || s[e] == '-' || s[e] == '+' ||
                            s[e] == '_'))
        ++e;
    const std::string word = s.substr(i, e - i);
    if (word == "True" || word == "true") *out = true;
    else if (word == "False" || word == "false") *out = false;
    else if (word == "None" || word == "null") *out = nullptr;
    else {
        json j = json::parse(word, nullptr, false);
        if (j.is_discarded() || !j.is_number()) return false;
        *out = j;
    }
    i = e;
    return true;
}

// NAME(key=value, ...) at s[i]; `i` past it.
bool read_call(const std::string& s, size_t& i, ToolCall* tc) {
    i = skip_space(s, i);
    const size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.' || s[i] == '-')) ++i;
    tc->name = s.substr(b, i - b);
    if (tc->name.empty() || i >= s.size() || s[i] != '(') return false;
    ++i;
    json args = json::object();
    for (bool first = true;; first = false) {
        i = skip_space(s, i);
        if (i < s.size() && s[i] == ')') break;
        if (!first) {
            if (i >= s.size() || s[i] != ',') return false;
            i = skip_space(s, i + 1);
        }
        const size_t k = i;
        while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
        const std::string key = s.substr(k, i - k);
        i = skip_space(s, i);
        if (key.empty() || i >= s.size() || s[i] != '=') return false;  // (positional arguments: no names to give them)
        ++i;
        json v;
        if (!read_literal(s, i, &v, 0)) return false;
        args[key] = std::move(v);
    }
    ++i;
    tc->arguments = args.dump();
    return true;
}

}  // namespace

ParsedCalls parse_pythonic_calls(const std::string& c) {
    const size_t p = c.find(kPythonicOpen);
    if (p == std::string::npos) return {};
    ParsedCalls out;
    out.before = c.substr(0, p);
    size_t i = skip_space(c, p + kPythonicOpen.size());
    if (i >= c.size() || c[i] != '[') return {};
    ++i;
    for (bool first = true;; first = false) {
        i = skip_space(c, i);
        if (i < c.size() && c[i] == ']') break;
        if (!first) {
            if (i >= c.size() || c[i] != ',') return {};
            ++i;
        }
        ToolCall tc;
        if (!read_call(c, i, &tc)) return {};
        out.calls.push_back(std::move(tc));
    }
    i = skip_space(c, i + 1);
    if (starts_with_at(c, i, kPythonicClose)) i += kPythonicClose.size();
    if (out.calls.empty()) return {};
    out.after = trim(c.substr(i));
    return out;
}

}  // namespace vega
