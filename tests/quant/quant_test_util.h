// Helpers shared by the quant tests: test vectors, byte-buffer wrappers around
// quantize_row / dequantize_row, and the list of supported types.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"

namespace vega::test {

inline const std::vector<GgmlType>& q8_types() {
    static const std::vector<GgmlType> v = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                            GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
    return v;
}
inline const std::vector<GgmlType>& all_supported_types() {
    static const std::vector<GgmlType> v = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                            GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
    return v;
}

inline std::string type_name(GgmlType t) { return type_traits(t).name; }

// x[i] = 0.1 + 2 cos(i): the round-trip signal from the brief.
inline std::vector<float> cos_signal(int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = 0.1f + 2.0f * std::cos(float(i));
    return x;
}

inline std::vector<float> normal_data(int64_t n, uint32_t seed, float mean = 0, float stddev = 1) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = dist(rng);
    return x;
}

inline std::vector<uint8_t> quantize(GgmlType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(quant::row_bytes(t, int64_t(x.size())));
    quant::quantize_row(t, x.data(), q.data(), int64_t(x.size()));
    return q;
}

inline std::vector<float> dequantize(GgmlType t, const void* q, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    quant::dequantize_row(t, q, y.data(), n);
    return y;
}

// rows x row elements of type t, row after row (each row_bytes(t, row) bytes) -> floats.
inline std::vector<float> dequantize_rows(GgmlType t, const uint8_t* q, int64_t row, int64_t rows) {
    const size_t rb = quant::row_bytes(t, row);
    std::vector<float> y(static_cast<size_t>(row * rows));
    for (int64_t r = 0; r < rows; ++r) quant::dequantize_row(t, q + size_t(r) * rb, y.data() + r * row, row);
    return y;
}

// An activation row that correlates with weight row w (w * inv_rms plus N(0, 0.2)
// noise from `seed`), quantized as matmul inputs are: what dot_q8 meets in a model.
inline std::vector<BlockQ8Act> correlated_act(const float* w, int64_t row, float inv_rms, uint32_t seed) {
    std::vector<float> ax = normal_data(row, seed, 0.0f, 0.2f);
    for (int64_t i = 0; i < row; ++i) ax[size_t(i)] += w[i] * inv_rms;
    std::vector<BlockQ8Act> a(size_t(row / QK_ACT));
    quant::quantize_act_row(ax.data(), a.data(), row);
    return a;
}

// sqrt(sum((a-b)^2)) in double.
inline double l2_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(s);
}

inline double l2_norm(const std::vector<float>& a) {
    double s = 0;
    for (float v : a) s += double(v) * v;
    return std::sqrt(s);
}

}  // namespace vega::test
