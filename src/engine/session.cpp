#include "engine/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "backend/backend_factory.h"
#include "core/env.h"
#include "core/error.h"
#include "model/forward.h"

namespace vega {

enum class Select { Logits, Argmax, TopK };

// The ids block a captured decode step reads from backend memory: one array of `stride`
// ints per field, in this order (fresh: BatchView::fresh; a one-token step's is its pos,
// so that block stops after kMax). kArgmax and kMax are the step's outputs: each row's
// argmax over the stage's vocabulary rows and (float bits) its logit, one array after the
// other, as select() writes them.
struct StepIds {
    enum Field { kTokens, kPos, kSeq, kOutIdx, kArgmax, kMax, kFresh, kFields };
    int32_t* base = nullptr;
    int stride = 1;
    int32_t* at(Field f) const { return base + int(f) * stride; }
};

struct Session::Impl {
    // One stage of the model (Model::stages()): its backend, its layers' KV cache, and
    // copies of each batch's metadata in its memory (every stage's attention reads the
    // positions and sequences).
    struct Stage {
        Backend* be = nullptr;
        std::unique_ptr<KvCache> cache;
        int32_t *d_tokens = nullptr, *d_pos = nullptr, *d_seq = nullptr;
        int32_t* d_step = nullptr;   // StepIds, stride 1
        int32_t* d_bstep = nullptr;  // StepIds, stride kMaxBucket
    };
    std::vector<Stage> st;
    // One share of the vocabulary's logits (Model::output_stages(): the last stage's whole
    // vocabulary, or each tensor-parallel device's rows): its stage, its rows [first,
    // first + n), and one chunk's output rows, logits and reductions in that stage's
    // memory. With several shares the host merges their rows, argmaxes or top-k.
    struct OutShard {
        size_t stage = 0;
        int64_t first = 0, n = 0;
        int32_t* d_out_idx = nullptr;  // [n_batch]
        int32_t* d_argmax = nullptr;   // [2][n_batch]: argmax, then (float bits) its logit
        float* d_logits = nullptr;     // [n_batch][n]
        int32_t* d_topk_ids = nullptr; // [n_batch][kTopKMax]
        float* d_topk_vals = nullptr;
    };
    std::vector<OutShard> outs;
    std::unique_ptr<Collective> collective;  // tensor parallel's all-reduce
    std::unique_ptr<Forward> fwd;
    int n_batch = 0;
    int n_vocab = 0;
    // Host staging, sized once; h_shard* / h_best / h_cand: merging several shares (grown as needed).
    std::vector<int32_t> h_tokens, h_pos, h_seq, h_out_idx;
    std::vector<float> logits, h_shard, h_best;
    std::vector<int32_t> h_shard_ids;
    std::vector<std::vector<std::pair<float, int32_t>>> h_cand;
    std::vector<int32_t> greedy;
    // The wanted rows of the last decode whose logits are still in d_logits: rows
    // [last_first, last_first + last_rows) of its batch order (logits_of()).
    size_t last_first = 0, last_rows = 0;
    std::vector<BatchToken> one_seq;
    std::vector<BatchView> views;  // one chunk's batch, per stage
    // Graph replay of decode steps. A captured step reads its ids from one StepIds block
    // per stage: d_step (stride 1) for one-token steps, d_bstep (stride kMaxBucket) for
    // steps of 2..64 sequences (ContextParams::batch_graphs), padded to a bucket with
    // rows of the hidden sequence `pad_seq`. One graph per (bucket, selection) and
    // stage; the host passes the residual stream between stages' graphs.
    static constexpr int kMaxBucket = 64;
    static constexpr int kBuckets[7] = {2, 4, 8, 16, 32, 48, 64};
    struct Graph {
        std::vector<int> ids;  // per stage; empty: not captured
        int k = 0;             // the top-k baked into a TopK graph
    };
    bool graphs = false;
    Graph one_graph[3];  // [Select]
    bool batch_graphs = false;
    int pad_seq = -1;
    Graph bgraph[7][3];  // [bucket][Select]
    std::vector<int32_t> h_bstep;
    int n_replays = 0;  // batched steps replayed
    // VEGA_STEP_REPLAYS (1..16): each decode graph replayed this many times a step, a
    // diagnostic: a step is idempotent (the same KV rows, sums and argmax again), so the
    // host's gap between steps is 2 t(1) - t(2) from the step times t(N).
    int step_replays = 1;
    TopK topk;

