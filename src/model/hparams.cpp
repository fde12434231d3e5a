#include "model/hparams.h"

#include <string>

#include "core/error.h"
#include "gguf/gguf.h"

namespace vega {

namespace {

bool is_supported_arch(const std::string& a) {
    return a == "llama" || a == "qwen2" || a == "qwen3" || a == "qwen3moe";
}

bool arch_has_experts(const std::string& a) { return a == "qwen3moe"; }

int positive_int(const gguf::File& f, const std::string& key, int64_t v) {
    if (v <= 0 || v > (int64_t(1) << 30)) fail("{}: metadata {} = {} is out of range", f.path(), key, v);
    return int(v);
}

// The keys llama.cpp reads for a qwen3moe FFN: expert_count, expert_used_count,
// expert_feed_forward_length and the expert groups (DeepSeek-style group-limited
// routing, which qwen3moe files do not use and vega refuses by name). qwen3moe's
// gating (softmax, renormalised, no scale) is fixed by the architecture in llama.cpp,
// not read from the file.
void read_experts(const gguf::File& f, const std::string& a, HParams& h) {
    auto need = [&](const std::string& k) { return positive_int(f, a + k, f.get_int(a + k)); };
    h.n_expert = need("expert_count");
    h.n_expert_used = need("expert_used_count");
    if (h.n_expert_used > h.n_expert)
        fail("{}: metadata {}expert_used_count = {} exceeds {}expert_count = {}", f.path(), a, h.n_expert_used, a,
             h.n_expert);
    if (h.n_expert > kMaxExperts || h.n_expert_used > kMaxExpertsUsed)
        fail("{}: {} experts with {} used per token: vega supports at most {} experts and {} used", f.path(),
             h.n_expert, h.n_expert_used, kMaxExperts, kMaxExpertsUsed);
    const int64_t groups = f.get_int(a + "expert_group_count", 0);
    if (groups > 1)
        fail("{}: metadata {}expert_group_count = {}: group-limited expert routing is not supported", f.path(), a,
             groups);
    if (!f.find(a + "expert_feed_forward_length") && h.n_ff < h.n_expert_used)
        fail("{}: metadata {}expert_feed_forward_length is missing (and no feed_forward_length to derive it from)",
             f.path(), a);
    h.n_ff_exp = positive_int(f, a + "expert_feed_forward_length",
                              f.get_int(a + "expert_feed_forward_length", h.n_ff / h.n_expert_used));
    h.routing.n_expert = h.n_expert;
    h.routing.n_used = h.n_expert_used;
    h.routing.gating = ExpertGating::Softmax;
    h.routing.norm_weights = true;
    h.routing.scale = 1.f;
}

}  // namespace

HParams HParams::from_gguf(const gguf::File& f) {
    HParams h;
    h.arch = f.get_string("general.architecture");
    if (!is_supported_arch(h.arch))
        fail("{}: unsupported architecture '{}' (supported: llama, qwen2, qwen3, qwen3moe)", f.path(), h.arch);
    h.name = f.get_string("general.name", "");
    const std::string a = h.arch + ".";
    auto req = [&](const std::string& k) { return positive_int(f, a + k, f.get_int(a + k)); };
    auto opt = [&](const std::string& k, int64_t d) { return positive_int(f, a + k, f.get_int(a + k, d)); };

    h.n_embd = req("embedding_length");
    h.n_layer = req("block_count");
    // A mixture of experts may leave the dense length out (its experts have their own).
    h.n_ff = arch_has_experts(h.arch) && !f.find(a + "feed_forward_length") ? 0 : req("feed_forward_length");
    h.n_head = req("attention.head_count");
    h.n_head_kv = opt("attention.head_count_kv", h.n_head);
    h.n_ctx_train = opt("context_length", 2048);
    if (h.n_embd % h.n_head != 0 && !f.find(a + "attention.key_length"))
        fail("{}: embedding_length {} is not a multiple of head_count {}", f.path(), h.n_embd, h.n_head);
    h.head_dim = opt("attention.key_length", h.n_embd / h.n_head);
    const int v_len = opt("attention.value_length", h.head_dim);
    if (v_len != h.head_dim)
        fail("{}: attention.value_length {} differs from key_length {} (not supported)", f.path(), v_len, h.head_dim);
    if (h.n_head % h.n_head_kv != 0)
        fail("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), h.n_head, h.n_head_kv);
    h.n_rot = opt("rope.dimension_count", h.head_dim);
    if (h.n_rot > h.head_dim || h.n_rot % 2 != 0)
        fail("{}: rope.dimension_count {} invalid for head dimension {}", f.path(), h.n_rot, h.head_dim);
    h.rms_eps = float(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5));
    h.rope_base = float(f.get_float(a + "rope.freq_base", 10000.0));
    const std::string scaling = f.get_string(a + "rope.scaling.type", "none");
    const double factor = f.get_float(a + "rope.scaling.factor", 0.0);
    if (scaling == "linear" && factor > 0) {
        h.rope_scale = float(1.0 / factor);
    } else if (scaling != "none" && scaling != "linear" && factor > 1.0) {
        fail("{}: rope scaling type '{}' is not supported yet", f.path(), scaling);
    }
    h.rope_neox = (h.arch == "qwen2" || h.arch == "qwen3" || h.arch == "qwen3moe");
    h.qk_norm = (h.arch == "qwen3" || h.arch == "qwen3moe");
    if (arch_has_experts(h.arch)) read_experts(f, a, h);
    return h;
}

}  // namespace vega
