#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/text.h"

namespace vega::tmpl {

void raise(const std::string& kind, const std::string& msg) { throw RenderError{kind, msg, 0}; }

Value Value::undefined(std::string hint, std::string exc) {
    Value v;
    v.kind = Kind::Undefined;
    v.s = std::move(hint);
    v.undef_exc = std::move(exc);
    return v;
}
Value Value::none() {
    Value v;
    v.kind = Kind::None;
    return v;
}
Value Value::boolean(bool x) {
    Value v;
    v.kind = Kind::Bool;
    v.b = x;
    return v;
}
Value Value::integer(int64_t x) {
    Value v;
    v.kind = Kind::Int;
    v.i = x;
    return v;
}
Value Value::number(double x) {
    Value v;
    v.kind = Kind::Float;
    v.f = x;
    return v;
}
Value Value::string(std::string x, bool safe) {
    charge_bytes(x.size());
    Value v;
    v.kind = Kind::String;
    v.s = std::move(x);
    v.b = safe;
    return v;
}
Value Value::new_list(std::vector<Value> items) {
    Value v;
    v.kind = Kind::List;
    charge_items(items.size());
    v.list = std::make_shared<ListData>();
    v.list->v = std::move(items);
    return v;
}
Value Value::new_tuple(std::vector<Value> items) {
    Value v = new_list(std::move(items));
    v.kind = Kind::Tuple;
    return v;
}
Value Value::new_generator(std::vector<Value> items) {
    Value v = new_list(std::move(items));
    v.kind = Kind::Generator;
    return v;
}
Value Value::new_dict() {
    Value v;
    v.kind = Kind::Dict;
    v.dict = std::make_shared<DictData>();
    return v;
}
Value Value::object(std::shared_ptr<Object> o) {
    Value v;
    v.kind = Kind::Object;
    v.obj = std::move(o);
    return v;
}

const std::vector<Value>& Value::items() const { return list->v; }
std::vector<Value>& Value::items_mut() { return list->v; }

void Value::fail_undefined() const {
    raise(undef_exc.empty() ? "UndefinedError" : undef_exc, s.empty() ? "value is undefined" : s);
}

// ---- freeing nested values ----
namespace {

thread_local std::vector<Value>* t_doomed = nullptr;

// Calls each(take) where take(v) moves v away if it holds a container or object; the first
// (outermost) caller on the thread then frees those one by one, and the destructors they
// run only add to its queue.
template <class Each>
void free_all(Each each) {
    auto take = [](Value& v) {
        if (v.list || v.dict || v.obj) t_doomed->push_back(std::move(v));
    };
    if (t_doomed) {
        each(take);
        return;
    }
    std::vector<Value> doomed;
    t_doomed = &doomed;
    each(take);
    while (!doomed.empty()) {
        Value v = std::move(doomed.back());
        doomed.pop_back();
    }  // v's destructor runs here and may queue more
    t_doomed = nullptr;
}

}  // namespace

void free_nested(std::vector<Value>& items) {
    free_all([&](auto& take) {
        for (auto& v : items) take(v);
    });
}

// ---- DictData ----
DictData::~DictData() {
    free_all([&](auto& take) {
        for (auto& [k, v] : entries) take(k), take(v);
    });
}

DictData& DictData::operator=(DictData&& o) {
    if (this != &o) {
        free_all([&](auto& take) {
            for (auto& [k, v] : entries) take(k), take(v);
        });
        entries = std::move(o.entries);
        index = std::move(o.index);
    }
    return *this;
}

const Value* DictData::find(const std::string& key) const {
    auto it = index.find(key);
    return it == index.end() ? nullptr : &entries[it->second].second;
}

const Value* DictData::find(const Value& key) const {
    if (key.kind == Kind::String) return find(key.s);
    std::string hk = hash_key(key);
    for (auto& e : entries)
        if (e.first.kind != Kind::String && hash_key(e.first) == hk) return &e.second;
    return nullptr;
}

void DictData::set(const Value& key, Value v) {
    if (key.kind == Kind::String) {
        auto it = index.find(key.s);
        if (it != index.end()) {
            entries[it->second].second = std::move(v);
            return;
        }
        index.emplace(key.s, entries.size());
        entries.emplace_back(Value::string(key.s), std::move(v));
        return;
    }
    std::string hk = hash_key(key);
    for (auto& e : entries)
        if (e.first.kind != Kind::String && hash_key(e.first) == hk) {
            e.second = std::move(v);
            return;
        }
    entries.emplace_back(key, std::move(v));
}

// ---- Object ----
Value Object::getattr(const std::string& name) {
    return Value::undefined("'" + type_name() + " object' has no attribute '" + name + "'");
}
Value Object::call(Renderer&, Args&) { raise("TypeError", "'" + type_name() + "' object is not callable"); }

Value make_function(std::string name, std::function<Value(Renderer&, Args&)> fn) {
    return Value::object(std::make_shared<Function>(std::move(name), std::move(fn)));
}

Value Namespace::getattr(const std::string& name) {
    if (const Value* v = attrs.find(name)) return *v;
    return Value::undefined("'Namespace object' has no attribute '" + name + "'");
}

std::string Namespace::repr() const {
    std::string s = "<Namespace {";
    bool first = true;
    for (auto& [k, v] : attrs.entries) {
        if (!first) s += ", ";
        first = false;
        s += tmpl::repr(k) + ": " + tmpl::repr(v);
    }
    return s + "}>";
}

// ---- semantics ----
bool truthy(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined:
        case Kind::None: return false;
        case Kind::Bool: return v.b;
        case Kind::Int: return v.i != 0;
        case Kind::Float: return v.f != 0;
        case Kind::String: return !v.s.empty();
        case Kind::List:
        case Kind::Tuple: return !v.items().empty();
        case Kind::Dict: return v.d().size() != 0;
        case Kind::Generator:
        case Kind::Object: return true;
    }
    return false;
}

