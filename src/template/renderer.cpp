#include "template/renderer.h"

#include <cmath>
#include <limits>

#include "template/builtins.h"
#include "template/text.h"

namespace vega::tmpl {

namespace {

std::string object_desc(const Value& v) {
    if (v.kind == Kind::None) return "'None'";
    return "'" + type_name(v) + " object'";
}

Value missing_attr(const Value& obj, const std::string& name) {
    return Value::undefined(object_desc(obj) + " has no attribute '" + name + "'");
}

int64_t as_int(const Value& v) { return v.kind == Kind::Bool ? (int64_t)v.b : v.i; }

// Python slice index normalisation.
void slice_indices(int64_t len, const Value& start, const Value& stop, int64_t step, int64_t& b, int64_t& e) {
    auto get = [&](const Value& v, int64_t def) -> int64_t {
        if (v.kind == Kind::None || v.kind == Kind::Undefined) return def;
        if (v.kind != Kind::Int && v.kind != Kind::Bool)
            raise("TypeError", "slice indices must be integers or None");
        int64_t x = as_int(v);
        if (x < 0) {
            x += len;
            if (x < 0) x = step < 0 ? -1 : 0;
        } else if (x >= len) {
            x = step < 0 ? len - 1 : len;
        }
        return x;
    };
    b = get(start, step < 0 ? len - 1 : 0);
    e = get(stop, step < 0 ? -1 : len);
}

}  // namespace

// ---- loop and macro objects ----
struct LoopObj : Object {
    Renderer* r = nullptr;
    const Stmt* stmt = nullptr;
    std::shared_ptr<Frame> outer;
    const std::vector<Value>* items = nullptr;
    int64_t index0 = 0;
    int depth = 0;
    bool has_last_changed = false;
    Value last_changed;

