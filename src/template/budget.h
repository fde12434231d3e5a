// The work budget of the render running on this thread: every loop over data and every
// recursive walk in the template module charges it, so that a hostile template or input
// ends with an error naming the limit instead of a hang, a stack overflow or a memory blow-up.
//
// It is per thread (not passed around) because the costs arise deep inside value semantics
// (copying a 16 MB string, comparing two deep lists inside a sort, repr of a cyclic
// namespace) where no Renderer is at hand. Outside a render, charging is free and value
// walks get the default depth limit.
//
// One step is one expression or statement evaluated, or 16 bytes of string, or one list or
// dict element created, copied or visited.
#pragma once
#include <cstddef>
#include <cstdint>

namespace vega::tmpl {

struct BudgetLimits {
    int64_t max_steps = INT64_MAX;
    int max_value_depth = 512;         // nesting of lists, dicts and namespaces a walk may enter
    size_t max_items = SIZE_MAX;       // elements of one list made from a string (list(s), s.split())
    size_t max_stack_bytes = 4u << 20;  // stack the render may use (less if the thread has less)
};

namespace budget_detail {
struct State {
    BudgetLimits lim;
    int64_t steps_left = INT64_MAX;
    int depth = 0;
    uintptr_t stack_floor = 0;  // the render fails before its stack reaches below this address
};
extern thread_local State* current;
[[noreturn]] void out_of_steps(const State& s);
[[noreturn]] void out_of_stack(const State& s);
}  // namespace budget_detail

// Installs a budget for the render on this thread for the life of the scope.
class BudgetScope {
public:
    explicit BudgetScope(const BudgetLimits& lim);
    ~BudgetScope();
    BudgetScope(const BudgetScope&) = delete;
    BudgetScope& operator=(const BudgetScope&) = delete;
    int64_t steps_used() const { return state_.lim.max_steps - state_.steps_left; }

private:
    budget_detail::State state_;
    budget_detail::State* saved_;
};

// Charges n steps; raises StepLimitError once the budget is spent.
inline void charge(int64_t n) {
    budget_detail::State* s = budget_detail::current;
    if (s && (s->steps_left -= n) < 0) budget_detail::out_of_steps(*s);
}
// Charges for handling n bytes of string.
inline void charge_bytes(size_t n) {
    if (n >= 16) charge(int64_t(n >> 4));
}

// Raises RecursionError when the render has used up its stack (checked by the recursive
// routines of the renderer, whose frames vary in size with the build).
inline void check_stack() {
    budget_detail::State* s = budget_detail::current;
    if (s && (uintptr_t)__builtin_frame_address(0) < s->stack_floor) budget_detail::out_of_stack(*s);
}

// Raises OutputLimitError if a list of n elements would exceed the item limit.
void check_items(size_t n);

// One level of a recursive walk over a value (repr, ==, <, hash, tojson): charges a step and
// raises RecursionError past max_value_depth.
class NestGuard {
public:
    NestGuard();
    ~NestGuard();
    NestGuard(const NestGuard&) = delete;
    NestGuard& operator=(const NestGuard&) = delete;
};

}  // namespace vega::tmpl
