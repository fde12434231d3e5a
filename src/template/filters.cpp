// The built-in filters, as jinja2 3.1 defines them (tojson as transformers overrides it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "template/builtins.h"
#include "template/json.h"
#include "template/renderer.h"
#include "template/text.h"

namespace vega::tmpl {

namespace {

using FilterFn = std::function<Value(Renderer&, const Value&, Args&)>;

// jinja2's make_attrgetter: "a.b.0" -> getitem chain; missing parts give Undefined.
Value get_attribute(Renderer& r, const Value& item, const Value& attribute, const Value* def = nullptr) {
    Value cur = item;
    if (attribute.kind == Kind::Int) {
        cur = r.getitem(cur, attribute);
    } else {
        std::string a = to_str(attribute);
        size_t p = 0;
        while (true) {
            size_t q = a.find('.', p);
            std::string part = a.substr(p, q == std::string::npos ? std::string::npos : q - p);
            int64_t index = 0;
            Value key = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) && parse_int64(part, index)
                            ? Value::integer(index)
                            : Value::string(part);
            cur = r.getitem(cur, key);
            if (def && cur.kind == Kind::Undefined) {
                cur = *def;
                break;
            }
            if (q == std::string::npos) break;
            p = q + 1;
        }
    }
    return cur;
}

Value lower_if_str(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.kind == Kind::String) return Value::string(text::lower(v.s));
    return v;
}

std::vector<Value> to_list(const Value& v) {
    if (v.kind == Kind::None || v.is_number() || (v.kind == Kind::Object))
        raise("TypeError", "'" + type_name(v) + "' object is not iterable");
    return iterate(v);
}

std::string soft_str(const Value& v) { return v.kind == Kind::String ? v.s : to_str(v); }

Value py_int(const std::string& s, int base, bool& ok) {
    std::string t = text::strip(s, true, true);
    std::string digits;
    for (char c : t)
        if (c != '_') digits += c;
    ok = false;
    if (digits.empty()) return Value();
    const char* b = digits.c_str();
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(b, &end, base);
    if (*end != 0 || errno == ERANGE || end == b) return Value();
    ok = true;
    return Value::integer(x);
}

bool py_float(const Value& v, double& out) {
    switch (v.kind) {
        case Kind::Int: out = (double)v.i; return true;
        case Kind::Bool: out = v.b; return true;
        case Kind::Float: out = v.f; return true;
        case Kind::String: {
            std::string t = text::strip(v.s, true, true);
            std::string digits;
            for (char c : t)
                if (c != '_') digits += c;
            if (digits.empty()) return false;
            std::string low = text::lower(digits);
            if (low == "inf" || low == "+inf" || low == "infinity" || low == "+infinity") return out = INFINITY, true;
            if (low == "-inf" || low == "-infinity") return out = -INFINITY, true;
            if (low == "nan" || low == "+nan" || low == "-nan") return out = NAN, true;
            char* end = nullptr;
            out = std::strtod(digits.c_str(), &end);
            return *end == 0 && (isdigit((unsigned char)digits.back()) || digits.back() == '.');
        }
        default: return false;
    }
}

std::vector<Value> select_impl(Renderer& r, const Value& seq, Args& a, bool by_attr, bool keep_if) {
    if (!truthy(seq)) return {};  // jinja2: `if value:` before iterating
    std::vector<Value> items = to_list(seq);
    size_t off = 0;
    Value attr;
    if (by_attr) {
        if (a.pos.empty()) raise("TypeError", "selectattr needs an attribute");
        attr = a.pos[0];
        off = 1;
    }
    std::string test_name;
    bool has_test = a.pos.size() > off;
    if (has_test) test_name = to_str(a.pos[off]);
    Args targs;
    if (has_test) targs.pos.assign(a.pos.begin() + off + 1, a.pos.end());
    targs.kw = a.kw;
    std::vector<Value> out;
    for (auto& it : items) {
        Value v = by_attr ? get_attribute(r, it, attr) : it;
        bool ok;
        if (has_test) {
            Args copy = targs;
            ok = r.test(test_name, v, copy);
        } else {
            ok = truthy(v);
        }
        if (ok == keep_if) out.push_back(it);
    }
    return out;
}

