#include "model/forward.h"

#include <algorithm>
#include <cmath>

namespace vega {

Forward::Forward(const Model& model, Backend& backend, KvCache& cache, int max_tokens)
    : m_(model), be_(backend), cache_(cache), max_tokens_(max_tokens) {
    const HParams& hp = m_.hparams();
    const ModelWeights& w = m_.weights();
    const size_t T = size_t(max_tokens);
    const size_t E = hp.n_embd, Dq = size_t(hp.n_head) * hp.head_dim, Dkv = size_t(hp.n_head_kv) * hp.head_dim;
    auto buf = [&](size_t n, const char* what) { return static_cast<float*>(be_.alloc(n * sizeof(float), what)); };
    x_ = buf(T * E, "activations (residual stream)");
    buf_.q = buf(T * Dq, "activations (q)");
    buf_.k = buf(T * Dkv, "activations (k)");
    buf_.v = buf(T * Dkv, "activations (v)");
    buf_.att = buf(T * Dq, "activations (attention output)");
    buf_.tmp = buf(T * E, "activations (projection)");
    // The FFN's hidden rows: [T][n_ff], or [T][n_used][n_ff_exp] with experts.
    const size_t K = hp.moe() ? size_t(hp.n_expert_used) : 0;
    const size_t F = hp.moe() ? K * hp.n_ff_exp : size_t(hp.n_ff);
    buf_.g = buf(T * F, "activations (ffn gate)");
    buf_.u = buf(T * F, "activations (ffn up)");
    buf_.h = buf(T * F, "activations (ffn hidden)");
    if (hp.moe()) {
        buf_.router = buf(T * hp.n_expert, "activations (router logits)");
        buf_.expert_ids = static_cast<int32_t*>(be_.alloc(T * K * sizeof(int32_t), "expert ids"));
        buf_.expert_w = buf(T * K, "expert weights");
        buf_.expert_out = buf(T * K * E, "activations (expert outputs)");
    }
    xo_ = buf(T * E, "activations (output rows)");
    // Matmul inputs: up to T rows of the widest input, and with experts the T * n_used
    // rows of the down projections' input (n_ff_exp wide).
    const int64_t ff_in = hp.moe() ? hp.n_ff_exp : hp.n_ff;
    const int64_t max_in = std::max<int64_t>({int64_t(E), int64_t(Dq), ff_in});
    be_.reserve(max_tokens * int(std::max<size_t>(K, 1)), max_in);

    // The architecture's differences are in these descriptions (optional weights,
    // rope style), not in the pass itself.
    RopeParams rp;
    rp.n_rot = hp.n_rot;
    rp.freq_base = hp.rope_base;
    rp.freq_scale = hp.rope_scale;
    rp.neox = hp.rope_neox;
    rp.freq_factors = w.rope_freqs ? static_cast<const float*>(w.rope_freqs.data) : nullptr;
    for (const LayerWeights& L : w.layers) {
        AttentionBlock a;
        a.norm = L.attn_norm, a.wq = L.wq, a.wk = L.wk, a.wv = L.wv, a.wo = L.wo;
        a.bq = L.bq, a.bk = L.bk, a.bv = L.bv;
        if (hp.qk_norm) a.q_norm = L.q_norm, a.k_norm = L.k_norm;
        a.n_head = hp.n_head, a.n_kv_head = hp.n_head_kv, a.head_dim = hp.head_dim;
        a.eps = hp.rms_eps;
        a.scale = 1.0f / std::sqrt(float(hp.head_dim));
        a.rope = rp;
        attn_.push_back(a);
        FfnBlock f;
        f.norm = L.ffn_norm, f.gate = L.ffn_gate, f.up = L.ffn_up, f.down = L.ffn_down;
        if (hp.moe()) {
            f.router = L.ffn_router, f.gate_exps = L.ffn_gate_exps, f.up_exps = L.ffn_up_exps;
            f.down_exps = L.ffn_down_exps, f.routing = hp.routing;
        }
        f.eps = hp.rms_eps;
        ffn_.push_back(f);
    }
    // Each block leaves the next block's normed input behind (BlockLink): the
    // attention block the FFN's, the FFN the next layer's attention's. The last FFN
    // leaves none: the logits read only the gathered rows.
    auto quantized = [](std::initializer_list<const Weight*> ws) {
        for (const Weight* x : ws)
            if (is_float_type(x->type)) return false;
        return true;
    };
    const size_t n = attn_.size();
    attn_link_.resize(n), ffn_link_.resize(n);
    for (size_t il = 0; il < n; ++il) {
        BlockLink& la = attn_link_[il];
        la.input_normed = il > 0;
        la.next_norm = &ffn_[il].norm, la.next_eps = ffn_[il].eps;
        const FfnBlock& f = ffn_[il];
        la.next_quantized = f.experts() ? quantized({&f.gate_exps, &f.up_exps}) : quantized({&f.gate, &f.up});
        la.next_router = f.experts() ? &f.router : nullptr;
        BlockLink& lf = ffn_link_[il];
        lf.input_normed = true;
        if (il + 1 < n) {
            const AttentionBlock& next = attn_[il + 1];
            lf.next_norm = &next.norm, lf.next_eps = next.eps;
            lf.next_quantized = quantized({&next.wq, &next.wk, &next.wv});
        }
    }
}

Forward::~Forward() {
    for (void* p : {(void*)x_, (void*)buf_.q, (void*)buf_.k, (void*)buf_.v, (void*)buf_.att, (void*)buf_.tmp,
                    (void*)buf_.g, (void*)buf_.u, (void*)buf_.h, (void*)buf_.router, (void*)buf_.expert_ids,
                    (void*)buf_.expert_w, (void*)buf_.expert_out, (void*)xo_})
        if (p) be_.release(p);
}

void Forward::set_route_trace(RouteTrace* t) {
    route_trace_ = t;
    const bool replay = t && !t->recording();
    for (size_t il = 0; il < ffn_.size(); ++il) {
        ffn_[il].route_override = replay && ffn_[il].experts() ? t : nullptr;
        ffn_[il].layer = int(il);
    }
}

void Forward::run(const BatchView& b, const int32_t* out_idx, int n_out, float* logits) {
    const HParams& hp = m_.hparams();
    const ModelWeights& w = m_.weights();
    be_.embed(w.token_embd, b.tokens, b.n_tokens, x_);
    for (int il = 0; il < hp.n_layer; ++il) {
        be_.attention_block(attn_[size_t(il)], cache_, il, b, x_, buf_, attn_link_[size_t(il)]);
        const FfnBlock& f = ffn_[size_t(il)];
        be_.ffn_block(f, x_, b.n_tokens, buf_, ffn_link_[size_t(il)]);
        if (route_trace_ && route_trace_->recording() && f.experts()) {
            const int T = b.n_tokens, K = f.routing.n_used, X = f.routing.n_expert;
            const size_t n = size_t(T) * size_t(K);
            route_ids_.resize(n), route_w_.resize(n), route_logits_.resize(size_t(T) * size_t(X));
            be_.synchronize();
            be_.download(route_ids_.data(), buf_.expert_ids, n * sizeof(int32_t));
            be_.download(route_w_.data(), buf_.expert_w, n * sizeof(float));
            be_.download(route_logits_.data(), buf_.router, route_logits_.size() * sizeof(float));
            route_trace_->add(il, T, K, X, route_ids_.data(), route_w_.data(), route_logits_.data());
        }
    }
    // Logits only for the rows that want them.
    be_.gather_rows(x_, out_idx, n_out, hp.n_embd, xo_);
    be_.matmul_input_rms_norm(xo_, w.output_norm, hp.rms_eps, n_out, hp.n_embd);
    be_.matmul(w.output, logits);
}

}  // namespace vega
