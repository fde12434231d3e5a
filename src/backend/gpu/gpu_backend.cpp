// GpuBackend: device memory, weight upload (repacked once), scratch sized at
// reserve(), and the op sequence issued on one stream (capturable as a graph).
// Host code only; the kernels live behind ops.h, the runtime behind runtime.h.
#include "backend/gpu/gpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "backend/gpu/collective_peer.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/repack.h"
#include "backend/gpu/runtime.h"
#include "core/env.h"
#include "core/error.h"
#include "gguf/gguf.h"

namespace vega {
namespace gpu {

void gpu_fail(const std::string& msg) { throw Error(msg); }

namespace {

std::string gib(size_t b) { return fmt::format("{:.2f} GiB", double(b) / double(1ull << 30)); }

// Partial results of split attention: a fixed budget, rows processed in chunks.
constexpr size_t kAttnPartBytes = size_t(64) << 20;
constexpr int64_t kAttnCounters = 1 << 16;  // (token, head) pairs of one merged attention launch

class GpuKvCache final : public KvCache {
public:
    GpuKvCache(const KvCacheDesc& d, void* buf, size_t bytes) : buf_(buf), bytes_(bytes) { desc_ = d; }
    size_t bytes() const override { return bytes_; }
    void* buf() const { return buf_; }
    // Layer il: its K and V value planes ([layer][K, V]), then for q8_0 the layers'
    // scale planes of (K, V) pairs after all of them; kv_cache_bytes(desc) in all.
    ops::KvLayer layer(int il) const {
        const KvLayout lay = kv_layout(desc_);
        const size_t elems = size_t(lay.layer_elems()), per = elems * kv_value_bytes(lay.elem);
        auto* base = static_cast<uint8_t*>(buf_);
        ops::KvLayer L;
        L.k = base + 2 * size_t(il) * per;
        L.v = base + (2 * size_t(il) + 1) * per;
        if (lay.elem == KvElem::Q8_0) {
            auto* scales = reinterpret_cast<uint16_t*>(base + 2 * size_t(desc_.n_layer) * per);
            L.k_scale = scales + size_t(il) * size_t(lay.scale_index(int64_t(elems)));
            L.v_scale = L.k_scale + 1;
        }
        L.elem = lay.elem;
        L.n_seq = desc_.n_seq, L.n_ctx = desc_.n_ctx, L.n_kv_head = desc_.n_kv_head, L.hd = desc_.head_dim;
        return L;
    }

private:
    void* buf_;
    size_t bytes_;
};

class GpuBackend final : public Backend {
    using Readers = std::array<const Weight*, 3>;  // the matrices reading one matmul input (null: none)

public:
    explicit GpuBackend(int device) : dev_(device) {
        const int n = rt::device_count();
        if (device < 0 || device >= n) fail("GPU {} requested but {} GPU device(s) found", device, n);
        rt::set_device(device);
        info_ = rt::device_info(device);
        rt::check_device_target(info_, device);
        stream_ = rt::stream_create();
        mark_ = rt::sync_event_create();
    }
    ~GpuBackend() override {
        on();
        for (void* g : graphs_) rt::graph_destroy(g);
        for (auto& [p, bytes] : owned_) rt::free(p);
        rt::event_destroy(mark_);
        rt::stream_destroy(stream_);
    }

    std::string name() const override {
        return fmt::format("gpu {}: {} ({}, {} CUs, {})", dev_, info_.name, info_.arch, info_.n_sm, gib(info_.total_mem));
    }

    // ---- memory ----
    void* alloc(size_t bytes, const char* what) override {
        on();
        void* p = rt::malloc(bytes);
        if (!p) {
            size_t free_b = 0, total_b = 0;
            rt::mem_info(&free_b, &total_b);
            fail("out of GPU memory allocating {}: {} bytes needed, {} bytes available ({} of {} free on {})", what,
                 bytes, free_b, gib(free_b), gib(total_b), info_.name);
        }
        owned_[p] = bytes;
        return p;
    }
    void release(void* p) override {
        on();
        if (!p) return;
        owned_.erase(p);
        mats_.erase(p);
        rt::free(p);
    }
    void upload(void* dst, const void* src, size_t bytes) override {
        on();
        rt::h2d(dst, src, bytes, stream_);
    }
    void download(void* dst, const void* src, size_t bytes) override {
        on();
        rt::d2h(dst, src, bytes, stream_);
    }
    void synchronize() override {
        on();
        rt::stream_sync(stream_);
    }
    // Another GPU backend (another device, or the same one twice): a copy on dst's
    // stream between two cross-stream waits, with no host wait: dst's stream waits
    // for this stream's earlier work, copies (peer to peer where the pair allows it,
    // else the runtime stages it through host memory), and this stream waits for the
    // copy before it may overwrite src.
    void copy_to(Backend& dst, void* dst_ptr, const void* src, size_t bytes) override {
        auto* g = dynamic_cast<GpuBackend*>(&dst);
        if (!g) return Backend::copy_to(dst, dst_ptr, src, bytes);
        on();
        rt::event_record(mark_, stream_);
        g->on();
        if (g->dev_ != dev_ && !g->peers_tried_.count(dev_)) {
            g->peers_tried_[dev_] = rt::enable_peer_access(g->dev_, dev_);
            g->on();
        }
        rt::stream_wait(g->stream_, mark_);
        rt::peer_copy(dst_ptr, g->dev_, src, dev_, bytes, g->stream_);
        rt::event_record(g->mark_, g->stream_);
        on();
        rt::stream_wait(stream_, g->mark_);
    }
    int device_index() const override { return dev_; }

