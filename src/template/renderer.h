// Evaluates a parsed template: scopes, statements, expressions, Python operators,
// attribute lookup (sandboxed like jinja2's ImmutableSandboxedEnvironment).
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>

#include "template/ast.h"
#include "template/value.h"

namespace vega::tmpl {

struct Limits {
    size_t max_output = 16u << 20;        // bytes of output (and of any one string)
    int max_call_depth = 200;             // nested macro / filter-block / eval depth
    int64_t max_loop_iterations = 1000000;  // all loops of one render together
    int64_t max_range = 100000;           // range() length (jinja2's sandbox MAX_RANGE)
    int64_t max_steps = 20000000;         // evaluation steps (budget.h)
    int max_value_depth = 512;            // nesting of lists / dicts a walk (repr, ==, tojson) enters
    size_t max_stack_bytes = 4u << 20;    // stack the render may use
};

struct Frame {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Frame> parent;
};

class Renderer {
public:
    Renderer(const Limits& limits, const std::tm& now);

    // Renders tpl with the variables of ctx (a Dict value).
    std::string render(const Template& tpl, const Value& ctx);

    // ---- used by filters, tests, methods and globals ----
    Value call(const Value& callee, Args& args);
    Value getattr(const Value& obj, const std::string& name);
    Value getitem(const Value& obj, const Value& key);
    Value filter(const std::string& name, const Value& v, Args& args);
    bool test(const std::string& name, const Value& v, Args& args);
    void check_string_size(size_t n) const;
    void check_list_size(size_t n) const;
    void count_iterations(int64_t n);
    // Objects that may hold references back into the render (namespaces, macros, loops):
    // released when the render ends so that no reference cycle outlives it.
    void track(const std::shared_ptr<Object>& o) { tracked_.push_back(o); }
    const Limits& limits() const { return limits_; }
    const std::tm& now() const { return now_; }

    // Renders a body in a new output buffer (macros, set blocks, filter blocks).
    std::string capture(const Body& body, std::shared_ptr<Frame> frame);
    // Used by the loop object for recursive loops.
    void run_for(const Stmt& s, const Value& iterable, int depth);

    struct DepthGuard {
        Renderer& r;
        explicit DepthGuard(Renderer& rr);
        ~DepthGuard() { --r.depth_; }
    };

private:
    enum class Flow { Normal, Break, Continue };

    Flow exec_body(const Body& body);
    Flow exec(const Stmt& s);
    Value eval(const Expr& e);
    Value eval_inner(const Expr& e);
    void eval_args(const CallArgs& ca, Args& out);
    Value binary(const std::string& op, const Value& a, const Value& b);
    bool compare_op(const std::string& op, const Value& a, const Value& b);
    Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
    Value lookup(const std::string& name);
    void assign(const Target& t, const Value& v);
    void write(const std::string& s);

    Limits limits_;
    std::tm now_;
    std::unordered_map<std::string, Value> globals_;
    std::shared_ptr<Frame> frame_;
    std::string* out_ = nullptr;
    int depth_ = 0;
    int64_t iterations_ = 0;
    std::vector<std::weak_ptr<Object>> tracked_;

    friend struct MacroObj;
    friend struct LoopObj;
};

}  // namespace vega::tmpl
