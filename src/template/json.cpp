#include "template/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/text.h"

namespace vega::tmpl {

namespace {

// The two-character escapes json.dumps writes; false for every other character.
bool short_escape(char32_t c, std::string& out) {
    switch (c) {
        case '"': out += "\\\""; return true;
        case '\\': out += "\\\\"; return true;
        case '\n': out += "\\n"; return true;
        case '\r': out += "\\r"; return true;
        case '\t': out += "\\t"; return true;
        case '\b': out += "\\b"; return true;
        case '\f': out += "\\f"; return true;
        default: return false;
    }
}

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out += '"';
    auto hex4 = [&](unsigned v) {
        char b[16];
        std::snprintf(b, sizeof b, "\\u%04x", v & 0xffff);
        out += b;
    };
    if (!ensure_ascii) {  // bytes pass through; only controls are escaped
        for (unsigned char c : s) {
            if (short_escape(c, out)) continue;
            if (c < 0x20) hex4(c);
            else out += char(c);
        }
    } else {  // everything outside ' '..'~' as \uXXXX (surrogate pairs above the BMP)
        for (char32_t c : text::decode(s)) {
            if (short_escape(c, out)) continue;
            if (c >= 0x20 && c <= 0x7e) {
                out += char(c);
            } else if (c >= 0x10000) {
                const char32_t v = c - 0x10000;
                hex4(0xd800 | (v >> 10));
                hex4(0xdc00 | (v & 0x3ff));
            } else {
                hex4(c);
            }
        }
    }
    out += '"';
}

std::string float_json(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return float_repr(d);
}

struct Dumper {
    const DumpOptions& o;
    std::string out;
    int depth = 0;

    // A long indent at a deep level writes indent * level bytes per line: checked before.
    void newline(int level) {
        if (!o.indent.empty() && (size_t)level > (o.max_bytes - std::min(out.size(), o.max_bytes)) / o.indent.size())
            too_long();
        out += '\n';
        for (int i = 0; i < level; ++i) out += o.indent;
        if (out.size() > o.max_bytes) too_long();
    }
    [[noreturn]] void too_long() const {
        raise("OutputLimitError", "output exceeds the limit of " + std::to_string(o.max_bytes) + " bytes");
    }

    std::string key_string(const Value& k) {
        switch (k.kind) {
            case Kind::String: return k.s;
            case Kind::Int: return std::to_string(k.i);
            case Kind::Float: return float_json(k.f);
            case Kind::Bool: return k.b ? "true" : "false";
            case Kind::None: return "null";
            default: raise("TypeError", "keys must be str, int, float, bool or None, not " + type_name(k));
        }
    }

    void dump(const Value& v, int level) {
        NestGuard g;
        if (out.size() > o.max_bytes) too_long();
        switch (v.kind) {
            case Kind::None: out += "null"; return;
            case Kind::Bool: out += v.b ? "true" : "false"; return;
            case Kind::Int: out += std::to_string(v.i); return;
            case Kind::Float: out += float_json(v.f); return;
            case Kind::String: dump_string(out, v.s, o.ensure_ascii); return;
            case Kind::List:
            case Kind::Tuple: {
                auto& it = v.items();
                if (it.empty()) {
                    out += "[]";
                    return;
                }
                out += '[';
                for (size_t i = 0; i < it.size(); ++i) {
                    if (i) out += o.item_sep;
                    if (o.has_indent) newline(level + 1);
                    dump(it[i], level + 1);
                }
                if (o.has_indent) newline(level);
                out += ']';
                return;
            }
            case Kind::Dict: {
                auto entries = v.d().entries;
                if (entries.empty()) {
                    out += "{}";
                    return;
                }
                if (o.sort_keys)
                    std::stable_sort(entries.begin(), entries.end(),
                                     [](auto& a, auto& b) { return less(a.first, b.first); });
                out += '{';
                bool first = true;
                for (auto& [k, x] : entries) {
                    if (!first) out += o.item_sep;
                    first = false;
                    if (o.has_indent) newline(level + 1);
                    dump_string(out, key_string(k), o.ensure_ascii);
                    out += o.key_sep;
                    dump(x, level + 1);
                }
                if (o.has_indent) newline(level);
                out += '}';
                return;
            }
            default: raise("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
        }
    }
};

}  // namespace

std::string json_dumps(const Value& v, const DumpOptions& o) {
    Dumper d{o, {}, 0};
    d.dump(v, 0);
    return std::move(d.out);
}

Value from_json(const nlohmann::ordered_json& j, int max_depth) {
    if (max_depth <= 0) raise("RecursionError", "the JSON input is nested too deeply (max_value_depth)");
    switch (j.type()) {
        case nlohmann::json::value_t::null: return Value::none();
        case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
        case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
        case nlohmann::json::value_t::number_unsigned: {
            uint64_t u = j.get<uint64_t>();
            if (u > (uint64_t)INT64_MAX) return Value::number((double)u);
            return Value::integer((int64_t)u);
        }
        case nlohmann::json::value_t::number_float: return Value::number(j.get<double>());
        case nlohmann::json::value_t::string: return Value::string(j.get<std::string>());
        case nlohmann::json::value_t::array: {
            std::vector<Value> items;
            items.reserve(j.size());
            for (auto& x : j) items.push_back(from_json(x, max_depth - 1));
            return Value::new_list(std::move(items));
        }
        case nlohmann::json::value_t::object: {
            Value d = Value::new_dict();
            for (auto it = j.begin(); it != j.end(); ++it) d.d().set(it.key(), from_json(it.value(), max_depth - 1));
            return d;
        }
        default: return Value::none();
    }
}

}  // namespace vega::tmpl