    // The quantized types of the GPU's format table (gpu_mat.h) and the float types.
    bool supports_type(GgmlType t) const override {
        return type_traits(t).supported && (is_repacked(t) || is_float_type(t));
    }
    Weight upload_weight(const gguf::TensorInfo& t) override {
        on();
        const TypeTraits tt = type_traits(t.type);
        if (!supports_type(t.type))
            fail("tensor '{}': type {} is not supported by the GPU backend", t.name, tt.name ? tt.name : "?");
        Weight w;
        w.type = t.type;
        w.n_in = t.ne[0];
        w.n_out = t.ne[1] * t.ne[2] * t.ne[3];
        if (w.n_in % tt.block_size)
            fail("tensor '{}': row of {} elements is not a multiple of the {} block size {}", t.name, w.n_in, tt.name,
                 tt.block_size);
        w.row_bytes = size_t(w.n_in / tt.block_size) * size_t(tt.type_size);
        w.name = t.name.c_str();
        const RepackLayout L = repack_layout(t.type, w.n_in, w.n_out);
        std::string what = "weight " + t.name;
        uint8_t* d = static_cast<uint8_t*>(alloc(L.total, what.c_str()));
        if (is_repacked(t.type)) {
            std::vector<uint8_t> host(L.total, 0);
            repack_matrix(t.type, t.data, w.n_in, w.n_out, host.data());
            rt::h2d(d, host.data(), L.total, stream_);
            rt::stream_sync(stream_);  // host buffer is freed below
        } else {
            rt::h2d(d, t.data, size_t(t.n_bytes), stream_);
        }
        mats_[d] = gpu_mat_view(t.type, w.n_in, w.n_out, d);
        if (ops::mma_min_rows() > 0 && !is_float_type(t.type) && !ops::mma_serves(mats_[d]))
            note(fmt::format("GPU: tensor '{}' ({} inputs, not a multiple of {} for {}) is not served by the "
                             "tensor-core matmul; steps of several rows run it as a matvec",
                             t.name, w.n_in, ops::mma_row_multiple(t.type), type_traits(t.type).name));
        w.data = d;
        return w;
    }

    void reserve(int max_rows, int64_t max_n_in) override {
        on();
        if (max_rows <= act_rows_ && max_n_in <= act_n_) return;
        for (void* p : {(void*)act_x_, (void*)act_q_, (void*)act_ds_, (void*)act_h_, (void*)act2_q_, (void*)act2_ds_,
                        (void*)act2_h_, (void*)ss_, (void*)plan_buf_})
            release(p);
        act_rows_ = std::max(act_rows_, max_rows);
        act_n_ = std::max(act_n_, max_n_in);
        const size_t cells = size_t(act_rows_) * size_t(act_n_);
        act_x_ = static_cast<float*>(alloc(cells * 4, "matmul input (f32)"));
        act_q_ = static_cast<int8_t*>(alloc(cells, "matmul input (q8)"));
        act_ds_ = static_cast<float*>(alloc(cells / 32 * 8 + 8, "matmul input (q8 scales)"));
        act2_q_ = static_cast<int8_t*>(alloc(cells, "attention output (q8)"));
        act2_ds_ = static_cast<float*>(alloc(cells / 32 * 8 + 8, "attention output (q8 scales)"));
        act_h_ = act2_h_ = nullptr;
        if (ops::mma_min_rows() > 0) {  // the f16 form the tensor-core matmul reads (Act::h)
            act_h_ = static_cast<uint16_t*>(alloc(cells * 2, "matmul input (q8 as f16)"));
            act2_h_ = static_cast<uint16_t*>(alloc(cells * 2, "attention output (q8 as f16)"));
        }
        // Decode residual + norm epilogue: per-chunk sums of squares of the deferred-norm input.
        ss_ = static_cast<float*>(alloc(size_t(act_n_) / 32 * 4 + 16, "norm partial sums"));
        // Expert plan (ops::ExpertPlan): up to act_rows_ (row, slot) pairs, kMaxExperts slots.
        const size_t items = size_t(act_rows_) / 16 + kMaxExperts + 1;  // ExpertPlan::items capacity
        const size_t plan_ints = size_t(act_rows_) + 2 * kMaxExperts + 3 + items + 1;
        plan_buf_ = static_cast<int32_t*>(alloc(plan_ints * sizeof(int32_t), "expert plan"));
        rt::memset(plan_buf_, 0, plan_ints * sizeof(int32_t), stream_);
        plan_.pairs = plan_buf_;
        plan_.slot_expert = plan_buf_ + act_rows_;
        plan_.slot_begin = plan_.slot_expert + kMaxExperts;
        plan_.n_active = plan_.slot_begin + kMaxExperts + 1;
        route_counter_ = plan_.n_active + 1;  // zero, kept zero by ops::router_route and route_experts
        plan_.n_items = route_counter_ + 1;
        plan_.items = plan_.n_items + 1;
        alloc_attention_scratch();
    }

    std::unique_ptr<KvCache> create_kv_cache(const KvCacheDesc& d) override {
        on();
        check_kv_cache_desc(d);
        const size_t bytes = kv_cache_bytes(d);
        void* buf = alloc(bytes, "KV cache");
        rt::memset(buf, 0, bytes, stream_);
        alloc_attention_scratch();
        return std::make_unique<GpuKvCache>(d, buf, bytes);
    }

