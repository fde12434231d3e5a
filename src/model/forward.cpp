#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace vega {

Forward::Forward(const Model& model, const std::vector<KvCache*>& caches, int max_tokens, Collective* collective)
    : m_(model), max_tokens_(max_tokens), collective_(collective) {
    const std::vector<ModelStage>& ms = m_.stages();
    if (caches.size() != ms.size()) fail("forward: {} KV cache(s) for {} model stage(s)", caches.size(), ms.size());
    const bool tp = tensor_parallel();
    if (tp && !collective_) fail("forward: tensor parallel needs a collective (the all-reduce)");
    if (tp) launcher_spin_us_ = DeviceLaunchers::spin_us_from_env();  // (a bad value: an error at load)
    stages_.resize(ms.size());
    for (size_t i = 0; i < ms.size(); ++i) {
        Stage& st = stages_[i];
        st.be = ms[i].backend, st.cache = caches[i], st.first = ms[i].first_layer, st.end = ms[i].end_layer;
        alloc_scratch(st, ms[i], ms[i].computes_logits());
        describe_blocks(st, m_.weights(i), ms[i]);
    }
}

// The architecture's differences are in these descriptions (optional weights, rope
// style), not in the pass itself. Each block leaves the next block's normed input
// behind (BlockLink): the attention block the FFN's, the FFN the next layer's
// attention's. The last FFN of a stage leaves none (the logits read only the gathered
// rows; the next stage's backend starts from the residual stream alone). Under tensor
// parallel a block's output is one device's part until the all-reduce: in the links
// attn_part / ffn_part each block leaves its part in buf.tmp (part_only), and the next
// block adds the all-reduced sum to x before its norm (pending); where the collective
// sums inside the output (decode), run_rank takes the one-device links with sum_output.
void Forward::describe_blocks(Stage& st, const ModelWeights& w, const ModelStage& ms) {
    const HParams& hp = m_.hparams();
    const bool linked = !tensor_parallel();  // (tensor parallel: the part links too)
    RopeParams rp;
    rp.n_rot = hp.n_rot;
    rp.freq_base = hp.rope_base;
    rp.freq_scale = hp.rope_scale;
    rp.neox = hp.rope_neox;
    for (int il = st.first; il < st.end; ++il) {
        const LayerWeights& L = w.layers[size_t(il)];  // (tensor parallel: this device's slices)
        rp.freq_factors = L.rope_freqs ? static_cast<const float*>(L.rope_freqs.data) : nullptr;  // its device's copy
        AttentionBlock a;
        a.norm = L.attn_norm, a.wq = L.wq, a.wk = L.wk, a.wv = L.wv, a.wo = L.wo;
        a.bq = L.bq, a.bk = L.bk, a.bv = L.bv;
        if (hp.qk_norm) a.q_norm = L.q_norm, a.k_norm = L.k_norm;
        a.n_head = ms.n_head, a.n_kv_head = ms.n_head_kv, a.head_dim = hp.head_dim;
        a.eps = hp.rms_eps;
        a.scale = 1.0f / std::sqrt(float(hp.head_dim));
        a.rope = rp;
        st.attn.push_back(a);
        FfnBlock f;
        f.norm = L.ffn_norm, f.gate = L.ffn_gate, f.up = L.ffn_up, f.down = L.ffn_down;
        if (hp.moe()) {
            f.router = L.ffn_router, f.gate_exps = L.ffn_gate_exps, f.up_exps = L.ffn_up_exps;
            f.down_exps = L.ffn_down_exps, f.routing = hp.routing;
            f.routing.held_first = ms.first_expert, f.routing.n_held = ms.n_expert;  // (tensor parallel: its share)
        }
        f.eps = hp.rms_eps;
        f.layer = il;
        st.ffn.push_back(f);
    }
    auto quantized = [](const auto& ws) {
        for (const Weight* x : ws)
            if (x && is_float_type(x->type)) return false;
        return true;
    };
    using Readers = std::array<const Weight*, 3>;
    const size_t n = st.attn.size();
    st.attn_link.assign(n, {});
    st.ffn_link.assign(n, {});
    st.attn_part.assign(n, {});
    st.ffn_part.assign(n, {});
    if (!linked) {
        for (size_t i = 0; i < n; ++i) {
            st.attn_part[i].part_only = st.ffn_part[i].part_only = true;
            st.attn_part[i].pending = i > 0 ? st.buf.tmp : nullptr;
            st.ffn_part[i].pending = st.buf.tmp;
        }
    }
    for (size_t i = 0; i < n; ++i) {
        BlockLink& la = st.attn_link[i];
        la.input_normed = i > 0;
        const FfnBlock& f = st.ffn[i];
        la.next_norm = &f.norm, la.next_eps = f.eps;
        la.next_readers = f.experts() ? Readers{&f.router, nullptr, nullptr} : Readers{&f.gate, &f.up, nullptr};
        // (A routed block's router reads the input first; its experts are what must be quantized.)
        la.next_quantized =
            f.experts() ? quantized(Readers{&f.gate_exps, &f.up_exps, nullptr}) : quantized(la.next_readers);
        la.next_router = f.experts() ? &f.router : nullptr;
        BlockLink& lf = st.ffn_link[i];
        lf.input_normed = true;
        if (i + 1 < n) {
            const AttentionBlock& next = st.attn[i + 1];
            lf.next_norm = &next.norm, lf.next_eps = next.eps;
            lf.next_readers = {&next.wq, &next.wk, &next.wv};
            lf.next_quantized = quantized(lf.next_readers);
        }
    }
}

