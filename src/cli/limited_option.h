// CLI options whose flags and valid range come from the shared table
// (engine/option_limits.h), so that the CLI refuses exactly what the server refuses,
// with the same message.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <type_traits>
#include <vector>

#include "engine/option_limits.h"

namespace vega::cli {

namespace detail {
template <typename T> struct element { using type = T; };
template <typename E> struct element<std::vector<E>> { using type = E; };
}  // namespace detail

// A validator for one value of type T (each item of a list option). A value outside
// the limit throws vega::Error rather than returning CLI11's message: main() prints it
// as one line ("error: '--top-p' must be between 0 and 1 (got 5)") and exits 1, while
// CLI11's ValidationError would prefix the flag again and add a "Run with --help" line.
// It runs while the command line is parsed, so nothing (no model) has been loaded yet.
// A value CLI11 cannot convert passes here and gets CLI11's own conversion error.
template <typename T>
CLI::Validator limit_validator(const OptionLimit& limit) {
    return CLI::Validator(
        [&limit](std::string& text) -> std::string {
            // Floats are read as double so that the message shows the value typed
            // ("got 1.1", not float's "got 1.100000023841858").
            std::conditional_t<std::is_floating_point_v<T>, double, T> v{};
            if (CLI::detail::lexical_cast(text, v)) check_option(limit, double(v), OptionSpelling::Flag);
            return {};
        },
        option_range(limit));
}

// cmd.add_option(limit.flags, target, help) with limit_validator; target may be a list.
template <typename T>
CLI::Option* add_limited_option(CLI::App& cmd, T& target, const OptionLimit& limit, const std::string& help) {
    return cmd.add_option(limit.flags, target, help)->check(limit_validator<typename detail::element<T>::type>(limit));
}

}  // namespace vega::cli