    // ---- ops: each runs when called; nothing is held back between calls ----
    void embed(const Weight& table, const int32_t* tokens, int n_tokens, float* out) override {
        on();
        ops::embed(mat(table), tokens, n_tokens, out, stream_);
        rt::check("embed");
    }
    void rms_norm(const float* x, const Weight& w, float* y, int rows, int n, float eps) override {
        on();
        ops::rms_norm(x, f32(w), y, rows, n, eps, stream_);
        rt::check("rms_norm");
    }
    void matmul_input(const float* x, int rows, int64_t n) override {
        on();
        set_input(x, nullptr, nullptr, 0.f, rows, n);
    }
    void matmul_input_rms_norm(const float* x, const Weight& w, float eps, int rows, int64_t n) override {
        on();
        set_input(x, nullptr, f32(w), eps, rows, n);
    }
    void matmul(const Weight& w, float* y) override {
        on();
        check_input(w);
        ops::matvec(mat(w), act_, y, stream_);
        rt::check("matmul");
    }
    void matmul_qkv(const Weight& wq, const Weight& wk, const Weight& wv, float* q, float* k, float* v) override {
        on();
        if (wq.type != wk.type) return Backend::matmul_qkv(wq, wk, wv, q, k, v);
        check_input(wq), check_input(wk), check_input(wv);
        const GpuMat W[3] = {mat(wq), mat(wk), mat(wv)};
        float* const y[3] = {q, k, v};
        // One launch for all three, or for q and k when v has its own type (Q4_K_M's Q6_K attn_v).
        const bool same_v = wv.type == wq.type;
        ops::matvec3(W, y, same_v ? 3 : 2, act_, stream_);
        if (!same_v) ops::matvec(W[2], act_, v, stream_);
        rt::check("matmul_qkv");
    }
    void matmul_swiglu(const Weight& gate, const Weight& up, float* g_tmp, float* u_tmp, float* h, int rows) override {
        on();
        if (!swiglu_pair(gate, up) || rows != act_.rows) return Backend::matmul_swiglu(gate, up, g_tmp, u_tmp, h, rows);
        check_input(gate);
        ops::matvec_swiglu(mat(gate), mat(up), act_, h, nullptr, nullptr, stream_);
        rt::check("matmul_swiglu");
    }
    void add_bias(float* y, const Weight& b, int rows, int n) override {
        on();
        ops::add_bias(y, f32(b), rows, n, stream_);
        rt::check("add_bias");
    }
    void add(float* x, const float* y, int64_t n) override {
        on();
        ops::add(x, y, n, stream_);
        rt::check("add");
    }
    void swiglu(const float* g, const float* u, float* h, int64_t n) override {
        on();
        ops::swiglu(g, u, h, n, stream_);
        rt::check("swiglu");
    }
    void head_rms_norm(float* x, const Weight& w, int rows, int n_head, int head_dim, float eps) override {
        on();
        ops::head_rms_norm(x, f32(w), rows, n_head, head_dim, eps, stream_);
        rt::check("head_rms_norm");
    }
    void rope(float* x, int n_head, int head_dim, const RopeParams& p, const BatchView& b) override {
        on();
        const ops::RopeArgs r = rope_args(p);
        ops::rope(x, b.n_tokens, n_head, head_dim, r, b.pos, stream_);
        rt::check("rope");
    }
    void rope_kv_store(KvCache& c, int layer, float* q, float* k, const float* v, int n_head, int n_kv_head,
                       int head_dim, const RopeParams& p, const BatchView& b) override {
        on();
        const ops::KvLayer L = cache_layer(c, layer, n_kv_head, head_dim, p);
        ops::rope_store(L, q, k, v, b.n_tokens, n_head, rope_args(p), b.pos, b.seq, stream_);
        rt::check("rope_kv_store");
    }
    void kv_store(KvCache& c, int layer, const float* k, const float* v, const BatchView& b) override {
        on();
        ops::kv_store(cache(c).layer(layer), k, v, b.n_tokens, b.pos, b.seq, stream_);
        rt::check("kv_store");
    }
    AttentionStats attention_stats() const override { return attn_stats_; }
    size_t free_memory() const override {
        on();
        size_t free_b = 0, total_b = 0;
        rt::mem_info(&free_b, &total_b);
        return free_b;
    }
    void attention(KvCache& c, int layer, const float* q, float* out, int n_head, float scale,
                   const BatchView& b) override {
        on();
        run_attention(cache(c).layer(layer), q, out, n_head, scale, b, false);
    }
    void gather_rows(const float* x, const int32_t* idx, int n_idx, int64_t n, float* y) override {
        on();
        ops::gather_rows(x, idx, n_idx, n, y, stream_);
        rt::check("gather_rows");
    }
    void argmax(const float* logits, int rows, int64_t n, int32_t* out, float* max_out = nullptr) override {
        on();
        ops::argmax(logits, rows, n, out, max_out, stream_);
        rt::check("argmax");
    }
    void top_k(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals) override {
        on();
        if (k < 1 || k > kTopKMax || k > n) fail("top_k: k = {} must be in [1, min({}, {})]", k, kTopKMax, n);
        ops::top_k(logits, rows, n, k, ids, vals, stream_);
        rt::check("top_k");
    }

    // ---- mixture of experts ----
    void route_experts(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w) override {
        on();
        ops::route_experts(logits, rows, r, ids, w, nullptr, nullptr, stream_);
        rt::check("route_experts");
    }
    void matmul_experts(const Weight& w, const int32_t* ids, int rows, int n_used, bool per_slot, float* y) override {
        on();
        check_expert_input(w, rows, n_used, per_slot);
        ops::group_experts(ids, rows, expert_routing(w, n_used), plan_, stream_);
        ops::matvec_experts(mat(w), nullptr, w.n_out, int(w.n_mat), plan_, rows, n_used, per_slot, act_, y, stream_);
        rt::check("matmul_experts");
    }
    void matmul_experts_swiglu(const Weight& gate, const Weight& up, const int32_t* ids, int rows, int n_used,
                               float* g_tmp, float* u_tmp, float* h) override {
        on();
        if (!swiglu_pair(gate, up)) return Backend::matmul_experts_swiglu(gate, up, ids, rows, n_used, g_tmp, u_tmp, h);
        check_expert_input(gate, rows, n_used, false);
        ops::group_experts(ids, rows, expert_routing(gate, n_used), plan_, stream_);
        const GpuMat U = mat(up);
        ops::matvec_experts(mat(gate), &U, gate.n_out, int(gate.n_mat), plan_, rows, n_used, false, act_, h, stream_);
        rt::check("matmul_experts_swiglu");
    }
    void combine_experts(const float* y, const float* w, int rows, int n_used, int64_t n, float* out) override {
        on();
        ops::combine_experts(y, w, rows, n_used, n, out, stream_);
        rt::check("combine_experts");
    }