std::string do_title(const std::string& s) {
    // re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower()
    auto cps = text::decode(s);
    auto is_delim = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || text::is_space(c); };
    std::vector<char32_t> out;
    size_t i = 0;
    while (i < cps.size()) {
        size_t j = i;
        bool d = is_delim(cps[i]);
        while (j < cps.size() && is_delim(cps[j]) == d) ++j;
        for (size_t k = i; k < j; ++k) out.push_back(k == i ? text::to_upper(cps[k]) : text::to_lower(cps[k]));
        i = j;
    }
    return text::encode(out);
}

std::string do_indent(Renderer& r, const std::string& s0, const Value& width, bool first, bool blank) {
    int64_t w = width.kind == Kind::Int ? width.i : 4;
    if (width.kind != Kind::String && w > 0) r.check_string_size((size_t)w);
    std::string ind = width.kind == Kind::String ? width.s : std::string(std::max<int64_t>(0, w), ' ');
    std::string s = s0 + "\n";
    auto lines = text::splitlines(s);
    std::string rv;
    // Every line gets the indent: a long one times many lines is checked as it grows.
    auto add = [&](const std::string& a, const std::string& b = {}) {
        r.check_string_size(rv.size() + a.size() + b.size() + (first ? ind.size() : 0));
        rv += a;
        rv += b;
    };
    if (blank) {
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i) add("\n", ind);
            add(lines[i]);
        }
    } else {
        rv = lines.empty() ? "" : lines[0];
        if (lines.size() > 1) {
            rv += "\n";
            for (size_t i = 1; i < lines.size(); ++i) {
                if (i > 1) add("\n");
                if (lines[i].empty())
                    add(lines[i]);
                else
                    add(ind, lines[i]);
            }
        }
    }
    if (first) rv = ind + rv;
    return rv;
}

std::string striptags(const std::string& s) {
    std::string t;
    size_t i = 0;
    while (i < s.size()) {
        if (s.compare(i, 4, "<!--") == 0) {
            size_t e = s.find("-->", i + 4);
            if (e == std::string::npos) {
                t += s.substr(i);
                break;
            }
            i = e + 3;
        } else if (s[i] == '<') {
            size_t e = s.find('>', i + 1);
            if (e == std::string::npos) {
                t += s.substr(i);
                break;
            }
            i = e + 1;
        } else {
            t += s[i++];
        }
    }
    auto words = text::split(t, false, "", -1, false);
    std::string out;
    for (size_t k = 0; k < words.size(); ++k) out += (k ? " " : "") + words[k];
    // unescape the common entities
    static const std::pair<const char*, const char*> ents[] = {{"&lt;", "<"},  {"&gt;", ">"},  {"&#39;", "'"},
                                                               {"&#34;", "\""}, {"&quot;", "\""}, {"&amp;", "&"}};
    for (auto& [e, c] : ents) out = text::replace(out, e, c, -1);
    return out;
}

std::string python_round(double v, int64_t prec) {
    char buf[1024];  // 309 integer digits and 300 decimals at most
    std::snprintf(buf, sizeof buf, "%.*f", (int)std::clamp<int64_t>(prec, 0, 300), v);
    return buf;
}