static double num(const Value& v) { return v.kind == Kind::Float ? v.f : v.kind == Kind::Int ? (double)v.i : (double)v.b; }

bool equals(const Value& a, const Value& b) {
    NestGuard g;
    if (a.is_number() && b.is_number()) {
        if (a.kind != Kind::Float && b.kind != Kind::Float) {
            int64_t x = a.kind == Kind::Int ? a.i : a.b, y = b.kind == Kind::Int ? b.i : b.b;
            return x == y;
        }
        return num(a) == num(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case Kind::Undefined:
        case Kind::None: return true;
        case Kind::String:
            if (a.s.size() != b.s.size()) return false;
            charge_bytes(a.s.size());
            return a.s == b.s;
        case Kind::List:
        case Kind::Tuple: {
            auto &x = a.items(), &y = b.items();
            if (x.size() != y.size()) return false;
            for (size_t k = 0; k < x.size(); ++k)
                if (!equals(x[k], y[k])) return false;
            return true;
        }
        case Kind::Dict: {
            if (a.d().size() != b.d().size()) return false;
            for (auto& [k, v] : a.d().entries) {
                const Value* o = b.d().find(k);
                if (!o || !equals(v, *o)) return false;
            }
            return true;
        }
        case Kind::Generator: return a.list == b.list;
        case Kind::Object: return a.obj == b.obj;
        default: return false;
    }
}

int compare(const Value& a, const Value& b) {
    NestGuard g;
    if (a.is_number() && b.is_number()) {
        if (a.kind != Kind::Float && b.kind != Kind::Float) {
            int64_t x = a.kind == Kind::Int ? a.i : a.b, y = b.kind == Kind::Int ? b.i : b.b;
            return x < y ? -1 : x > y ? 1 : 0;
        }
        double x = num(a), y = num(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.kind == Kind::String && b.kind == Kind::String) {
        charge_bytes(std::min(a.s.size(), b.s.size()));
        int c = a.s.compare(b.s);
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if ((a.kind == Kind::List || a.kind == Kind::Tuple) && a.kind == b.kind) {
        auto &x = a.items(), &y = b.items();
        for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
            if (equals(x[k], y[k])) continue;
            return compare(x[k], y[k]);
        }
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    if (a.is_undefined()) a.fail_undefined();
    if (b.is_undefined()) b.fail_undefined();
    raise("TypeError", "'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool less(const Value& a, const Value& b) { return compare(a, b) < 0; }

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    // sci: [-]D[.DDD]e[+-]XX
    bool neg = sci[0] == '-';
    if (neg) sci.erase(0, 1);
    size_t epos = sci.find('e');
    std::string mant = sci.substr(0, epos);
    int exp = std::stoi(sci.substr(epos + 1));
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    int decpt = exp + 1;  // value = 0.digits * 10^decpt
    std::string out;
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out = "0." + std::string(-decpt, '0') + digits;
        } else if ((size_t)decpt >= digits.size()) {
            out = digits + std::string(decpt - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, decpt) + "." + digits.substr(decpt);
        }
    } else {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        int e = decpt - 1;
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        out += eb;
    }
    return neg ? "-" + out : out;
}

static std::string repr_string(const std::string& s) {
    bool has_sq = s.find('\'') != std::string::npos, has_dq = s.find('"') != std::string::npos;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    std::string out(1, q);
    for (char32_t c : text::decode(s)) {
        if (c == (char32_t)q || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", (unsigned)c);
            out += b;
        } else if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f) ||
                   c == 0x3000 || c == 0xfeff || (c >= 0xd800 && c <= 0xf8ff) || c == 0x1680) {
            if (c >= 0x2000 && c <= 0x200a && false) {
            }
            char b[12];
            std::snprintf(b, sizeof b, "\\u%04x", (unsigned)c);
            out += b;
        } else {
            text::append_utf8(out, c);
        }
    }
    out += q;
    return out;
}