    // ---- block ops: the fused kernels, chosen from the arguments alone ----
    // Decode (one row, quantized): q+k+v with rope and the cache store in its
    // epilogue; attention writing the q8 form of its output; o projection with
    // residual + next norm + q8 in its epilogue (BlockLink); gate/up writing h's q8
    // form; down with the residual + next norm epilogue: 5 kernels per layer (gfx906,
    // one matrix per launch: q, k and v as three, 7). Other shapes run the same steps
    // unfused, each kernel over all rows at once.
    void attention_block(const AttentionBlock& a, KvCache& c, int layer, const BatchView& b, float* x,
                         const BlockBuffers& buf, const BlockLink& link) override {
        on();
        const int T = b.n_tokens;
        const int64_t E = a.wq.n_in, Dq = int64_t(a.n_head) * a.head_dim;
        const ops::KvLayer L = cache_layer(c, layer, a.n_kv_head, a.head_dim, a.rope);
        block_input(x, a.norm, a.eps, T, E, link, {&a.wq, &a.wk, &a.wv});
        const bool no_bias = !a.bq && !a.bk && !a.bv;  // (q/k head norms: the kernel's per-head tail)
        bool stored = false;
        // (q8_0 caches: rope_store quantizes whole blocks of a head; the epilogue stores element by element.)
        // (v may have a type of its own: Q4_K_M's Q6_K attn_v, see VEGA_GPU_QKV_MIXED_TYPES.)
        if (fuse_qkv_rope_ && no_bias && a.wq.type == a.wk.type && qkv_v_type_ok(a.wq.type, a.wv.type) &&
            L.elem != KvElem::Q8_0) {
            check_input(a.wq), check_input(a.wk), check_input(a.wv);
            const GpuMat W[3] = {mat(a.wq), mat(a.wk), mat(a.wv)};
            float* const y[3] = {buf.q, buf.k, buf.v};
            ops::QkvRope e;
            e.c = L, e.r = rope_args(a.rope), e.pos = b.pos, e.seq = b.seq;
            if (a.q_norm || a.k_norm) {
                e.qn = a.q_norm ? f32(a.q_norm) : nullptr, e.kn = a.k_norm ? f32(a.k_norm) : nullptr;
                e.eps = a.eps, e.count = head_count_, e.n_head = a.n_head;
            }
            stored = ops::matvec_qkv_rope(W, y, act_, e, a.n_head, stream_);  // false: launched nothing
            if (stored) rt::check("q+k+v + rope + cache store");
            else if (T == 1 && !is_float_type(a.wq.type))
                note(fmt::format("GPU: q+k+v with rope and the cache store in one kernel does not serve this target or "
                                 "shape ({} heads x {} dims, n_rot {}); rope and the store run as their own kernel",
                                 a.n_head, a.head_dim, a.rope.n_rot));
        }
        if (!stored && fuse_) {  // q/k norms (qwen3) inside the rope + store kernel
            qkv_projections(a, buf, T, /*head_norms=*/false);
            ops::rope_store(L, buf.q, buf.k, buf.v, T, a.n_head, rope_args(a.rope), b.pos, b.seq, stream_,
                            a.q_norm ? f32(a.q_norm) : nullptr, a.k_norm ? f32(a.k_norm) : nullptr, a.eps);
            rt::check("(q/k norm +) rope + cache store");
        } else if (!stored) {
            qkv_projections(a, buf, T);
            ops::rope_store(L, buf.q, buf.k, buf.v, T, a.n_head, rope_args(a.rope), b.pos, b.seq, stream_);
            rt::check("rope_kv_store");
        }
        if (run_attention(L, buf.q, buf.att, a.n_head, a.scale, b, true))
            use_q8(buf.att, act2_q_, act2_ds_, want_h(T) ? act2_h_ : nullptr, T, Dq);
        else set_input(buf.att, nullptr, nullptr, 0.f, T, Dq, h_only(T, {&a.wo}));
        block_output(a.wo, x, buf.tmp, T, E, link);
    }
    void ffn_block(const FfnBlock& f, float* x, int rows, const BlockBuffers& buf, const BlockLink& link) override {
        on();
        if (f.experts()) return expert_ffn_block(f, x, rows, buf, link);
        const int64_t E = f.gate.n_in, F = f.gate.n_out;
        block_input(x, f.norm, f.eps, rows, E, link, {&f.gate, &f.up});
        bool h_q8 = false;
        if (swiglu_pair(f.gate, f.up)) {
            check_input(f.gate);
            // One row: the kernel also writes h's q8 form (second buffer) for the down matmul.
            const bool q8 = fuse_h_q8_ && int64_t(rows) * F <= int64_t(act_rows_) * act_n_;
            h_q8 = ops::matvec_swiglu(mat(f.gate), mat(f.up), act_, buf.h, q8 ? act2_q_ : nullptr,
                                      q8 ? act2_ds_ : nullptr, stream_);
            rt::check("gate/up + swiglu");
            if (q8 && rows == 1 && !h_q8 && !is_float_type(f.gate.type))
                note(fmt::format("GPU: the gate/up kernel's q8 epilogue does not serve this target or n_ff = {} "
                                 "(needs n_ff % 32 == 0); h is quantized by its own kernel",
                                 F));
        } else {
            Backend::matmul_swiglu(f.gate, f.up, buf.g, buf.u, buf.h, rows);
        }
        if (h_q8) use_q8(buf.h, act2_q_, act2_ds_, nullptr, rows, F);  // (one row: no f16 form)
        else set_input(buf.h, nullptr, nullptr, 0.f, rows, F, h_only(rows, {&f.down}));
        block_output(f.down, x, buf.tmp, rows, E, link);
    }

