// Methods of str, dict and list values, Python string formatting and argument reading.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "template/builtins.h"
#include "template/renderer.h"
#include "template/text.h"

namespace vega::tmpl {

// ---- ArgReader ----
ArgReader::ArgReader(Args& a, const char* fname, std::initializer_list<const char*> names)
    : vals_(names.size()), have_(names.size(), false) {
    if (a.pos.size() > names.size())
        raise("TypeError", std::string(fname) + "() takes at most " + std::to_string(names.size()) + " arguments (" +
                               std::to_string(a.pos.size()) + " given)");
    for (size_t i = 0; i < a.pos.size(); ++i) {
        vals_[i] = a.pos[i];
        have_[i] = true;
    }
    for (auto& [k, v] : a.kw) {
        size_t i = 0;
        for (const char* n : names) {
            if (k == n) break;
            ++i;
        }
        if (i == names.size()) raise("TypeError", std::string(fname) + "() got an unexpected keyword argument '" + k + "'");
        if (have_[i]) raise("TypeError", std::string(fname) + "() got multiple values for argument '" + k + "'");
        vals_[i] = v;
        have_[i] = true;
    }
}

bool ArgReader::get_bool(size_t i, bool def) const { return have_[i] ? truthy(vals_[i]) : def; }

namespace {
// Reads one more decimal digit into n, saturating at cap (format widths and precisions
// are parsed from template text of any length).
template <class T>
void add_digit(T& n, int digit, T cap) {
    n = n > (cap - digit) / 10 ? cap : n * 10 + digit;
}
constexpr int64_t kMaxWidth = int64_t(1) << 40;
constexpr int kMaxPrecision = 1 << 20;
}  // namespace

int64_t ArgReader::get_int(size_t i, int64_t def) const {
    if (!have_[i] || vals_[i].kind == Kind::None) return def;
    const Value& v = vals_[i];
    if (v.kind == Kind::Int) return v.i;
    if (v.kind == Kind::Bool) return v.b;
    if (v.kind == Kind::Float) return float_to_int(v.f);
    raise("TypeError", "'" + type_name(v) + "' object cannot be interpreted as an integer");
}

std::string ArgReader::get_str(size_t i, const std::string& def) const {
    if (!have_[i]) return def;
    return to_str(vals_[i]);
}

namespace {

const std::string& need_str(const Value& v, const char* what) {
    if (v.kind != Kind::String)
        raise("TypeError", std::string(what) + " arg must be None or str, not " + type_name(v));
    return v.s;
}

Value str_list(const std::vector<std::string>& parts) {
    std::vector<Value> v;
    v.reserve(parts.size());
    for (auto& p : parts) v.push_back(Value::string(p));
    return Value::new_list(std::move(v));
}

std::string pad(const std::string& s, int64_t width, char32_t fill, int align /*-1 left, 0 center, 1 right*/) {
    int64_t n = (int64_t)text::count_code_points(s);
    if (width <= n) return s;
    int64_t total = width - n, left = 0;
    if (align == 1) left = total;
    if (align == 0) left = total / 2 + (total & width & 1);
    std::string f;
    text::append_utf8(f, fill);
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += f;
    out += s;
    for (int64_t i = 0; i < total - left; ++i) out += f;
    return out;
}

// str.format with {}, {0}, {name}, {name.attr}, {0[key]} and simple format specs.
std::string str_format(Renderer& r, const std::string& fmt, Args& a);

std::string apply_spec(const Value& v, const std::string& spec, size_t max_size) {
    if (spec.empty()) return to_str(v);
    // [[fill]align][sign][0][width][.precision][type]
    size_t i = 0;
    char32_t fill = ' ';
    int align = -2;
    auto cps = text::decode(spec);
    auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
    if (cps.size() >= 2 && is_align(cps[1])) {
        fill = cps[0];
        align = cps[1] == '<' ? -1 : cps[1] == '>' ? 1 : 0;
        i = 2;
    } else if (!cps.empty() && is_align(cps[0])) {
        align = cps[0] == '<' ? -1 : cps[0] == '>' ? 1 : 0;
        i = 1;
    }
    std::string sign;
    if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) sign = std::string(1, (char)cps[i++]);
    bool zero = false;
    if (i < cps.size() && cps[i] == '0') {
        zero = true;
        ++i;
    }
    int64_t width = 0;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') add_digit<int64_t>(width, int(cps[i++] - '0'), kMaxWidth);
    // A fill character is up to 4 bytes.
    if (width > 0 && (uint64_t)width > max_size / 4)
        raise("OutputLimitError", "format width " + std::to_string(width) + " exceeds the output limit");
    int prec = -1;
    if (i < cps.size() && cps[i] == '.') {
        ++i;
        prec = 0;
        while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') add_digit(prec, int(cps[i++] - '0'), kMaxPrecision);
    }
    char type = i < cps.size() ? (char)cps[i] : 0;
    bool float_type = type != 0 && std::strchr("fFeEgG%", type);
    if (v.kind == Kind::Float && prec >= 0 && type != 0 && !float_type)  // printf would read a double as something else
        raise("ValueError", "Unknown format code '" + std::string(1, type) + "' for object of type 'float'");
    std::string body;
    if (float_type || (v.kind == Kind::Float && prec >= 0)) {
        double d = v.kind == Kind::Float ? v.f : (double)(v.kind == Kind::Bool ? v.b : v.i);
        if (!v.is_number()) raise("ValueError", "Unknown format code '" + std::string(1, type) + "' for object of type '" + type_name(v) + "'");
        char b[512];  // 309 integer digits, 100 decimals
        std::string f = "%" + sign + "." + std::to_string(prec < 0 ? 6 : std::min(prec, 100)) + (type == '%' ? 'f' : type ? type : 'g');
        std::snprintf(b, sizeof b, f.c_str(), type == '%' ? d * 100 : d);
        body = b;
        if (type == '%') body += '%';
    } else if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
        if (v.kind != Kind::Int && v.kind != Kind::Bool) raise("ValueError", "Unknown format code '" + std::string(1, type) + "' for object of type '" + type_name(v) + "'");
        int64_t x = v.kind == Kind::Int ? v.i : v.b;
        char b[128];
        if (type == 'b') {
            uint64_t u = x < 0 ? -(uint64_t)x : x;
            std::string bits;
            do {
                bits.insert(bits.begin(), char('0' + (u & 1)));
                u >>= 1;
            } while (u);
            body = (x < 0 ? "-" : sign == "+" ? "+" : "") + bits;
        } else {
            std::string f = "%" + sign + (type == 'd' ? "lld" : type == 'x' ? "llx" : type == 'X' ? "llX" : "llo");
            std::snprintf(b, sizeof b, f.c_str(), (long long)x);
            body = b;
        }
    } else {
        body = to_str(v);
        if (prec >= 0) {
            auto c = text::decode(body);
            if ((int64_t)c.size() > prec) c.resize(prec);
            body = text::encode(c);
        }
    }
    if (align == -2) align = v.is_number() ? 1 : -1;
    if (zero && align == 1 && fill == ' ' && v.is_number()) {
        bool neg = !body.empty() && (body[0] == '-' || body[0] == '+');
        std::string digits = neg ? body.substr(1) : body;
        int64_t need = width - (int64_t)body.size();
        if (need > 0) digits = std::string(need, '0') + digits;
        return (neg ? body.substr(0, 1) : "") + digits;
    }
    return pad(body, width, fill, align);
}

