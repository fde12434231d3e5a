// The built-in tests (`x is defined`, `x is string`, ...), as jinja2 3.1 defines them.
#include <cmath>
#include <unordered_set>

#include "template/builtins.h"
#include "template/renderer.h"
#include "template/text.h"

namespace vega::tmpl {

namespace {

const std::unordered_set<std::string>& test_names() {
    static const std::unordered_set<std::string> names = {
        "defined", "undefined", "none",  "boolean", "false",  "true",   "integer", "float",       "number",
        "string",  "mapping",   "iterable", "sequence", "callable", "sameas", "escaped", "lower", "upper",
        "odd",     "even",      "divisibleby", "eq", "equalto", "==",   "ne",      "!=",          "lt",
        "lessthan", "<",        "le",    "<=",      "gt",     "greaterthan", ">", "ge", ">=", "in", "filter", "test"};
    return names;
}

int64_t int_arg(const Value& v) {
    if (v.kind == Kind::Undefined) v.fail_undefined();
    if (v.kind == Kind::Int) return v.i;
    if (v.kind == Kind::Bool) return v.b;
    if (v.kind == Kind::Float) return float_to_int(v.f);
    raise("TypeError", "unsupported operand type(s) for %: '" + type_name(v) + "' and 'int'");
}

const Value& need_arg(Args& a, size_t i, const char* test) {
    if (a.pos.size() <= i) raise("TypeError", std::string("test '") + test + "' needs an argument");
    return a.pos[i];
}

}  // namespace

bool has_test(const std::string& name) { return test_names().count(name) != 0; }

bool call_test(Renderer& r, const std::string& n, const Value& v, Args& a, bool& out) {
    if (!has_test(n)) return false;
    Kind k = v.kind;
    if (n == "defined") out = k != Kind::Undefined;
    else if (n == "undefined") out = k == Kind::Undefined;
    else if (n == "none") out = k == Kind::None;
    else if (n == "boolean") out = k == Kind::Bool;
    else if (n == "false") out = k == Kind::Bool && !v.b;
    else if (n == "true") out = k == Kind::Bool && v.b;
    else if (n == "integer") out = k == Kind::Int;
    else if (n == "float") out = k == Kind::Float;
    else if (n == "number") out = k == Kind::Int || k == Kind::Float || k == Kind::Bool;
    else if (n == "string") out = k == Kind::String;
    else if (n == "mapping") out = k == Kind::Dict;
    else if (n == "iterable")
        out = k == Kind::String || k == Kind::List || k == Kind::Tuple || k == Kind::Dict || k == Kind::Generator ||
              k == Kind::Undefined;
    else if (n == "sequence")
        out = k == Kind::String || k == Kind::List || k == Kind::Tuple || k == Kind::Dict || k == Kind::Undefined;
    else if (n == "callable") out = (k == Kind::Object && v.obj->callable()) || k == Kind::Undefined;
    else if (n == "sameas") {
        const Value& o = need_arg(a, 0, "sameas");
        if (k != o.kind) out = false;
        else if (k == Kind::None || k == Kind::Undefined) out = true;
        else if (k == Kind::Bool) out = v.b == o.b;
        else if (k == Kind::Int) out = v.i == o.i && v.i >= -5 && v.i <= 256;
        else if (k == Kind::List || k == Kind::Tuple || k == Kind::Generator) out = v.list == o.list;
        else if (k == Kind::Dict) out = v.dict == o.dict;
        else if (k == Kind::Object) out = v.obj == o.obj;
        else out = false;
    } else if (n == "escaped") out = v.is_safe();
    else if (n == "lower" || n == "upper") {
        std::string s = to_str(v);
        bool any = false, ok = true;
        for (char32_t c : text::decode(s)) {
            bool lo = text::to_upper(c) != c, up = text::to_lower(c) != c;
            if (n == "lower" ? up : lo) ok = false;
            any = any || lo || up;
        }
        out = ok && any;
    } else if (n == "odd") out = (int_arg(v) % 2 + 2) % 2 == 1;
    else if (n == "even") out = int_arg(v) % 2 == 0;
    else if (n == "divisibleby") {
        int64_t d = int_arg(need_arg(a, 0, "divisibleby"));
        if (d == 0) raise("ZeroDivisionError", "integer division or modulo by zero");
        if (v.kind == Kind::Float) out = std::fmod(v.f, (double)d) == 0;
        else out = d == -1 || int_arg(v) % d == 0;  // INT64_MIN % -1 traps
    } else if (n == "eq" || n == "equalto" || n == "==") out = equals(v, need_arg(a, 0, "eq"));
    else if (n == "ne" || n == "!=") out = !equals(v, need_arg(a, 0, "ne"));
    else if (n == "in") {
        const Value& seq = need_arg(a, 0, "in");
        Args probe;
        // Reuse the renderer's `in` via a tiny expression-free check.
        bool found = false;
        if (seq.kind == Kind::String) {
            if (v.kind != Kind::String) raise("TypeError", "'in <string>' requires string as left operand, not " + type_name(v));
            found = text::contains(seq.s, v.s);
        } else if (seq.kind == Kind::Dict) {
            found = seq.d().find(v) != nullptr;
        } else {
            for (auto& x : iterate(seq))
                if (equals(x, v)) {
                    found = true;
                    break;
                }
        }
        out = found;
    } else if (n == "filter") out = v.kind == Kind::String && has_filter(v.s);
    else if (n == "test") out = v.kind == Kind::String && has_test(v.s);
    else {
        const Value& o = need_arg(a, 0, n.c_str());
        if (v.kind == Kind::Undefined) v.fail_undefined();
        if (o.kind == Kind::Undefined) o.fail_undefined();
        bool ok_types = (v.is_number() && o.is_number()) || (v.kind == Kind::String && o.kind == Kind::String) ||
                        ((v.kind == Kind::List || v.kind == Kind::Tuple) && v.kind == o.kind);
        if (!ok_types) raise("TypeError", "'" + n + "' not supported between instances of '" + type_name(v) + "' and '" + type_name(o) + "'");
        int c = compare(v, o);
        if (n == "lt" || n == "lessthan" || n == "<") out = c < 0;
        else if (n == "le" || n == "<=") out = c <= 0;
        else if (n == "gt" || n == "greaterthan" || n == ">") out = c > 0;
        else out = c >= 0;
    }
    (void)r;
    return true;
}

}  // namespace vega::tmpl
