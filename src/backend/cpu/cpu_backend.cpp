// The CPU backend: the reference implementation of every op, multithreaded.
// Weights stay in the GGUF mapping; quantized matmuls quantize their input once
// to q8 blocks (BlockQ8Act) and use the integer dot kernels of src/quant.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/cpu/prompt_attention.h"
#include "backend/cpu/thread_pool.h"
#include "core/error.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

namespace vega {

namespace {

// K/V for all layers, [layer][seq][kv_head][ctx][head_dim] (kv_layout.h): f32, f16
// bits, or q8_0 values with their scale planes.
class CpuKvCache : public KvCache {
public:
    explicit CpuKvCache(const KvCacheDesc& d) {
        desc_ = d;
        layout_ = kv_layout(d);
        const size_t elems = size_t(layout_.layer_elems()) * d.n_layer;
        k_.assign(elems * kv_value_bytes(layout_.elem), 0);
        v_.assign(elems * kv_value_bytes(layout_.elem), 0);
        if (layout_.elem == KvElem::Q8_0) scales_.assign(2 * elems / layout_.q8_block(), 0);  // (K, V) pairs
    }
    size_t bytes() const override { return k_.size() + v_.size() + 2 * scales_.size(); }
    // Element offset of row (layer, seq, head, pos) in the planes.
    size_t row(int layer, int seq, int head, int pos) const {
        return size_t(layer) * size_t(layout_.layer_elems()) + size_t(layout_.row(seq, head, pos));
    }
    cpu::KvView view(int layer) {
        cpu::KvView v;
        v.k = k_.data(), v.v = v_.data(), v.layout = layout_, v.layer_base = row(layer, 0, 0, 0);
        v.k_scale = scales_.empty() ? nullptr : scales_.data();
        v.v_scale = scales_.empty() ? nullptr : scales_.data() + 1;
        return v;
    }

private:
    KvLayout layout_;
    std::vector<uint8_t> k_, v_;
    std::vector<uint16_t> scales_;
};

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {}

    std::string name() const override {
        return "cpu (" + std::to_string(pool_.size()) + " threads" + (cpu_has_avx2() ? ", avx2)" : ")");
    }

    // MemAvailable of /proc/meminfo (Linux), 0 elsewhere.
    size_t free_memory() const override {
        std::ifstream f("/proc/meminfo");
        std::string key;
        size_t kb = 0;
        std::string unit;
        while (f >> key >> kb >> unit)
            if (key == "MemAvailable:") return kb * 1024;
        return 0;
    }

    void* alloc(size_t bytes, const char* what) override {
        void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
        if (!p) fail("out of host memory allocating {} ({} bytes)", what, bytes);
        return p;
    }
    void release(void* p) override { std::free(p); }
    void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void synchronize() override {}

    bool computes_from_host_memory() const override { return true; }
    Weight upload_weight(const gguf::TensorInfo& t) override {
        Weight w;
        w.type = t.type;
        w.n_in = t.ne[0];
        w.n_out = t.n_elements() / std::max<int64_t>(1, t.ne[0]);  // all rows (the loader splits stacked ones)
        w.row_bytes = quant::row_bytes(t.type, t.ne[0]);
        w.data = t.data;
        return w;
    }

    void reserve(int max_rows, int64_t max_n_in) override {
        max_rows_ = max_rows;
        max_n_in_ = max_n_in;
        in_norm_.assign(size_t(max_rows) * max_n_in, 0.f);
        in_rounded_.assign(size_t(max_rows) * max_n_in, 0.f);
        in_q8_.resize(size_t(max_rows) * ((max_n_in + QK_ACT - 1) / QK_ACT));
    }

    std::unique_ptr<KvCache> create_kv_cache(const KvCacheDesc& d) override {
        return std::make_unique<CpuKvCache>(d);
    }