std::string str_format(Renderer& r, const std::string& fmt, Args& a) {
    std::string out;
    size_t auto_idx = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '{') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
                out += '{';
                ++i;
                continue;
            }
            size_t e = fmt.find('}', i);
            if (e == std::string::npos) raise("ValueError", "Single '{' encountered in format string");
            std::string field = fmt.substr(i + 1, e - i - 1);
            std::string spec;
            size_t colon = field.find(':');
            if (colon != std::string::npos) {
                spec = field.substr(colon + 1);
                field = field.substr(0, colon);
            }
            size_t bang = field.find('!');
            std::string conv;
            if (bang != std::string::npos) {
                conv = field.substr(bang + 1);
                field = field.substr(0, bang);
            }
            size_t p = 0;
            while (p < field.size() && field[p] != '.' && field[p] != '[') ++p;
            std::string head = field.substr(0, p);
            Value v;
            if (head.empty()) {
                if (auto_idx >= a.pos.size()) raise("IndexError", "Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
                v = a.pos[auto_idx++];
            } else if (std::all_of(head.begin(), head.end(), ::isdigit)) {
                int64_t k = 0;
                if (!parse_int64(head, k) || (size_t)k >= a.pos.size()) raise("IndexError", "Replacement index " + head + " out of range for positional args tuple");
                v = a.pos[k];
            } else {
                bool found = false;
                for (auto& [kk, vv] : a.kw)
                    if (kk == head) {
                        v = vv;
                        found = true;
                    }
                if (!found) raise("KeyError", "'" + head + "'");
            }
            while (p < field.size()) {
                if (field[p] == '.') {
                    size_t q = p + 1;
                    while (q < field.size() && field[q] != '.' && field[q] != '[') ++q;
                    v = r.getattr(v, field.substr(p + 1, q - p - 1));
                    p = q;
                } else {
                    size_t q = field.find(']', p);
                    if (q == std::string::npos) raise("ValueError", "Missing ']' in format string");
                    std::string key = field.substr(p + 1, q - p - 1);
                    int64_t index = 0;
                    Value kv = !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) && parse_int64(key, index)
                                   ? Value::integer(index)
                                   : Value::string(key);
                    v = r.getitem(v, kv);
                    p = q + 1;
                }
            }
            if (conv == "r") v = Value::string(repr(v));
            out += apply_spec(v, spec, r.limits().max_output);
            r.check_string_size(out.size());
            i = e;
        } else if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                out += '}';
                ++i;
                continue;
            }
            raise("ValueError", "Single '}' encountered in format string");
        } else {
            out += c;
        }
    }
    return out;
}