    // Routed experts: router matvec; routing + the plan in one launch (one block);
    // the chosen experts' gate/up + SwiGLU, grouped (each expert's rows read once for
    // all rows that chose it); their down projections, grouped; the weighted sum;
    // the residual add with the next block's norm and q8 (BlockLink).
    void expert_ffn_block(const FfnBlock& f, float* x, int rows, const BlockBuffers& buf, const BlockLink& link) {
        const int K = f.routing.n_used;
        const int64_t E = f.n_embd(), F = f.gate_exps.n_out;
        // Routing and the grouped matmuls' plan are one launch here: replayed routes
        // (vega eval --routes-in) are applied by the CPU's reference composition only.
        if (f.route_override) fail("expert FFN: route replay (--routes-in) runs on the CPU (--device cpu)");
        block_input(x, f.norm, f.eps, rows, E, link, {&f.router});
        if (act_.ss && (!act_.x || !deferred_router_ok(&f.router, E)))
            fail("expert FFN: the deferred-norm input does not serve router '{}'", f.router.name);
        if (!act_.ss) check_input(f.router);
        if (f.router.type == GgmlType::F32 && act_.x && ops::router_route_ok(E, rows, f.routing.n_expert)) {
            ops::router_route(f32(f.router), act_, f.routing, buf.router, buf.expert_ids, buf.expert_w, plan_,
                              route_counter_, stream_);  // decode batches: one launch
        } else {
            ops::matvec(mat(f.router), act_, buf.router, stream_);
            ops::route_experts(buf.router, rows, f.routing, buf.expert_ids, buf.expert_w, &plan_, route_counter_,
                               stream_);
        }
        rt::check("router + routing");
        const bool one_launch = swiglu_pair(f.gate_exps, f.up_exps);  // gate/up right after the routing
        if (one_launch) {
            check_expert_input(f.gate_exps, rows, K, false);
            const GpuMat U = mat(f.up_exps);
            ops::matvec_experts(mat(f.gate_exps), &U, F, int(f.gate_exps.n_mat), plan_, rows, K, false, act_, buf.h,
                                stream_);
            rt::check("experts gate/up + swiglu");
        } else {
            Backend::matmul_experts_swiglu(f.gate_exps, f.up_exps, buf.expert_ids, rows, K, buf.g, buf.u, buf.h);
        }
        // Decode: the down kernel quantizes h as it loads it (no launch in between).
        const GpuMat& D = mat(f.down_exps);
        if (ops::experts_quantize_on_load(D, rows, K, int(f.down_exps.n_mat))) {
            act_ = {};
            act_.x = buf.h, act_.rows = rows * K, act_.n = F;
        } else {
            set_input(buf.h, nullptr, nullptr, 0.f, rows * K, F);
        }
        check_expert_input(f.down_exps, rows, K, true);
        // The plan is read before the dependency wait: gate/up (one launch) came between.
        ops::matvec_experts(D, nullptr, E, int(f.down_exps.n_mat), plan_, rows, K, true, act_, buf.expert_out, stream_,
                            /*plan_early=*/one_launch);
        rt::check("experts down");
        // x += the weighted sum, the next norm and its q8 form: one kernel where it fits.
        if (link.next_norm && !link.part_only && !link.sum_output && E <= act_n_) {
            uint16_t* h = want_h(rows) ? act_h_ : nullptr;
            const bool only_h = h && h_only(rows, link.next_readers);
            if (ops::prepare_act_experts(x, buf.expert_out, buf.expert_w, K, f32(*link.next_norm), link.next_eps, rows,
                                         E, only_h ? nullptr : act_x_, only_h ? nullptr : act_q_, act_ds_, h, stream_)) {
                rt::check("experts combine + residual + norm");
                return use_own_input(rows, E, true, h, only_h);
            }
        }
        ops::combine_experts(buf.expert_out, buf.expert_w, rows, K, E, buf.tmp, stream_);
        rt::check("experts combine");
        if (link.part_only) return;
        if (link.sum_output) return sum_input(x, buf.tmp, link, rows, E);
        if (link.next_norm)  // x += tmp first
            return set_input(x, buf.tmp, f32(*link.next_norm), link.next_eps, rows, E, h_only(rows, link.next_readers));
        ops::add(x, buf.tmp, int64_t(rows) * E, stream_);
        rt::check("add");
    }

    // ---- graphs ----
    bool supports_capture() const override { return true; }
    void capture_begin() override {
        on();
        rt::capture_begin(stream_);
        capturing_ = true;
    }
    int capture_end() override {
        on();
        capturing_ = false;
        graphs_.push_back(rt::capture_end(stream_));
        return int(graphs_.size()) - 1;
    }
    void replay(int g) override {
        on();
        if (g < 0 || g >= int(graphs_.size()) || !graphs_[g]) fail("replay: no graph {}", g);
        rt::graph_launch(graphs_[g], stream_);
    }
    void release_graph(int g) override {
        on();
        if (g >= 0 && g < int(graphs_.size())) rt::graph_destroy(graphs_[g]), graphs_[g] = nullptr;
    }

    void* stream() const { return stream_; }

private:
    void on() const { rt::set_device(dev_); }  // every call: this backend's device is current
    const GpuMat& mat(const Weight& w) const {
        auto it = mats_.find(w.data);
        if (it == mats_.end()) fail("GPU backend: weight '{}' was not uploaded to this device", w.name);
        return it->second;
    }
    static const float* f32(const Weight& w) {
        if (w.type != GgmlType::F32) fail("GPU backend: vector weight '{}' must be F32", w.name);
        return static_cast<const float*>(w.data);
    }
    static GpuKvCache& cache(KvCache& c) { return static_cast<GpuKvCache&>(c); }
    static ops::RopeArgs rope_args(const RopeParams& p) {
        ops::RopeArgs r;
        r.n_rot = p.n_rot, r.freq_base = p.freq_base, r.freq_scale = p.freq_scale, r.neox = p.neox;
        r.ln_base = std::log(double(p.freq_base));
        r.freq_factors = p.freq_factors;
        return r;
    }