void Forward::alloc_scratch(Stage& st, const ModelStage& ms, bool output) {
    const HParams& hp = m_.hparams();
    const size_t T = size_t(max_tokens_);
    const size_t E = hp.n_embd, Dq = size_t(ms.n_head) * hp.head_dim, Dkv = size_t(ms.n_head_kv) * hp.head_dim;
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
    const size_t F = hp.moe() ? K * hp.n_ff_exp : size_t(ms.n_ff);
    b.g = buf(T * F, "activations (ffn gate)");
    b.u = buf(T * F, "activations (ffn up)");
    b.h = buf(T * F, "activations (ffn hidden)");
    if (hp.moe()) {
        b.router = buf(T * hp.n_expert, "activations (router logits)");
        b.expert_ids = static_cast<int32_t*>(be.alloc(T * K * sizeof(int32_t), "expert ids"));
        b.expert_w = buf(T * K, "expert weights");
        b.expert_out = buf(T * K * E, "activations (expert outputs)");
    }
    if (output) st.xo = buf(T * E, "activations (output rows)");
    // Matmul inputs: up to T rows of the widest input, and with experts the T * n_used
    // rows of the down projections' input (n_ff_exp wide).
    const int64_t ff_in = hp.moe() ? hp.n_ff_exp : ms.n_ff;
    const int64_t max_in = std::max<int64_t>({int64_t(E), int64_t(Dq), ff_in});
    be.reserve(max_tokens_ * int(std::max<size_t>(K, 1)), max_in);
}

void Forward::release_scratch(Stage& st) {
    const BlockBuffers& b = st.buf;
    for (void* p : {(void*)st.x, (void*)b.q, (void*)b.k, (void*)b.v, (void*)b.att, (void*)b.tmp,
                    (void*)b.g, (void*)b.u, (void*)b.h, (void*)b.router, (void*)b.expert_ids, (void*)b.expert_w,
                    (void*)b.expert_out, (void*)st.xo})
        if (p) st.be->release(p);
}

Forward::~Forward() {
    for (Stage& st : stages_) release_scratch(st);
}

void Forward::set_route_trace(RouteTrace* t) {
    if (t && !t->recording() && tensor_parallel())
        fail("replayed routes (--routes-in) need the whole model on one device, not tensor parallel");
    route_trace_ = t;
    const bool replay = t && !t->recording();
    for (Stage& st : stages_)
        for (FfnBlock& f : st.ffn) f.route_override = replay && f.experts() ? t : nullptr;
}

void Forward::record_routes(Stage& st, int il, const FfnBlock& f, int rows) {
    if (!route_trace_ || !route_trace_->recording() || !f.experts()) return;
    const int K = f.routing.n_used, X = f.routing.n_expert;
    const size_t n = size_t(rows) * size_t(K);
    route_ids_.resize(n), route_w_.resize(n), route_logits_.resize(size_t(rows) * size_t(X));
    st.be->synchronize();
    st.be->download(route_ids_.data(), st.buf.expert_ids, n * sizeof(int32_t));
    st.be->download(route_w_.data(), st.buf.expert_w, n * sizeof(float));
    st.be->download(route_logits_.data(), st.buf.router, route_logits_.size() * sizeof(float));
    route_trace_->add(il, rows, K, X, route_ids_.data(), route_w_.data(), route_logits_.data());
}

