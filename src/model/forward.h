// The forward pass, written once for every supported architecture: the
// differences (QKV bias, q/k norm, rope style, tied output) are flags and
// optional weights in the Model. Scratch is allocated on the backend once.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/route_trace.h"

namespace vega {

class Forward {
public:
    Forward(const Model& model, Backend& backend, KvCache& cache, int max_tokens);
    ~Forward();
    Forward(const Forward&) = delete;
    Forward& operator=(const Forward&) = delete;

    // Runs the batch through all layers (writing its K/V into the cache) and
    // computes logits [n_out][n_vocab] for the batch rows listed in out_idx.
    // All pointers are backend memory.
    void run(const BatchView& b, const int32_t* out_idx, int n_out, float* logits);

    // Records (after each routed block, a host round trip) or replays the experts
    // chosen in every routed layer (model/route_trace.h); null: off.
    void set_route_trace(RouteTrace* t);

private:
    const Model& m_;
    Backend& be_;
    KvCache& cache_;
    int max_tokens_;
    // Scratch activations, [max_tokens][...] floats.
    float *x_ = nullptr, *xo_ = nullptr;
    BlockBuffers buf_;
    // Each layer's two block ops, described once.
    std::vector<AttentionBlock> attn_;
    std::vector<FfnBlock> ffn_;
    std::vector<BlockLink> attn_link_, ffn_link_;  // how each block meets the next
    RouteTrace* route_trace_ = nullptr;
    // Host copies of a routed block's ids, weights and router logits (recording).
    std::vector<int32_t> route_ids_;
    std::vector<float> route_w_, route_logits_;
};

}  // namespace vega