    // The matmul input of a block: rms_norm(x) * norm, unless the previous block
    // already left it (link.input_normed). readers: the block's matrices that read it.
    void block_input(float* x, const Weight& norm, float eps, int rows, int64_t n, const BlockLink& link,
                     const Readers& readers) {
        if (link.pending && link.input_normed) fail("GPU block op: a pending part with an input already normed");
        if (!link.input_normed)  // (x += pending first)
            return set_input(x, link.pending, f32(norm), eps, rows, n, h_only(rows, readers));
        if (act_.rows != rows || act_.n != n)
            fail("GPU block op: the input is marked normed, but the matmul input is [{}][{}], not [{}][{}]", act_.rows,
                 act_.n, rows, n);
    }
    // x += W · input, and with link.next_norm the next block's input. One quantized
    // row: one kernel (matvec + residual + norm + q8, the deferred-norm form), when
    // the next block reads it only through quantized weights and this input is not
    // the buffer that kernel writes. Otherwise the matvec, then one kernel for the
    // residual add with the next norm and its q8 form.
    void block_output(const Weight& w, float* x, float* tmp, int rows, int64_t n, const BlockLink& link) {
        check_input(w);
        const GpuMat& m = mat(w);
        if (link.part_only) {  // tensor parallel: this device's part, summed by the all-reduce
            ops::matvec(m, act_, tmp, stream_);
            rt::check("matmul (part)");
            return;
        }
        // Tensor parallel's fused sums: in the epilogue when it serves this rank's
        // exchange (every block of the launch resident), else after the part.
        const ops::PeerChunks* peer = link.sum_output ? &link.sum_output->chunks : nullptr;
        const bool peer_epi = peer && ops::matvec_peer_epi_ok(m, rows, *peer);  // (the same answer on every rank)
        if (link.next_norm && link.next_quantized && fuse_ && !act_.ss && !input_in_own_buffers() &&
            ops::matvec_epi_ok(m, rows) && (epi_max_in_ <= 0 || m.n_in <= epi_max_in_) && m.n_out <= act_n_ &&
            deferred_router_ok(link.next_router, m.n_out) && (!link.sum_output || peer_epi)) {
            ops::Epi e;
            e.x = x, e.w = f32(*link.next_norm), e.q = act_q_, e.ds = act_ds_, e.ss = ss_;
            if (link.next_router) e.xw = act_x_;  // the router's f32 x * w
            e.peer = peer;  // (null without sum_output)
            ops::matvec_residual_norm(m, act_, e, stream_);
            rt::check(link.sum_output ? "matmul + peer sum + residual + norm" : "matmul + residual + norm");
            act_ = {};
            act_.q = act_q_, act_.ds = act_ds_, act_.ss = ss_, act_.eps = link.next_eps, act_.rows = 1, act_.n = m.n_out;
            act_.x = e.xw;
            return;
        }
        if (link.next_norm && link.next_quantized && fuse_ && rows == 1 && !is_float_type(w.type) &&
            !ops::matvec_epi_ok(m, rows))
            note(fmt::format("GPU: the residual + norm epilogue does not serve this target or a projection of {} "
                             "outputs (needs n_out % 128 == 0 and n_out <= 128 x the wave size); it runs as a matvec "
                             "and a residual + norm kernel",
                             m.n_out));
        ops::matvec(m, act_, tmp, stream_);
        rt::check("matmul");
        if (link.sum_output) return sum_input(x, tmp, link, rows, n);
        if (link.next_norm)  // x += tmp first
            return set_input(x, tmp, f32(*link.next_norm), link.next_eps, rows, n, h_only(rows, link.next_readers));
        ops::add(x, tmp, int64_t(rows) * n, stream_);
        rt::check("add");
    }
    // Whether a deferred-norm input (one row) serves the next block's expert router:
    // none, or an F32 router through router_route (which applies the 1/rms).
    static bool deferred_router_ok(const Weight* router, int64_t n) {
        return !router || (router->type == GgmlType::F32 && ops::router_route_ok(n, 1, int(router->n_out)));
    }
    static bool swiglu_pair(const Weight& gate, const Weight& up) {
        return gate.type == up.type && gate.n_in == up.n_in && gate.n_out == up.n_out && gate.n_mat == up.n_mat;
    }
    static ExpertRouting expert_routing(const Weight& w, int n_used) {
        ExpertRouting r;
        r.n_expert = int(w.n_mat), r.n_used = n_used;
        return r;
    }
    // The current input serves the experts of w: [rows][n_in], or per slot [rows * n_used][n_in];
    // never a deferred-norm form (the expert kernels do not apply one).
    void check_expert_input(const Weight& w, int rows, int n_used, bool per_slot) const {
        if (act_.q || !act_.x || !ops::experts_quantize_on_load(mat(w), rows, n_used, int(w.n_mat))) check_input(w);
        else if (w.n_in != act_.n) fail("matmul '{}': input has {} columns, weight has {}", w.name, act_.n, w.n_in);
        const int want = per_slot ? rows * n_used : rows;
        if (act_.rows != want)
            fail("matmul_experts '{}': the input has {} rows, expected {}", w.name, act_.rows, want);
        if (act_.ss && (per_slot || rows != 1))  // (a deferred form: one row, the gate/up experts apply it)
            fail("matmul_experts '{}': the input is in the deferred-norm form", w.name);
        if (w.n_mat > kMaxExperts) fail("matmul_experts '{}': {} experts exceed {}", w.name, w.n_mat, kMaxExperts);
    }
    ops::KvLayer cache_layer(KvCache& c, int layer, int n_kv_head, int head_dim, const RopeParams& p) const {
        const ops::KvLayer L = cache(c).layer(layer);
        if (n_kv_head != L.n_kv_head || head_dim != L.hd || p.n_rot > head_dim)
            fail("rope_kv_store: {} kv heads of {} dims against a cache of {} x {}", n_kv_head, head_dim, L.n_kv_head,
                 L.hd);
        return L;
    }
    // Attention over the cache; with want_q8 (and a shape that allows it) the combine
    // also writes out's q8 form into the second activation buffer. Returns whether it did.
    bool run_attention(const ops::KvLayer& L, const float* q, float* out, int n_head, float scale, const BatchView& b,
                       bool want_q8) {
        // Prompt rows (the batch's last prompt_rows): the tiled kernel, which reads each
        // K/V row once per tile of query rows, not once per row; the generated rows
        // before them: the split kernel below. (Captured graphs are decode steps.)
        const int n_prompt = std::clamp(b.prompt_rows, 0, b.n_tokens);
        if (tiled_attn_ && !capturing_ && n_prompt > 0) {
            const int r0 = b.n_tokens - n_prompt;
            const int64_t w = int64_t(n_head) * L.hd;
            // A q8_0 cache: the prompt rows' sequences, up to their positions, staged in f16 first.
            const ops::KvLayer T = L.elem == KvElem::Q8_0 ? staged_f16(L, n_prompt, b.pos + r0, b.seq + r0, b.n_kv_max) : L;
            if (ops::attention_tiled(T, q + r0 * w, out + r0 * w, n_prompt, n_head, scale, b.pos + r0, b.seq + r0,
                                     stream_)) {
                rt::check("attention (tiled)");
                ++attn_stats_.tiled;
                if (r0 == 0) return false;
                BatchView gen = b;  // the generated rows: split kernel, out in f32 (the input is quantized as a whole)
                gen.n_tokens = r0, gen.prompt_rows = 0;
                return run_attention(L, q, out, n_head, scale, gen, false);
            }
            note(fmt::format("GPU: prompt attention has no tiled kernel for this cache ({}, {} heads of {} dims, "
                             "{} kv heads); prompts run the per-row split kernel",
                             L.elem == KvElem::F16 ? "f16" : L.elem == KvElem::F32 ? "f32" : "q8_0", n_head, L.hd,
                             L.n_kv_head));
        }
        ++attn_stats_.other;
        // A captured graph must serve every later position: cover the whole context.
        const int n_kv = capturing_ ? L.n_ctx : std::clamp(b.n_kv_max > 0 ? b.n_kv_max : L.n_ctx, 1, L.n_ctx);
        const int n_part = ops::attention_parts(L, n_kv, b.n_tokens, n_head, info_.n_sm);
        const size_t per_row = size_t(n_head) * n_part * (L.hd + 2) * sizeof(float);
        const int chunk = int(std::max<size_t>(1, kAttnPartBytes / per_row));
        const int64_t w = int64_t(n_head) * L.hd;
        const bool q8 = want_q8 && L.hd % 32 == 0 && b.n_tokens <= act_rows_ && w <= act_n_;
        for (int r0 = 0; r0 < b.n_tokens; r0 += chunk) {
            const int nr = std::min(chunk, b.n_tokens - r0);
            // One launch (split + merge by the last block) unless VEGA_GPU_ATTN_MERGE=0 (A/B).
            int* count = merge_attn_ && int64_t(nr) * n_head <= kAttnCounters ? attn_count_ : nullptr;
            ops::attention(L, q + r0 * w, out + r0 * w, nr, n_head, scale, b.pos + r0, b.seq + r0,
                           b.fresh ? b.fresh + r0 : nullptr, n_part, part_,
                           q8 ? act2_q_ + r0 * w : nullptr, q8 ? act2_ds_ + r0 * (w / 32) * 2 : nullptr,
                           q8 && want_h(b.n_tokens) ? act2_h_ + r0 * w : nullptr, count,
                           stream_);
        }
        rt::check("attention");
        return q8;
    }

