// Hyper-parameters of a decoder-only transformer read from GGUF metadata
// (<arch>.* keys), and the per-architecture switches of the one forward pass.
#pragma once
#include <cstdint>
#include <string>

#include "backend/expert_routing.h"

namespace vega {

namespace gguf { class File; }

struct HParams {
    std::string arch;         // general.architecture: llama, qwen2, qwen3, ...
    std::string name;         // general.name (may be empty)
    int n_vocab = 0;
    int n_ctx_train = 0;
    int n_embd = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim = 0;         // key_length (n_embd / n_head by default)
    int n_ff = 0;
    int n_rot = 0;            // rope.dimension_count (head_dim by default)
    float rms_eps = 1e-5f;
    float rope_base = 10000.f;
    float rope_scale = 1.f;   // linear scaling factor applied to positions (1/factor)
    bool rope_neox = false;   // qwen2/qwen3: rotate (i, i + n_rot/2)
    bool qk_norm = false;     // qwen3: per-head RMS norm on q and k
    bool qkv_bias = false;    // qwen2: biases on q, k, v (detected from tensors)
    bool tied_output = false; // no output.weight: logits use token_embd

    // Mixture of experts (qwen3moe): every layer's FFN is n_expert stacked FFNs of
    // length n_ff_exp, n_expert_used of them chosen per token by a router. Zero
    // experts: a dense FFN of length n_ff.
    int n_expert = 0;
    int n_expert_used = 0;
    int n_ff_exp = 0;         // expert_feed_forward_length (n_ff / n_expert_used by default)
    ExpertRouting routing;    // how the router's logits become expert ids and weights
    bool moe() const { return n_expert > 0; }

    static HParams from_gguf(const gguf::File& f);
};

}  // namespace vega
