// Top-k selection on the host: the reference for every backend's top_k op and the
// default implementation (through host memory) for backends without their own.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace vega {

void top_k_host(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals,
                std::vector<int32_t>& idx) {
    if (k < 1 || k > Backend::kTopKMax || k > n) fail("top_k: k = {} must be in [1, min({}, {})]", k, Backend::kTopKMax, n);
    idx.resize(size_t(n));
    for (int r = 0; r < rows; ++r) {
        const float* l = logits + size_t(r) * n;
        auto key = [l](int32_t i) { return std::isnan(l[i]) ? -INFINITY : l[i]; };
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
            const float ka = key(a), kb = key(b);
            return ka > kb || (ka == kb && a < b);
        });
        for (int j = 0; j < k; ++j) {
            ids[size_t(r) * k + j] = idx[size_t(j)];
            vals[size_t(r) * k + j] = key(idx[size_t(j)]);
        }
    }
}

void Backend::top_k(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals) {
    std::vector<float> host(size_t(rows) * size_t(n));
    std::vector<int32_t> hid(size_t(rows) * size_t(k));
    std::vector<float> hval(size_t(rows) * size_t(k));
    std::vector<int32_t> scratch;
    synchronize();
    download(host.data(), logits, host.size() * sizeof(float));
    top_k_host(host.data(), rows, n, k, hid.data(), hval.data(), scratch);
    upload(ids, hid.data(), hid.size() * sizeof(int32_t));
    upload(vals, hval.data(), hval.size() * sizeof(float));
}

}  // namespace vega