    void embed(const Weight& table, const int32_t* tokens, int n_tokens, float* out) override {
        pool_.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) {
                const uint8_t* row = static_cast<const uint8_t*>(table.data) + size_t(tokens[i]) * table.row_bytes;
                quant::dequantize_row(table.type, row, out + i * table.n_in, table.n_in);
            }
        });
    }

    void rms_norm(const float* x, const Weight& w, float* y, int rows, int n, float eps) override {
        const float* wd = static_cast<const float*>(w.data);
        pool_.parallel_for(rows, 1, [&](int64_t b, int64_t e, int) {
            for (int64_t r = b; r < e; ++r) norm_row(x + r * n, wd, y + r * n, n, eps);
        });
    }

    void matmul_input(const float* x, int rows, int64_t n) override {
        check_input(rows, n);
        in_ = x;
        in_rows_ = rows;
        in_n_ = n;
        in_quantized_ = false;
        in_rounded_type_ = GgmlType::F32;
    }

    void matmul_input_rms_norm(const float* x, const Weight& w, float eps, int rows, int64_t n) override {
        check_input(rows, n);
        rms_norm(x, w, in_norm_.data(), rows, int(n), eps);
        matmul_input(in_norm_.data(), rows, n);
    }

    void matmul(const Weight& w, float* y) override {
        if (w.n_in != in_n_) fail("matmul: weight '{}' expects {} inputs, got {}", w.name, w.n_in, in_n_);
        const int rows = in_rows_;
        const int64_t n = in_n_, n_out = w.n_out;
        const uint8_t* wd = static_cast<const uint8_t*>(w.data);
        if (quant::uses_q8_activations(w.type)) {
            quantize_input();
            const size_t nb = size_t(n / QK_ACT);
            pool_.parallel_for(n_out, 16, [&](int64_t b, int64_t e, int) {
                for (int64_t o = b; o < e; ++o) {
                    const uint8_t* wr = wd + size_t(o) * w.row_bytes;
                    for (int r = 0; r < rows; ++r)
                        y[size_t(r) * n_out + o] = quant::dot_q8(w.type, wr, in_q8_.data() + r * nb, n);
                }
            });
        } else {
            const float* x = input_rounded_to(w.type);
            pool_.parallel_for(n_out, 16, [&](int64_t b, int64_t e, int) {
                for (int64_t o = b; o < e; ++o) {
                    const uint8_t* wr = wd + size_t(o) * w.row_bytes;
                    for (int r = 0; r < rows; ++r)
                        y[size_t(r) * n_out + o] = quant::dot_f32(w.type, wr, x + size_t(r) * n, n);
                }
            });
        }
    }

    // ---- mixture of experts ----
    void route_experts(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w) override {
        route_experts_host(logits, rows, r, ids, w);
    }

    // Grouped by expert: the (row, slot) pairs are sorted by their expert (counting
    // sort, stable), then each chosen expert's weight rows are read once for all of
    // its pairs. Threads split (expert, 16-row block) tasks.
    void matmul_experts(const Weight& w, const int32_t* ids, int rows, int n_used, bool per_slot,
                        float* y) override {
        if (w.n_in != in_n_) fail("matmul_experts: weight '{}' expects {} inputs, got {}", w.name, w.n_in, in_n_);
        const int want_rows = per_slot ? rows * n_used : rows;
        if (in_rows_ != want_rows)
            fail("matmul_experts: weight '{}': input has {} rows, expected {}", w.name, in_rows_, want_rows);
        const int X = int(w.n_mat), P = rows * n_used;
        const int64_t n = in_n_, n_out = w.n_out;
        group_by_expert(ids, P, X, w.name);
        constexpr int64_t kBlock = 16;  // output rows per task
        const int64_t n_blk = (n_out + kBlock - 1) / kBlock;
        const uint8_t* wd = static_cast<const uint8_t*>(w.data);
        const bool q8 = quant::uses_q8_activations(w.type);
        if (q8) quantize_input();
        const float* xf = q8 ? nullptr : input_rounded_to(w.type);
        const size_t nb = size_t(n / QK_ACT);
        pool_.parallel_for(int64_t(active_.size()) * n_blk, 1, [&](int64_t b, int64_t e, int) {
            for (int64_t task = b; task < e; ++task) {
                const int ex = active_[size_t(task / n_blk)];
                const int64_t o0 = task % n_blk * kBlock, o1 = std::min(n_out, o0 + kBlock);
                for (int64_t o = o0; o < o1; ++o) {
                    const uint8_t* wr = wd + size_t(int64_t(ex) * n_out + o) * w.row_bytes;
                    for (int i = pair_begin_[size_t(ex)]; i < pair_begin_[size_t(ex) + 1]; ++i) {
                        const int p = pairs_[size_t(i)];
                        const int in_row = per_slot ? p : p / n_used;
                        y[size_t(p) * n_out + o] = q8 ? quant::dot_q8(w.type, wr, in_q8_.data() + in_row * nb, n)
                                                      : quant::dot_f32(w.type, wr, xf + size_t(in_row) * n, n);
                    }
                }
            }
        });
    }

    void combine_experts(const float* y, const float* w, int rows, int n_used, int64_t n, float* out) override {
        pool_.parallel_for(rows, 1, [&](int64_t b, int64_t e, int) {
            for (int64_t r = b; r < e; ++r) {
                float* o = out + r * n;
                std::fill(o, o + n, 0.f);
                for (int j = 0; j < n_used; ++j) {
                    const float wj = w[r * n_used + j];
                    if (wj == 0.f) continue;  // (also an expert held by another device: its y was not written)
                    const float* yj = y + (r * n_used + j) * n;
                    for (int64_t i = 0; i < n; ++i) o[i] += wj * yj[i];
                }
            }
        });
    }

    void add_bias(float* y, const Weight& b, int rows, int n) override {
        const float* bd = static_cast<const float*>(b.data);
        for (int r = 0; r < rows; ++r)
            for (int i = 0; i < n; ++i) y[size_t(r) * n + i] += bd[i];
    }

    void add(float* x, const float* y, int64_t n) override {
        for (int64_t i = 0; i < n; ++i) x[i] += y[i];
    }

    void swiglu(const float* g, const float* u, float* h, int64_t n) override {
        pool_.parallel_for(n, 4096, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
        });
    }

    void head_rms_norm(float* x, const Weight& w, int rows, int n_head, int head_dim, float eps) override {
        const float* wd = static_cast<const float*>(w.data);
        for (int64_t r = 0; r < int64_t(rows) * n_head; ++r) norm_row(x + r * head_dim, wd, x + r * head_dim, head_dim, eps);
    }

    void rope(float* x, int n_head, int head_dim, const RopeParams& p, const BatchView& b) override {
        const int half = p.n_rot / 2;
        for (int t = 0; t < b.n_tokens; ++t) {
            const double pos = double(b.pos[t]) * p.freq_scale;
            for (int i = 0; i < half; ++i) {
                double theta = pos * std::pow(double(p.freq_base), -2.0 * i / p.n_rot);
                if (p.freq_factors) theta /= p.freq_factors[i];
                const float c = float(std::cos(theta)), s = float(std::sin(theta));
                for (int h = 0; h < n_head; ++h) {
                    float* v = x + (size_t(t) * n_head + h) * head_dim;
                    const int i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + half : 2 * i + 1;
                    const float a = v[i0], bb = v[i1];
                    v[i0] = a * c - bb * s;
                    v[i1] = a * s + bb * c;
                }
            }
        }
    }

    void kv_store(KvCache& c, int layer, const float* k, const float* v, const BatchView& b) override {
        auto& kc = static_cast<CpuKvCache&>(c);
        const KvCacheDesc& d = kc.desc();
        const cpu::KvView cv = kc.view(layer);
        for (int t = 0; t < b.n_tokens; ++t) {
            for (int h = 0; h < d.n_kv_head; ++h) {
                const size_t dst = cv.layer_base + size_t(cv.layout.row(b.seq[t], h, b.pos[t]));
                const size_t src = (size_t(t) * d.n_kv_head + h) * d.head_dim;
                cpu::encode_kv_row(cv.k, cv.k_scale, cv.layout, dst, d.head_dim, k + src);
                cpu::encode_kv_row(cv.v, cv.v_scale, cv.layout, dst, d.head_dim, v + src);
            }
        }
    }

    void attention(KvCache& c, int layer, const float* q, float* out, int n_head, float scale,
                   const BatchView& b) override {
        auto& kc = static_cast<CpuKvCache&>(c);
        const KvCacheDesc& d = kc.desc();
        const cpu::KvView cv = kc.view(layer);
        const int hd = d.head_dim, group = n_head / d.n_kv_head;
        // Prompt rows (the batch's last prompt_rows): tile by tile (prompt_attention.h);
        // generated rows: one (row, head) at a time below, with a score row of n_ctx.
        const int n_gen = b.n_tokens - std::clamp(b.prompt_rows, 0, b.n_tokens);
        if (n_gen < b.n_tokens) {
            cpu::prompt_attention(pool_, cv, q, out, n_head, scale, b.pos, b.seq, n_gen, b.n_tokens, prompt_scratch_);
            ++attn_stats_.tiled;
        }
        if (n_gen == 0) return;
        ++attn_stats_.other;
        // Per thread: a score row [n_ctx] and one decoded K or V row [hd].
        const size_t per_thread = size_t(d.n_ctx) + size_t(hd);
        scores_.resize(size_t(pool_.size()) * per_thread);
        pool_.parallel_for(int64_t(n_gen) * n_head, 1, [&](int64_t beg, int64_t end, int thread) {
            float* s = scores_.data() + size_t(thread) * per_thread;
            float* kv_row = s + d.n_ctx;
            for (int64_t th = beg; th < end; ++th) {
                const int t = int(th / n_head), h = int(th % n_head), kvh = h / group;
                const int n_kv = b.pos[t] + 1;
                const float* qh = q + (size_t(t) * n_head + h) * hd;
                const size_t base = kc.row(layer, b.seq[t], kvh, 0);
                float mx = -INFINITY;
                for (int j = 0; j < n_kv; ++j) {
                    float acc = 0.f;
                    cpu::decode_kv_row(cv.k, cv.k_scale, cv.layout, base + size_t(j) * hd, hd, kv_row);
                    for (int i = 0; i < hd; ++i) acc += qh[i] * kv_row[i];
                    s[j] = acc * scale;
                    mx = std::max(mx, s[j]);
                }
                double sum = 0;
                for (int j = 0; j < n_kv; ++j) {
                    s[j] = std::exp(s[j] - mx);
                    sum += s[j];
                }
                const float inv = float(1.0 / sum);
                float* o = out + (size_t(t) * n_head + h) * hd;
                std::fill(o, o + hd, 0.f);
                for (int j = 0; j < n_kv; ++j) {
                    const float pj = s[j] * inv;
                    cpu::decode_kv_row(cv.v, cv.v_scale, cv.layout, base + size_t(j) * hd, hd, kv_row);
                    for (int i = 0; i < hd; ++i) o[i] += pj * kv_row[i];
                }
            }
        });
    }

    AttentionStats attention_stats() const override { return attn_stats_; }

    void gather_rows(const float* x, const int32_t* idx, int n_idx, int64_t n, float* y) override {
        for (int j = 0; j < n_idx; ++j) std::memmove(y + size_t(j) * n, x + size_t(idx[j]) * n, size_t(n) * sizeof(float));
    }

    void argmax(const float* logits, int rows, int64_t n, int32_t* out, float* max_out = nullptr) override {
        // As the GPU's: the first maximum (lowest index wins), NaN never chosen; a row
        // with no value above -inf gives 0 and -inf.
        for (int r = 0; r < rows; ++r) {
            const float* l = logits + size_t(r) * n;
            float best = -INFINITY;
            int64_t bi = 0;
            for (int64_t j = 0; j < n; ++j)
                if (l[j] > best) best = l[j], bi = j;
            out[r] = int32_t(bi);
            if (max_out) max_out[r] = best;
        }
    }

    void top_k(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals) override {
        top_k_host(logits, rows, n, k, ids, vals, topk_scratch_);
    }