    Backend& be_of(const OutShard& o) const { return *st[o.stage].be; }
    const OutShard* shard_of(size_t stage) const {
        for (const OutShard& o : outs)
            if (o.stage == stage) return &o;
        return nullptr;
    }
    bool merged() const { return outs.size() > 1; }
    // Whether decode steps can be recorded: every backend captures, and the collective
    // (tensor parallel) can be recorded (the host's all-reduce cannot).
    bool can_capture() const {
        bool ok = !collective || collective->capturable();
        for (const Stage& s : st) ok = ok && s.be->supports_capture();
        return ok;
    }
    int n_stages() const { return int(st.size()); }

    // Reduces the logits of `rows` rows of share o on its stage: the argmax of each into
    // argmax_out [rows] and, where shares are merged, its logit into argmax_out + stride
    // (float bits); or the top-k into d_topk_* (a share narrower than k: all its rows).
    void select(const OutShard& o, Select sel, int rows, int k, int32_t* argmax_out, int stride) {
        Backend& be = be_of(o);
        float* max_out = merged() ? reinterpret_cast<float*>(argmax_out + stride) : nullptr;
        if (sel == Select::Argmax) be.argmax(o.d_logits, rows, o.n, argmax_out, max_out);
        if (sel == Select::TopK)
            be.top_k(o.d_logits, rows, o.n, int(std::min<int64_t>(k, o.n)), o.d_topk_ids, o.d_topk_vals);
    }
    // Where each stage puts its logits in a captured step (batched: the bucket's ids block).
    std::vector<StageLogits> step_logits(bool batched) const {
        std::vector<StageLogits> out(st.size());
        for (const OutShard& o : outs) out[o.stage] = {ids_of(int(o.stage), batched).at(StepIds::kOutIdx), o.d_logits};
        return out;
    }
    // Whole rows: rows [row0, row0 + n) of the chunk's logits into dst [n][n_vocab], each
    // share's columns from its stage.
    void download_logits(float* dst, size_t row0, size_t n) {
        const size_t V = size_t(n_vocab);
        if (!merged()) {
            be_of(outs[0]).download(dst, outs[0].d_logits + row0 * V, n * V * sizeof(float));
            return;
        }
        for (const OutShard& o : outs) {
            const size_t w = size_t(o.n);
            h_shard.resize(n * w);
            be_of(o).download(h_shard.data(), o.d_logits + row0 * w, n * w * sizeof(float));
            for (size_t r = 0; r < n; ++r)
                std::copy_n(h_shard.data() + r * w, w, dst + r * V + size_t(o.first));
        }
    }
    // The argmax of n rows (select()'s output at argmax_of(o), `stride` apart), appended
    // to out: over several shares, the largest logit, the lowest id on ties (shares in
    // vocabulary order, each with its own lowest).
    void fetch_argmax(int n, const std::function<int32_t*(const OutShard&)>& argmax_of, int stride,
                      std::vector<int32_t>& out) {
        const size_t base = out.size();
        out.resize(base + size_t(n));
        if (!merged()) {
            be_of(outs[0]).download(out.data() + base, argmax_of(outs[0]), size_t(n) * sizeof(int32_t));
            return;
        }
        std::vector<float>& best = h_best;
        best.resize(size_t(n));
        h_shard_ids.resize(size_t(stride) + size_t(n));
        for (size_t i = 0; i < outs.size(); ++i) {
            const OutShard& o = outs[i];
            be_of(o).download(h_shard_ids.data(), argmax_of(o), (size_t(stride) + size_t(n)) * sizeof(int32_t));
            for (size_t r = 0; r < size_t(n); ++r) {
                float v;
                std::memcpy(&v, &h_shard_ids[size_t(stride) + r], sizeof v);
                if (std::isnan(v)) v = -INFINITY;  // (the backends never choose NaN; kept so)
                if (i == 0 || v > best[r]) best[r] = v, out[base + r] = int32_t(o.first) + h_shard_ids[r];
            }
        }
    }
    // The top-k of n rows, appended to t: over several shares, the k best of their
    // candidates (best first, ties by lowest id).
    void fetch_top_k(int n, int k, TopK& t) {
        const size_t old = t.ids.size(), add = size_t(n) * size_t(k);
        t.ids.resize(old + add);
        t.logits.resize(old + add);
        if (!merged()) {
            be_of(outs[0]).download(t.ids.data() + old, outs[0].d_topk_ids, add * sizeof(int32_t));
            be_of(outs[0]).download(t.logits.data() + old, outs[0].d_topk_vals, add * sizeof(float));
            return;
        }
        std::vector<std::vector<std::pair<float, int32_t>>>& cand = h_cand;  // [row][candidate]
        cand.resize(size_t(n));
        for (auto& c : cand) c.clear();
        for (const OutShard& o : outs) {
            const size_t ks = size_t(std::min<int64_t>(k, o.n));
            h_shard_ids.resize(size_t(n) * ks);
            h_shard.resize(size_t(n) * ks);
            be_of(o).download(h_shard_ids.data(), o.d_topk_ids, h_shard_ids.size() * sizeof(int32_t));
            be_of(o).download(h_shard.data(), o.d_topk_vals, h_shard.size() * sizeof(float));
            for (size_t r = 0; r < size_t(n); ++r)
                for (size_t j = 0; j < ks; ++j)
                    cand[r].push_back({h_shard[r * ks + j], int32_t(o.first) + h_shard_ids[r * ks + j]});
        }
        for (size_t r = 0; r < size_t(n); ++r) {
            auto& c = cand[r];
            std::partial_sort(c.begin(), c.begin() + k, c.end(), [](const auto& a, const auto& b) {
                return a.first > b.first || (a.first == b.first && a.second < b.second);
            });
            for (size_t j = 0; j < size_t(k); ++j)
                t.ids[old + r * size_t(k) + j] = c[j].second, t.logits[old + r * size_t(k) + j] = c[j].first;
        }
    }
    void synchronize() {
        for (Stage& s : st) s.be->synchronize();
    }
    void release(Graph& g) {
        for (size_t s = 0; s < g.ids.size(); ++s)
            if (g.ids[s] >= 0) st[s].be->release_graph(g.ids[s]);
        g.ids.clear();
    }
    ~Impl() {
        for (Graph& g : one_graph) release(g);
        for (auto& per_bucket : bgraph)
            for (Graph& g : per_bucket) release(g);
        fwd.reset();
        for (const OutShard& o : outs)
            for (void* p : {(void*)o.d_out_idx, (void*)o.d_argmax, (void*)o.d_logits, (void*)o.d_topk_ids,
                            (void*)o.d_topk_vals})
                if (p) be_of(o).release(p);
        for (Stage& s : st)
            for (void* p : {(void*)s.d_tokens, (void*)s.d_pos, (void*)s.d_seq, (void*)s.d_step, (void*)s.d_bstep})
                if (p) s.be->release(p);
    }

