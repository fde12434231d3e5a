// Global functions: range, dict, namespace, cycler, joiner (jinja2) and raise_exception,
// strftime_now (transformers).
#include <ctime>

#include "template/builtins.h"
#include "template/renderer.h"

namespace vega::tmpl {

namespace {

int64_t int_of(const Value& v, const char* fn) {
    if (v.kind == Kind::Int) return v.i;
    if (v.kind == Kind::Bool) return v.b;
    raise("TypeError", "'" + type_name(v) + "' object cannot be interpreted as an integer");
}

struct Cycler : Object {
    std::vector<Value> items;
    size_t pos = 0;
    ~Cycler() override { free_nested(items); }  // cycler(cycler(...)) may nest deeply
    std::string type_name() const override { return "Cycler"; }
    Value getattr(const std::string& n) override {
        if (n == "current") return items.empty() ? Value::undefined() : items[pos];
        if (n == "next") {
            auto self = this;
            return make_function("next", [self](Renderer&, Args&) {
                Value v = self->items[self->pos];
                self->pos = (self->pos + 1) % self->items.size();
                return v;
            });
        }
        if (n == "reset") {
            auto self = this;
            return make_function("reset", [self](Renderer&, Args&) {
                self->pos = 0;
                return Value::none();
            });
        }
        return Object::getattr(n);
    }
};

struct Joiner : Object {
    std::string sep;
    bool used = false;
    std::string type_name() const override { return "Joiner"; }
    bool callable() const override { return true; }
    Value call(Renderer&, Args&) override {
        if (!used) {
            used = true;
            return Value::string("");
        }
        return Value::string(sep);
    }
};

}  // namespace

void add_globals(std::unordered_map<std::string, Value>& g) {
    g["range"] = make_function("range", [](Renderer& r, Args& a) {
        if (!a.kw.empty()) raise("TypeError", "range() takes no keyword arguments");
        int64_t start = 0, stop = 0, step = 1;
        if (a.pos.size() == 1) {
            stop = int_of(a.pos[0], "range");
        } else if (a.pos.size() == 2 || a.pos.size() == 3) {
            start = int_of(a.pos[0], "range");
            stop = int_of(a.pos[1], "range");
            if (a.pos.size() == 3) step = int_of(a.pos[2], "range");
        } else {
            raise("TypeError", "range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
        }
        if (step == 0) raise("ValueError", "range() arg 3 must not be zero");
        // In 128 bits: stop - start and start + i * step overflow int64 for extreme arguments.
        __int128 n = 0, lo = start, hi = stop, st = step;
        if (step > 0 && stop > start) n = (hi - lo + st - 1) / st;
        if (step < 0 && stop < start) n = (lo - hi - st - 1) / (-st);
        if (n > r.limits().max_range)
            raise("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                                       std::to_string(r.limits().max_range) + ").");
        std::vector<Value> v;
        v.reserve((size_t)n);
        for (int64_t i = 0; i < (int64_t)n; ++i) v.push_back(Value::integer((int64_t)(lo + i * st)));
        return Value::new_list(std::move(v));
    });
    g["dict"] = make_function("dict", [](Renderer&, Args& a) {
        Value d = Value::new_dict();
        if (!a.pos.empty()) {
            if (a.pos[0].kind == Kind::Dict) {
                for (auto& [k, v] : a.pos[0].d().entries) d.d().set(k, v);
            } else {
                for (auto& pair : iterate(a.pos[0])) {
                    auto kv = iterate(pair);
                    if (kv.size() != 2) raise("ValueError", "dictionary update sequence element has wrong length");
                    d.d().set(kv[0], kv[1]);
                }
            }
        }
        for (auto& [k, v] : a.kw) d.d().set(k, v);
        return d;
    });
    g["namespace"] = make_function("namespace", [](Renderer& r, Args& a) {
        auto ns = std::make_shared<Namespace>();
        r.track(ns);
        if (!a.pos.empty()) {
            if (a.pos[0].kind != Kind::Dict) raise("TypeError", "namespace() expects a mapping");
            for (auto& [k, v] : a.pos[0].d().entries) ns->attrs.set(k, v);
        }
        for (auto& [k, v] : a.kw) ns->attrs.set(k, v);
        return Value::object(ns);
    });
    g["cycler"] = make_function("cycler", [](Renderer&, Args& a) {
        auto c = std::make_shared<Cycler>();
        c->items = a.pos;
        if (c->items.empty()) raise("TypeError", "cycler needs at least one item");
        return Value::object(c);
    });
    g["joiner"] = make_function("joiner", [](Renderer&, Args& a) {
        auto j = std::make_shared<Joiner>();
        ArgReader ar(a, "joiner", {"sep"});
        j->sep = ar.get_str(0, ", ");
        return Value::object(j);
    });
    g["raise_exception"] = make_function("raise_exception", [](Renderer&, Args& a) -> Value {
        raise("TemplateError", a.pos.empty() ? std::string() : to_str(a.pos[0]));
    });
    g["strftime_now"] = make_function("strftime_now", [](Renderer& r, Args& a) {
        if (a.pos.size() != 1) raise("TypeError", "strftime_now() takes exactly one argument");
        std::string fmt = to_str(a.pos[0]);
        if (fmt.empty()) return Value::string("");
        r.check_string_size(fmt.size() * 8);
        std::tm tm = r.now();
        std::string buf(fmt.size() * 8 + 256, '\0');
        size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
        buf.resize(n);
        return Value::string(buf);
    });
}

}  // namespace vega::tmpl
