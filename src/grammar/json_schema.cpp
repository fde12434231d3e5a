// JSON Schema to GBNF (see json_schema.h for what is honoured).
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "core/utf8.h"

namespace vega::grammar {

namespace {

using json = nlohmann::ordered_json;  // properties keep their declared order

// The JSON primitives every grammar may use; each value ends with optional whitespace.
// Between tokens at most one space: JSON as compact as the model likes, and a model that
// would pad with blanks (a random-weight one does, token after token) cannot.
const char* kPrimitives = R"(ws ::= " "?
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}" ws
array ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" char* "\"" ws
char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]{0,30} ) ( "." [0-9]{1,30} )? ( [eE] [-+]? [0-9]{1,5} )? ws
integer ::= "-"? ( "0" | [1-9] [0-9]{0,30} ) ws
natural ::= ( "0" | [1-9] [0-9]{0,30} ) ws
boolean ::= ( "true" | "false" ) ws
null ::= "null" ws
date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )
time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
hex ::= [0-9a-fA-F]
uuid ::= hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}
)";

// Keywords that only annotate: accepted, ignored.
const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id", "id",
                                            "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                            "format", "contentMediaType", "contentEncoding"};
// Keywords compiled (each under its conditions).
const std::set<std::string> kCompiled = {"type", "nullable", "properties", "required", "additionalProperties", "items",
                                         "minItems", "maxItems", "enum", "const", "minLength", "maxLength", "minimum",
                                         "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
                                         "$ref", "uniqueItems"};

// A GBNF string literal for these bytes.
std::string literal(const std::string& s) {
    std::string o = "\"";
    for (const unsigned char c : s) {
        if (c == '"') o += "\\\"";
        else if (c == '\\') o += "\\\\";
        else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02X", c);
            o += b;
        } else o += char(c);
    }
    return o + "\"";
}

class Compiler {
public:
    explicit Compiler(const json& root) : root_(root) {}

    // The rules (no root) and the expression of the schema's values.
    SchemaRules run() {
        SchemaRules r;
        r.value = visit(root_, "#", "root-value");
        // (An empty body is written "": a newline after ::= does not end a rule.)
        for (const auto& [name, body] : rules_) r.rules += name + " ::= " + (body.empty() ? "\"\"" : body) + "\n";
        r.rules += kPrimitives;
        // A loop of references with no JSON text between them ({"$ref": "#"}, or a
        // definition whose anyOf starts with itself) compiles to a left-recursive grammar,
        // which the matcher cannot run: refused here as a schema error naming the
        // reference, not later by the grammar parser with a rule name the client never wrote.
        try {
            (void)Grammar::parse("root ::= ws " + r.value + "\n" + r.rules);
        } catch (const LeftRecursionError& e) {
            std::string where = "#";
            for (const auto& [path, name] : ref_rules_)
                if (e.rule == name || e.rule.rfind(name + "-", 0) == 0) where = path;
            error("$ref", where,
                  "the references loop back to '" + where +
                      "' before any JSON text (a left-recursive grammar, which constrained sampling cannot follow)");
        }
        return r;
    }

private:
    [[noreturn]] static void error(const std::string& kw, const std::string& where, const std::string& what) {
        throw SchemaError(kw, where, what);
    }

    std::string rule(const std::string& hint, const std::string& body) {
        std::string name;
        for (const char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
        if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) name = "r-" + name;
        std::string n = name;
        for (int k = 2; used_.count(n); ++k) n = name + "-" + std::to_string(k);
        used_.insert(n);
        rules_.push_back({n, body});
        return n;
    }

