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
    // token_embd on the first stage (tensor parallel: on every one); output_norm and the
    // output matrix's rows of the stage's logits (ModelStage::first_vocab/n_vocab) on each
    // stage that computes some.
    Weight token_embd, output_norm, output;
    std::vector<LayerWeights> layers;
};

// Where a model's weights live. One device: one stage holding every layer. A layer
// split (--devices 0,1 --split-mode layer) has one stage per device, each holding a
// contiguous range of layers (and its part of the KV cache, in the Session); the
// residual stream passes from stage to stage. The token embedding sits on the first
// stage, the output norm and matrix on the last.
//
// Tensor parallel (--split-mode tensor) has one stage per device too, each holding a slice
// of every layer: its share of the attention heads (the rows of q, k and v, the columns of
// the o projection; KV heads with their query groups) and of the FFN rows (gate and up by
// rows, down by columns); norms whole. Each device's blocks add its part, and an all-reduce
// per block (backend/collective.h) sums the parts into every device's residual stream.
// Every device embeds the tokens itself, and computes the logits of its share of the
// vocabulary (the output matrix split by rows); the session merges the shares on the host
// (whole rows, or each share's argmax / top-k, so only those leave the devices).
enum class SplitMode { kLayer, kTensor };

struct ModelStage {
    Backend* backend = nullptr;
    int first_layer = 0, end_layer = 0;  // layers [first_layer, end_layer) (tensor parallel: all)
    int n_head = 0, n_head_kv = 0;       // this device's attention heads (tensor parallel: its share)
    int64_t n_ff = 0;                    // its FFN rows (dense models)
    // Its experts [first_expert, first_expert + n_expert) (a mixture of experts; tensor
    // parallel: its share, whole experts), else 0 and 0.
    int first_expert = 0, n_expert = 0;
    // The logits it computes: rows [first_vocab, first_vocab + n_vocab) of the output matrix
    // (the last stage of a layer split: all; tensor parallel: its share of the vocabulary,
    // contiguous, in device order), else 0 and 0.
    int64_t first_vocab = 0, n_vocab = 0;
    size_t weight_bytes = 0;             // bytes of the tensors uploaded to this stage
    bool computes_logits() const { return n_vocab > 0; }
};

// How to place a model: on which devices (in order), and how to split it over several.
struct Placement {
    std::vector<Backend*> devices;
    SplitMode mode = SplitMode::kLayer;
    std::vector<double> shares;  // layer split: each device's share of the layers (empty: free memory)
};

// The split of a vocabulary of n_vocab rows over `parts` devices: first row of each
// part, then n_vocab: even shares, their starts rounded down to 64 rows.
std::vector<int64_t> split_vocab(int64_t n_vocab, int parts);

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
    // Same, split as `p` says (layer split or tensor parallel).
    static std::unique_ptr<Model> load(const std::string& path, const Placement& p,
                                       const std::function<void(float)>& progress = {});

    const HParams& hparams() const { return hp_; }
    const Tokenizer& tokenizer() const { return *tok_; }
    const ModelWeights& weights() const { return w_; }  // of stage 0 under tensor parallel
    // The weights stage s computes with: the model's (layer split), or its slices (tensor parallel).
    const ModelWeights& weights(size_t stage) const { return shards_.empty() ? w_ : shards_[stage]; }
    // kTensor only for a tensor-parallel split over several devices (one device: kLayer).
    SplitMode split_mode() const { return shards_.empty() ? SplitMode::kLayer : SplitMode::kTensor; }
    // The stages that compute logits (ModelStage::computes_logits), in vocabulary order: the
    // last of a layer split, every device of tensor parallel.
    std::vector<size_t> output_stages() const;
    const gguf::File& file() const { return *file_; }
    size_t weight_bytes() const { return weight_bytes_; }  // bytes of all weight tensors (each once)
    const std::vector<ModelStage>& stages() const { return stages_; }
    Backend& first_backend() const { return *stages_.front().backend; }  // holds the token embedding
    Backend& last_backend() const { return *stages_.back().backend; }
    // "2 devices (layer split): layers 0-15 (3.90 GB) on gpu 0: ...; layers 16-31 (4.10 GB) on gpu 1: ...";
    // one stage: its backend's name.
    std::string describe_placement() const;
    std::string describe() const;                          // "llama 2L 256d Q4_0 (1.05 MB)"

private:
    std::unique_ptr<gguf::File> file_;
    HParams hp_;
    std::unique_ptr<Tokenizer> tok_;
    ModelWeights w_;
    std::vector<ModelWeights> shards_;  // tensor parallel: each stage's slices (w_ is shards_[0])
    std::vector<ModelStage> stages_;
    // Column slices made in host memory for backends that compute from host memory (the CPU).
    std::vector<std::vector<uint8_t>> host_slices_;
    size_t weight_bytes_ = 0;
};

}  // namespace vega