    std::string type_name() const override { return "LoopContext"; }
    bool callable() const override { return stmt && stmt->recursive; }
    Value getattr(const std::string& n) override {
        int64_t len = (int64_t)items->size();
        if (n == "index") return Value::integer(index0 + 1);
        if (n == "index0") return Value::integer(index0);
        if (n == "revindex") return Value::integer(len - index0);
        if (n == "revindex0") return Value::integer(len - index0 - 1);
        if (n == "first") return Value::boolean(index0 == 0);
        if (n == "last") return Value::boolean(index0 == len - 1);
        if (n == "length") return Value::integer(len);
        if (n == "depth") return Value::integer(depth + 1);
        if (n == "depth0") return Value::integer(depth);
        if (n == "previtem")
            return index0 > 0 ? (*items)[index0 - 1] : Value::undefined("there is no previous item");
        if (n == "nextitem")
            return index0 + 1 < len ? (*items)[index0 + 1] : Value::undefined("there is no next item");
        if (n == "cycle") {
            int64_t i0 = index0;
            return make_function("cycle", [i0](Renderer&, Args& a) -> Value {
                if (a.pos.empty()) raise("TypeError", "no items for cycling given");
                return a.pos[i0 % (int64_t)a.pos.size()];
            });
        }
        if (n == "changed") {
            LoopObj* self = this;
            auto keep = std::static_pointer_cast<LoopObj>(shared_from_this_hack());
            return make_function("changed", [self, keep](Renderer&, Args& a) -> Value {
                Value cur = Value::new_tuple(a.pos);
                if (!self->has_last_changed || !equals(self->last_changed, cur)) {
                    self->has_last_changed = true;
                    self->last_changed = cur;
                    return Value::boolean(true);
                }
                return Value::boolean(false);
            });
        }
        return Object::getattr(n);
    }
    Value call(Renderer& rr, Args& a) override {
        if (!callable()) return Object::call(rr, a);
        if (a.pos.size() != 1) raise("TypeError", "loop() takes exactly one argument");
        Renderer::DepthGuard g(rr);  // a recursive loop recurses like a macro
        auto saved_frame = rr.frame_;
        std::string buf;
        std::string* saved_out = rr.out_;
        rr.out_ = &buf;
        rr.frame_ = outer;
        try {
            rr.run_for(*stmt, a.pos[0], depth + 1);
        } catch (...) {
            rr.out_ = saved_out;
            rr.frame_ = saved_frame;
            throw;
        }
        rr.out_ = saved_out;
        rr.frame_ = saved_frame;
        return Value::string(buf);
    }
    std::weak_ptr<Object> self_ref;
    void release() override { outer.reset(); }
    std::shared_ptr<Object> shared_from_this_hack() { return self_ref.lock(); }
};

struct MacroObj : Object {
    std::shared_ptr<MacroDef> def;
    std::shared_ptr<Frame> closure;
    std::string type_name() const override { return "Macro"; }
    bool callable() const override { return true; }
    std::string repr() const override { return "<Macro '" + def->name + "'>"; }
    void release() override { closure.reset(); }
    Value getattr(const std::string& n) override {
        if (n == "name") return Value::string(def->name);
        return Object::getattr(n);
    }
    Value call(Renderer& r, Args& a) override {
        Renderer::DepthGuard g(r);
        auto f = std::make_shared<Frame>();
        f->parent = closure;
        size_t np = def->params.size(), nd = def->defaults.size();
        std::vector<bool> set(np, false);
        std::vector<Value> varargs;
        for (size_t i = 0; i < a.pos.size(); ++i) {
            if (i < np) {
                f->vars[def->params[i]] = a.pos[i];
                set[i] = true;
            } else {
                varargs.push_back(a.pos[i]);
            }
        }
        Value kwargs = Value::new_dict();
        for (auto& [k, v] : a.kw) {
            bool found = false;
            for (size_t i = 0; i < np; ++i)
                if (def->params[i] == k) {
                    if (set[i]) raise("TypeError", "macro '" + def->name + "' got multiple values for argument '" + k + "'");
                    f->vars[k] = v;
                    set[i] = true;
                    found = true;
                }
            if (found) continue;
            if (k == "caller")
                f->vars["caller"] = v;
            else
                kwargs.d().set(k, v);
        }
        auto saved = r.frame_;
        r.frame_ = f;
        try {
            for (size_t i = 0; i < np; ++i) {
                if (set[i]) continue;
                if (i >= np - nd)
                    f->vars[def->params[i]] = r.eval(*def->defaults[i - (np - nd)]);
                else
                    f->vars[def->params[i]] = Value::undefined("parameter '" + def->params[i] + "' was not provided");
            }
        } catch (...) {
            r.frame_ = saved;
            throw;
        }
        r.frame_ = saved;
        if (!varargs.empty() && !def->uses_varargs)
            raise("TypeError", "macro '" + def->name + "' takes not more than " + std::to_string(np) + " argument(s)");
        if (kwargs.d().size() && !def->uses_kwargs)
            raise("TypeError", "macro '" + def->name + "' takes no keyword argument '" + to_str(kwargs.d().entries[0].first) + "'");
        f->vars["varargs"] = Value::new_tuple(std::move(varargs));
        f->vars["kwargs"] = kwargs;
        return Value::string(r.capture(def->body, f));
    }
};

// ---- Renderer ----
Renderer::DepthGuard::DepthGuard(Renderer& rr) : r(rr) {
    if (r.depth_ >= r.limits_.max_call_depth)
        raise("RecursionError", "maximum recursion depth exceeded (" + std::to_string(r.limits_.max_call_depth) +
                                    "; max_recursion_depth)");
    check_stack();
    ++r.depth_;  // last: a constructor that raises runs no destructor
}

Renderer::Renderer(const Limits& limits, const std::tm& now) : limits_(limits), now_(now) { add_globals(globals_); }

std::string Renderer::render(const Template& tpl, const Value& ctx) {
    BudgetLimits bl;
    bl.max_steps = limits_.max_steps;
    bl.max_value_depth = limits_.max_value_depth;
    bl.max_items = limits_.max_output / 16;  // as check_list_size
    bl.max_stack_bytes = limits_.max_stack_bytes;
    BudgetScope budget(bl);
    frame_ = std::make_shared<Frame>();
    if (ctx.kind == Kind::Dict)
        for (auto& [k, v] : ctx.d().entries) frame_->vars[to_str(k)] = v;
    std::string out;
    out_ = &out;
    iterations_ = 0;
    depth_ = 0;
    struct Release {
        Renderer& r;
        ~Release() {
            for (auto& w : r.tracked_)
                if (auto o = w.lock()) o->release();
            r.tracked_.clear();
            r.out_ = nullptr;
            r.frame_.reset();
        }
    } release{*this};
    exec_body(tpl.body);
    return out;
}

void Renderer::check_string_size(size_t n) const {
    if (n > limits_.max_output)
        raise("OutputLimitError", "output exceeds the limit of " + std::to_string(limits_.max_output) + " bytes");
}

void Renderer::check_list_size(size_t n) const {
    // A value costs far more than a byte: allow one element per 16 bytes of output limit.
    if (n > limits_.max_output / 16)
        raise("OutputLimitError", "list of " + std::to_string(n) + " items exceeds the size limit");
}

void Renderer::count_iterations(int64_t n) {
    iterations_ += n;
    if (iterations_ > limits_.max_loop_iterations)
        raise("LoopLimitError", "more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
}

void Renderer::write(const std::string& s) {
    check_string_size(out_->size() + s.size());
    out_->append(s);
}

std::string Renderer::capture(const Body& body, std::shared_ptr<Frame> frame) {
    DepthGuard g(*this);
    std::string buf;
    std::string* saved_out = out_;
    auto saved_frame = frame_;
    out_ = &buf;
    frame_ = std::move(frame);
    try {
        exec_body(body);
    } catch (...) {
        out_ = saved_out;
        frame_ = saved_frame;
        throw;
    }
    out_ = saved_out;
    frame_ = saved_frame;
    return buf;
}

Value Renderer::lookup(const std::string& name) {
    for (Frame* f = frame_.get(); f; f = f->parent.get()) {
        auto it = f->vars.find(name);
        if (it != f->vars.end()) return it->second;
    }
    auto g = globals_.find(name);
    if (g != globals_.end()) return g->second;
    return Value::undefined("'" + name + "' is undefined");
}

void Renderer::assign(const Target& t, const Value& v) {
    if (!t.attr.empty()) {
        Value ns = lookup(t.name);
        if (ns.kind != Kind::Object || !ns.obj->setattr(t.attr, v))
            raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        return;
    }
    if (t.names.empty()) {
        frame_->vars[t.name] = v;
        return;
    }
    std::vector<Value> items = iterate(v);
    if (items.size() != t.names.size())
        raise("ValueError", items.size() < t.names.size()
                                ? "not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                                      std::to_string(items.size()) + ")"
                                : "too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
    for (size_t i = 0; i < items.size(); ++i) frame_->vars[t.names[i]] = items[i];
}

Renderer::Flow Renderer::exec_body(const Body& body) {
    for (auto& s : body) {
        Flow f = exec(*s);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

static Value apply_chain(Renderer& r, const Expr& f, const Value& input, const std::function<void(const CallArgs&, Args&)>& ev) {
    Value v = f.a ? apply_chain(r, *f.a, input, ev) : input;
    Args args;
    ev(f.args, args);
    return r.filter(f.name, v, args);
}

Renderer::Flow Renderer::exec(const Stmt& s) {
    try {
        charge(1);
        check_stack();
        switch (s.k) {
            case Stmt::Text: write(s.text); break;
            case Stmt::Output: {
                Value v = eval(*s.expr);
                if (v.kind == Kind::String)
                    write(v.s);
                else
                    write(to_str(v));
                break;
            }
            case Stmt::If:
                return truthy(eval(*s.expr)) ? exec_body(s.body) : exec_body(s.else_body);
            case Stmt::For: {
                Value it = eval(*s.expr);
                run_for(s, it, 0);
                break;
            }
            case Stmt::Set: assign(s.target, eval(*s.expr)); break;
            case Stmt::SetBlock: {
                Value v = Value::string(capture(s.body, frame_));
                if (s.expr) v = apply_chain(*this, *s.expr, v, [this](const CallArgs& c, Args& a) { eval_args(c, a); });
                assign(s.target, v);
                break;
            }
            case Stmt::Macro: {
                auto m = std::make_shared<MacroObj>();
                m->def = s.macro;
                m->closure = frame_;
                track(m);
                frame_->vars[s.macro->name] = Value::object(m);
                break;
            }
            case Stmt::CallBlock: {
                auto m = std::make_shared<MacroObj>();
                m->def = s.macro;
                m->closure = frame_;
                track(m);
                Value callee = eval(*s.expr->a);
                Args args;
                eval_args(s.expr->args, args);
                args.kw.emplace_back("caller", Value::object(m));
                write(to_str(call(callee, args)));
                break;
            }
            case Stmt::FilterBlock: {
                Value v = Value::string(capture(s.body, frame_));
                v = apply_chain(*this, *s.expr, v, [this](const CallArgs& c, Args& a) { eval_args(c, a); });
                write(to_str(v));
                break;
            }
            case Stmt::Break: return Flow::Break;
            case Stmt::Continue: return Flow::Continue;
            case Stmt::Scope: return exec_body(s.body);
            case Stmt::With: {
                auto f = std::make_shared<Frame>();
                f->parent = frame_;
                std::vector<Value> vals;
                for (auto& [t, e] : s.with_vars) vals.push_back(eval(*e));
                auto saved = frame_;
                frame_ = f;
                for (size_t i = 0; i < vals.size(); ++i) assign(s.with_vars[i].first, vals[i]);
                Flow fl;
                try {
                    fl = exec_body(s.body);
                } catch (...) {
                    frame_ = saved;
                    throw;
                }
                frame_ = saved;
                return fl;
            }
        }
    } catch (RenderError& e) {
        if (e.line == 0) e.line = s.line;
        throw;
    }
    return Flow::Normal;
}

void Renderer::run_for(const Stmt& s, const Value& iterable, int depth) {
    if (iterable.kind == Kind::None || iterable.kind == Kind::Int || iterable.kind == Kind::Float ||
        iterable.kind == Kind::Bool)
        raise("TypeError", "'" + type_name(iterable) + "' object is not iterable");
    std::vector<Value> all = iterate(iterable);
    auto loop_frame = std::make_shared<Frame>();
    loop_frame->parent = frame_;
    auto saved = frame_;
    frame_ = loop_frame;
    try {
        std::vector<Value> items;
        if (s.cond) {
            for (auto& v : all) {
                count_iterations(1);
                assign(s.target, v);
                if (truthy(eval(*s.cond))) items.push_back(v);
            }
        } else {
            items = std::move(all);
        }
        auto loop = std::make_shared<LoopObj>();
        loop->self_ref = loop;
        track(loop);
        loop->r = this;
        loop->stmt = &s;
        loop->outer = saved;
        loop->items = &items;
        loop->depth = depth;
        Value loopv = Value::object(loop);
        for (size_t i = 0; i < items.size(); ++i) {
            count_iterations(1);
            loop->index0 = (int64_t)i;
            // jinja2 re-reads outer variables at the start of every iteration: a fresh
            // scope per iteration, so `set` inside the body never carries over.
            frame_ = std::make_shared<Frame>();
            frame_->parent = saved;
            assign(s.target, items[i]);
            frame_->vars["loop"] = loopv;
            Flow f = exec_body(s.body);
            if (f == Flow::Break) break;
        }
        frame_ = loop_frame;
        loop->items = nullptr;
        static const std::vector<Value> kEmpty;
        loop->items = &kEmpty;
        if (items.empty()) {
            loop_frame->vars.erase("loop");
            exec_body(s.else_body);
        }
    } catch (...) {
        frame_ = saved;
        throw;
    }
    frame_ = saved;
}

void Renderer::eval_args(const CallArgs& ca, Args& out) {
    for (auto& e : ca.pos) out.pos.push_back(eval(*e));
    for (auto& [k, e] : ca.kw) out.kw.emplace_back(k, eval(*e));
    if (ca.star) {
        Value v = eval(*ca.star);
        for (auto& x : iterate(v)) out.pos.push_back(x);
    }
    if (ca.starstar) {
        Value v = eval(*ca.starstar);
        if (v.kind != Kind::Dict) raise("TypeError", "argument after ** must be a mapping");
        for (auto& [k, x] : v.d().entries) out.kw.emplace_back(to_str(k), x);
    }
}

Value Renderer::eval(const Expr& e) {
    try {
        charge(1);
        check_stack();
        return eval_inner(e);
    } catch (RenderError& err) {
        if (err.line == 0) err.line = e.line;
        throw;
    }
}

Value Renderer::eval_inner(const Expr& e) {
    switch (e.k) {
        case Expr::Literal: return e.value;
        case Expr::Name: return lookup(e.name);
        case Expr::TupleLit:
        case Expr::ListLit: {
            std::vector<Value> items;
            items.reserve(e.items.size());
            for (auto& x : e.items) items.push_back(eval(*x));
            return e.k == Expr::TupleLit ? Value::new_tuple(std::move(items)) : Value::new_list(std::move(items));
        }
        case Expr::DictLit: {
            Value d = Value::new_dict();
            for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
                Value k = eval(*e.items[i]);
                hash_key(k);  // raises for unhashable keys
                d.d().set(k, eval(*e.items[i + 1]));
            }
            return d;
        }
        case Expr::Getattr: return getattr(eval(*e.a), e.name);
        case Expr::Getitem: return getitem(eval(*e.a), eval(*e.b));
        case Expr::Slice: {
            Value obj = eval(*e.a);
            Value b = e.b ? eval(*e.b) : Value::none();
            Value c = e.c ? eval(*e.c) : Value::none();
            Value d = e.d ? eval(*e.d) : Value::none();
            return slice(obj, b, c, d);
        }
        case Expr::Call: {
            Value callee = eval(*e.a);
            Args args;
            eval_args(e.args, args);
            return call(callee, args);
        }
        case Expr::Filter: {
            Value v = e.a ? eval(*e.a) : Value::undefined();
            Args args;
            eval_args(e.args, args);
            return filter(e.name, v, args);
        }
        case Expr::Test: {
            Value v = eval(*e.a);
            Args args;
            eval_args(e.args, args);
            return Value::boolean(test(e.name, v, args) != e.negated);
        }
        case Expr::Neg:
        case Expr::Pos: {
            Value v = eval(*e.a);
            if (v.kind == Kind::Undefined) v.fail_undefined();
            if (v.kind == Kind::Int || v.kind == Kind::Bool) {
                if (e.k == Expr::Neg && as_int(v) == INT64_MIN) raise("OverflowError", "integer overflow");
                return Value::integer(e.k == Expr::Neg ? -as_int(v) : as_int(v));
            }
            if (v.kind == Kind::Float) return Value::number(e.k == Expr::Neg ? -v.f : v.f);
            raise("TypeError", std::string("bad operand type for unary ") + (e.k == Expr::Neg ? "-" : "+") + ": '" +
                                   type_name(v) + "'");
        }
        case Expr::Not: return Value::boolean(!truthy(eval(*e.a)));
        case Expr::And: {
            Value a = eval(*e.a);
            return truthy(a) ? eval(*e.b) : a;
        }
        case Expr::Or: {
            Value a = eval(*e.a);
            return truthy(a) ? a : eval(*e.b);
        }
        case Expr::Binary: {
            Value a = eval(*e.a);
            Value b = eval(*e.b);
            return binary(e.name, a, b);
        }
        case Expr::Concat: {
            std::string s;
            for (auto& x : e.items) {
                Value v = eval(*x);
                s += v.kind == Kind::String ? v.s : to_str(v);
                check_string_size(s.size());
            }
            return Value::string(std::move(s));
        }
        case Expr::Compare: {
            Value left = eval(*e.a);
            for (size_t i = 0; i < e.ops.size(); ++i) {
                Value right = eval(*e.items[i]);
                if (!compare_op(e.ops[i], left, right)) return Value::boolean(false);
                left = std::move(right);
            }
            return Value::boolean(true);
        }
        case Expr::CondExpr: {
            if (truthy(eval(*e.b))) return eval(*e.a);
            if (e.c) return eval(*e.c);
            return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                    " evaluated to false and no else section was defined.");
        }
    }
    return Value::undefined();
}

bool Renderer::compare_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in" || op == "notin") {
        bool found = false;
        switch (b.kind) {
            case Kind::String:
                if (a.kind != Kind::String) {
                    if (a.kind == Kind::Undefined) a.fail_undefined();
                    raise("TypeError", "'in <string>' requires string as left operand, not " + type_name(a));
                }
                found = text::contains(b.s, a.s);
                break;
            case Kind::List:
            case Kind::Tuple:
            case Kind::Generator:
                for (auto& x : b.items())
                    if (equals(x, a)) {
                        found = true;
                        break;
                    }
                break;
            case Kind::Dict:
                hash_key(a);
                found = b.d().find(a) != nullptr;
                break;
            case Kind::Undefined:
                if (!b.undef_exc.empty()) b.fail_undefined();
                found = false;
                break;
            default: raise("TypeError", "argument of type '" + type_name(b) + "' is not iterable");
        }
        return op == "in" ? found : !found;
    }
    if (a.kind == Kind::Undefined) a.fail_undefined();
    if (b.kind == Kind::Undefined) b.fail_undefined();
    bool ok_types = (a.is_number() && b.is_number()) || (a.kind == Kind::String && b.kind == Kind::String) ||
                    ((a.kind == Kind::List || a.kind == Kind::Tuple) && a.kind == b.kind);
    if (!ok_types)
        raise("TypeError", "'" + op + "' not supported between instances of '" + type_name(a) + "' and '" +
                               type_name(b) + "'");
    int c = compare(a, b);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
}