Value unsafe(const Value& self, const std::string& name) {
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(self) + "' object is unsafe.",
                            "SecurityError");
}

bool string_method(const Value& self, const std::string& name, Value& out) {
    using F = std::function<Value(Renderer&, Args&)>;
    charge_bytes(self.s.size() * 2);  // the copies below (here and in the closure)
    std::string s = self.s;
    F f;
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        bool l = name != "rstrip", rr = name != "lstrip";
        f = [s, l, rr, name](Renderer&, Args& a) {
            ArgReader ar(a, name.c_str(), {"chars"});
            if (ar.has(0) && ar.get(0).kind != Kind::None)
                return Value::string(text::strip(s, l, rr, true, need_str(ar.get(0), name.c_str())));
            return Value::string(text::strip(s, l, rr));
        };
    } else if (name == "split" || name == "rsplit") {
        bool right = name == "rsplit";
        f = [s, right, name](Renderer&, Args& a) {
            ArgReader ar(a, name.c_str(), {"sep", "maxsplit"});
            bool has_sep = ar.has(0) && ar.get(0).kind != Kind::None;
            std::string sep = has_sep ? need_str(ar.get(0), "sep") : "";
            if (has_sep && sep.empty()) raise("ValueError", "empty separator");
            return str_list(text::split(s, has_sep, sep, ar.get_int(1, -1), right));
        };
    } else if (name == "splitlines") {
        f = [s](Renderer&, Args& a) {
            ArgReader ar(a, "splitlines", {"keepends"});
            return str_list(text::splitlines(s, ar.get_bool(0, false)));
        };
    } else if (name == "replace") {
        f = [s](Renderer& r, Args& a) {
            ArgReader ar(a, "replace", {"old", "new", "count"});
            if (!ar.has(0) || !ar.has(1)) raise("TypeError", "replace expected at least 2 arguments");
            std::string res = text::replace(s, need_str(ar.get(0), "replace"), need_str(ar.get(1), "replace"),
                                            ar.get_int(2, -1), r.limits().max_output);
            r.check_string_size(res.size());
            return Value::string(res);
        };
    } else if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase") {
        f = [s, name](Renderer&, Args&) {
            if (name == "upper") return Value::string(text::upper(s));
            if (name == "lower") return Value::string(text::lower(s));
            if (name == "title") return Value::string(text::title(s));
            if (name == "swapcase") return Value::string(text::swapcase(s));
            return Value::string(text::capitalize(s));
        };
    } else if (name == "startswith" || name == "endswith") {
        bool start = name == "startswith";
        f = [s, start](Renderer&, Args& a) {
            if (a.pos.empty()) raise("TypeError", "startswith takes at least 1 argument");
            const Value& p = a.pos[0];
            std::vector<Value> cands = p.kind == Kind::Tuple ? p.items() : std::vector<Value>{p};
            for (auto& c : cands) {
                if (c.kind != Kind::String)
                    raise("TypeError", std::string(start ? "startswith" : "endswith") +
                                           " first arg must be str or a tuple of str, not " + type_name(c));
                if (start ? text::starts_with(s, c.s) : text::ends_with(s, c.s)) return Value::boolean(true);
            }
            return Value::boolean(false);
        };
    } else if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
        f = [s, name](Renderer&, Args& a) {
            if (a.pos.empty()) raise("TypeError", name + " takes at least 1 argument");
            int64_t r = text::find(s, need_str(a.pos[0], name.c_str()), name[0] == 'r');
            if (r < 0 && name.find("index") != std::string::npos) raise("ValueError", "substring not found");
            return Value::integer(r);
        };
    } else if (name == "count") {
        f = [s](Renderer&, Args& a) {
            if (a.pos.empty()) raise("TypeError", "count takes at least 1 argument");
            return Value::integer(text::count(s, need_str(a.pos[0], "count")));
        };
    } else if (name == "join") {
        f = [s](Renderer& r, Args& a) {
            if (a.pos.size() != 1) raise("TypeError", "join() takes exactly one argument");
            std::string out;
            bool first = true;
            for (auto& v : iterate(a.pos[0])) {
                if (v.kind != Kind::String) raise("TypeError", "sequence item: expected str instance, " + type_name(v) + " found");
                if (!first) out += s;
                first = false;
                out += v.s;
                r.check_string_size(out.size());
            }
            return Value::string(out);
        };
    } else if (name == "format") {
        f = [s](Renderer& r, Args& a) { return Value::string(str_format(r, s, a)); };
    } else if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" ||
               name == "isalnum" || name == "isspace" || name == "islower" || name == "isupper") {
        f = [s, name](Renderer&, Args&) {
            auto cps = text::decode(s);
            if (name == "islower" || name == "isupper") {
                bool any = false;
                for (char32_t c : cps) {
                    bool lo = text::to_upper(c) != c, up = text::to_lower(c) != c;
                    if (name == "islower" ? up : lo) return Value::boolean(false);
                    any = any || lo || up;
                }
                return Value::boolean(any);
            }
            if (cps.empty()) return Value::boolean(false);
            for (char32_t c : cps) {
                bool ok = name == "isspace" ? text::is_space(c)
                          : name == "isalpha" ? text::is_alpha(c)
                          : name == "isalnum" ? (text::is_alpha(c) || text::is_digit(c))
                                              : text::is_digit(c);
                if (!ok) return Value::boolean(false);
            }
            return Value::boolean(true);
        };
    } else if (name == "center" || name == "ljust" || name == "rjust") {
        f = [s, name](Renderer& r, Args& a) {
            ArgReader ar(a, name.c_str(), {"width", "fillchar"});
            std::string fc = ar.get_str(1, " ");
            auto c = text::decode(fc);
            int64_t w = ar.get_int(0, 0);
            if (w > 0 && (uint64_t)w > r.limits().max_output / 4)  // a fill character is up to 4 bytes
                r.check_string_size(SIZE_MAX);
            return Value::string(pad(s, w, c.empty() ? U' ' : c[0],
                                     name == "center" ? 0 : name == "ljust" ? -1 : 1));
        };
    } else if (name == "zfill") {
        f = [s](Renderer& r, Args& a) {
            ArgReader ar(a, "zfill", {"width"});
            int64_t w = ar.get_int(0, 0), n = (int64_t)text::count_code_points(s);
            if (w <= n) return Value::string(s);
            r.check_string_size((uint64_t)(w - n) > r.limits().max_output ? SIZE_MAX : s.size() + size_t(w - n));
            bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
            return Value::string((sign ? s.substr(0, 1) : "") + std::string(w - n, '0') + (sign ? s.substr(1) : s));
        };
    } else if (name == "removeprefix" || name == "removesuffix") {
        bool pre = name == "removeprefix";
        f = [s, pre](Renderer&, Args& a) {
            if (a.pos.size() != 1) raise("TypeError", "expected one argument");
            const std::string& p = need_str(a.pos[0], "remove");
            if (pre && text::starts_with(s, p)) return Value::string(s.substr(p.size()));
            if (!pre && text::ends_with(s, p)) return Value::string(s.substr(0, s.size() - p.size()));
            return Value::string(s);
        };
    } else if (name == "partition" || name == "rpartition") {
        bool right = name == "rpartition";
        f = [s, right](Renderer&, Args& a) {
            if (a.pos.size() != 1) raise("TypeError", "expected one argument");
            const std::string& sep = need_str(a.pos[0], "partition");
            size_t p = right ? text::rfind_bytes(s, sep) : text::find_bytes(s, sep);
            if (p == std::string::npos)
                return right ? Value::new_tuple({Value::string(""), Value::string(""), Value::string(s)})
                             : Value::new_tuple({Value::string(s), Value::string(""), Value::string("")});
            return Value::new_tuple({Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))});
        };
    } else {
        return false;
    }
    out = make_function(name, std::move(f));
    return true;
}

