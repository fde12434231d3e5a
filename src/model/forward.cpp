#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace vega {

Forward::Forward(const Model& model, const std::vector<KvCache*>& caches, int max_tokens)
    : m_(model), max_tokens_(max_tokens) {
    const HParams& hp = m_.hparams();
    const ModelWeights& w = m_.weights();
    const std::vector<ModelStage>& ms = m_.stages();
    if (caches.size() != ms.size()) fail("forward: {} KV cache(s) for {} model stage(s)", caches.size(), ms.size());
    for (size_t i = 0; i < ms.size(); ++i) {
        Stage st;
        st.be = ms[i].backend, st.cache = caches[i], st.first = ms[i].first_layer, st.end = ms[i].end_layer;
        stages_.push_back(st);
        alloc_scratch(stages_.back(), i + 1 == ms.size());
    }

    // The architecture's differences are in these descriptions (optional weights,
    // rope style), not in the pass itself.
    RopeParams rp;
    rp.n_rot = hp.n_rot;
    rp.freq_base = hp.rope_base;
    rp.freq_scale = hp.rope_scale;
    rp.neox = hp.rope_neox;
    for (const LayerWeights& L : w.layers) {
        rp.freq_factors = L.rope_freqs ? static_cast<const float*>(L.rope_freqs.data) : nullptr;  // its device's copy
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
    // of a stage leaves none: the logits read only the gathered rows, and the next
    // stage's backend starts from the residual stream alone.
    auto quantized = [](std::initializer_list<const Weight*> ws) {
        for (const Weight* x : ws)
            if (is_float_type(x->type)) return false;
        return true;
    };
    const size_t n = attn_.size();
    attn_link_.resize(n), ffn_link_.resize(n);
    auto stage_start = [&](size_t il) {
        for (const Stage& st : stages_)
            if (int(il) == st.first) return true;
        return false;
    };
    for (size_t il = 0; il < n; ++il) {
        BlockLink& la = attn_link_[il];
        la.input_normed = !stage_start(il);
        la.next_norm = &ffn_[il].norm, la.next_eps = ffn_[il].eps;
        const FfnBlock& f = ffn_[il];
        la.next_quantized = f.experts() ? quantized({&f.gate_exps, &f.up_exps}) : quantized({&f.gate, &f.up});
        la.next_router = f.experts() ? &f.router : nullptr;
        BlockLink& lf = ffn_link_[il];
        lf.input_normed = true;
        if (il + 1 < n && !stage_start(il + 1)) {
            const AttentionBlock& next = attn_[il + 1];
            lf.next_norm = &next.norm, lf.next_eps = next.eps;
            lf.next_quantized = quantized({&next.wq, &next.wk, &next.wv});
        }
    }
}

void Forward::alloc_scratch(Stage& st, bool last) {
    const HParams& hp = m_.hparams();
    const size_t T = size_t(max_tokens_);
    const size_t E = hp.n_embd, Dq = size_t(hp.n_head) * hp.head_dim, Dkv = size_t(hp.n_head_kv) * hp.head_dim;
    Backend& be = *st.be;
    auto buf = [&](size_t n, const char* what) { return static_cast<float*>(be.alloc(n * sizeof(float), what)); };
    BlockBuffers& b = st.buf;
    st.x = buf(T * E, "activations (residual stream)");
    b.q = buf(T * Dq, "activations (q)");
    b.k = buf(T * Dkv, "activations (k)");
    b.v = buf(T * Dkv, "activations (v)");
    b.att = buf(T * Dq, "activations (attention output)");
    b.tmp = buf(T * E, "activations (projection)");
    // The FFN's hidden rows: [T][n_ff], or [T][n_used][n_ff_exp] with experts.
    const size_t K = hp.moe() ? size_t(hp.n_expert_used) : 0;
    const size_t F = hp.moe() ? K * hp.n_ff_exp : size_t(hp.n_ff);
    b.g = buf(T * F, "activations (ffn gate)");
    b.u = buf(T * F, "activations (ffn up)");
    b.h = buf(T * F, "activations (ffn hidden)");
    if (hp.moe()) {
        b.router = buf(T * hp.n_expert, "activations (router logits)");
        b.expert_ids = static_cast<int32_t*>(be.alloc(T * K * sizeof(int32_t), "expert ids"));
        b.expert_w = buf(T * K, "expert weights");
        b.expert_out = buf(T * K * E, "activations (expert outputs)");
    }
    if (last) st.xo = buf(T * E, "activations (output rows)");
    // Matmul inputs: up to T rows of the widest input, and with experts the T * n_used
    // rows of the down projections' input (n_ff_exp wide).
    const int64_t ff_in = hp.moe() ? hp.n_ff_exp : hp.n_ff;
    const int64_t max_in = std::max<int64_t>({int64_t(E), int64_t(Dq), ff_in});
    be.reserve(max_tokens_ * int(std::max<size_t>(K, 1)), max_in);
}

void Forward::release_scratch(Stage& st) {
    const BlockBuffers& b = st.buf;
    for (void* p : {(void*)st.x, (void*)b.q, (void*)b.k, (void*)b.v, (void*)b.att, (void*)b.tmp, (void*)b.g,
                    (void*)b.u, (void*)b.h, (void*)b.router, (void*)b.expert_ids, (void*)b.expert_w,
                    (void*)b.expert_out, (void*)st.xo})
        if (p) st.be->release(p);
}

Forward::~Forward() {
    for (Stage& st : stages_) release_scratch(st);
}

void Forward::set_route_trace(RouteTrace* t) {
    route_trace_ = t;
    const bool replay = t && !t->recording();
    for (size_t il = 0; il < ffn_.size(); ++il) {
        ffn_[il].route_override = replay && ffn_[il].experts() ? t : nullptr;
        ffn_[il].layer = int(il);
    }
}

void Forward::run_stage(int s, const BatchView& b, const int32_t* out_idx, int n_out, float* logits) {
    const HParams& hp = m_.hparams();
    const ModelWeights& w = m_.weights();
    Stage& st = stages_[size_t(s)];
    Backend& be = *st.be;
    if (s == 0) be.embed(w.token_embd, b.tokens, b.n_tokens, st.x);
    for (int il = st.first; il < st.end; ++il) {
        be.attention_block(attn_[size_t(il)], *st.cache, il - st.first, b, st.x, st.buf, attn_link_[size_t(il)]);
        const FfnBlock& f = ffn_[size_t(il)];
        be.ffn_block(f, st.x, b.n_tokens, st.buf, ffn_link_[size_t(il)]);
        if (route_trace_ && route_trace_->recording() && f.experts()) {
            const int T = b.n_tokens, K = f.routing.n_used, X = f.routing.n_expert;
            const size_t n = size_t(T) * size_t(K);
            route_ids_.resize(n), route_w_.resize(n), route_logits_.resize(size_t(T) * size_t(X));
            be.synchronize();
            be.download(route_ids_.data(), st.buf.expert_ids, n * sizeof(int32_t));
            be.download(route_w_.data(), st.buf.expert_w, n * sizeof(float));
            be.download(route_logits_.data(), st.buf.router, route_logits_.size() * sizeof(float));
            route_trace_->add(il, T, K, X, route_ids_.data(), route_w_.data(), route_logits_.data());
        }
    }
    if (s + 1 < n_stages()) return;
    // Logits only for the rows that want them.
    be.gather_rows(st.x, out_idx, n_out, hp.n_embd, st.xo);
    be.matmul_input_rms_norm(st.xo, w.output_norm, hp.rms_eps, n_out, hp.n_embd);
    be.matmul(w.output, logits);
}

void Forward::hand_off(int s, int rows) {
    Stage &from = stages_[size_t(s)], &to = stages_[size_t(s) + 1];
    from.be->copy_to(*to.be, to.x, from.x, size_t(rows) * size_t(m_.hparams().n_embd) * sizeof(float));
}

void Forward::run(const std::vector<BatchView>& b, const int32_t* out_idx, int n_out, float* logits) {
    for (int s = 0; s < n_stages(); ++s) {
        run_stage(s, b[size_t(s)], out_idx, n_out, logits);
        if (s + 1 < n_stages()) hand_off(s, b[size_t(s)].n_tokens);
    }
}

}  // namespace vega
