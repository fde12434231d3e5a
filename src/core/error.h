// vega::Error — the one exception type for user-facing failures (bad file, bad
// argument, out of memory). Its message is one line that names the problem.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace vega {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> f, Args&&... args) {
    throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace vega
