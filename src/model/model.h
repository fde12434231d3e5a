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
};

struct ModelWeights {
    Weight token_embd, output_norm, output, rope_freqs;
    std::vector<LayerWeights> layers;
};

class Model {
public:
    // Opens the GGUF (mmap), validates shapes and types against the hyper-parameters
    // (errors name the tensor, its shape/type and what was expected), builds the
    // tokenizer and uploads the weights to `backend`. progress(fraction) while uploading.
    static std::unique_ptr<Model> load(const std::string& path, Backend& backend,
                                       const std::function<void(float)>& progress = {});

    const HParams& hparams() const { return hp_; }
    const Tokenizer& tokenizer() const { return *tok_; }
    const ModelWeights& weights() const { return w_; }
    const gguf::File& file() const { return *file_; }
    size_t weight_bytes() const { return weight_bytes_; }  // bytes of all weight tensors
    std::string describe() const;                          // "llama 2L 256d Q4_0 (1.05 MB)"

private:
    std::unique_ptr<gguf::File> file_;
    HParams hp_;
    std::unique_ptr<Tokenizer> tok_;
    ModelWeights w_;
    size_t weight_bytes_ = 0;
};

}  // namespace vega