    // The f16 copy of q8_0 layer L that the tiled prompt kernels read: positions below
    // n_kv_max of the rows' sequences (ops::kv_dequant_f16), in a buffer grown to the
    // deepest prompt so far (at most one f16 layer of the cache), reused by every layer.
    ops::KvLayer staged_f16(const ops::KvLayer& L, int rows, const int32_t* pos, const int32_t* seq, int n_kv_max) {
        ops::KvLayer T = L;
        T.elem = KvElem::F16, T.k_scale = T.v_scale = nullptr;
        T.n_ctx = std::min(L.n_ctx, (std::max(n_kv_max, 1) + 255) / 256 * 256);
        const size_t half = size_t(T.layout().layer_elems()) * 2;
        if (2 * half > stage_bytes_ || L.n_seq > stage_seqs_) {
            if (stage_) release(stage_), release(stage_need_);
            stage_bytes_ = std::max(2 * half, stage_bytes_), stage_seqs_ = std::max(L.n_seq, stage_seqs_);
            stage_ = alloc(stage_bytes_, "q8_0 KV staged in f16 for prompt attention");
            rt::memset(stage_, 0, stage_bytes_, stream_);  // (the kernels read rows below each sequence's length only)
            stage_need_ = static_cast<int*>(alloc(size_t(stage_seqs_) * sizeof(int), "q8_0 KV staging lengths"));
        }
        T.k = stage_, T.v = static_cast<uint8_t*>(stage_) + half;
        ops::kv_dequant_f16(L, T, rows, pos, seq, std::min(std::max(n_kv_max, 1), L.n_ctx), stage_need_, stream_);
        rt::check("q8_0 KV staged in f16");
        return T;
    }

    void alloc_attention_scratch() {
        if (part_) return;
        part_ = static_cast<float*>(alloc(kAttnPartBytes, "attention split scratch"));
        attn_count_ = static_cast<int*>(alloc(kAttnCounters * sizeof(int), "attention split counters"));
        rt::memset(attn_count_, 0, kAttnCounters * sizeof(int), stream_);  // kept zero by the kernel
        head_count_ = static_cast<int*>(alloc(ops::kQkvHeadCounters * sizeof(int), "q+k+v per-head counters"));
        rt::memset(head_count_, 0, ops::kQkvHeadCounters * sizeof(int), stream_);  // kept zero by the kernel
    }
    void use_q8(const float* x, const int8_t* q, const float* ds, const uint16_t* h, int rows, int64_t n) {
        act_ = {};
        act_.x = x, act_.q = q, act_.ds = ds, act_.h = h, act_.rows = rows, act_.n = n;
    }
    // Whether an input of this many rows also gets its f16 form (Act::h): only the
    // tensor-core matmul reads it, from mma_min_rows() rows on.
    bool want_h(int rows) const { return act_h_ && rows >= ops::mma_min_rows(); }
    // Whether an input of `rows` rows is read by `readers` alone (null entries: none), each
    // of them a matrix the tensor-core matmul takes reading Act::h only
    // (ops::reads_h_only): its input kernel then writes h and neither the f32 rows nor
    // the q8 form, which nothing would read (llama3-8b, 2048 rows: ~280 MB of writes a
    // layer). VEGA_GPU_H_ONLY=0 writes every form (A/B).
    bool h_only(int rows, const Readers& readers) const {
        if (!h_only_ || !want_h(rows)) return false;
        bool any = false;
        for (const Weight* w : readers) {
            if (!w) continue;
            if (is_float_type(w->type) || !ops::reads_h_only(mat(*w), rows)) return false;
            any = true;
        }
        return any;
    }

