// Scanning helpers the tool-call parsers share (engine/tool_calls.cpp and the family
// parsers beside it): spaces, markers, JSON objects inside free text, parameter values
// typed by the request's tools.
#pragma once
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

namespace vega::tool_scan {

using json = nlohmann::ordered_json;

inline bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

inline size_t skip_space(const std::string& s, size_t i) {
    while (i < s.size() && is_space(s[i])) ++i;
    return i;
}

inline std::string trim(const std::string& s) {
    const size_t b = skip_space(s, 0);
    size_t e = s.size();
    while (e > b && is_space(s[e - 1])) --e;
    return s.substr(b, e - b);
}

inline bool starts_with_at(const std::string& s, size_t i, const std::string& w) { return s.compare(i, w.size(), w) == 0; }

// The length of the longest suffix of s (from `from` on) that is a proper prefix of w:
// bytes that may yet become w.
inline size_t partial_suffix(const std::string& s, size_t from, const std::string& w) {
    const size_t avail = s.size() - from;
    for (size_t k = std::min(avail, w.size() - 1); k > 0; --k)
        if (s.compare(s.size() - k, k, w, 0, k) == 0) return k;
    return 0;
}

// The end (one past the closing brace) of the JSON object starting at s[i] == '{', or
// npos when it does not close. Strings and their escapes are skipped.
inline size_t object_end(const std::string& s, size_t i) {
    int depth = 0;
    bool in_str = false;
    for (; i < s.size(); ++i) {
        const char c = s[i];
        if (in_str) {
            if (c == '\\') ++i;
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        else if (c == '{' || c == '[') ++depth;
        else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
            if (depth < 0) return std::string::npos;
        }
    }
    return std::string::npos;
}

// The declared type of parameter p of function `name` in `tools` ("" when unknown).
inline std::string param_type(const json& tools, const std::string& name, const std::string& p) {
    if (!tools.is_array()) return "";
    for (const json& t : tools) {
        if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
        const json& fn = t["function"];
        if (!fn.contains("name") || fn["name"] != name || !fn.contains("parameters") || !fn["parameters"].is_object()) continue;
        const json& props = fn["parameters"].value("properties", json::object());
        if (!props.is_object() || !props.contains(p) || !props[p].is_object()) return "";
        const json& ty = props[p].value("type", json());
        if (ty.is_string()) return ty.get<std::string>();
        if (ty.is_array())
            for (const json& x : ty)
                if (x == "string") return "string";
        return "";
    }
    return "";
}

// A typed parameter value: text for a string parameter, else JSON when it parses.
inline json typed_value(const json& tools, const std::string& fn, const std::string& p, const std::string& v) {
    if (param_type(tools, fn, p) != "string") {
        json j = json::parse(v, nullptr, false);
        if (!j.is_discarded()) return j;
    }
    return v;
}

// A JSON object at c[i] (after spaces) as arguments; `end` past it.
inline bool read_args(const std::string& c, size_t i, std::string* args, size_t* end) {
    i = skip_space(c, i);
    if (i >= c.size() || c[i] != '{') return false;
    const size_t e = object_end(c, i);
    if (e == std::string::npos) return false;
    const json a = json::parse(c.substr(i, e - i), nullptr, false);
    if (a.is_discarded() || !a.is_object()) return false;
    *args = a.dump();
    *end = e;
    return true;
}

}  // namespace vega::tool_scan