bool dict_method(const Value& self, const std::string& name, Value& out) {
    using F = std::function<Value(Renderer&, Args&)>;
    Value d = self;
    F f;
    if (name == "items") {
        f = [d](Renderer&, Args&) {
            std::vector<Value> v;
            for (auto& [k, x] : d.d().entries) v.push_back(Value::new_tuple({k, x}));
            return Value::new_list(std::move(v));
        };
    } else if (name == "keys" || name == "values") {
        bool keys = name == "keys";
        f = [d, keys](Renderer&, Args&) {
            std::vector<Value> v;
            for (auto& [k, x] : d.d().entries) v.push_back(keys ? k : x);
            return Value::new_list(std::move(v));
        };
    } else if (name == "get") {
        f = [d](Renderer&, Args& a) {
            if (a.pos.empty() || a.pos.size() > 2) raise("TypeError", "get expected 1 or 2 arguments");
            hash_key(a.pos[0]);
            if (const Value* v = d.d().find(a.pos[0])) return *v;
            return a.pos.size() > 1 ? a.pos[1] : Value::none();
        };
    } else if (name == "copy") {
        f = [d](Renderer&, Args&) {
            Value c = Value::new_dict();
            charge_items(d.d().size());
            *c.dict = *d.dict;
            return c;
        };
    } else if (name == "pop" || name == "popitem" || name == "update" || name == "setdefault" || name == "clear" ||
               name == "fromkeys") {
        out = unsafe(self, name);
        return true;
    } else {
        return false;
    }
    out = make_function(name, std::move(f));
    return true;
}