    // The input kernels below write the backend's own buffers (act_x_, act_q_, ...), sized
    // at reserve time.
    void check_reserved_input(int rows, int64_t n) const {
        if (rows > act_rows_ || n > act_n_)
            fail("GPU backend: matmul input [{}][{}] exceeds the reserved [{}][{}]", rows, n, act_rows_, act_n_);
    }
    // Whether the current matmul input (act_) lives in the buffers the input kernels and
    // the residual epilogue write (act_x_, act_q_): then a kernel that writes the next
    // input cannot read this one (the epilogue would overwrite the q8 rows its own blocks
    // still read). Inputs written elsewhere: the attention output and h (act2_*, use_q8),
    // a caller's rows.
    bool input_in_own_buffers() const {
        return (act_.q && act_.q == act_q_) || (act_.x && act_.x == act_x_) || (act_.h && act_.h == act_h_);
    }
    // act_ = those buffers as an input kernel left them: the f32 rows, their q8 form where q,
    // the f16 form where h; with only_h, h alone.
    void use_own_input(int rows, int64_t n, bool q, uint16_t* h, bool only_h = false) {
        act_ = {};
        if (!only_h) act_.x = act_x_, act_.q = q ? act_q_ : nullptr, act_.ds = q ? act_ds_ : nullptr;
        act_.h = h, act_.rows = rows, act_.n = n;
    }
    // The matmul input from x (see ops::prepare_act); only_h: its readers read Act::h
    // alone (h_only), so that form alone is written where it exists.
    void set_input(const float* x, const float* res, const float* w, float eps, int rows, int64_t n,
                   bool only_h = false) {
        check_reserved_input(rows, n);
        const bool q = n % 32 == 0;
        uint16_t* h = q && want_h(rows) ? act_h_ : nullptr;
        only_h = only_h && h;
        ops::prepare_act(const_cast<float*>(x), res, w, eps, rows, n, only_h ? nullptr : act_x_,
                         q && !only_h ? act_q_ : nullptr, act_ds_, h, stream_);
        rt::check("matmul input");
        use_own_input(rows, n, q, h, only_h);
    }
    // Tensor parallel: x += part summed over the devices, and the next block's matmul
    // input from it (link.next_norm), in one kernel (ops::peer_sum_norm).
    void sum_input(float* x, const float* part, const BlockLink& link, int rows, int64_t n) {
        if (!link.next_norm) fail("GPU block op: a part summed by the output (sum_output) without the next norm");
        check_reserved_input(rows, n);
        uint16_t* h = want_h(rows) ? act_h_ : nullptr;
        ops::peer_sum_norm(link.sum_output->peer, x, part, f32(*link.next_norm), link.next_eps, rows, n, act_x_,
                           act_q_, act_ds_, h, stream_);
        rt::check("peer sum + matmul input");
        use_own_input(rows, n, true, h);
    }
    void check_input(const Weight& w) const {
        if (w.n_in != act_.n) fail("matmul '{}': input has {} columns, weight has {}", w.name, act_.n, w.n_in);
        if (is_float_type(w.type) && !act_.x) fail("matmul '{}': float weights need the f32 input", w.name);
        if (is_float_type(w.type) && act_.ss) fail("matmul '{}': float weights never read the deferred-norm form", w.name);
        if (is_float_type(w.type) || act_.q) return;
        if (act_.h) {  // written as h alone (h_only): a reader h_only did not see would be this backend's bug
            if (ops::reads_h_only(mat(w), act_.rows)) return;
            fail("matmul '{}': the input was written for the tensor-core matmul alone (its f16 form), which does "
                 "not take these weights at {} rows",
                 w.name, act_.rows);
        }
        fail("matmul '{}': input length {} is not a multiple of 32", w.name, act_.n);
    }

    int dev_;
    rt::DeviceInfo info_;
    void* stream_ = nullptr;
    std::unordered_map<void*, size_t> owned_;
    std::unordered_map<const void*, GpuMat> mats_;
    float* act_x_ = nullptr;
    int8_t* act_q_ = nullptr;
    float* act_ds_ = nullptr;
    int8_t* act2_q_ = nullptr;  // second q8 buffer: attention output or h, written by the producing kernel
    float* act2_ds_ = nullptr;
    uint16_t* act_h_ = nullptr;   // f16 forms of both (tensor-core targets only)
    uint16_t* act2_h_ = nullptr;
    float* ss_ = nullptr;  // [n/32] sums of squares of the deferred-norm input
    int32_t* plan_buf_ = nullptr;  // the expert plan's arrays (plan_) and route_counter_
    int* route_counter_ = nullptr;
    void* stage_ = nullptr;  // staged_f16: K then V, f16
    int* stage_need_ = nullptr;
    size_t stage_bytes_ = 0;
    int stage_seqs_ = 0;
    int* head_count_ = nullptr;  // ops::QkvRope::count (the q/k-norm tail of the q+k+v kernel)
    ops::ExpertPlan plan_;
    // A/B switches: VEGA_GPU_FUSE=0 turns every decode fusion below off;
    // VEGA_GPU_FUSE_SWIGLU_Q8=0 only the q8 epilogue of the gate/up kernel;
    // VEGA_GPU_ATTN_MERGE=0: the attention splits merged by a second kernel;
    // VEGA_GPU_FUSE_QKV_ROPE=0: rope + cache store as their own kernel after q+k+v;
    // VEGA_GPU_TILED_ATTN=0: prompts through the split (decode) attention kernel;
    // VEGA_GPU_H_ONLY=0: every matmul input in all its forms (h_only);
    // VEGA_GPU_EPI_MAX_IN=N: the residual + norm epilogue only for projections of at most
    // N inputs (wider ones: the plain matvec, then the residual + norm kernel; 0: any).
    static bool env_on(const char* name) { return env::flag(name, true); }
    const int epi_max_in_ = env::integer("VEGA_GPU_EPI_MAX_IN", 0);
    const bool fuse_ = env_on("VEGA_GPU_FUSE");
    const bool fuse_h_q8_ = fuse_ && env_on("VEGA_GPU_FUSE_SWIGLU_Q8");
    const bool merge_attn_ = env_on("VEGA_GPU_ATTN_MERGE");
    const bool fuse_qkv_rope_ = fuse_ && env_on("VEGA_GPU_FUSE_QKV_ROPE");
    const bool tiled_attn_ = env_on("VEGA_GPU_TILED_ATTN");
    const bool h_only_ = env_on("VEGA_GPU_H_ONLY");
    AttentionStats attn_stats_;
    int act_rows_ = 0;
    int64_t act_n_ = 0;
    ops::Act act_;
    float* part_ = nullptr;
    int* attn_count_ = nullptr;  // [kAttnCounters] per-(token, head) split counters of the merged attention
    bool capturing_ = false;
    std::vector<void*> graphs_;
    void* mark_ = nullptr;                    // cross-stream ordering event (copy_to)
    std::unordered_map<int, bool> peers_tried_;  // device -> peer access enabled (copy_to)
};

}  // namespace
}  // namespace gpu

std::unique_ptr<Backend> make_gpu_backend(int device) { return std::make_unique<gpu::GpuBackend>(device); }

void* gpu_stream_of(Backend& be) {
    auto* g = dynamic_cast<gpu::GpuBackend*>(&be);
    return g ? g->stream() : nullptr;
}

int gpu_device_count_impl() {
    try {
        return gpu::rt::device_count();
    } catch (const Error&) {
        return 0;
    }
}

}  // namespace vega
