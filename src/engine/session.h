// A session runs a model on a backend: it owns the KV cache and all scratch
// (sized once at creation: nothing is allocated per token) and evaluates
// batches of tokens, each with its own (sequence, position).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/route_trace.h"

namespace vega {

struct ContextParams {
    int n_ctx = 0;        // cells per sequence; 0 = min(model's training context, 4096)
    int n_batch = 512;    // most tokens evaluated in one forward call
    int n_seq = 1;        // independent sequences sharing the cache
    GgmlType kv_type = GgmlType::F16;
    // Decode steps of 2..64 sequences replay graphs captured per batch-size bucket
    // (2, 4, 8, 16, 32, 48, 64; padding rows write to one extra, hidden sequence of
    // the cache) on backends that capture. Single-token steps always replay their
    // graph. vega's commands turn it on (VEGA_BATCH_GRAPHS=0: off).
    bool batch_graphs = false;
};

struct BatchToken {
    int32_t token;
    int32_t pos;
    int32_t seq;
    bool want_logits;
    // A prompt token (prefill), not a generated one being fed back. Prompt rows are
    // attended by the backend's tiled (flash) kernel and generated rows by its decode
    // kernel, whatever else shares the batch: a row's result is the same alone or
    // batched with others (vega run --parallel equals each prompt alone).
    bool prompt = false;
};

class Session {
public:
    // On the model's stages (Model::stages()): one KV cache per stage, on its backend,
    // holding its layers.
    Session(const Model& model, const ContextParams& p);
    // Same, for a model loaded on `backend` alone (fails otherwise).
    Session(const Model& model, Backend& backend, const ContextParams& p);
    ~Session();

    const ContextParams& params() const { return p_; }
    // Bytes of the KV cache (K and V, every layer and sequence, every stage; kv_cache_bytes()).
    size_t kv_bytes() const;
    int n_vocab() const { return model_.hparams().n_vocab; }

    // Runs the forward pass on `batch` (any size: split into n_batch pieces). The
    // logits of the tokens with want_logits are returned in batch order,
    // [n_wanted][n_vocab]. Throws vega::Error on positions beyond n_ctx.
    const std::vector<float>& decode(const std::vector<BatchToken>& batch);
    // Same, but only the argmax of each wanted row is returned (computed on the backend).
    const std::vector<int32_t>& decode_greedy(const std::vector<BatchToken>& batch);
    // Same, but the k best candidates of each wanted row (computed on the backend, so
    // only k ids and logits per row leave the device): ids/logits [n_wanted][k], best
    // first, ties by lowest id. 1 <= k <= Backend::kTopKMax.
    struct TopK {
        int k = 0;
        std::vector<int32_t> ids;
        std::vector<float> logits;
    };
    const TopK& decode_top_k(const std::vector<BatchToken>& batch, int k);
    // After decode_greedy / decode_top_k: the whole logits of some of its wanted rows
    // (indices in its batch order), read from the backend now: [rows.size()][n_vocab].
    // For the rows whose reduced result does not serve (a grammar that refuses every
    // candidate). Valid until the next decode. The rows must come from the call's last
    // chunk of n_batch tokens (a batch of at most n_batch tokens is one chunk); throws
    // vega::Error otherwise.
    const std::vector<float>& logits_of(const std::vector<int>& rows);

    // Single-token batches (decode / decode_greedy with one token that wants
    // logits) replay a decode step captured once as a graph when the backend
    // supports capture (default on): only token, position and the result cross
    // the bus. Off: every call runs the forward op by op.
    void set_use_graphs(bool on);
    // Records or replays the experts every routed layer chooses (model/route_trace.h;
    // vega eval --routes-out/--routes-in); turns graph replay off. Null: off.
    void set_route_trace(RouteTrace* t);
    bool use_graphs() const;
    // The all-reduce of a tensor-parallel model ("NCCL over devices 0,1"); empty otherwise.
    std::string collective_name() const;
    // Decode steps replayed through batch-size bucket graphs so far (batch_graphs).
    int batch_graph_replays() const;

    // Convenience for one sequence: evaluates tokens at positions start.. and returns
    // the logits of the last token (or of every token when all_logits). prompt: they are
    // prompt tokens (BatchToken::prompt); false for a generated token fed back.
    const std::vector<float>& eval(const std::vector<int32_t>& tokens, int start_pos, int seq = 0,
                                   bool all_logits = false, bool prompt = true);

private:
    void decode_reduced(const std::vector<BatchToken>& batch, int mode, int k);
    struct Impl;
    const Model& model_;
    ContextParams p_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace vega