    // The grammar expression for the values schema s (at path `at`) accepts.
    std::string visit(const json& s, const std::string& at, const std::string& hint) {
        if (++depth_ > 64) error("$ref", at, "schemas nested deeper than 64");
        struct Leave {
            int& d;
            ~Leave() { --d; }
        } leave{depth_};
        if (s.is_boolean()) {
            if (s.get<bool>()) return "value";
            error("false", at, "the schema accepts nothing");
        }
        if (!s.is_object()) error("schema", at, "a schema must be an object or a boolean");
        for (const auto& [k, v] : s.items())
            if (!kAnnotations.count(k) && !kCompiled.count(k)) error(k, at, "not supported");
        // $ref: its siblings are ignored (drafts 4 to 7). enum, const and the combinators
        // stand alone: with other constraints beside them a grammar would need their
        // intersection, which is not built.
        if (s.contains("$ref")) return ref(s, at);
        for (const char* kw : {"const", "enum", "anyOf", "oneOf", "allOf"}) {
            if (!s.contains(kw)) continue;
            for (const auto& [k, v] : s.items())
                if (k != kw && kCompiled.count(k) && k != "nullable")
                    error(kw, at, std::string("'") + kw + "' beside '" + k + "' is not supported");
        }
        if (s.contains("const")) return literal(s["const"].dump()) + " ws";
        if (s.contains("enum")) {
            const json& e = s["enum"];
            if (!e.is_array() || e.empty()) error("enum", at, "must be a non-empty array");
            std::string alts;
            for (const json& v : e) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
            return "( " + alts + " ) ws";
        }
        for (const char* kw : {"anyOf", "oneOf"})
            if (s.contains(kw)) {
                const json& a = s[kw];
                if (!a.is_array() || a.empty()) error(kw, at, "must be a non-empty array");
                std::string alts;
                for (size_t i = 0; i < a.size(); ++i)
                    alts += (i ? " | " : "") + visit(a[i], at + "/" + kw + "/" + std::to_string(i), hint + "-" + std::to_string(i));
                return rule(hint, alts);
            }
        if (s.contains("allOf")) {
            const json& a = s["allOf"];
            if (!a.is_array() || a.size() != 1) error("allOf", at, "only an allOf of one schema is supported");
            return visit(a[0], at + "/allOf/0", hint);
        }
        // The types it may take.
        std::vector<std::string> types;
        if (s.contains("type")) {
            const json& t = s["type"];
            if (t.is_string()) types.push_back(t);
            else if (t.is_array())
                for (const json& x : t) {
                    if (!x.is_string()) error("type", at, "must be a string or an array of strings");
                    types.push_back(x);
                }
            else error("type", at, "must be a string or an array of strings");
        } else {
            // No type: every type is allowed, each keyword constraining only its own
            // (JSON Schema's rule: {"properties": ...} accepts 5 as it is).
            const bool obj = s.contains("properties") || s.contains("additionalProperties") || s.contains("required");
            const bool arr = s.contains("items") || s.contains("minItems") || s.contains("maxItems") ||
                             s.contains("uniqueItems");
            const bool str = s.contains("minLength") || s.contains("maxLength");
            const bool num = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                             s.contains("exclusiveMaximum");
            if (!obj && !arr && !str && !num) return "value";
            if (num) typed(s, "number", at, hint);  // throws: bounds apply to non-integers too
            return rule(hint, (obj ? object(s, at, hint + "-o") : std::string("object")) + " | " +
                                  (arr ? array(s, at, hint + "-a") : std::string("array")) + " | " +
                                  (str ? string(s, at, hint + "-s") : std::string("string")) + " | number | boolean | null");
        }
        if (s.contains("nullable")) {
            if (!s["nullable"].is_boolean()) error("nullable", at, "must be a boolean");
            if (s["nullable"].get<bool>()) types.push_back("null");
        }
        std::string alts;
        for (const std::string& t : types) alts += (alts.empty() ? "" : " | ") + typed(s, t, at, hint);
        return types.size() == 1 ? alts : "( " + alts + " )";
    }

    std::string ref(const json& s, const std::string& at) {
        const json& r = s["$ref"];
        if (!r.is_string()) error("$ref", at, "must be a string");
        const std::string p = r;
        std::string name;
        const json* defs = nullptr;
        for (const char* pre : {"#/$defs/", "#/definitions/"})
            if (p.rfind(pre, 0) == 0) {
                name = p.substr(std::string(pre).size());
                const std::string key = std::string(pre).substr(2, std::string(pre).size() - 3);
                if (root_.contains(key)) defs = &root_[key];
            }
        if (p == "#") {
            if (!ref_rules_.count(p)) {
                const std::string n = "ref-root";
                ref_rules_[p] = n;
                used_.insert(n);
                rules_.push_back({n, ""});
                const size_t slot = rules_.size() - 1;
                rules_[slot].second = visit(root_, "#", n + "-v");
            }
            return ref_rules_[p];
        }
        if (!defs || name.empty() || name.find('/') != std::string::npos || !defs->contains(name))
            error("$ref", at, "'" + p + "' is not a local #/$defs/NAME or #/definitions/NAME of this schema");
        auto it = ref_rules_.find(p);
        if (it != ref_rules_.end()) return it->second;
        // The rule is named before its body is compiled, so recursive references resolve.
        std::string n = "def-";
        for (const char c : name) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
        while (used_.count(n)) n += "-";
        used_.insert(n);
        ref_rules_[p] = n;
        rules_.push_back({n, ""});
        const size_t slot = rules_.size() - 1;
        const std::string body = visit((*defs)[name], p, n + "-v");
        rules_[slot].second = body;
        return n;
    }

