// The VEGA_* environment switches (A/B and tuning knobs, documented in the README),
// parsed one way everywhere. Header-only and free of fmt, so GPU translation units use
// it too. Unset or empty: the fallback. A value that does not parse throws, naming the
// variable (a typo in an A/B run must not silently measure the default).
#pragma once
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace vega::env {

inline const char* get(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}

// "0", "false", "off", "no": off; "1", "true", "on", "yes": on.
inline bool flag(const char* name, bool fallback) {
    const char* v = get(name);
    if (!v) return fallback;
    for (const char* off : {"0", "false", "off", "no"})
        if (std::strcmp(v, off) == 0) return false;
    for (const char* on : {"1", "true", "on", "yes"})
        if (std::strcmp(v, on) == 0) return true;
    throw std::invalid_argument(std::string(name) + "='" + v + "' is not a switch (use 0 or 1)");
}

inline int integer(const char* name, int fallback) {
    const char* v = get(name);
    if (!v) return fallback;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < -2147483647L || n > 2147483647L)
        throw std::invalid_argument(std::string(name) + "='" + v + "' is not an integer");
    return int(n);
}

// An integer in [lo, hi] (fallback: unset or empty); `what` says what it counts. Both a
// malformed and an out-of-range value throw, naming the variable, what it counts and the range.
inline int integer_in(const char* name, int fallback, int lo, int hi, const char* what) {
    const std::string range = std::string(" (") + what + ", " + std::to_string(lo) + ".." + std::to_string(hi) + ")";
    int n = fallback;
    try {
        n = integer(name, fallback);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(e.what() + range);
    }
    if (n < lo || n > hi) throw std::invalid_argument(std::string(name) + "=" + std::to_string(n) + " is out of range" + range);
    return n;
}

// "A,B" (a tuning shape); false when unset, a and b untouched.
inline bool int_pair(const char* name, int& a, int& b) {
    const char* v = get(name);
    if (!v) return false;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end != ',') throw std::invalid_argument(std::string(name) + "='" + v + "' is not two integers A,B");
    const long y = std::strtol(end + 1, &end, 10);
    if (*end != '\0') throw std::invalid_argument(std::string(name) + "='" + v + "' is not two integers A,B");
    a = int(x), b = int(y);
    return true;
}

}  // namespace vega::env
