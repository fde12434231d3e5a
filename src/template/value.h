// The template value model: Python semantics for the values a Jinja2 chat template
// sees (None, bool, int, float, str, list, tuple, dict, Undefined, callables, objects).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "template/budget.h"

namespace vega::tmpl {

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Generator, Object };

struct Value;
struct ListData;
struct DictData;
struct Object;
class Renderer;

// Positional and keyword arguments of a call.
struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
};

// Errors raised while rendering. kind names the Python exception ("UndefinedError",
// "TypeError", "TemplateError", "SecurityError", ...).
struct RenderError {
    std::string kind;
    std::string msg;
    int line = 0;
};
[[noreturn]] void raise(const std::string& kind, const std::string& msg);

struct Value {
    Kind kind = Kind::Undefined;
    bool b = false;       // Bool; for String: a Markup (|safe) string
    int64_t i = 0;        // Int
    double f = 0;         // Float
    std::string s;        // String; for Undefined: the hint ("'x' is undefined")
    std::string undef_exc;  // Undefined: exception kind raised on use ("" = UndefinedError)
    std::shared_ptr<ListData> list;  // List, Tuple, Generator
    std::shared_ptr<DictData> dict;  // Dict
    std::shared_ptr<Object> obj;     // Object

    Value() = default;
    // A copy charges the render for the string it copies (budget.h): a template can copy a
    // 16 MB string a million times in a loop.
    Value(const Value& o)
        : kind(o.kind), b(o.b), i(o.i), f(o.f), s((charge_bytes(o.s.size()), o.s)), undef_exc(o.undef_exc),
          list(o.list), dict(o.dict), obj(o.obj) {}
    Value(Value&&) noexcept = default;
    Value& operator=(const Value& o) {
        if (this != &o) *this = Value(o);
        return *this;
    }
    Value& operator=(Value&&) noexcept = default;
    ~Value() = default;

    static Value undefined(std::string hint = {}, std::string exc = {});
    static Value none();
    static Value boolean(bool v);
    static Value integer(int64_t v);
    static Value number(double v);
    static Value string(std::string v, bool safe = false);
    static Value new_list(std::vector<Value> items = {});
    static Value new_tuple(std::vector<Value> items = {});
    static Value new_generator(std::vector<Value> items);
    static Value new_dict();
    static Value object(std::shared_ptr<Object> o);

    bool is_undefined() const { return kind == Kind::Undefined; }
    bool is_none() const { return kind == Kind::None; }
    bool is_string() const { return kind == Kind::String; }
    bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
    bool is_sequence() const { return kind == Kind::List || kind == Kind::Tuple; }
    bool is_dict() const { return kind == Kind::Dict; }
    bool is_safe() const { return kind == Kind::String && b; }

    const std::vector<Value>& items() const;  // List/Tuple/Generator
    std::vector<Value>& items_mut();
    DictData& d() const { return *dict; }

    // Raises the Undefined's error (UndefinedError or SecurityError).
    [[noreturn]] void fail_undefined() const;
};

// Charges the render for n list or dict elements created or copied (a step per 16 bytes).
inline void charge_items(size_t n) { charge(int64_t(n * (sizeof(Value) / 16))); }

// Lists, dicts and namespaces nest without limit (a template can build [[[...]]] a million
// deep), so freeing one must not recurse: their destructors hand nested containers to a
// per-thread queue that the outermost destructor drains (free_nested).
void free_nested(std::vector<Value>& items);

struct ListData {
    std::vector<Value> v;
    ListData() = default;
    ListData(const ListData&) = default;
    ListData& operator=(const ListData&) = default;
    ~ListData() { free_nested(v); }
};

// An insertion-ordered dict. String keys are indexed; other keys are searched.
struct DictData {
    std::vector<std::pair<Value, Value>> entries;
    std::unordered_map<std::string, size_t> index;  // string key -> entry

    DictData() = default;
    DictData(const DictData&) = default;
    DictData(DictData&&) = default;
    DictData& operator=(const DictData&) = default;
    DictData& operator=(DictData&&);
    ~DictData();

    const Value* find(const Value& key) const;
    const Value* find(const std::string& key) const;
    void set(const Value& key, Value v);
    void set(const std::string& key, Value v) { set(Value::string(key), std::move(v)); }
    size_t size() const { return entries.size(); }
};

// Objects with attributes (loop, namespace, callables, bound methods, macros).
struct Object {
    virtual ~Object() = default;
    virtual std::string type_name() const = 0;
    // Attribute lookup; return an Undefined when missing.
    virtual Value getattr(const std::string& name);
    virtual bool callable() const { return false; }
    virtual Value call(Renderer& r, Args& args);
    // Namespace only.
    virtual bool setattr(const std::string& name, const Value& v) { return false; }
    // repr()/str()
    virtual std::string repr() const { return "<" + type_name() + " object>"; }
    // Drops references to other values (breaks reference cycles when a render ends).
    virtual void release() {}
};

// A callable defined by a C++ function.
struct Function : Object {
    std::string name;
    std::function<Value(Renderer&, Args&)> fn;
    Function(std::string n, std::function<Value(Renderer&, Args&)> f) : name(std::move(n)), fn(std::move(f)) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    bool callable() const override { return true; }
    Value call(Renderer& r, Args& args) override { return fn(r, args); }
    std::string repr() const override { return "<built-in function " + name + ">"; }
};
Value make_function(std::string name, std::function<Value(Renderer&, Args&)> fn);

// jinja2's namespace(): attributes settable with {% set ns.x = ... %}.
struct Namespace : Object {
    DictData attrs;
    std::string type_name() const override { return "Namespace"; }
    Value getattr(const std::string& name) override;
    bool setattr(const std::string& name, const Value& v) override {
        attrs.set(name, v);
        return true;
    }
    std::string repr() const override;
    void release() override { attrs = DictData(); }
};

// ---- Python semantics ----
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// a < b; raises TypeError for unorderable values.
bool less(const Value& a, const Value& b);
// Three-way compare used by sort (raises like Python on mismatched types).
int compare(const Value& a, const Value& b);
// str(v): what {{ v }} prints ('' for Undefined).
std::string to_str(const Value& v);
// repr(v) as Python prints it inside containers.
std::string repr(const Value& v);
// The Python type name: 'str', 'int', 'dict', 'list', 'NoneType', ...
std::string type_name(const Value& v);
// A string usable as a hash key (1, 1.0 and True collapse as in Python).
std::string hash_key(const Value& v);
// Python float repr ('1.0', '0.1', '1e+16', 'inf', 'nan').
std::string float_repr(double d);
// len(v); raises TypeError when v has no length.
int64_t length(const Value& v);
// int(d) for a float: raises OverflowError for NaN, infinities and floats outside int64
// (casting those is undefined behaviour in C++; Python would give a big int).
int64_t float_to_int(double d);
// Parses a run of decimal digits; false if it does not fit in int64.
bool parse_int64(const std::string& digits, int64_t& out);
// Iterates v as Python's iter() would (dict: keys; str: characters).
std::vector<Value> iterate(const Value& v);

}  // namespace vega::tmpl