    // The batch of a captured step in each stage's memory.
    std::vector<BatchView> step_views(bool batched, int rows, int n_ctx) const {
        std::vector<BatchView> out;
        for (int s = 0; s < n_stages(); ++s) {
            const StepIds ids = ids_of(s, batched);
            BatchView b;
            b.n_tokens = rows, b.tokens = ids.at(StepIds::kTokens), b.pos = ids.at(StepIds::kPos);
            b.seq = ids.at(StepIds::kSeq), b.n_kv_max = n_ctx;
            b.fresh = ids.stride == 1 ? b.pos : ids.at(StepIds::kFresh);
            out.push_back(b);
        }
        return out;
    }
    // The step ids block of stage s (batched: stride kMaxBucket).
    StepIds ids_of(int s, bool batched) const {
        return batched ? StepIds{st[size_t(s)].d_bstep, kMaxBucket} : StepIds{st[size_t(s)].d_step, 1};
    }
    // Records forward (+ argmax or top-k) of `rows` rows whose ids are in each stage's
    // block (see above), one graph per stage. A failure turns the path off (`enabled`)
    // and propagates.
    void capture(Graph& g, bool batched, int rows, int n_ctx, Select sel, int k, bool& enabled) {
        const std::vector<BatchView> views = step_views(batched, rows, n_ctx);
        const std::vector<StageLogits> out = step_logits(batched);
        auto select_on = [&](int s) {  // stage s's reduction of its share, if it holds one
            const StepIds ids = ids_of(s, batched);
            if (const OutShard* o = shard_of(size_t(s))) select(*o, sel, rows, k, ids.at(StepIds::kArgmax), ids.stride);
        };
        auto abandon = [&](int first, int end) {  // ends stages [first, end)'s captures, drops the graphs
            for (int s = first; s < end; ++s) try {
                    st[size_t(s)].be->release_graph(st[size_t(s)].be->capture_end());
                } catch (...) {
                }
            release(g);
            enabled = false;
        };
        if (fwd->tensor_parallel()) {
            // One pass over every device at once (each block's all-reduce joins them),
            // each device's part on its own thread, which records its own graph of it.
            std::vector<int> ids(st.size(), -1);
            try {
                fwd->run(views, out, rows,
                         [&](int s, const std::function<void()>& pass) {
                             Backend& be = *st[size_t(s)].be;
                             be.capture_begin();
                             try {
                                 pass();
                                 select_on(s);
                             } catch (...) {
                                 try {
                                     be.release_graph(be.capture_end());
                                 } catch (...) {
                                 }
                                 throw;
                             }
                             ids[size_t(s)] = be.capture_end();
                         });
            } catch (...) {
                for (size_t s = 0; s < st.size(); ++s)
                    if (ids[s] >= 0) st[s].be->release_graph(ids[s]);
                release(g);
                enabled = false;
                throw;
            }
            g.ids = ids;
            return;
        }
        for (int s = 0; s < n_stages(); ++s) {
            Backend& be = *st[size_t(s)].be;
            be.capture_begin();
            try {
                fwd->run_stage(s, views[size_t(s)], out[size_t(s)], rows);
                select_on(s);
            } catch (...) {
                abandon(s, s + 1);
                throw;
            }
            g.ids.push_back(be.capture_end());
        }
    }
    // Replays g over the ids already uploaded, capturing it first (again when the
    // top-k's k changed: it is baked into the graph).
    void replay(Graph& g, bool batched, int rows, int n_ctx, Select sel, int k, bool& enabled) {
        if (!g.ids.empty() && sel == Select::TopK && g.k != k) release(g);
        static const bool trace = env::flag("VEGA_TRACE_GRAPHS", false);
        auto say = [&](const char* what) {
            if (trace) std::fprintf(stderr, "vega: graph %s (%d rows)\n", what, rows);
        };
        if (g.ids.empty()) {
            say("sync before capture");
            synchronize();
            say("capture");
            capture(g, batched, rows, n_ctx, sel, k, enabled);
            g.k = k;
            say("captured");
        }
        if (fwd->tensor_parallel()) {
            say("launch");
            fwd->on_each_device([&](int s) {
                for (int i = 0; i < step_replays; ++i) st[size_t(s)].be->replay(g.ids[size_t(s)]);
            });
            say("launched");
            if (trace) synchronize(), say("finished");
            return;
        }
        for (int s = 0; s < n_stages(); ++s) {
            for (int i = 0; i < step_replays; ++i) st[size_t(s)].be->replay(g.ids[size_t(s)]);
            if (s + 1 < n_stages()) fwd->hand_off(s, rows);
        }
    }
    // The smallest bucket holding n rows (index into kBuckets), or -1.
    static int bucket_of(int n) {
        for (int i = 0; i < 7; ++i)
            if (n <= kBuckets[i]) return i;
        return -1;
    }
    // A decode step of n (2..64) rows through its bucket's graph: rows n.. are padding.
    void batch_step(const std::vector<BatchToken>& batch, int n_ctx, Select sel, int k) {
        const int n = int(batch.size()), bi = bucket_of(n), bucket = kBuckets[bi];
        const StepIds host{h_bstep.data(), kMaxBucket};
        int32_t *tok = host.at(StepIds::kTokens), *pos = host.at(StepIds::kPos), *seq = host.at(StepIds::kSeq);
        for (int i = 0; i < bucket; ++i) {
            const bool pad = i >= n;
            tok[i] = pad ? 0 : batch[size_t(i)].token;
            pos[i] = pad ? 0 : batch[size_t(i)].pos;
            seq[i] = pad ? pad_seq : batch[size_t(i)].seq;
            host.at(StepIds::kOutIdx)[i] = i;
        }
        // fresh: the lowest position this step writes for the row's sequence (a
        // sequence may hold several rows of one step).
        for (int i = 0; i < bucket; ++i) {
            int32_t lo = pos[i];
            for (int j = 0; j < bucket; ++j)
                if (seq[j] == seq[i]) lo = std::min(lo, pos[j]);
            host.at(StepIds::kFresh)[i] = lo;
        }
        // Tokens .. out_idx in one upload (argmax and max are the step's output), then fresh.
        for (int s = 0; s < n_stages(); ++s) {
            const StepIds dev = ids_of(s, true);
            Backend& be = *st[size_t(s)].be;
            be.upload(dev.base, host.base, size_t(StepIds::kArgmax * kMaxBucket) * sizeof(int32_t));
            be.upload(dev.at(StepIds::kFresh), host.at(StepIds::kFresh), size_t(kMaxBucket) * sizeof(int32_t));
        }
        replay(bgraph[bi][int(sel)], true, bucket, n_ctx, sel, k, batch_graphs);
        ++n_replays;
    }
    // A one-token step: uploads its ids and replays its graph.
    void step(const BatchToken& t, int n_ctx, Select sel, int k) {
        int32_t ids[StepIds::kArgmax];  // tokens, pos, seq, out_idx (stride 1)
        ids[StepIds::kTokens] = t.token, ids[StepIds::kPos] = t.pos, ids[StepIds::kSeq] = t.seq;
        ids[StepIds::kOutIdx] = 0;
        for (int s = 0; s < n_stages(); ++s) st[size_t(s)].be->upload(st[size_t(s)].d_step, ids, sizeof(ids));
        replay(one_graph[int(sel)], false, 1, n_ctx, sel, k, graphs);
    }
};

Session::Session(const Model& model, Backend& backend, const ContextParams& p) : Session(model, p) {
    if (model.stages().size() != 1 || &model.first_backend() != &backend)
        fail("session: the model's weights live on {}, not on {}", model.describe_placement(), backend.name());
}

Session::Session(const Model& model, const ContextParams& p)
    : model_(model), p_(p), impl_(std::make_unique<Impl>()) {
    const HParams& hp = model.hparams();
    if (p_.n_ctx <= 0) p_.n_ctx = std::min(hp.n_ctx_train, 4096);
    if (p_.n_batch <= 0) fail("n_batch must be positive (got {})", p_.n_batch);
    if (p_.n_seq <= 0) fail("n_seq must be positive (got {})", p_.n_seq);
    p_.n_batch = std::min(p_.n_batch, p_.n_ctx * p_.n_seq);

    Impl& I = *impl_;
    I.step_replays = env::integer_in("VEGA_STEP_REPLAYS", 1, 1, 16, "decode graph replays a step");
    if (model.split_mode() == SplitMode::kTensor) {
        std::vector<Backend*> devices;
        for (const ModelStage& ms : model.stages()) devices.push_back(ms.backend);
        I.collective = make_collective(devices);
    }
    bool capture = !I.collective || I.collective->capturable();  // (the stages are not made yet)
    for (const ModelStage& ms : model.stages()) capture = capture && ms.backend->supports_capture();
    // Batch graphs pad their buckets with rows of one extra sequence nobody reads.
    const bool batch_graphs = p_.batch_graphs && p_.n_seq > 1 && capture;
    std::vector<KvCache*> caches;
    for (const ModelStage& ms : model.stages()) {
        KvCacheDesc d;
        d.n_layer = ms.end_layer - ms.first_layer;
        d.n_seq = p_.n_seq + (batch_graphs ? 1 : 0);
        d.n_ctx = p_.n_ctx;
        d.n_kv_head = ms.n_head_kv;  // (tensor parallel: this device's KV heads)
        d.head_dim = hp.head_dim;
        d.type = p_.kv_type;
        check_kv_cache_desc(d);
        // The cache is the session's one large allocation: check it fits first and say
        // what to lower (an allocation failure deep in the backend, or the OOM killer on
        // the CPU, would say neither).
        Backend& backend = *ms.backend;
        const size_t kv_bytes = kv_cache_bytes(d);
        if (const size_t avail = backend.free_memory(); avail > 0 && kv_bytes > avail)
            fail("the KV cache does not fit: {} sequence(s) x {} cells ({}) x {} layers needs {:.2f} GiB, {:.2f} GiB "
                 "is free on {}; lower -c/--ctx-size or --parallel, or use a smaller --kv-type",
                 p_.n_seq, d.n_ctx, type_traits(d.type).name, d.n_layer, double(kv_bytes) / (1 << 30),
                 double(avail) / (1 << 30), backend.name());
        Impl::Stage s;
        s.be = &backend;
        s.cache = backend.create_kv_cache(d);
        caches.push_back(s.cache.get());
        I.st.push_back(std::move(s));
    }
    I.n_batch = p_.n_batch;
    I.n_vocab = hp.n_vocab;
    I.fwd = std::make_unique<Forward>(model, caches, I.n_batch, I.collective.get());
    const size_t B = size_t(I.n_batch);
    I.batch_graphs = batch_graphs && I.n_batch >= Impl::kMaxBucket;
    for (Impl::Stage& s : I.st) {
        Backend& be = *s.be;
        auto ibuf = [&](const char* what) { return static_cast<int32_t*>(be.alloc(B * sizeof(int32_t), what)); };
        s.d_tokens = ibuf("batch tokens");
        s.d_pos = ibuf("batch positions");
        s.d_seq = ibuf("batch sequence ids");
        s.d_step = static_cast<int32_t*>(be.alloc(StepIds::kFields * sizeof(int32_t), "decode step ids"));
        if (I.batch_graphs)
            s.d_bstep = static_cast<int32_t*>(
                be.alloc(StepIds::kFields * Impl::kMaxBucket * sizeof(int32_t), "batched step ids"));
    }
    const size_t KB = B * size_t(Backend::kTopKMax);
    for (const size_t s : model.output_stages()) {
        const ModelStage& ms = model.stages()[s];
        Backend& be = *ms.backend;
        // (Impl owns each buffer as soon as it exists: released with it if a later one throws.)
        Impl::OutShard& o = I.outs.emplace_back();
        o.stage = s, o.first = ms.first_vocab, o.n = ms.n_vocab;
        o.d_out_idx = static_cast<int32_t*>(be.alloc(B * sizeof(int32_t), "batch output rows"));
        o.d_argmax = static_cast<int32_t*>(be.alloc(2 * B * sizeof(int32_t), "argmax output"));
        o.d_logits = static_cast<float*>(be.alloc(B * size_t(o.n) * sizeof(float), "logits"));
        o.d_topk_ids = static_cast<int32_t*>(be.alloc(KB * sizeof(int32_t), "top-k ids"));
        o.d_topk_vals = static_cast<float*>(be.alloc(KB * sizeof(float), "top-k values"));
    }
    if (I.outs.empty()) fail("session: no stage of {} computes logits", model.describe_placement());
    I.graphs = I.can_capture();
    if (I.batch_graphs) {
        I.pad_seq = p_.n_seq;
        I.h_bstep.assign(StepIds::kFields * Impl::kMaxBucket, 0);
    }
    I.topk.ids.reserve(KB);
    I.topk.logits.reserve(KB);
    I.h_tokens.resize(B);
    I.h_pos.resize(B);
    I.h_seq.resize(B);
    I.h_out_idx.resize(B);
}

Session::~Session() = default;

size_t Session::kv_bytes() const {
    size_t n = 0;
    for (const Impl::Stage& s : impl_->st) n += s.cache->bytes();
    return n;
}

void Session::set_use_graphs(bool on) { impl_->graphs = on && impl_->can_capture(); }
void Session::set_route_trace(RouteTrace* t) {
    if (t) set_use_graphs(false);  // a captured step cannot stop for the host
    impl_->fwd->set_route_trace(t);
}
bool Session::use_graphs() const { return impl_->graphs; }
std::string Session::collective_name() const { return impl_->collective ? impl_->collective->name() : ""; }
int Session::batch_graph_replays() const { return impl_->n_replays; }

namespace {

// Validates and stages one chunk; returns the number of rows that want logits.
int stage_chunk(const std::vector<BatchToken>& batch, size_t begin, size_t end, const ContextParams& p, int n_vocab,
                std::vector<int32_t>& tok, std::vector<int32_t>& pos, std::vector<int32_t>& seq,
                std::vector<int32_t>& out_idx, int& n_kv_max, int* prompt_rows = nullptr) {
    // Generated rows first, then prompt rows (BatchToken::prompt), each in batch order:
    // the backend takes the prompt rows as one range (BatchView::prompt_rows).
    // out_idx lists the wanted rows' staged indices in batch order.
    int n_prompt = 0;
    for (size_t i = begin; i < end; ++i) n_prompt += batch[i].prompt;
    if (prompt_rows) *prompt_rows = n_prompt;
    int n_out = 0, next_gen = 0, next_prompt = int(end - begin) - n_prompt;
    n_kv_max = 0;
    for (size_t i = begin; i < end; ++i) {
        const BatchToken& t = batch[i];
        if (t.token < 0 || t.token >= n_vocab) fail("token id {} is out of range [0, {})", t.token, n_vocab);
        if (t.pos < 0 || t.pos >= p.n_ctx)
            fail("position {} is beyond the context size {} (use a larger -c/--ctx-size)", t.pos, p.n_ctx);
        if (t.seq < 0 || t.seq >= p.n_seq) fail("sequence id {} is out of range [0, {})", t.seq, p.n_seq);
        const size_t j = size_t(t.prompt ? next_prompt++ : next_gen++);
        tok[j] = t.token;
        pos[j] = t.pos;
        seq[j] = t.seq;
        n_kv_max = std::max(n_kv_max, t.pos + 1);
        if (t.want_logits) out_idx[n_out++] = int32_t(j);
    }
    return n_out;
}

}  // namespace

const std::vector<float>& Session::decode(const std::vector<BatchToken>& batch) {
    decode_reduced(batch, int(Select::Logits), 0);
    return impl_->logits;
}

const std::vector<int32_t>& Session::decode_greedy(const std::vector<BatchToken>& batch) {
    decode_reduced(batch, int(Select::Argmax), 1);
    return impl_->greedy;
}

const Session::TopK& Session::decode_top_k(const std::vector<BatchToken>& batch, int k) {
    if (k < 1 || k > Backend::kTopKMax || k > n_vocab())
        fail("top-k on the device needs 1 <= k <= {} (got {})", std::min(Backend::kTopKMax, n_vocab()), k);
    impl_->topk.k = k;
    decode_reduced(batch, int(Select::TopK), k);
    return impl_->topk;
}

// Forward, then for every row that wants logits: the whole row (Logits), or its
// argmax or top-k reduced on the backend so that only those leave it. Results go
// to logits / greedy / topk, in batch order.
void Session::decode_reduced(const std::vector<BatchToken>& batch, int mode, int k) {
    Impl& I = *impl_;
    const Select sel = Select(mode);
    I.greedy.clear();
    I.topk.ids.clear();
    I.topk.logits.clear();
    I.last_first = I.last_rows = 0;
    size_t written = 0;  // logits rows so far
    size_t fetched = 0;  // wanted rows so far (every selection)
    if (sel == Select::Logits) {
        size_t n_wanted = 0;
        for (const auto& t : batch) n_wanted += t.want_logits;
        I.logits.resize(n_wanted * size_t(I.n_vocab));
    }
    // The chunk's results; its argmax (with each share's max, `stride` ints after) in a
    // captured step's ids block (graph: 0 one-token, 1 batched) or the shares' buffers.
    auto fetch = [&](int n_out, int graph) {
        I.last_first = fetched, I.last_rows = size_t(n_out);
        fetched += size_t(n_out);
        if (sel == Select::Logits) {
            I.download_logits(I.logits.data() + written * size_t(I.n_vocab), 0, size_t(n_out));
            written += size_t(n_out);
        } else if (sel == Select::Argmax) {
            const int stride = graph < 0 ? I.n_batch : I.ids_of(0, graph == 1).stride;
            I.fetch_argmax(n_out,
                           [&](const Impl::OutShard& o) {
                               return graph < 0 ? o.d_argmax : I.ids_of(int(o.stage), graph == 1).at(StepIds::kArgmax);
                           },
                           stride, I.greedy);
        } else {
            I.fetch_top_k(n_out, k, I.topk);
        }
    };
    // Graphs replay decode steps: generated rows only (prompt rows take the tiled attention).
    if (I.graphs && batch.size() == 1 && batch[0].want_logits && !batch[0].prompt) {
        int n_kv = 0;
        stage_chunk(batch, 0, 1, p_, I.n_vocab, I.h_tokens, I.h_pos, I.h_seq, I.h_out_idx, n_kv);  // validates
        I.step(batch[0], p_.n_ctx, sel, k);
        fetch(1, 0);
        return;
    }
    // A decode step of 2..64 sequences: every row wants logits.
    if (I.graphs && I.batch_graphs && batch.size() >= 2 && batch.size() <= size_t(Impl::kMaxBucket) &&
        std::all_of(batch.begin(), batch.end(), [](const BatchToken& t) { return t.want_logits && !t.prompt; })) {
        int n_kv = 0;
        stage_chunk(batch, 0, batch.size(), p_, I.n_vocab, I.h_tokens, I.h_pos, I.h_seq, I.h_out_idx, n_kv);  // validates
        I.batch_step(batch, p_.n_ctx, sel, k);
        fetch(int(batch.size()), 1);
        I.synchronize();
        return;
    }
    for (size_t begin = 0; begin < batch.size(); begin += size_t(I.n_batch)) {
        const size_t end = std::min(batch.size(), begin + size_t(I.n_batch));
        const int n = int(end - begin);
        BatchView bv;
        int n_out = stage_chunk(batch, begin, end, p_, I.n_vocab, I.h_tokens, I.h_pos, I.h_seq, I.h_out_idx,
                                bv.n_kv_max, &bv.prompt_rows);
        const bool keep = n_out > 0;
        if (!keep) I.h_out_idx[0] = 0, n_out = 1;
        bv.n_tokens = n;
        I.views.clear();
        for (Impl::Stage& s : I.st) {
            s.be->upload(s.d_tokens, I.h_tokens.data(), size_t(n) * 4);
            s.be->upload(s.d_pos, I.h_pos.data(), size_t(n) * 4);
            s.be->upload(s.d_seq, I.h_seq.data(), size_t(n) * 4);
            bv.tokens = s.d_tokens, bv.pos = s.d_pos, bv.seq = s.d_seq;
            I.views.push_back(bv);
        }
        std::vector<StageLogits> out(I.st.size());
        for (const Impl::OutShard& o : I.outs) {
            I.be_of(o).upload(o.d_out_idx, I.h_out_idx.data(), size_t(n_out) * 4);
            out[o.stage] = {o.d_out_idx, o.d_logits};
        }
        I.fwd->run(I.views, out, n_out);
        if (!keep) continue;
        for (const Impl::OutShard& o : I.outs) I.select(o, sel, n_out, k, o.d_argmax, I.n_batch);
        fetch(n_out, -1);
    }
    I.synchronize();
}

const std::vector<float>& Session::logits_of(const std::vector<int>& rows) {
    Impl& I = *impl_;
    const size_t n_vocab = size_t(I.n_vocab);
    I.logits.resize(rows.size() * n_vocab);
    for (const int r : rows)
        if (r < 0 || size_t(r) < I.last_first || size_t(r) >= I.last_first + I.last_rows)
            fail("logits_of: row {} is not among the last decode's rows still on the backend ([{}, {}))", r,
                 I.last_first, I.last_first + I.last_rows);
    for (size_t i = 0; i < rows.size();) {
        // One download for each run of consecutive rows.
        size_t run = 1;
        while (i + run < rows.size() && rows[i + run] == rows[i] + int(run)) ++run;
        I.download_logits(I.logits.data() + i * n_vocab, size_t(rows[i]) - I.last_first, run);
        i += run;
    }
    return I.logits;
}

const std::vector<float>& Session::eval(const std::vector<int32_t>& tokens, int start_pos, int seq, bool all_logits,
                                        bool prompt) {
    Impl& I = *impl_;
    I.one_seq.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i)
        I.one_seq[i] = {tokens[i], start_pos + int32_t(i), seq, all_logits || i + 1 == tokens.size(), prompt};
    return decode(I.one_seq);
}

}  // namespace vega
