// A CPU backend that records ops between capture_begin() and capture_end() and
// runs them again on replay(), as CUDA/HIP graphs do: host-side arguments
// (pointers, row counts, the BatchView) are frozen at capture, what the ops read
// from backend memory may change. Lets the CPU tests exercise the Session's graph
// paths (one-token steps, batch-size buckets with padding rows).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_factory.h"

namespace vega::test {

class RecordingBackend final : public Backend {
public:
    explicit RecordingBackend(int threads) : in_(make_cpu_backend(threads)) {}
    std::string name() const override { return "recording " + in_->name(); }
    int replays() const { return replays_; }

    void* alloc(size_t bytes, const char* what) override { return in_->alloc(bytes, what); }
    void release(void* p) override { in_->release(p); }
    void upload(void* dst, const void* src, size_t bytes) override { no_capture("upload"), in_->upload(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override { no_capture("download"), in_->download(dst, src, bytes); }
    void synchronize() override { no_capture("synchronize"), in_->synchronize(); }
    Weight upload_weight(const gguf::TensorInfo& t) override { return in_->upload_weight(t); }
    bool computes_from_host_memory() const override { return true; }
    void reserve(int max_rows, int64_t max_n_in) override { in_->reserve(max_rows, max_n_in); }
    std::unique_ptr<KvCache> create_kv_cache(const KvCacheDesc& d) override { return in_->create_kv_cache(d); }

    void embed(const Weight& t, const int32_t* tok, int n, float* out) override { op([=, this] { in_->embed(t, tok, n, out); }); }
    void rms_norm(const float* x, const Weight& w, float* y, int rows, int n, float eps) override {
        op([=, this] { in_->rms_norm(x, w, y, rows, n, eps); });
    }
    void matmul_input(const float* x, int rows, int64_t n) override { op([=, this] { in_->matmul_input(x, rows, n); }); }
    void matmul_input_rms_norm(const float* x, const Weight& w, float eps, int rows, int64_t n) override {
        op([=, this] { in_->matmul_input_rms_norm(x, w, eps, rows, n); });
    }
    void matmul(const Weight& w, float* y) override { op([=, this] { in_->matmul(w, y); }); }
    void matmul_swiglu(const Weight& g, const Weight& u, float* gt, float* ut, float* h, int rows) override {
        op([=, this] { in_->matmul_swiglu(g, u, gt, ut, h, rows); });
    }
    void matmul_qkv(const Weight& wq, const Weight& wk, const Weight& wv, float* q, float* k, float* v) override {
        op([=, this] { in_->matmul_qkv(wq, wk, wv, q, k, v); });
    }
    void add_bias(float* y, const Weight& b, int rows, int n) override { op([=, this] { in_->add_bias(y, b, rows, n); }); }
    void add(float* x, const float* y, int64_t n) override { op([=, this] { in_->add(x, y, n); }); }
    void swiglu(const float* g, const float* u, float* h, int64_t n) override { op([=, this] { in_->swiglu(g, u, h, n); }); }
    void head_rms_norm(float* x, const Weight& w, int rows, int nh, int hd, float eps) override {
        op([=, this] { in_->head_rms_norm(x, w, rows, nh, hd, eps); });
    }
    void rope(float* x, int nh, int hd, const RopeParams& p, const BatchView& b) override {
        op([=, this] { in_->rope(x, nh, hd, p, b); });
    }
    void rope_kv_store(KvCache& c, int layer, float* q, float* k, const float* v, int nh, int nkv, int hd,
                       const RopeParams& p, const BatchView& b) override {
        KvCache* cp = &c;
        op([=, this] { in_->rope_kv_store(*cp, layer, q, k, v, nh, nkv, hd, p, b); });
    }
    void kv_store(KvCache& c, int layer, const float* k, const float* v, const BatchView& b) override {
        KvCache* cp = &c;
        op([=, this] { in_->kv_store(*cp, layer, k, v, b); });
    }
    void attention(KvCache& c, int layer, const float* q, float* out, int nh, float scale, const BatchView& b) override {
        KvCache* cp = &c;
        op([=, this] { in_->attention(*cp, layer, q, out, nh, scale, b); });
    }
    void gather_rows(const float* x, const int32_t* idx, int n_idx, int64_t n, float* y) override {
        op([=, this] { in_->gather_rows(x, idx, n_idx, n, y); });
    }
    void argmax(const float* logits, int rows, int64_t n, int32_t* out, float* max_out = nullptr) override {
        op([=, this] { in_->argmax(logits, rows, n, out, max_out); });
    }
    void top_k(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals) override {
        op([=, this] { in_->top_k(logits, rows, n, k, ids, vals); });
    }

    void route_experts(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w) override {
        op([=, this] { in_->route_experts(logits, rows, r, ids, w); });
    }
    void matmul_experts(const Weight& w, const int32_t* ids, int rows, int n_used, bool per_slot, float* y) override {
        op([=, this] { in_->matmul_experts(w, ids, rows, n_used, per_slot, y); });
    }
    void combine_experts(const float* y, const float* w, int rows, int n_used, int64_t n, float* out) override {
        op([=, this] { in_->combine_experts(y, w, rows, n_used, n, out); });
    }

    bool supports_capture() const override { return true; }
    bool records_host_calls() const override { return true; }
    void host_call(const std::function<void()>& fn) override { op(fn); }
    void capture_begin() override { capturing_ = true, graphs_.emplace_back(); }
    int capture_end() override {
        capturing_ = false;
        return int(graphs_.size()) - 1;
    }
    void replay(int g) override {
        ++replays_;
        for (auto& f : graphs_.at(size_t(g))) f();
    }
    void release_graph(int g) override {
        if (g >= 0 && g < int(graphs_.size())) graphs_[size_t(g)].clear();
    }

private:
    void op(std::function<void()> f) {
        if (capturing_) graphs_.back().push_back(std::move(f));
        else f();
    }
    void no_capture(const char* what) {
        if (capturing_) throw std::logic_error(std::string(what) + " while capturing a graph");
    }
    std::unique_ptr<Backend> in_;
    bool capturing_ = false;
    int replays_ = 0;
    std::vector<std::vector<std::function<void()>>> graphs_;
};

}  // namespace vega::test
