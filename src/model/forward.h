// The forward pass, written once for every supported architecture: the
// differences (QKV bias, q/k norm, rope style, tied output) are flags and
// optional weights in the Model. It runs in the model's stages (Model::stages():
// one per device of a layer split or of tensor parallel, one in all other runs),
// each on its backend with its own scratch, allocated there once.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/collective.h"
#include "backend/device_launchers.h"
#include "model/model.h"
#include "model/route_trace.h"

namespace vega {

// Tensor parallel: the links of layer i's two blocks on one rank. Without fused sums
// (fused null), the part links (part_only, pending: an all-reduce between the blocks).
// With them, the one-device links with fused as sum_output (each block's output sums
// its part over the devices and leaves the next input), except a last FFN (no next
// norm): part_only, its part summed by the all-reduce before the output.
struct RankLinks {
    BlockLink attn, ffn;
};
RankLinks tensor_parallel_links(const BlockLink& attn_linked, const BlockLink& ffn_linked, const BlockLink& attn_part,
                                const BlockLink& ffn_part, const FusedSum* fused);

// Where stage s puts its logits: the batch rows that want them, out_idx [n_out], and
// logits [n_out][ModelStage::n_vocab] (its rows of the output matrix), both in its
// memory. Null for a stage that computes none.
struct StageLogits {
    const int32_t* out_idx = nullptr;
    float* logits = nullptr;
};

class Forward {
public:
    // caches[s]: the KV cache of stage s, on its backend, holding its layers
    // first_layer..end_layer-1 as cache layers 0.. (tensor parallel: its KV heads).
    // `collective` sums the devices' parts under tensor parallel (else unused).
    Forward(const Model& model, const std::vector<KvCache*>& caches, int max_tokens, Collective* collective = nullptr);
    ~Forward();
    Forward(const Forward&) = delete;
    Forward& operator=(const Forward&) = delete;

    int n_stages() const { return int(stages_.size()); }
    bool tensor_parallel() const { return m_.split_mode() == SplitMode::kTensor; }
    // Layer split: stage s of the pass over the batch b (its metadata in stage s's
    // memory): the first stage embeds the tokens, each stage runs its layers (writing
    // their K/V), and the last computes logits (out: where) for the n_out rows.
    void run_stage(int s, const BatchView& b, const StageLogits& out, int n_out);
    // Layer split: passes the residual stream [rows][n_embd] from stage s to stage s + 1.
    void hand_off(int s, int rows);
    // The whole pass; b[s]: the batch in stage s's memory; out[s]: where stage s puts its
    // logits (Model::output_stages()). Tensor parallel: every device runs every block on
    // its heads and FFN rows, each device on its own host thread, and an all-reduce per
    // block sums the parts; each then computes its share of the vocabulary's logits.
    // `around` (tensor parallel only) wraps each device's pass on that device's thread:
    // around(s, pass) must call pass() once (the session records each device's graph of it).
    using RankWrap = std::function<void(int s, const std::function<void()>& pass)>;
    void run(const std::vector<BatchView>& b, const std::vector<StageLogits>& out, int n_out,
             const RankWrap& around = nullptr);
    // Tensor parallel: fn(s) for every device s, each on its device's thread, all at once
    // (launching graphs whose sums wait for one another).
    void on_each_device(const std::function<void(int)>& fn);

    // Records (after each routed block, a host round trip) or replays the experts
    // chosen in every routed layer (model/route_trace.h); null: off.
    void set_route_trace(RouteTrace* t);

private:
    // One stage's backend, cache, layers, block descriptions and scratch activations
    // ([max_tokens][...] floats).
    struct Stage {
        Backend* be = nullptr;
        KvCache* cache = nullptr;
        int first = 0, end = 0;  // layers [first, end)
        float* x = nullptr;      // residual stream
        float* xo = nullptr;     // output rows (a stage that computes logits)
        BlockBuffers buf;
        // Layer first + i's two block ops, described once, and how each meets the next.
        std::vector<AttentionBlock> attn;
        std::vector<FfnBlock> ffn;
        std::vector<BlockLink> attn_link, ffn_link;
        // Tensor parallel: the same blocks linked through the all-reduced part (part_only).
        std::vector<BlockLink> attn_part, ffn_part;
    };
    void describe_blocks(Stage& st, const ModelWeights& w, const ModelStage& ms);
    void alloc_scratch(Stage& st, const ModelStage& ms, bool output);
    void release_scratch(Stage& st);
    void record_routes(Stage& st, int il, const FfnBlock& f, int rows);
    // Tensor parallel, on device s's thread: its ids and weights of a routed layer
    // (recording), kept until the pass ends; record_routes_split then takes every slot
    // from the device that holds its expert, as a global id.
    void keep_routes(int s, int il, int rows);
    void record_routes_split(int rows);
    // Stage s's logits (its rows of the output matrix) for the rows out.out_idx.
    void logits_of(int s, const StageLogits& out, int n_out);
    // Tensor parallel: device s's pass (on its own thread).
    void run_rank(int s, const BatchView& b, const StageLogits& out, int n_out);

    const Model& m_;
    int max_tokens_;
    Collective* collective_ = nullptr;
    std::vector<Stage> stages_;
    RouteTrace* route_trace_ = nullptr;
    // Host copies of a routed block's ids, weights and router logits (recording).
    std::vector<int32_t> route_ids_;
    std::vector<float> route_w_, route_logits_;
    // Tensor parallel: one host thread per device, and (recording) each device's ids and
    // weights [layer][rows * n_used] and device 0's router logits [layer][rows * n_expert].
    std::unique_ptr<DeviceLaunchers> launchers_;
    int64_t launcher_spin_us_ = 0;  // VEGA_LAUNCHER_SPIN_US (tensor parallel)
    std::vector<std::vector<std::vector<int32_t>>> rank_ids_;
    std::vector<std::vector<std::vector<float>>> rank_w_;
    std::vector<std::vector<float>> rank_logits_;
};

}  // namespace vega