void Forward::keep_routes(int s, int il, int rows) {
    Stage& st = stages_[size_t(s)];
    const FfnBlock& f = st.ffn[size_t(il)];
    if (!route_trace_ || !route_trace_->recording() || !f.experts()) return;
    const size_t n = size_t(rows) * size_t(f.routing.n_used);
    std::vector<int32_t>& ids = rank_ids_[size_t(s)][size_t(il)];
    std::vector<float>& w = rank_w_[size_t(s)][size_t(il)];
    ids.resize(n), w.resize(n);
    st.be->synchronize();
    st.be->download(ids.data(), st.buf.expert_ids, n * sizeof(int32_t));
    st.be->download(w.data(), st.buf.expert_w, n * sizeof(float));
    if (s != 0) return;  // (every device computes the same router logits from the same x)
    std::vector<float>& l = rank_logits_[size_t(il)];
    l.resize(size_t(rows) * size_t(f.routing.n_expert));
    st.be->download(l.data(), st.buf.router, l.size() * sizeof(float));
}

void Forward::record_routes_split(int rows) {
    if (!route_trace_ || !route_trace_->recording() || !stages_[0].ffn[0].experts()) return;
    for (int il = 0; il < m_.hparams().n_layer; ++il) {
        const ExpertRouting& r0 = stages_[0].ffn[size_t(il)].routing;
        const int K = r0.n_used, X = r0.n_expert;
        const size_t n = size_t(rows) * size_t(K);
        route_ids_.assign(n, -1), route_w_.assign(n, 0.f);
        for (size_t s = 0; s < stages_.size(); ++s) {
            const int first = stages_[s].ffn[size_t(il)].routing.held_first;
            const std::vector<int32_t>& ids = rank_ids_[s][size_t(il)];
            const std::vector<float>& w = rank_w_[s][size_t(il)];
            for (size_t i = 0; i < n; ++i)
                if (ids[i] >= 0) route_ids_[i] = ids[i] + first, route_w_[i] = w[i];
        }
        for (size_t i = 0; i < n; ++i)
            if (route_ids_[i] < 0) fail("route trace: layer {} slot {} has an expert no device holds", il, i);
        route_trace_->add(il, rows, K, X, route_ids_.data(), route_w_.data(), rank_logits_[size_t(il)].data());
    }
}

// Logits only for the rows that want them, and only of the stage's vocabulary rows.
void Forward::logits_of(int s, const StageLogits& out, int n_out) {
    Stage& st = stages_[size_t(s)];
    const HParams& hp = m_.hparams();
    const ModelWeights& w = m_.weights(size_t(s));
    if (!out.out_idx || !out.logits) fail("forward: stage {} computes logits but was given nowhere to put them", s);
    st.be->gather_rows(st.x, out.out_idx, n_out, hp.n_embd, st.xo);
    st.be->matmul_input_rms_norm(st.xo, w.output_norm, hp.rms_eps, n_out, hp.n_embd);
    st.be->matmul(w.output, out.logits);
}

void Forward::run_stage(int s, const BatchView& b, const StageLogits& out, int n_out) {
    Stage& st = stages_[size_t(s)];
    Backend& be = *st.be;
    if (s == 0) be.embed(m_.weights(0).token_embd, b.tokens, b.n_tokens, st.x);
    for (int il = st.first; il < st.end; ++il) {
        const size_t i = size_t(il - st.first);
        be.attention_block(st.attn[i], *st.cache, il - st.first, b, st.x, st.buf, st.attn_link[i]);
        be.ffn_block(st.ffn[i], st.x, b.n_tokens, st.buf, st.ffn_link[i]);
        record_routes(st, il, st.ffn[i], b.n_tokens);
    }
    if (m_.stages()[size_t(s)].computes_logits()) logits_of(s, out, n_out);
}