bool list_method(const Value& self, const std::string& name, Value& out) {
    using F = std::function<Value(Renderer&, Args&)>;
    Value l = self;
    F f;
    if (name == "count") {
        f = [l](Renderer&, Args& a) {
            if (a.pos.size() != 1) raise("TypeError", "count() takes exactly one argument");
            int64_t n = 0;
            for (auto& x : l.items()) n += equals(x, a.pos[0]);
            return Value::integer(n);
        };
    } else if (name == "index") {
        f = [l](Renderer&, Args& a) {
            if (a.pos.empty()) raise("TypeError", "index expected at least 1 argument");
            for (size_t i = 0; i < l.items().size(); ++i)
                if (equals(l.items()[i], a.pos[0])) return Value::integer((int64_t)i);
            raise("ValueError", repr(a.pos[0]) + " is not in list");
        };
    } else if (name == "copy" && self.kind == Kind::List) {
        f = [l](Renderer&, Args&) { return Value::new_list(l.items()); };
    } else if (self.kind == Kind::List && (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
                                           name == "remove" || name == "reverse" || name == "sort" || name == "clear")) {
        out = unsafe(self, name);
        return true;
    } else {
        return false;
    }
    out = make_function(name, std::move(f));
    return true;
}

std::string percent_one(const Value& v, const std::string& flags, int64_t width, int prec, char conv) {
    std::string body;
    switch (conv) {
        case 's': body = to_str(v); break;
        case 'r':
        case 'a': body = repr(v); break;
        case 'd':
        case 'i':
        case 'u':
        case 'x':
        case 'X':
        case 'o': {
            if (!v.is_number()) raise("TypeError", std::string("%") + conv + " format: a real number is required, not " + type_name(v));
            int64_t x = v.kind == Kind::Float ? float_to_int(v.f) : v.kind == Kind::Int ? v.i : v.b;
            char b[64];
            std::string f = "%" + flags + (prec >= 0 ? "." + std::to_string(std::min(prec, 40)) : "") +
                            (conv == 'x' ? "llx" : conv == 'X' ? "llX" : conv == 'o' ? "llo" : "lld");
            std::snprintf(b, sizeof b, f.c_str(), (long long)x);
            body = b;
            break;
        }
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G': {
            if (!v.is_number()) raise("TypeError", "must be real number, not " + type_name(v));
            double d = v.kind == Kind::Float ? v.f : (double)(v.kind == Kind::Int ? v.i : v.b);
            char b[512];
            std::string f = "%" + flags + "." + std::to_string(prec < 0 ? 6 : std::min(prec, 100)) + conv;
            std::snprintf(b, sizeof b, f.c_str(), d);
            body = b;
            break;
        }
        case 'c': {
            if (v.kind == Kind::String) body = v.s;
            else if (v.kind == Kind::Int) {
                if (v.i < 0 || v.i > 0x10ffff) raise("OverflowError", "%c arg not in range(0x110000)");
                text::append_utf8(body, (char32_t)v.i);
            }
            break;
        }
        default: raise("ValueError", std::string("unsupported format character '") + conv + "'");
    }
    if (conv == 's' || conv == 'r' || conv == 'a') {
        if (prec >= 0) {
            auto c = text::decode(body);
            if ((int64_t)c.size() > prec) c.resize(prec);
            body = text::encode(c);
        }
    }
    bool left = flags.find('-') != std::string::npos;
    int64_t n = (int64_t)text::count_code_points(body);
    if (width > n) {
        bool zero = flags.find('0') != std::string::npos && !left && conv != 's' && conv != 'r';
        if (zero) {
            bool sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ');
            body = (sign ? body.substr(0, 1) : "") + std::string(width - n, '0') + (sign ? body.substr(1) : body);
        } else {
            body = left ? body + std::string(width - n, ' ') : std::string(width - n, ' ') + body;
        }
    }
    return body;
}

}  // namespace