    static int64_t as_int(const json& v, const std::string& kw, const std::string& at) {
        if (!v.is_number()) error(kw, at, "must be a number");
        const double d = v.get<double>();
        if (std::fabs(d) > 9e15) error(kw, at, "out of the supported range");
        return int64_t(std::ceil(d));
    }

    std::string typed(const json& s, const std::string& t, const std::string& at, const std::string& hint) {
        if (t == "null") return "null";
        if (t == "boolean") return "boolean";
        if (t == "string") return string(s, at, hint);
        if (t == "integer") return integer(s, at, hint);
        if (t == "number") {
            for (const char* kw : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
                if (s.contains(kw)) error(kw, at, "bounds on 'number' are not supported (on 'integer' they are)");
            return "number";
        }
        if (t == "array") return array(s, at, hint);
        if (t == "object") return object(s, at, hint);
        error("type", at, "unknown type '" + t + "'");
    }

    std::string string(const json& s, const std::string& at, const std::string& hint) {
        if (s.contains("format") && !s["format"].is_string()) error("format", at, "must be a string");
        const std::string fmt = s.value("format", "");
        if (fmt == "date" || fmt == "time" || fmt == "uuid") return rule(hint, "\"\\\"\" " + fmt + " \"\\\"\" ws");
        if (fmt == "date-time") return rule(hint, "\"\\\"\" date \"T\" time \"\\\"\" ws");
        if (!s.contains("minLength") && !s.contains("maxLength")) return "string";
        const int64_t lo = s.contains("minLength") ? as_int(s["minLength"], "minLength", at) : 0;
        const int64_t hi = s.contains("maxLength") ? as_int(s["maxLength"], "maxLength", at) : -1;
        if (lo < 0 || (hi >= 0 && hi < lo)) error("maxLength", at, "minLength/maxLength out of order");
        if (lo > int64_t(kMaxRepeat) || hi > int64_t(kMaxRepeat))
            error(hi > int64_t(kMaxRepeat) ? "maxLength" : "minLength", at, "lengths above 1000 are not supported");
        const std::string rep = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
        return rule(hint, "\"\\\"\" char" + rep + " \"\\\"\" ws");
    }

    std::string integer(const json& s, const std::string& at, const std::string& hint) {
        bool has_lo = false, has_hi = false;
        int64_t lo = 0, hi = 0;
        for (const char* kw : {"exclusiveMinimum", "exclusiveMaximum"})  // draft 4's boolean, draft 6's number
            if (s.contains(kw) && !s[kw].is_boolean() && !s[kw].is_number()) error(kw, at, "must be a boolean or a number");
        if (s.contains("minimum")) {
            has_lo = true, lo = as_int(s["minimum"], "minimum", at);
            if (s.value("exclusiveMinimum", json(false)).is_boolean() && s.value("exclusiveMinimum", false)) ++lo;
        }
        if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number()) {
            const double d = s["exclusiveMinimum"].get<double>();
            const int64_t v = int64_t(std::floor(d)) + 1;
            lo = has_lo ? std::max(lo, v) : v, has_lo = true;
        }
        if (s.contains("maximum")) {
            has_hi = true;
            if (!s["maximum"].is_number()) error("maximum", at, "must be a number");
            hi = int64_t(std::floor(s["maximum"].get<double>()));
            if (s.value("exclusiveMaximum", json(false)).is_boolean() && s.value("exclusiveMaximum", false)) --hi;
        }
        if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number()) {
            const double d = s["exclusiveMaximum"].get<double>();
            const int64_t v = int64_t(std::ceil(d)) - 1;
            hi = has_hi ? std::min(hi, v) : v, has_hi = true;
        }
        if (!has_lo && !has_hi) return "integer";
        if (has_lo && has_hi) {
            if (hi < lo) error("maximum", at, "the range holds no integer");
            if (hi - lo > 1000) error("maximum", at, "integer ranges of more than 1000 values are not supported");
            std::string alts;
            for (int64_t v = lo; v <= hi; ++v) alts += (alts.empty() ? "" : " | ") + literal(std::to_string(v));
            return rule(hint, "( " + alts + " ) ws");
        }
        if (has_lo && !has_hi && lo >= 0) {
            if (lo == 0) return "natural";
            if (lo > 1000) error("minimum", at, "a lower bound above 1000 without an upper bound is not supported");
            // lo..999 listed, or any natural of 4 digits and more.
            std::string alts;
            for (int64_t v = lo; v < 1000; ++v) alts += (alts.empty() ? "" : " | ") + literal(std::to_string(v));
            return rule(hint, "( " + alts + (alts.empty() ? "" : " | ") + "[1-9] [0-9]{3,30} ) ws");
        }
        error(has_lo ? "minimum" : "maximum", at, "this integer bound is not supported (ranges of up to 1000 values, or a lower bound >= 0)");
    }

    std::string array(const json& s, const std::string& at, const std::string& hint) {
        if (s.contains("uniqueItems") && s["uniqueItems"].is_boolean() && s["uniqueItems"].get<bool>())
            error("uniqueItems", at, "not supported");
        std::string item = "value";
        if (s.contains("items")) {
            if (s["items"].is_array()) error("items", at, "tuple items (an array of schemas) are not supported");
            item = visit(s["items"], at + "/items", hint + "-item");
        }
        const int64_t lo = s.contains("minItems") ? as_int(s["minItems"], "minItems", at) : 0;
        const int64_t hi = s.contains("maxItems") ? as_int(s["maxItems"], "maxItems", at) : -1;
        if (lo < 0 || (hi >= 0 && hi < lo)) error("maxItems", at, "minItems/maxItems out of order");
        if (lo > int64_t(kMaxRepeat) || hi > int64_t(kMaxRepeat))
            error(hi > int64_t(kMaxRepeat) ? "maxItems" : "minItems", at, "counts above 1000 are not supported");
        if (hi == 0) return rule(hint, "\"[\" ws \"]\" ws");
        // item, then the rest: lo - 1 .. hi - 1 more (or any number more).
        const std::string more_lo = std::to_string(std::max<int64_t>(0, lo - 1));
        const std::string rep = hi < 0 ? "{" + more_lo + ",}" : "{" + more_lo + "," + std::to_string(hi - 1) + "}";
        const std::string list = item + " ( \",\" ws " + item + " )" + rep;
        return rule(hint, "\"[\" ws " + (lo == 0 ? "( " + list + " )?" : list) + " \"]\" ws");
    }

    std::string object(const json& s, const std::string& at, const std::string& hint) {
        std::vector<std::pair<std::string, std::string>> props;  // key, value expression
        std::set<std::string> required;
        if (s.contains("required")) {
            if (!s["required"].is_array()) error("required", at, "must be an array of strings");
            for (const json& r : s["required"]) {
                if (!r.is_string()) error("required", at, "must be an array of strings");
                required.insert(r.get<std::string>());
            }
        }
        if (s.contains("properties")) {
            if (!s["properties"].is_object()) error("properties", at, "must be an object");
            for (const auto& [k, v] : s["properties"].items())
                props.push_back({k, visit(v, at + "/properties/" + k, hint + "-" + k)});
        }
        // A required key without a schema is still required (any value).
        for (const std::string& r : required) {
            bool found = false;
            for (const auto& p : props) found |= p.first == r;
            if (!found) props.push_back({r, "value"});
        }
        std::string extra;  // the key-value expression of additional properties, "" when none allowed
        const bool any_extra = !s.contains("additionalProperties") || s["additionalProperties"] == json(true);
        if (!any_extra && !s["additionalProperties"].is_object() && s["additionalProperties"] != json(false))
            error("additionalProperties", at, "must be a boolean or a schema");
        if (any_extra || s["additionalProperties"].is_object()) {
            // An additional key is any string but a declared one (else {"age": "x"} would
            // pass an integer "age" as an additional property).
            std::vector<std::string> keys;
            for (const auto& p : props) keys.push_back(p.first);
            const std::string key = keys.empty() ? "string" : other_key(keys, at, hint + "-key");
            extra = key + " \":\" ws " +
                    (any_extra ? std::string("value")
                               : visit(s["additionalProperties"], at + "/additionalProperties", hint + "-extra"));
        }
        // A_i: nothing written yet, properties i.. left; B_i: something written.
        const size_t n = props.size();
        std::vector<std::string> A(n + 1), B(n + 1);
        const std::string base = hint;
        A[n] = rule(base + "-a", extra.empty() ? "" : "( " + extra + " ( \",\" ws " + extra + " )* )?");
        B[n] = rule(base + "-b", extra.empty() ? "" : "( \",\" ws " + extra + " )*");
        for (size_t i = n; i-- > 0;) {
            const std::string kv = literal(json(props[i].first).dump()) + " ws \":\" ws " + props[i].second;
            const bool req = required.count(props[i].first) > 0;
            B[i] = rule(base + "-b", "\",\" ws " + kv + " " + B[i + 1] + (req ? "" : " | " + B[i + 1]));
            A[i] = rule(base + "-a", kv + " " + B[i + 1] + (req ? "" : " | " + A[i + 1]));
        }
        return rule(base, "\"{\" ws " + A[0] + " \"}\" ws");
    }

    // A JSON string (with its quotes and trailing ws) that is none of `keys`: over the
    // trie of the keys' characters, at each node the string may end (unless a key ends
    // there), go on with a character no key continues with, or follow a key's next
    // character. Keys must be written as themselves in JSON (no quote, backslash or
    // control character); an escape in the generated key (\u0061 for 'a') is not
    // compared.
    std::string other_key(const std::vector<std::string>& keys, const std::string& at, const std::string& hint) {
        struct Node {
            std::map<char32_t, int> next;
            bool end = false;
        };
        std::vector<Node> trie(1);
        for (const std::string& k : keys) {
            int n = 0;
            for (size_t i = 0; i < k.size();) {
                const unsigned char c = static_cast<unsigned char>(k[i]);
                if (c == '"' || c == '\\' || c < 0x20)
                    error("additionalProperties", at, "beside a property name with a quote, backslash or control character");
                const int len = std::max(1, utf8_sequence_length(c));  // (JSON strings are valid UTF-8)
                char32_t cp = utf8_lead_bits(c, len);
                for (int j = 1; j < len && i + size_t(j) < k.size(); ++j) cp = (cp << 6) | (static_cast<unsigned char>(k[i + size_t(j)]) & 0x3F);
                i += size_t(len);
                auto it = trie[size_t(n)].next.find(cp);
                if (it == trie[size_t(n)].next.end()) {
                    trie.push_back({});
                    it = trie[size_t(n)].next.emplace(cp, int(trie.size()) - 1).first;
                }
                n = it->second;
            }
            trie[size_t(n)].end = true;
        }
        auto cls = [](char32_t c) {
            char b[16];
            std::snprintf(b, sizeof b, "\\U%08X", unsigned(c));
            return std::string(b);
        };
        const std::string tail = rule(hint + "-tail", "char* \"\\\"\" ws");  // any rest, the closing quote
        std::vector<std::string> names(trie.size());
        for (size_t n = trie.size(); n-- > 0;) names[n] = "";  // filled bottom-up below
        std::function<std::string(int)> build = [&](int n) -> std::string {
            const Node& node = trie[size_t(n)];
            std::string alts;
            auto add = [&](const std::string& a) { alts += (alts.empty() ? "" : " | ") + a; };
            if (!node.end) add("\"\\\"\" ws");
            std::string other = "[^\"\\\\\\x00-\\x1F";
            for (const auto& [c, child] : node.next) other += cls(c);
            add(other + "] " + tail);
            add("\"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) " + tail);
            for (const auto& [c, child] : node.next) add("[" + cls(c) + "] " + build(child));
            return rule(hint, alts);
        };
        return "\"\\\"\" " + build(0);
    }

    const json& root_;
    std::vector<std::pair<std::string, std::string>> rules_;
    std::set<std::string> used_ = {"root", "ws", "value", "object", "array", "string", "char", "number", "integer",
                                   "natural", "boolean", "null", "date", "time", "hex", "uuid"};
    std::map<std::string, std::string> ref_rules_;
    int depth_ = 0;
};

}  // namespace

SchemaRules json_schema_rules(const nlohmann::ordered_json& schema) { return Compiler(schema).run(); }

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
    const SchemaRules r = json_schema_rules(schema);
    return "root ::= ws " + r.value + "\n" + r.rules;
}

std::string json_object_gbnf() { return std::string("root ::= ws object\n") + kPrimitives; }

}  // namespace vega::grammar
