#include "model/forward.h"

#include <cmath>

namespace vega {

Forward::Forward(const Model& model, Backend& backend, KvCache& cache, int max_tokens)
    : m_(model), be_(backend), cache_(cache), max_tokens_(max_tokens) {
    const HParams& hp = m_.hparams();
    const size_t T = size_t(max_tokens);
    const size_t E = hp.n_embd, Dq = size_t(hp.n_head) * hp.head_dim, Dkv = size_t(hp.n_head_kv) * hp.head_dim;
    auto buf = [&](size_t n, const char* what) { return static_cast<float*>(be_.alloc(n * sizeof(float), what)); };
    x_ = buf(T * E, "activations (residual stream)");
    q_ = buf(T * Dq, "activations (q)");
    k_ = buf(T * Dkv, "activations (k)");
    v_ = buf(T * Dkv, "activations (v)");
    att_ = buf(T * Dq, "activations (attention output)");
    tmp_ = buf(T * E, "activations (projection)");
    g_ = buf(T * hp.n_ff, "activations (ffn gate)");
    u_ = buf(T * hp.n_ff, "activations (ffn up)");
    h_ = buf(T * hp.n_ff, "activations (ffn hidden)");
    xo_ = buf(T * E, "activations (output rows)");
    const int64_t max_in = std::max<int64_t>({int64_t(E), int64_t(Dq), int64_t(hp.n_ff)});
    be_.reserve(max_tokens, max_in);
}

Forward::~Forward() {
    for (float* p : {x_, q_, k_, v_, att_, tmp_, g_, u_, h_, xo_})
        if (p) be_.release(p);
}

void Forward::run(const BatchView& b, const int32_t* out_idx, int n_out, float* logits) {
    const HParams& hp = m_.hparams();
    const ModelWeights& w = m_.weights();
    const int T = b.n_tokens;
    const int64_t E = hp.n_embd, Dq = int64_t(hp.n_head) * hp.head_dim, Dkv = int64_t(hp.n_head_kv) * hp.head_dim;
    const float eps = hp.rms_eps;
    const float scale = 1.0f / std::sqrt(float(hp.head_dim));
    RopeParams rp;
    rp.n_rot = hp.n_rot;
    rp.freq_base = hp.rope_base;
    rp.freq_scale = hp.rope_scale;
    rp.neox = hp.rope_neox;
    rp.freq_factors = w.rope_freqs ? static_cast<const float*>(w.rope_freqs.data) : nullptr;

    be_.embed(w.token_embd, b.tokens, T, x_);
    for (int il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& L = w.layers[il];
        // Attention block: x += Wo · attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x))
        be_.matmul_input_rms_norm(x_, L.attn_norm, eps, T, E);
        be_.matmul_qkv(L.wq, L.wk, L.wv, q_, k_, v_);
        if (L.bq) be_.add_bias(q_, L.bq, T, int(Dq));
        if (L.bk) be_.add_bias(k_, L.bk, T, int(Dkv));
        if (L.bv) be_.add_bias(v_, L.bv, T, int(Dkv));
        if (hp.qk_norm) {
            be_.head_rms_norm(q_, L.q_norm, T, hp.n_head, hp.head_dim, eps);
            be_.head_rms_norm(k_, L.k_norm, T, hp.n_head_kv, hp.head_dim, eps);
        }
        be_.rope_kv_store(cache_, il, q_, k_, v_, hp.n_head, hp.n_head_kv, hp.head_dim, rp, b);
        be_.attention(cache_, il, q_, att_, hp.n_head, scale, b);
        be_.matmul_input(att_, T, Dq);
        be_.matmul(L.wo, tmp_);
        be_.add(x_, tmp_, int64_t(T) * E);
        // Feed-forward block: x += Wdown · (silu(Wgate·n(x)) * Wup·n(x))
        be_.matmul_input_rms_norm(x_, L.ffn_norm, eps, T, E);
        be_.matmul_swiglu(L.ffn_gate, L.ffn_up, g_, u_, h_, T);
        be_.matmul_input(h_, T, hp.n_ff);
        be_.matmul(L.ffn_down, tmp_);
        be_.add(x_, tmp_, int64_t(T) * E);
    }
    // Logits only for the rows that want them.
    be_.gather_rows(x_, out_idx, n_out, E, xo_);
    be_.matmul_input_rms_norm(xo_, w.output_norm, eps, n_out, E);
    be_.matmul(w.output, logits);
}

}  // namespace vega