Value Renderer::binary(const std::string& op, const Value& a, const Value& b) {
    if (a.kind == Kind::Undefined) a.fail_undefined();
    if (b.kind == Kind::Undefined) b.fail_undefined();
    auto unsupported = [&]() -> Value {
        if (op == "+" && a.kind == Kind::String)
            raise("TypeError", "can only concatenate str (not \"" + type_name(b) + "\") to str");
        if (op == "+" && a.kind == Kind::List)
            raise("TypeError", "can only concatenate list (not \"" + type_name(b) + "\") to list");
        raise("TypeError", "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
    };
    bool ints = (a.kind == Kind::Int || a.kind == Kind::Bool) && (b.kind == Kind::Int || b.kind == Kind::Bool);
    bool nums = a.is_number() && b.is_number();
    auto fa = [&] { return a.kind == Kind::Float ? a.f : (double)as_int(a); };
    auto fb = [&] { return b.kind == Kind::Float ? b.f : (double)as_int(b); };
    if (op == "+") {
        if (ints) {
            int64_t r;
            if (__builtin_add_overflow(as_int(a), as_int(b), &r)) raise("OverflowError", "integer overflow");
            return Value::integer(r);
        }
        if (nums) return Value::number(fa() + fb());
        if (a.kind == Kind::String && b.kind == Kind::String) {
            check_string_size(a.s.size() + b.s.size());
            if (a.is_safe() && !b.is_safe()) return Value::string(a.s + text::html_escape(b.s), true);
            if (!a.is_safe() && b.is_safe()) return Value::string(text::html_escape(a.s) + b.s, true);
            return Value::string(a.s + b.s, a.is_safe());
        }
        if ((a.kind == Kind::List || a.kind == Kind::Tuple) && a.kind == b.kind) {
            check_list_size(a.items().size() + b.items().size());
            std::vector<Value> v = a.items();
            v.insert(v.end(), b.items().begin(), b.items().end());
            return a.kind == Kind::List ? Value::new_list(std::move(v)) : Value::new_tuple(std::move(v));
        }
        return unsupported();
    }
    if (op == "-") {
        if (ints) {
            int64_t r;
            if (__builtin_sub_overflow(as_int(a), as_int(b), &r)) raise("OverflowError", "integer overflow");
            return Value::integer(r);
        }
        if (nums) return Value::number(fa() - fb());
        return unsupported();
    }
    if (op == "*") {
        if (ints) {
            int64_t r;
            if (__builtin_mul_overflow(as_int(a), as_int(b), &r)) raise("OverflowError", "integer overflow");
            return Value::integer(r);
        }
        if (nums) return Value::number(fa() * fb());
        const Value* seq = nullptr;
        const Value* cnt = nullptr;
        if ((a.kind == Kind::String || a.is_sequence()) && (b.kind == Kind::Int || b.kind == Kind::Bool)) seq = &a, cnt = &b;
        if ((b.kind == Kind::String || b.is_sequence()) && (a.kind == Kind::Int || a.kind == Kind::Bool)) seq = &b, cnt = &a;
        if (!seq) {
            if (a.is_sequence() || a.kind == Kind::String || b.is_sequence() || b.kind == Kind::String)
                raise("TypeError", "can't multiply sequence by non-int of type '" +
                                       type_name(a.kind == Kind::String || a.is_sequence() ? b : a) + "'");
            return unsupported();
        }
        int64_t n = std::max<int64_t>(0, as_int(*cnt));
        // An empty sequence repeated is empty however large n is (without this, '' * 10**12
        // looped 10**12 times under the output bound: a fuzzer's timeout).
        if (seq->kind == Kind::String ? seq->s.empty() : seq->items().empty()) n = 0;
        if (seq->kind == Kind::String) {
            if (n > 0 && seq->s.size() > 0) check_string_size((size_t)std::min<int64_t>(n, INT64_MAX / (int64_t)seq->s.size() / 2) * seq->s.size());
            std::string r;
            r.reserve(seq->s.size() * n);
            for (int64_t i = 0; i < n; ++i) r += seq->s;
            return Value::string(std::move(r));
        }
        if (n > 0 && !seq->items().empty()) check_list_size((size_t)std::min<int64_t>(n, 1 << 30) * seq->items().size());
        std::vector<Value> v;
        for (int64_t i = 0; i < n; ++i) v.insert(v.end(), seq->items().begin(), seq->items().end());
        return seq->kind == Kind::List ? Value::new_list(std::move(v)) : Value::new_tuple(std::move(v));
    }
    if (op == "/") {
        if (!nums) return unsupported();
        if (fb() == 0) raise("ZeroDivisionError", "division by zero");
        return Value::number(fa() / fb());
    }
    if (op == "//") {
        if (!nums) return unsupported();
        if (fb() == 0) raise("ZeroDivisionError", "integer division or modulo by zero");
        if (ints) {
            int64_t x = as_int(a), y = as_int(b);
            if (x == INT64_MIN && y == -1) raise("OverflowError", "integer overflow");  // 2**63
            int64_t q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
            return Value::integer(q);
        }
        return Value::number(std::floor(fa() / fb()));
    }
    if (op == "%") {
        if (a.kind == Kind::String) return Value::string(percent_format(*this, a.s, b));
        if (!nums) return unsupported();
        if (fb() == 0) raise("ZeroDivisionError", "integer division or modulo by zero");
        if (ints) {
            int64_t x = as_int(a), y = as_int(b);
            if (y == -1) return Value::integer(0);  // INT64_MIN % -1 traps in C++
            int64_t m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return Value::integer(m);
        }
        double m = std::fmod(fa(), fb());
        if (m != 0 && ((m < 0) != (fb() < 0))) m += fb();
        return Value::number(m);
    }
    if (op == "**") {
        if (!nums) return unsupported();
        if (ints && as_int(b) >= 0) {
            int64_t base = as_int(a), ex = as_int(b), r = 1;
            while (ex > 0) {
                if (ex & 1)
                    if (__builtin_mul_overflow(r, base, &r)) raise("OverflowError", "integer overflow");
                ex >>= 1;
                if (ex > 0 && __builtin_mul_overflow(base, base, &base)) raise("OverflowError", "integer overflow");
            }
            return Value::integer(r);
        }
        return Value::number(std::pow(fa(), fb()));
    }
    return unsupported();
}

Value Renderer::slice(const Value& obj, const Value& start, const Value& stop, const Value& stepv) {
    if (obj.kind == Kind::Undefined) obj.fail_undefined();
    int64_t step = 1;
    if (stepv.kind != Kind::None) {
        if (stepv.kind != Kind::Int && stepv.kind != Kind::Bool) raise("TypeError", "slice indices must be integers or None");
        step = as_int(stepv);
        if (step == 0) raise("ValueError", "slice step cannot be zero");
    }
    auto pick = [&](int64_t len, auto&& take) {
        int64_t b, e;
        slice_indices(len, start, stop, step, b, e);
        // i += step must not overflow (step may be near INT64_MAX): stop before it would pass e.
        if (step > 0) {
            for (int64_t i = b; i < e; i = e - i > step ? i + step : e) take(i);
        } else {
            for (int64_t i = b; i > e; i = i - e > -(step + 1) ? i + step : e) take(i);
        }
    };
    if (obj.kind == Kind::String) {
        auto cps = text::decode(obj.s);
        std::vector<char32_t> out;
        pick((int64_t)cps.size(), [&](int64_t i) { out.push_back(cps[i]); });
        return Value::string(text::encode(out));
    }
    if (obj.kind == Kind::List || obj.kind == Kind::Tuple) {
        auto& it = obj.items();
        std::vector<Value> out;
        pick((int64_t)it.size(), [&](int64_t i) { out.push_back(it[i]); });
        return obj.kind == Kind::List ? Value::new_list(std::move(out)) : Value::new_tuple(std::move(out));
    }
    return Value::undefined(object_desc(obj) + " has no element slice");
}

Value Renderer::getattr(const Value& obj, const std::string& name) {
    switch (obj.kind) {
        case Kind::Undefined: obj.fail_undefined();
        case Kind::Object: return obj.obj->getattr(name);
        case Kind::Dict:
        case Kind::String:
        case Kind::List:
        case Kind::Tuple: {
            Value m;
            if (lookup_method(obj, name, m)) return m;
            if (obj.kind == Kind::Dict)
                if (const Value* v = obj.d().find(name)) return *v;
            return missing_attr(obj, name);
        }
        default: {
            Value m;
            if (lookup_method(obj, name, m)) return m;
            return missing_attr(obj, name);
        }
    }
}

Value Renderer::getitem(const Value& obj, const Value& key) {
    switch (obj.kind) {
        case Kind::Undefined: obj.fail_undefined();
        case Kind::Dict: {
            if (key.kind != Kind::List && key.kind != Kind::Dict)
                if (const Value* v = obj.d().find(key)) return *v;
            break;
        }
        case Kind::String:
        case Kind::List:
        case Kind::Tuple: {
            if (key.kind == Kind::Int || key.kind == Kind::Bool) {
                int64_t i = as_int(key);
                if (obj.kind == Kind::String) {
                    auto cps = text::decode(obj.s);
                    int64_t n = (int64_t)cps.size();
                    if (i < 0) i += n;
                    if (i >= 0 && i < n) {
                        std::string s;
                        text::append_utf8(s, cps[i]);
                        return Value::string(s);
                    }
                } else {
                    int64_t n = (int64_t)obj.items().size();
                    if (i < 0) i += n;
                    if (i >= 0 && i < n) return obj.items()[i];
                }
                return Value::undefined(object_desc(obj) + " has no element " + std::to_string(as_int(key)));
            }
            break;
        }
        case Kind::Object:
            if (key.kind == Kind::String) return obj.obj->getattr(key.s);
            break;
        default: break;
    }
    if (key.kind == Kind::String) {
        Value m;
        if (lookup_method(obj, key.s, m)) return m;
        return missing_attr(obj, key.s);
    }
    return Value::undefined(object_desc(obj) + " has no element " + repr(key));
}

Value Renderer::call(const Value& callee, Args& args) {
    if (callee.kind == Kind::Undefined) callee.fail_undefined();
    if (callee.kind != Kind::Object || !callee.obj->callable())
        raise("TypeError", "'" + type_name(callee) + "' object is not callable");
    return callee.obj->call(*this, args);
}

Value Renderer::filter(const std::string& name, const Value& v, Args& args) {
    Value out;
    if (!call_filter(*this, name, v, args, out)) raise("TemplateRuntimeError", "No filter named '" + name + "'.");
    return out;
}

bool Renderer::test(const std::string& name, const Value& v, Args& args) {
    bool out = false;
    if (!call_test(*this, name, v, args, out)) raise("TemplateRuntimeError", "No test named '" + name + "'.");
    return out;
}

}  // namespace vega::tmpl
