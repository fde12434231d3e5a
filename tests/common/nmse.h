// Normalized MSE of a against a reference: sum((a - ref)^2) / sum(ref^2), as the
// end-to-end and parity tests measure it; infinity when a holds a NaN or Inf.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

namespace vega::test {

inline double nmse(const float* a, const float* ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
        den += double(ref[i]) * ref[i];
    }
    return den > 0 ? num / den : num;
}
inline double nmse(const std::vector<float>& a, const std::vector<float>& ref) {
    return a.size() == ref.size() ? nmse(a.data(), ref.data(), a.size()) : INFINITY;
}

}  // namespace vega::test
