// The routing rule of a mixture-of-experts FFN, shared by the model (which reads it
// from GGUF metadata) and the backends (which apply it on their device).
#pragma once
#include "core/host_device.h"

namespace vega {

// How a router's logits [n_expert] choose n_used experts and weigh them: the
// gating function gives each expert a probability, the n_used best (by logit;
// ties to the lower id) are chosen, their probabilities renormalised to sum 1 when
// norm_weights (the sum clamped below at 2^-14, as llama.cpp does), then times
// scale. qwen3moe: softmax over all experts, renormalised, scale 1.
// Limits of the routing kernels (experts per layer, experts per token).
constexpr int kMaxExperts = 512;
constexpr int kMaxExpertsUsed = 16;

enum class ExpertGating : int { Softmax = 0 };  // (gpt-oss adds softmax over the chosen logits)
struct ExpertRouting {
    int n_expert = 0;
    int n_used = 0;
    ExpertGating gating = ExpertGating::Softmax;
    bool norm_weights = true;
    float scale = 1.f;
    // The experts this device holds: [held_first, held_first + n_held) of n_expert
    // (tensor parallel splits them by device; n_held 0: all). Routing chooses and weighs
    // over all n_expert, then writes a held expert as its index among the held ones and
    // any other as id -1 with weight 0: the device computes only its own, and the
    // all-reduce sums every device's share of the weighted sum.
    int held_first = 0;
    int n_held = 0;
    VEGA_HOST_DEVICE bool holds_all() const { return n_held == 0 || (held_first == 0 && n_held == n_expert); }
};
// The id a device writes for expert e of routing r (above): its held index, or -1.
VEGA_HOST_DEVICE int held_expert_id(const ExpertRouting& r, int e) {
    if (r.holds_all()) return e;
    const int local = e - r.held_first;
    return local >= 0 && local < r.n_held ? local : -1;
}

class Backend;

// Replaces the experts a routed FFN block chose by ones decided elsewhere: the route
// replay that checks one backend against another where router logits nearly tie
// (model/route_trace.h). `logits`, `ids`, `w` are backend memory: [rows][n_expert],
// [rows][n_used], [rows][n_used].
class RouteOverride {
public:
    virtual ~RouteOverride() = default;
    virtual void override_routes(Backend& be, int layer, const ExpertRouting& r, int rows, const float* logits,
                                 int32_t* ids, float* w) = 0;
};

}  // namespace vega