std::string percent_format(Renderer& r, const std::string& fmt, const Value& args) {
    std::vector<Value> pos;
    const Value* mapping = nullptr;
    if (args.kind == Kind::Tuple)
        pos = args.items();
    else if (args.kind == Kind::Dict)
        mapping = &args, pos = {args};
    else
        pos = {args};
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        ++i;
        if (i >= fmt.size()) raise("ValueError", "incomplete format");
        if (fmt[i] == '%') {
            out += '%';
            continue;
        }
        Value v;
        bool have = false;
        if (fmt[i] == '(') {
            size_t e = fmt.find(')', i);
            if (e == std::string::npos || !mapping) raise("TypeError", "format requires a mapping");
            std::string key = fmt.substr(i + 1, e - i - 1);
            const Value* x = mapping->d().find(key);
            if (!x) raise("KeyError", "'" + key + "'");
            v = *x;
            have = true;
            i = e + 1;
        }
        std::string flags;
        while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) flags += fmt[i++];
        int64_t width = 0;
        while (i < fmt.size() && isdigit((unsigned char)fmt[i])) add_digit<int64_t>(width, fmt[i++] - '0', kMaxWidth);
        int prec = -1;
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            prec = 0;
            while (i < fmt.size() && isdigit((unsigned char)fmt[i])) add_digit(prec, fmt[i++] - '0', kMaxPrecision);
        }
        if (i >= fmt.size()) raise("ValueError", "incomplete format");
        char conv = fmt[i];
        if (!have) {
            if (next >= pos.size()) raise("TypeError", "not enough arguments for format string");
            v = pos[next++];
        }
        out += percent_one(v, flags, std::min<int64_t>(width, 1 << 20), prec, conv);
        r.check_string_size(out.size());
    }
    if (!mapping && next < pos.size()) raise("TypeError", "not all arguments converted during string formatting");
    return out;
}

bool lookup_method(const Value& self, const std::string& name, Value& out) {
    if (name.size() > 4 && name.compare(0, 2, "__") == 0 && name.compare(name.size() - 2, 2, "__") == 0) {
        out = unsafe(self, name);  // dunder attributes (__class__, ...) are never safe
        return true;
    }
    switch (self.kind) {
        case Kind::String: return string_method(self, name, out);
        case Kind::Dict: return dict_method(self, name, out);
        case Kind::List:
        case Kind::Tuple: return list_method(self, name, out);
        default: return false;
    }
}

}  // namespace vega::tmpl
