#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace vega {

TokenLogprobs token_logprobs(const float* logits, int n_vocab, int32_t chosen, int n_top) {
    TokenLogprobs r;
    r.token = chosen;
    // log p_i = x_i - (max + log sum exp(x - max)); NaN logits count as -inf.
    double mx = -INFINITY;
    for (int i = 0; i < n_vocab; ++i)
        if (logits[i] == logits[i]) mx = std::max(mx, double(logits[i]));
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i)
        if (logits[i] == logits[i]) sum += std::exp(double(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    auto lp = [&](int i) {
        const double v = logits[i] == logits[i] ? double(logits[i]) - lse : -INFINITY;
        return float(std::min(0.0, v));
    };
    if (chosen >= 0 && chosen < n_vocab) r.logprob = lp(chosen);
    n_top = std::clamp(n_top, 0, std::min(kMaxTopLogprobs, n_vocab));
    if (n_top > 0) {
        std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
        for (int i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
        auto better = [&](int32_t a, int32_t b) {
            const float x = logits[a] == logits[a] ? logits[a] : -INFINITY, y = logits[b] == logits[b] ? logits[b] : -INFINITY;
            return x != y ? x > y : a < b;
        };
        std::partial_sort(ids.begin(), ids.begin() + n_top, ids.end(), better);
        for (int k = 0; k < n_top; ++k) r.top.push_back({ids[size_t(k)], lp(ids[size_t(k)])});
    }
    return r;
}

}  // namespace vega
