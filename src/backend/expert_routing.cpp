// Host-side reference of expert routing (ExpertRouting): the rule every backend's
// route_experts follows, and the CPU's implementation.
#include <algorithm>
#include <cmath>

#include "backend/backend.h"
#include "core/error.h"

namespace vega {

namespace {

// NaN never wins (treated as -inf), as in top_k.
float route_key(const float* l, int e) { return std::isnan(l[e]) ? -INFINITY : l[e]; }

}  // namespace

void weigh_experts_host(const float* l, const ExpertRouting& r, const int32_t* id, float* wt) {
    const int E = r.n_expert, K = r.n_used;
    float mx = -INFINITY;
    for (int e = 0; e < E; ++e) mx = std::max(mx, route_key(l, e));
    float sum = 0.f;  // softmax denominator over all experts
    for (int e = 0; e < E; ++e) sum += std::exp(route_key(l, e) - mx);
    for (int j = 0; j < K; ++j) wt[j] = std::exp(route_key(l, id[j]) - mx) / sum;
    if (r.norm_weights) {
        float s = 0.f;
        for (int j = 0; j < K; ++j) s += wt[j];
        s = std::max(s, 6.103515625e-5f);
        for (int j = 0; j < K; ++j) wt[j] /= s;
    }
    if (r.scale != 1.f)
        for (int j = 0; j < K; ++j) wt[j] *= r.scale;
}

void route_experts_host(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w) {
    if (r.n_expert < 1 || r.n_expert > kMaxExperts || r.n_used < 1 || r.n_used > std::min(r.n_expert, kMaxExpertsUsed))
        fail("route_experts: {} of {} experts is outside [1, {}] of [1, {}]", r.n_used, r.n_expert, kMaxExpertsUsed,
             kMaxExperts);
    if (r.n_held < 0 || r.held_first < 0 || r.held_first + r.n_held > r.n_expert)
        fail("route_experts: held experts [{}, +{}) outside the {} experts", r.held_first, r.n_held, r.n_expert);
    const int E = r.n_expert, K = r.n_used;
    for (int t = 0; t < rows; ++t) {
        const float* l = logits + size_t(t) * E;
        int32_t* id = ids + size_t(t) * K;
        // The K best by logit, ties to the lower id: K passes of a linear scan (K <= 16).
        for (int j = 0; j < K; ++j) {
            int best = -1;
            for (int e = 0; e < E; ++e) {
                bool taken = false;
                for (int i = 0; i < j; ++i) taken |= id[i] == e;
                if (taken) continue;
                if (best < 0 || route_key(l, e) > route_key(l, best)) best = e;
            }
            id[j] = best;
        }
        float* wt = w + size_t(t) * K;
        weigh_experts_host(l, r, id, wt);
        for (int j = 0; j < K; ++j) {
            id[j] = held_expert_id(r, id[j]);
            if (id[j] < 0) wt[j] = 0.f;
        }
    }
}

}  // namespace vega