void Forward::hand_off(int s, int rows) {
    Stage &from = stages_[size_t(s)], &to = stages_[size_t(s) + 1];
    from.be->copy_to(*to.be, to.x, from.x, size_t(rows) * size_t(m_.hparams().n_embd) * sizeof(float));
}

RankLinks tensor_parallel_links(const BlockLink& attn_linked, const BlockLink& ffn_linked, const BlockLink& attn_part,
                                const BlockLink& ffn_part, const FusedSum* fused) {
    if (!fused) return {attn_part, ffn_part};
    RankLinks r{attn_linked, ffn_linked};
    r.attn.sum_output = fused;
    if (r.ffn.next_norm) r.ffn.sum_output = fused;
    else r.ffn.part_only = true;  // the last block: its part through the all-reduce after it
    return r;
}

// Every device holds x (the same bits on each: the same sums are added to it). Each
// block leaves its device's part in buf.tmp; the all-reduce sums the parts on every
// device, and the next block (or, after the last, each device before its logits) adds the sum to x.
// Where the collective offers it for this batch (decode: Collective::fused_sum), each
// block's output sums its part over the devices itself (BlockLink::sum_output) and
// leaves the next block's input, as on one device, and no all-reduce runs between
// blocks; the last block's part stays an all-reduce.
void Forward::run_rank(int s, const BatchView& b, const StageLogits& out, int n_out) {
    Stage& st = stages_[size_t(s)];
    Backend& be = *st.be;
    const int T = b.n_tokens;
    const int64_t E = m_.hparams().n_embd, n = int64_t(T) * E;
    const FusedSum* fused = collective_->fused_sum(s, T, E);
    be.embed(m_.weights(size_t(s)).token_embd, b.tokens, T, st.x);
    const int L = m_.hparams().n_layer;
    for (int il = 0; il < L; ++il) {
        const size_t i = size_t(il);
        const auto [la, lf] = tensor_parallel_links(st.attn_link[i], st.ffn_link[i], st.attn_part[i], st.ffn_part[i], fused);
        be.attention_block(st.attn[i], *st.cache, il, b, st.x, st.buf, la);
        if (!fused) collective_->all_reduce_sum(s, st.buf.tmp, n);
        be.ffn_block(st.ffn[i], st.x, T, st.buf, lf);
        keep_routes(s, il, T);
        if (!fused || il + 1 == L) collective_->all_reduce_sum(s, st.buf.tmp, n);
    }
    if (!m_.stages()[size_t(s)].computes_logits()) return;
    be.add(st.x, st.buf.tmp, n);
    logits_of(s, out, n_out);
}

void Forward::on_each_device(const std::function<void(int)>& fn) {
    if (!launchers_)
        launchers_ = std::make_unique<DeviceLaunchers>(n_stages(), DeviceLaunchers::kSpinYields, launcher_spin_us_);
    launchers_->run(fn);
}

void Forward::run(const std::vector<BatchView>& b, const std::vector<StageLogits>& out, int n_out,
                  const RankWrap& around) {
    if (out.size() != stages_.size())
        fail("forward: logits destinations for {} of {} stages", out.size(), stages_.size());
    if (tensor_parallel()) {
        if (route_trace_ && route_trace_->recording()) {
            rank_ids_.assign(stages_.size(), std::vector<std::vector<int32_t>>(size_t(m_.hparams().n_layer)));
            rank_w_.assign(stages_.size(), std::vector<std::vector<float>>(size_t(m_.hparams().n_layer)));
            rank_logits_.assign(size_t(m_.hparams().n_layer), {});
        }
        collective_->reset();
        on_each_device([&](int s) {
            auto pass = [&] { run_rank(s, b[size_t(s)], out[size_t(s)], n_out); };
            try {
                if (around) around(s, pass);
                else pass();
            } catch (...) {
                launchers_->keep_error();  // the cause, before the others fail for want of this device
                collective_->abort(s);     // (their threads stop waiting for this one)
                throw;
            }
        });
        record_routes_split(b[0].n_tokens);
        return;
    }
    if (around) fail("forward: a per-device wrap is for tensor parallel only");
    for (int s = 0; s < n_stages(); ++s) {
        run_stage(s, b[size_t(s)], out[size_t(s)], n_out);
        if (s + 1 < n_stages()) hand_off(s, b[size_t(s)].n_tokens);
    }
}

}  // namespace vega