private:
    static bool cpu_has_avx2() {
#if defined(__x86_64__)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
        return false;
#endif
    }

    static void norm_row(const float* x, const float* w, float* y, int n, float eps) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
        const float s = float(1.0 / std::sqrt(ss / n + eps));
        for (int i = 0; i < n; ++i) y[i] = x[i] * s * w[i];
    }

    // pairs_ = the pair indices 0..P-1 ordered by their expert ids[p] (stable),
    // pair_begin_[e] .. pair_begin_[e+1] those of expert e; active_ the experts
    // with any. The vectors only grow: no allocation per token once warm.
    // Id -1 (an expert another device holds, ExpertRouting::n_held) joins no group.
    void group_by_expert(const int32_t* ids, int P, int X, const char* what) {
        pair_begin_.assign(size_t(X) + 1, 0);
        int placed = 0;
        for (int p = 0; p < P; ++p) {
            if (ids[p] == -1) continue;
            if (ids[p] < 0 || ids[p] >= X) fail("matmul_experts: '{}': expert id {} outside [0, {})", what, ids[p], X);
            ++pair_begin_[size_t(ids[p]) + 1];
            ++placed;
        }
        active_.clear();
        for (int e = 0; e < X; ++e) {
            if (pair_begin_[size_t(e) + 1] > 0) active_.push_back(e);
            pair_begin_[size_t(e) + 1] += pair_begin_[size_t(e)];
        }
        pairs_.resize(size_t(placed));
        fill_.assign(pair_begin_.begin(), pair_begin_.end() - 1);
        for (int p = 0; p < P; ++p)
            if (ids[p] >= 0) pairs_[size_t(fill_[size_t(ids[p])]++)] = p;
    }

    void check_input(int rows, int64_t n) const {
        if (rows > max_rows_ || n > max_n_in_)
            fail("matmul input [{}][{}] exceeds the reserved scratch [{}][{}]", rows, n, max_rows_, max_n_in_);
    }

    void quantize_input() {
        if (in_quantized_) return;
        const size_t nb = size_t(in_n_ / QK_ACT);
        pool_.parallel_for(in_rows_, 1, [&](int64_t b, int64_t e, int) {
            for (int64_t r = b; r < e; ++r) quant::quantize_act_row(in_ + r * in_n_, in_q8_.data() + r * nb, in_n_);
        });
        in_quantized_ = true;
    }

    // F16/BF16 weights take their input rounded to the weight's type (as llama.cpp
    // does before its f16/bf16 dot products); F32 weights take it as is.
    const float* input_rounded_to(GgmlType t) {
        if (t == GgmlType::F32) return in_;
        if (in_rounded_type_ != t) {
            const int64_t n = int64_t(in_rows_) * in_n_;
            float* dst = in_rounded_.data();
            for (int64_t i = 0; i < n; ++i)
                dst[i] = t == GgmlType::F16 ? f16_to_f32(f32_to_f16(in_[i])) : bf16_to_f32(f32_to_bf16(in_[i]));
            in_rounded_type_ = t;
        }
        return in_rounded_.data();
    }

    ThreadPool pool_;
    std::vector<float> in_rounded_;
    GgmlType in_rounded_type_ = GgmlType::F32;
    int max_rows_ = 0;
    int64_t max_n_in_ = 0;
    std::vector<float> in_norm_;
    std::vector<BlockQ8Act> in_q8_;
    std::vector<float> scores_;
    cpu::PromptAttentionScratch prompt_scratch_;
    AttentionStats attn_stats_;
    std::vector<int32_t> topk_scratch_;
    std::vector<int> pair_begin_, pairs_, active_, fill_;  // group_by_expert
    const float* in_ = nullptr;
    int in_rows_ = 0;
    int64_t in_n_ = 0;
    bool in_quantized_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace vega