const std::unordered_map<std::string, FilterFn>& filters() {
    static const std::unordered_map<std::string, FilterFn> table = [] {
        std::unordered_map<std::string, FilterFn> t;
        t["abs"] = [](Renderer&, const Value& v, Args&) {
            if (v.kind == Kind::Int) {
                if (v.i == INT64_MIN) raise("OverflowError", "integer overflow");
                return Value::integer(v.i < 0 ? -v.i : v.i);
            }
            if (v.kind == Kind::Bool) return Value::integer(v.b);
            if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
            if (v.kind == Kind::Undefined) v.fail_undefined();
            raise("TypeError", "bad operand type for abs(): '" + type_name(v) + "'");
        };
        t["attr"] = [](Renderer& r, const Value& v, Args& a) {
            // Python attributes only (methods, namespace and loop attributes), no item fallback.
            ArgReader ar(a, "attr", {"name"});
            std::string name = ar.get_str(0, "");
            if (v.kind == Kind::Object) return v.obj->getattr(name);
            Value m;
            if (lookup_method(v, name, m)) return m;
            return Value::undefined("'" + type_name(v) + " object' has no attribute '" + name + "'");
        };
        t["batch"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "batch", {"linecount", "fill_with"});
            int64_t n = ar.get_int(0, 1);
            if (n <= 0) raise("ValueError", "batch size must be positive");
            if (ar.has(1) && ar.get(1).kind != Kind::None) r.check_list_size((size_t)n);  // padded to n
            std::vector<Value> out, cur;
            for (auto& x : to_list(v)) {
                cur.push_back(x);
                if ((int64_t)cur.size() == n) {
                    out.push_back(Value::new_list(cur));
                    cur.clear();
                }
            }
            if (!cur.empty()) {
                if (ar.has(1) && ar.get(1).kind != Kind::None)
                    while ((int64_t)cur.size() < n) cur.push_back(ar.get(1));
                out.push_back(Value::new_list(cur));
            }
            return Value::new_generator(out);
        };
        t["capitalize"] = [](Renderer&, const Value& v, Args&) { return Value::string(text::capitalize(soft_str(v))); };
        t["center"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "center", {"width"});
            std::string s = soft_str(v);
            int64_t w = ar.get_int(0, 80), n = (int64_t)text::count_code_points(s);
            if (w <= n) return Value::string(s);
            r.check_string_size((size_t)(w - n) < SIZE_MAX - s.size() ? s.size() + (size_t)(w - n) : SIZE_MAX);
            int64_t total = w - n, left = total / 2 + (total & w & 1);
            return Value::string(std::string(left, ' ') + s + std::string(total - left, ' '));
        };
        t["default"] = [](Renderer&, const Value& v, Args& a) {
            ArgReader ar(a, "default", {"default_value", "boolean"});
            if (v.kind == Kind::Undefined || (ar.get_bool(1, false) && !truthy(v)))
                return ar.get_or(0, Value::string(""));
            return v;
        };
        t["d"] = t["default"];
        t["dictsort"] = [](Renderer&, const Value& v, Args& a) {
            ArgReader ar(a, "dictsort", {"case_sensitive", "by", "reverse"});
            if (v.kind != Kind::Dict) raise("TypeError", "dictsort filter expects a mapping");
            bool cs = ar.get_bool(0, false), rev = ar.get_bool(2, false);
            std::string by = ar.get_str(1, "key");
            int pos = by == "key" ? 0 : by == "value" ? 1 : -1;
            if (pos < 0) raise("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
            auto entries = v.d().entries;
            std::stable_sort(entries.begin(), entries.end(), [&](auto& x, auto& y) {
                Value kx = lower_if_str(pos == 0 ? x.first : x.second, cs);
                Value ky = lower_if_str(pos == 0 ? y.first : y.second, cs);
                return rev ? less(ky, kx) : less(kx, ky);
            });
            std::vector<Value> out;
            for (auto& [k, x] : entries) out.push_back(Value::new_tuple({k, x}));
            return Value::new_list(out);
        };
        t["escape"] = [](Renderer&, const Value& v, Args&) {
            if (v.is_safe()) return v;
            return Value::string(text::html_escape(soft_str(v)), true);
        };
        t["e"] = t["escape"];
        t["forceescape"] = [](Renderer&, const Value& v, Args&) { return Value::string(text::html_escape(soft_str(v)), true); };
        t["first"] = [](Renderer&, const Value& v, Args&) {
            auto items = to_list(v);
            if (items.empty()) return Value::undefined("No first item, sequence was empty.");
            return items[0];
        };
        t["last"] = [](Renderer&, const Value& v, Args&) {
            if (v.kind == Kind::Generator) raise("TypeError", "'generator' object is not reversible");
            auto items = to_list(v);
            if (items.empty()) return Value::undefined("No last item, sequence was empty.");
            return items.back();
        };
        t["float"] = [](Renderer&, const Value& v, Args& a) {
            ArgReader ar(a, "float", {"default"});
            double d;
            if (py_float(v, d)) return Value::number(d);
            return ar.get_or(0, Value::number(0.0));
        };
        t["format"] = [](Renderer& r, const Value& v, Args& a) {
            Value args;
            if (!a.kw.empty()) {
                args = Value::new_dict();
                for (auto& [k, x] : a.kw) args.d().set(k, x);
            } else {
                args = Value::new_tuple(a.pos);
            }
            return Value::string(percent_format(r, soft_str(v), args));
        };
        t["indent"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "indent", {"width", "first", "blank"});
            return Value::string(do_indent(r, soft_str(v), ar.get_or(0, Value::integer(4)), ar.get_bool(1, false),
                                           ar.get_bool(2, false)));
        };
        t["int"] = [](Renderer&, const Value& v, Args& a) {
            ArgReader ar(a, "int", {"default", "base"});
            Value def = ar.get_or(0, Value::integer(0));
            if (v.kind == Kind::Int) return v;
            if (v.kind == Kind::Bool) return Value::integer(v.b);
            if (v.kind == Kind::Float) {
                if (std::isnan(v.f) || std::isinf(v.f)) return def;
                return Value::integer(float_to_int(v.f));
            }
            if (v.kind == Kind::String) {
                bool ok;
                Value r = py_int(v.s, (int)ar.get_int(1, 10), ok);
                if (ok) return r;
                double d;
                if (py_float(v, d) && !std::isnan(d) && !std::isinf(d)) return Value::integer(float_to_int(d));
            }
            return def;
        };
        t["items"] = [](Renderer&, const Value& v, Args&) {
            if (v.kind == Kind::Undefined) return Value::new_generator({});
            if (v.kind != Kind::Dict) raise("TypeError", "Can only get item pairs from a mapping.");
            std::vector<Value> out;
            for (auto& [k, x] : v.d().entries) out.push_back(Value::new_tuple({k, x}));
            return Value::new_generator(out);
        };
        t["join"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "join", {"d", "attribute"});
            std::string sep = ar.get_str(0, "");
            std::string out;
            bool first = true;
            for (auto& x : to_list(v)) {
                Value y = ar.has(1) && ar.get(1).kind != Kind::None ? get_attribute(r, x, ar.get(1)) : x;
                if (!first) out += sep;
                first = false;
                out += soft_str(y);
                r.check_string_size(out.size());
            }
            return Value::string(out);
        };
        t["length"] = [](Renderer&, const Value& v, Args&) { return Value::integer(length(v)); };
        t["count"] = t["length"];
        t["list"] = [](Renderer&, const Value& v, Args&) { return Value::new_list(to_list(v)); };
        t["lower"] = [](Renderer&, const Value& v, Args&) { return Value::string(text::lower(soft_str(v))); };
        t["upper"] = [](Renderer&, const Value& v, Args&) { return Value::string(text::upper(soft_str(v))); };
        t["map"] = [](Renderer& r, const Value& v, Args& a) {
            std::vector<Value> items, out;
            if (truthy(v)) items = to_list(v);  // jinja2: `if value:` before iterating
            if (a.pos.empty()) {
                Value attr;
                const Value* def = nullptr;
                bool have = false;
                for (auto& [k, x] : a.kw) {
                    if (k == "attribute") attr = x, have = true;
                    else if (k == "default") def = &x;
                    else raise("FilterArgumentError", "Unexpected keyword argument '" + k + "'");
                }
                if (!have) raise("FilterArgumentError", "map requires a filter argument");
                for (auto& x : items) out.push_back(get_attribute(r, x, attr, def));
            } else {
                std::string name = to_str(a.pos[0]);
                for (auto& x : items) {
                    Args fa;
                    fa.pos.assign(a.pos.begin() + 1, a.pos.end());
                    fa.kw = a.kw;
                    out.push_back(r.filter(name, x, fa));
                }
            }
            return Value::new_generator(out);
        };
        auto minmax = [](bool is_max) {
            return [is_max](Renderer& r, const Value& v, Args& a) {
                ArgReader ar(a, is_max ? "max" : "min", {"case_sensitive", "attribute"});
                auto items = to_list(v);
                if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
                bool cs = ar.get_bool(0, false);
                auto key = [&](const Value& x) {
                    Value k = ar.has(1) && ar.get(1).kind != Kind::None ? get_attribute(r, x, ar.get(1)) : x;
                    return lower_if_str(k, cs);
                };
                size_t best = 0;
                for (size_t i = 1; i < items.size(); ++i) {
                    int c = compare(key(items[i]), key(items[best]));
                    if (is_max ? c > 0 : c < 0) best = i;
                }
                return items[best];
            };
        };
        t["max"] = minmax(true);
        t["min"] = minmax(false);
        t["pprint"] = [](Renderer&, const Value& v, Args&) { return Value::string(repr(v)); };
        t["reject"] = [](Renderer& r, const Value& v, Args& a) { return Value::new_generator(select_impl(r, v, a, false, false)); };
        t["select"] = [](Renderer& r, const Value& v, Args& a) { return Value::new_generator(select_impl(r, v, a, false, true)); };
        t["rejectattr"] = [](Renderer& r, const Value& v, Args& a) { return Value::new_generator(select_impl(r, v, a, true, false)); };
        t["selectattr"] = [](Renderer& r, const Value& v, Args& a) { return Value::new_generator(select_impl(r, v, a, true, true)); };
        t["replace"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "replace", {"old", "new", "count"});
            std::string res = text::replace(soft_str(v), ar.get_str(0, ""), ar.get_str(1, ""), ar.get_int(2, -1),
                                            r.limits().max_output);
            r.check_string_size(res.size());
            return Value::string(res);
        };
        t["reverse"] = [](Renderer&, const Value& v, Args&) {
            if (v.kind == Kind::String) {
                auto c = text::decode(v.s);
                std::reverse(c.begin(), c.end());
                return Value::string(text::encode(c));
            }
            auto items = to_list(v);
            std::reverse(items.begin(), items.end());
            return Value::new_generator(items);
        };
        t["round"] = [](Renderer&, const Value& v, Args& a) {
            ArgReader ar(a, "round", {"precision", "method"});
            int64_t p = ar.get_int(0, 0);
            std::string method = ar.get_str(1, "common");
            if (method != "common" && method != "ceil" && method != "floor")
                raise("FilterArgumentError", "method must be common, ceil or floor");
            if (v.kind == Kind::Undefined) v.fail_undefined();
            if (!v.is_number()) raise("TypeError", "type " + type_name(v) + " doesn't define __round__ method");
            double d = v.kind == Kind::Float ? v.f : (double)(v.kind == Kind::Int ? v.i : v.b);
            if (method == "common") {
                if (v.kind != Kind::Float) return Value::integer(v.kind == Kind::Int ? v.i : v.b);
                return Value::number(std::strtod(python_round(d, p).c_str(), nullptr));
            }
            double m = std::pow(10.0, (double)p);
            return Value::number((method == "ceil" ? std::ceil(d * m) : std::floor(d * m)) / m);
        };
        t["safe"] = [](Renderer&, const Value& v, Args&) { return Value::string(soft_str(v), true); };
        t["slice"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "slice", {"slices", "fill_with"});
            auto seq = to_list(v);
            int64_t slices = ar.get_int(0, 1);
            if (slices <= 0) raise("ValueError", "slices must be positive");
            r.check_list_size((size_t)slices);  // one list per slice, even empty ones
            int64_t length = (int64_t)seq.size(), per = length / slices, extra = length % slices, offset = 0;
            std::vector<Value> out;
            for (int64_t i = 0; i < slices; ++i) {
                int64_t start = offset + i * per;
                if (i < extra) ++offset;
                int64_t end = offset + (i + 1) * per;
                std::vector<Value> tmp(seq.begin() + start, seq.begin() + end);
                if (ar.has(1) && ar.get(1).kind != Kind::None && i >= extra) tmp.push_back(ar.get(1));
                out.push_back(Value::new_list(tmp));
            }
            return Value::new_generator(out);
        };
        t["sort"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "sort", {"reverse", "case_sensitive", "attribute"});
            auto items = to_list(v);
            bool rev = ar.get_bool(0, false), cs = ar.get_bool(1, false);
            std::vector<std::pair<Value, Value>> keyed;
            for (auto& x : items) {
                Value k = ar.has(2) && ar.get(2).kind != Kind::None ? get_attribute(r, x, ar.get(2)) : x;
                keyed.emplace_back(lower_if_str(k, cs), x);
            }
            std::stable_sort(keyed.begin(), keyed.end(), [rev](auto& x, auto& y) {
                return rev ? less(y.first, x.first) : less(x.first, y.first);
            });
            std::vector<Value> out;
            for (auto& kv : keyed) out.push_back(kv.second);
            return Value::new_list(out);
        };
        t["string"] = [](Renderer&, const Value& v, Args&) {
            if (v.kind == Kind::String) return v;
            return Value::string(to_str(v));
        };
        t["striptags"] = [](Renderer&, const Value& v, Args&) { return Value::string(striptags(soft_str(v))); };
        t["sum"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "sum", {"attribute", "start"});
            Value total = ar.get_or(1, Value::integer(0));
            for (auto& x : to_list(v)) {
                Value y = ar.has(0) && ar.get(0).kind != Kind::None ? get_attribute(r, x, ar.get(0)) : x;
                if (!(total.is_number() && y.is_number()))
                    raise("TypeError", "unsupported operand type(s) for +: '" + type_name(total) + "' and '" + type_name(y) + "'");
                if (total.kind != Kind::Float && y.kind != Kind::Float) {
                    int64_t s;
                    if (__builtin_add_overflow(total.kind == Kind::Int ? total.i : (int64_t)total.b,
                                               y.kind == Kind::Int ? y.i : (int64_t)y.b, &s))
                        raise("OverflowError", "integer overflow");
                    total = Value::integer(s);
                } else
                    total = Value::number((total.kind == Kind::Float ? total.f : (double)(total.kind == Kind::Int ? total.i : total.b)) +
                                          (y.kind == Kind::Float ? y.f : (double)(y.kind == Kind::Int ? y.i : y.b)));
            }
            return total;
        };
        t["title"] = [](Renderer&, const Value& v, Args&) { return Value::string(do_title(soft_str(v))); };
        t["tojson"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
            DumpOptions o;
            o.ensure_ascii = ar.get_bool(0, false);
            if (ar.has(1) && ar.get(1).kind != Kind::None) {
                o.has_indent = true;
                const Value& ind = ar.get(1);
                if (ind.kind == Kind::String) {
                    o.indent = ind.s;
                } else {
                    int64_t w = ar.get_int(1, 0);
                    if (w > 0) r.check_string_size((size_t)w);
                    o.indent = std::string(std::max<int64_t>(0, w), ' ');
                }
                o.item_sep = ",";
            }
            if (ar.has(2) && ar.get(2).kind != Kind::None) {
                auto seps = to_list(ar.get(2));
                if (seps.size() != 2) raise("ValueError", "separators must be a pair");
                o.item_sep = to_str(seps[0]);
                o.key_sep = to_str(seps[1]);
            }
            o.sort_keys = ar.get_bool(3, false);
            o.max_bytes = r.limits().max_output;
            std::string s = json_dumps(v, o);
            r.check_string_size(s.size());
            return Value::string(s);
        };
        t["trim"] = [](Renderer&, const Value& v, Args& a) {
            ArgReader ar(a, "trim", {"chars"});
            if (ar.has(0) && ar.get(0).kind != Kind::None)
                return Value::string(text::strip(soft_str(v), true, true, true, to_str(ar.get(0))));
            return Value::string(text::strip(soft_str(v), true, true));
        };
        t["truncate"] = [](Renderer&, const Value& v, Args& a) {
            ArgReader ar(a, "truncate", {"length", "killwords", "end", "leeway"});
            auto s = text::decode(soft_str(v));
            int64_t len = ar.get_int(0, 255), leeway = ar.get_int(3, 5);
            bool kill = ar.get_bool(1, false);
            std::string end = ar.get_str(2, "...");
            int64_t endlen = (int64_t)text::count_code_points(end);
            if (len < endlen) raise("AssertionError", "expected length >= " + std::to_string(endlen) + ", got " + std::to_string(len));
            if (leeway < 0) raise("AssertionError", "expected leeway >= 0");
            if ((int64_t)s.size() - len <= leeway) return Value::string(text::encode(s));  // len + leeway may overflow
            std::vector<char32_t> head(s.begin(), s.begin() + (len - endlen));
            if (kill) return Value::string(text::encode(head) + end);
            std::string h = text::encode(head);
            size_t sp = h.rfind(' ');
            if (sp != std::string::npos) h = h.substr(0, sp);
            return Value::string(h + end);
        };
        t["unique"] = [](Renderer& r, const Value& v, Args& a) {
            ArgReader ar(a, "unique", {"case_sensitive", "attribute"});
            bool cs = ar.get_bool(0, false);
            std::unordered_set<std::string> seen;
            std::vector<Value> out;
            for (auto& x : to_list(v)) {
                Value k = ar.has(1) && ar.get(1).kind != Kind::None ? get_attribute(r, x, ar.get(1)) : x;
                if (seen.insert(hash_key(lower_if_str(k, cs))).second) out.push_back(x);
            }
            return Value::new_generator(out);
        };
        t["wordcount"] = [](Renderer&, const Value& v, Args&) {
            int64_t n = 0;
            bool in = false;
            for (char32_t c : text::decode(soft_str(v))) {
                bool w = text::is_alpha(c) || text::is_digit(c) || c == '_' || (c >= 0x80 && !text::is_space(c));
                if (w && !in) ++n;
                in = w;
            }
            return Value::integer(n);
        };
        return t;
    }();
    return table;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) != 0; }

bool call_filter(Renderer& r, const std::string& name, const Value& v, Args& args, Value& out) {
    auto& t = filters();
    auto it = t.find(name);
    if (it == t.end()) return false;
    out = it->second(r, v, args);
    return true;
}

}  // namespace vega::tmpl
