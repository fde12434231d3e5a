// Seeded normal samples for the CPU op tests (deterministic per seed).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace vega::test {

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

}  // namespace vega::test