std::string repr(const Value& v) {
    NestGuard g;  // also bounds a namespace that holds itself
    switch (v.kind) {
        case Kind::String: return repr_string(v.s);
        case Kind::List:
        case Kind::Tuple: {
            std::string s = v.kind == Kind::List ? "[" : "(";
            auto& it = v.items();
            for (size_t k = 0; k < it.size(); ++k) {
                if (k) s += ", ";
                s += repr(it[k]);
            }
            if (v.kind == Kind::Tuple && it.size() == 1) s += ",";
            return s + (v.kind == Kind::List ? "]" : ")");
        }
        case Kind::Dict: {
            std::string s = "{";
            bool first = true;
            for (auto& [k, x] : v.d().entries) {
                if (!first) s += ", ";
                first = false;
                s += repr(k) + ": " + repr(x);
            }
            return s + "}";
        }
        case Kind::Undefined: return "Undefined";
        default: return to_str(v);
    }
}

std::string to_str(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return "";
        case Kind::None: return "None";
        case Kind::Bool: return v.b ? "True" : "False";
        case Kind::Int: return std::to_string(v.i);
        case Kind::Float: return float_repr(v.f);
        case Kind::String: return v.s;
        case Kind::Generator: return "<generator object at 0x7f0000000000>";
        case Kind::Object: return v.obj->repr();
        default: return repr(v);
    }
}

std::string type_name(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return "Undefined";
        case Kind::None: return "NoneType";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::List: return "list";
        case Kind::Tuple: return "tuple";
        case Kind::Dict: return "dict";
        case Kind::Generator: return "generator";
        case Kind::Object: return v.obj->type_name();
    }
    return "object";
}

std::string hash_key(const Value& v) {
    NestGuard g;
    charge_bytes(v.s.size());
    switch (v.kind) {
        case Kind::Bool: return "n" + std::to_string((int)v.b);
        case Kind::Int: return "n" + std::to_string(v.i);
        case Kind::Float:
            if (v.f == std::floor(v.f) && std::fabs(v.f) < 9e18) return "n" + std::to_string((int64_t)v.f);
            return "f" + float_repr(v.f);
        case Kind::String: return "s" + v.s;
        case Kind::None: return "N";
        case Kind::Tuple: {
            std::string s = "t(";
            for (auto& x : v.items()) s += hash_key(x) + ",";
            return s + ")";
        }
        case Kind::List:
        case Kind::Dict: raise("TypeError", "unhashable type: '" + type_name(v) + "'");
        default: return "o" + repr(v);
    }
}

int64_t length(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return 0;
        case Kind::String: return (int64_t)text::count_code_points(v.s);
        case Kind::List:
        case Kind::Tuple: return (int64_t)v.items().size();
        case Kind::Dict: return (int64_t)v.d().size();
        default: raise("TypeError", "object of type '" + type_name(v) + "' has no len()");
    }
}

int64_t float_to_int(double d) {
    if (std::isnan(d)) raise("ValueError", "cannot convert float NaN to integer");
    if (std::isinf(d)) raise("OverflowError", "cannot convert float infinity to integer");
    d = std::trunc(d);
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        raise("OverflowError", "integer " + float_repr(d) + " does not fit in 64 bits");
    return (int64_t)d;
}

bool parse_int64(const std::string& digits, int64_t& out) {
    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return r.ec == std::errc() && r.ptr == digits.data() + digits.size();
}

std::vector<Value> iterate(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined:
            if (!v.undef_exc.empty()) v.fail_undefined();
            return {};
        case Kind::String: {
            check_items(text::count_code_points(v.s));
            std::vector<Value> out;
            for (char32_t c : text::decode(v.s)) {
                std::string s;
                text::append_utf8(s, c);
                out.push_back(Value::string(std::move(s)));
            }
            return out;
        }
        case Kind::List:
        case Kind::Tuple:
        case Kind::Generator: charge_items(v.items().size()); return v.items();
        case Kind::Dict: {
            charge_items(v.d().size());
            std::vector<Value> out;
            for (auto& e : v.d().entries) out.push_back(e.first);
            return out;
        }
        default: raise("TypeError", "'" + type_name(v) + "' object is not iterable");
    }
}

}  // namespace vega::tmpl
