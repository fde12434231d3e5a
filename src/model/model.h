// A loaded model: hyper-parameters, tokenizer, and its weights resident on a
// backend. Weight names follow llama.cpp's GGUF convention (blk.N.attn_q.weight).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "tokenizer/tokenizer.h"

namespace vega {

struct LayerWeights {
    Weight attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm;
    Weight ffn_norm, ffn_gate, ffn_up, ffn_down;
    // Mixture of experts (HParams::moe()) instead of ffn_gate/up/down: the router
    // ffn_gate_inp [n_expert][n_embd] and the stacked experts (Weight::n_mat).
    Weight ffn_router, ffn_gate_exps, ffn_up_exps, ffn_down_exps;
    // llama3's rope_freqs [n_rot/2] (optional): one copy per device, shared by its layers.
    Weight rope_freqs;
};

struct ModelWeights {
    Weight token_embd, output_norm, output;  // token_embd on the first stage, the output on the last
    std::vector<LayerWeights> layers;
};

// Where a model's weights live. One device: one stage holding every layer. A layer
// split (--devices 0,1 --split-mode layer) has one stage per device, each holding a
// contiguous range of layers (and its part of the KV cache, in the Session); the
// residual stream passes from stage to stage. The token embedding sits on the first
// stage, the output norm and matrix on the last.
struct ModelStage {
    Backend* backend = nullptr;
    int first_layer = 0, end_layer = 0;  // layers [first_layer, end_layer)
    size_t weight_bytes = 0;             // bytes of the tensors uploaded to this stage
};

// The layer ranges of a split of n_layer layers over shares.size() devices in proportion
// to shares (--tensor-split 3,1, or each device's free memory): first layer of each
// stage, then n_layer. Fails naming the share when a device would get no layer.
std::vector<int> split_layers(int n_layer, const std::vector<double>& shares);

class Model {
public:
    // Opens the GGUF (mmap), validates shapes and types against the hyper-parameters
    // (errors name the tensor, its shape/type and what was expected), builds the
    // tokenizer and uploads the weights to `backend`. progress(fraction) while uploading.
    static std::unique_ptr<Model> load(const std::string& path, Backend& backend,
                                       const std::function<void(float)>& progress = {});
    // Same, with the layers split over `devices` (one stage each, in order) in
    // proportion to `shares` (empty: each device's free memory, equal when unknown).
    static std::unique_ptr<Model> load(const std::string& path, const std::vector<Backend*>& devices,
                                       const std::vector<double>& shares,
                                       const std::function<void(float)>& progress = {});

    const HParams& hparams() const { return hp_; }
    const Tokenizer& tokenizer() const { return *tok_; }
    const ModelWeights& weights() const { return w_; }
    const gguf::File& file() const { return *file_; }
    size_t weight_bytes() const { return weight_bytes_; }  // bytes of all weight tensors (each once)
    const std::vector<ModelStage>& stages() const { return stages_; }
    Backend& first_backend() const { return *stages_.front().backend; }  // holds the token embedding
    Backend& last_backend() const { return *stages_.back().backend; }    // holds the output
    // "2 devices (layer split): layers 0-15 (3.90 GB) on gpu 0: ...; layers 16-31 (4.10 GB) on gpu 1: ...";
    // one stage: its backend's name.
    std::string describe_placement() const;
    std::string describe() const;                          // "llama 2L 256d Q4_0 (1.05 MB)"

private:
    std::unique_ptr<gguf::File> file_;
    HParams hp_;
    std::unique_ptr<Tokenizer> tok_;
    ModelWeights w_;
    std::vector<ModelStage> stages_;
    size_t weight_bytes_ = 0;
};

}  // namespace vega
