#include "template/budget.h"

#include <pthread.h>

#include <algorithm>
#include <string>

#include "template/value.h"

namespace vega::tmpl {

namespace budget_detail {

thread_local State* current = nullptr;

void out_of_steps(const State& s) {
    raise("StepLimitError", "the template did more than " + std::to_string(s.lim.max_steps) +
                                " evaluation steps (max_steps)");
}

void out_of_stack(const State& s) {
    raise("RecursionError", "template nesting used more than " + std::to_string(s.lim.max_stack_bytes >> 10) +
                                " KiB of stack (max_stack_bytes)");
}

namespace {
// Outside a render: the default depth limit, no step limit.
thread_local int t_free_depth = 0;
}  // namespace

}  // namespace budget_detail

using budget_detail::State;

namespace {

// The lowest address this thread's stack may grow to, less a margin for the frames that
// run after a check (raising, formatting the error, library calls); 0 if unknown.
uintptr_t thread_stack_low() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
    void* addr = nullptr;
    size_t size = 0;
    int rc = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    if (rc != 0 || !addr) return 0;
    return (uintptr_t)addr + (256u << 10);
}

}  // namespace

BudgetScope::BudgetScope(const BudgetLimits& lim) : saved_(budget_detail::current) {
    state_.lim = lim;
    state_.steps_left = lim.max_steps;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t floor = here > lim.max_stack_bytes ? here - lim.max_stack_bytes : 0;
    state_.stack_floor = std::max(floor, thread_stack_low());
    budget_detail::current = &state_;
}

BudgetScope::~BudgetScope() { budget_detail::current = saved_; }

void check_items(size_t n) {
    State* s = budget_detail::current;
    if (s && n > s->lim.max_items)
        raise("OutputLimitError", "a list of " + std::to_string(n) + " items exceeds the limit of " +
                                      std::to_string(s->lim.max_items));
}

NestGuard::NestGuard() {
    State* s = budget_detail::current;
    int& depth = s ? s->depth : budget_detail::t_free_depth;
    int max = s ? s->lim.max_value_depth : BudgetLimits{}.max_value_depth;
    if (depth >= max)
        raise("RecursionError", "a value is nested more than " + std::to_string(max) + " levels deep (max_value_depth)");
    if (s) {
        charge(1);
        if ((uintptr_t)__builtin_frame_address(0) < s->stack_floor) budget_detail::out_of_stack(*s);
    }
    ++depth;  // last: a constructor that raises runs no destructor
}

NestGuard::~NestGuard() {
    State* s = budget_detail::current;
    --(s ? s->depth : budget_detail::t_free_depth);
}

}  // namespace vega::tmpl
