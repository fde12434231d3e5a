// The mixture-of-experts ops, GPU against the CPU backend (the reference), on
// random inputs, with parity_test.cpp's harness: each GPU output sits between
// guard regions (checked untouched afterwards) and is poisoned before the op (NaN,
// or -1 for expert ids) so that an unwritten element fails; float results must be
// finite and match the CPU by normalized MSE sum((g-c)^2)/sum(c^2) under a per-op
// threshold; expert ids must be equal.
//   route_experts: ids exactly equal, weights within 1e-5 relative; ties (the lower
//     id wins), -inf / NaN logits (never chosen over finite ones), rows choosing
//     the same expert, experts chosen by no row.
//   matmul_experts (one input row per row, and per slot) and matmul_experts_swiglu:
//     stacked 3-D weights (n_mat experts) of every type the GPU supports, with ids
//     repeating experts across rows and leaving experts unused; thresholds of the
//     dense matmul of the same type (parity_test.cpp).
//   combine_experts.
//   ffn_block with experts: the GPU's own block (expert_ffn_block) against the
//     reference composition (blocks.cpp), two layers chained by BlockLinks as the
//     forward pass chains them, and single layers with and without a next norm; a
//     following matmul checks the input a next_norm left. The routing inside may
//     differ only at near ties of the router logits (those rows are then left out).
// Without a GPU backend in the build, or without a device, every test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#ifdef VEGA_HAVE_GPU
#include "backend/gpu/gpu_backend.h"
#include "backend/gpu/ops.h"
#endif

namespace vega {
namespace {

constexpr size_t kGuard = 64;                 // elements of guard on each side
constexpr uint32_t kGuardBits = 0x7fa5a5a5u;  // a NaN payload no kernel writes
constexpr int32_t kIdPoison = -1;             // unwritten expert ids

double nmse(const std::vector<float>& g, const std::vector<float>& c) {
    double num = 0, den = 0;
    for (size_t i = 0; i < c.size(); ++i) num += (double(g[i]) - c[i]) * (double(g[i]) - c[i]), den += double(c[i]) * c[i];
    return den > 0 ? num / den : num;
}

const GgmlType kMatTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0, GgmlType::Q4_1,
                              GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::Q8_0,   GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::IQ4_NL,
                              GgmlType::IQ4_XS, GgmlType::MXFP4};

// As parity_test.cpp for the dense matmul of the same type (the expert kernels are
// matvecs over the same q8 activations, or the f32 input rounded to the type).
double mat_threshold(GgmlType t) { return is_float_type(t) ? 1e-8 : 1e-5; }
bool k_quant(GgmlType t) { return type_traits(t).block_size == 256; }
const char* tname(GgmlType t) { return type_traits(t).name; }

// Approximately normal values, fast (the Qwen3-30B-like layer has 600M weights):
// splitmix64, the sum of four 16-bit uniforms, scaled to unit variance.
struct FastNormal {
    uint64_t s;
    float operator()() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const float sum = float(z & 0xffff) + float((z >> 16) & 0xffff) + float((z >> 32) & 0xffff) + float(z >> 48);
        return (sum - 131070.f) * (1.7320508f / 65536.f);
    }
};

class MoeParity : public ::testing::Test {
protected:
    void SetUp() override {
#ifndef VEGA_HAVE_GPU
        GTEST_SKIP() << "this build has no GPU backend (configure with -DVEGA_CUDA=ON or -DVEGA_HIP=ON)";
#else
        if (gpu_device_count_impl() == 0) GTEST_SKIP() << "no GPU device found; GPU parity tests skipped";
        gpu_ = make_gpu_backend(0);
        cpu_ = make_cpu_backend(2);
#endif
    }
    void TearDown() override {
        if (gpu_) for (void* p : gbufs_) gpu_->release(p);
        if (cpu_) for (void* p : cbufs_) cpu_->release(p);
    }

    std::vector<float> randn(size_t n, float sd = 1.f) {
        std::normal_distribution<float> d(0.f, sd);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng_);
        return v;
    }
    void reserve(int max_rows, int64_t max_n_in) {
        gpu_->reserve(max_rows, max_n_in);
        cpu_->reserve(max_rows, max_n_in);
    }

    // n 4-byte elements on both backends: on the GPU between guards; the payload
    // `host`, or else `poison` (on both sides).
    std::pair<void*, void*> buffers(size_t n, const void* host, uint32_t poison) {
        std::vector<uint32_t> full(n + 2 * kGuard, kGuardBits);
        if (host) std::memcpy(full.data() + kGuard, host, n * 4);
        else std::fill(full.begin() + kGuard, full.begin() + kGuard + std::ptrdiff_t(n), poison);
        auto* g = static_cast<uint32_t*>(gpu_->alloc(full.size() * 4, "test buffer"));
        gpu_->upload(g, full.data(), full.size() * 4);
        gbufs_.push_back(g);
        void* c = cpu_->alloc(std::max<size_t>(n, 1) * 4, "test buffer");
        cpu_->upload(c, full.data() + kGuard, n * 4);
        cbufs_.push_back(c);
        return {g + kGuard, c};
    }

    struct Pair {  // floats
        float* g;  // device pointer to the payload (after the front guard)
        float* c;
        size_t n;
    };
    struct Ids {
        int32_t* g;
        int32_t* c;
        size_t n;
    };
    Pair pair(const std::vector<float>& host) {
        auto [g, c] = buffers(host.size(), host.data(), 0);
        return {static_cast<float*>(g), static_cast<float*>(c), host.size()};
    }
    Pair pair_n(size_t n) {  // an output, poisoned with NaN
        const float nan = std::nanf("");
        uint32_t bits;
        std::memcpy(&bits, &nan, 4);
        auto [g, c] = buffers(n, nullptr, bits);
        return {static_cast<float*>(g), static_cast<float*>(c), n};
    }
    Ids ids(const std::vector<int32_t>& host) {
        auto [g, c] = buffers(host.size(), host.data(), 0);
        return {static_cast<int32_t*>(g), static_cast<int32_t*>(c), host.size()};
    }
    Ids ids_n(size_t n) {  // an output, poisoned with -1
        auto [g, c] = buffers(n, nullptr, uint32_t(kIdPoison));
        return {static_cast<int32_t*>(g), static_cast<int32_t*>(c), n};
    }

    // Downloads both sides' payloads of n 4-byte elements and checks the GPU's guards.
    template <typename T>
    void fetch(const T* gp, const T* cp, size_t n, const std::string& what, std::vector<T>& g, std::vector<T>& c) {
        static_assert(sizeof(T) == 4);
        gpu_->synchronize();
        cpu_->synchronize();
        std::vector<uint32_t> full(n + 2 * kGuard);
        gpu_->download(full.data(), reinterpret_cast<const uint32_t*>(gp) - kGuard, full.size() * 4);
        int bad = 0;
        for (size_t i = 0; i < kGuard; ++i) {
            if (full[i] != kGuardBits && bad++ < 4) ADD_FAILURE() << what << ": front guard overwritten at " << i;
            if (full[kGuard + n + i] != kGuardBits && bad++ < 4)
                ADD_FAILURE() << what << ": back guard overwritten at " << i;
        }
        g.resize(n), c.resize(n);
        if (n) std::memcpy(g.data(), full.data() + kGuard, n * 4);
        if (n) cpu_->download(c.data(), cp, n * 4);
    }
    void check_guards(const Pair& p, const std::string& what) {
        std::vector<float> g, c;
        fetch(p.g, p.c, p.n, what, g, c);
    }
    void check_guards(const Ids& p, const std::string& what) {
        std::vector<int32_t> g, c;
        fetch(p.g, p.c, p.n, what, g, c);
    }
    // Guards, finiteness, then the nmse.
    double compare(const Pair& p, const std::string& what) {
        std::vector<float> g, c;
        fetch(p.g, p.c, p.n, what, g, c);
        for (size_t i = 0; i < p.n; ++i) {
            if (!std::isfinite(g[i])) {
                ADD_FAILURE() << what << ": GPU output " << i << " is " << g[i];
                return 1e30;
            }
        }
        return nmse(g, c);
    }
    // Guards, then whether both sides hold the same ids (the first difference reported).
    bool same_ids(const Ids& p, int n_used, const std::string& what, std::vector<int32_t>* out = nullptr) {
        std::vector<int32_t> g, c;
        fetch(p.g, p.c, p.n, what, g, c);
        if (out) *out = g;
        for (size_t i = 0; i < p.n; ++i) {
            if (g[i] != c[i]) {
                ADD_FAILURE() << what << ": row " << i / size_t(n_used) << " slot " << i % size_t(n_used)
                              << ": GPU chose expert " << g[i] << ", CPU " << c[i];
                return false;
            }
        }
        return true;
    }

    // A weight of type t uploaded to both backends: [n_out][n_in], or with n_mat > 1
    // n_mat stacked matrices (a 3-D tensor, ne = [n_in, n_out, n_mat]) whose Weight
    // says n_out and n_mat as Model::load's stacked() sets them.
    struct W {
        Weight g, c;
    };
    W weight(GgmlType t, int64_t n_in, int64_t n_out, int64_t n_mat = 1, float sd = 1.f, bool ones_offset = false) {
        auto tensor = std::make_unique<gguf::TensorInfo>();
        tensor->name = "test." + std::string(tname(t)) + "." + std::to_string(names_++);
        tensor->type = t;
        tensor->n_dims = n_mat > 1 ? 3 : 2;
        tensor->ne[0] = n_in, tensor->ne[1] = n_out, tensor->ne[2] = n_mat;
        const size_t rb = quant::row_bytes(t, n_in);
        const int64_t n_rows = n_out * n_mat;
        auto data = std::make_unique<std::vector<uint8_t>>(rb * size_t(n_rows));
        std::vector<float> row(static_cast<size_t>(n_in));
        for (int64_t r = 0; r < n_rows; ++r) {
            for (auto& x : row) x = fast_() * sd + (ones_offset ? 1.f : 0.f);
            quant::quantize_row(t, row.data(), data->data() + size_t(r) * rb, n_in);
        }
        tensor->data = data->data();
        tensor->n_bytes = data->size();
        W w{gpu_->upload_weight(*tensor), cpu_->upload_weight(*tensor)};
        for (Weight* x : {&w.g, &w.c}) x->n_out = n_out, x->n_mat = n_mat;
        tensors_.push_back(std::move(tensor));
        datas_.push_back(std::move(data));
        return w;
    }

    // ids [rows][n_used] as routing gives them (distinct within a row, best first in
    // no particular id order), drawn from a pool of about 3/4 of the experts (always
    // 0 and n_mat - 1; the others never chosen), with one hot expert in every row at
    // a slot that moves from row to row, and some rows repeating an earlier row's
    // experts in reverse order.
    std::vector<int32_t> make_ids(int rows, int n_used, int n_mat) {
        std::vector<int32_t> perm(static_cast<size_t>(n_mat));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin() + 1, perm.end() - 1, rng_);
        const int n_pool = std::max(n_used, std::min(n_mat, std::max(2, n_mat * 3 / 4)));
        std::vector<int32_t> pool = {0};
        if (n_mat > 1) pool.push_back(n_mat - 1);
        for (int i = 1; int(pool.size()) < n_pool; ++i) pool.push_back(perm[size_t(i)]);
        const int32_t hot = pool[size_t(rng_() % pool.size())];
        std::vector<int32_t> ids(size_t(rows) * size_t(n_used));
        for (int r = 0; r < rows; ++r) {
            int32_t* id = ids.data() + size_t(r) * size_t(n_used);
            if (r >= 2 && r % 5 == 2) {
                const int32_t* prev = id - 2 * size_t(n_used);
                std::reverse_copy(prev, prev + n_used, id);
                continue;
            }
            std::vector<int32_t> rest;
            for (int32_t e : pool)
                if (e != hot) rest.push_back(e);
            std::shuffle(rest.begin(), rest.end(), rng_);
            for (int j = 0, k = 0; j < n_used; ++j) id[j] = j == r % n_used ? hot : rest[size_t(k++)];
        }
        return ids;
    }

    std::mt19937 rng_{20240611};
    FastNormal fast_{777};
    std::unique_ptr<Backend> gpu_, cpu_;
    std::vector<void*> gbufs_, cbufs_;
    std::vector<std::unique_ptr<gguf::TensorInfo>> tensors_;
    std::vector<std::unique_ptr<std::vector<uint8_t>>> datas_;
    int names_ = 0;

    // ---- route_experts ----
    // Row patterns ((row + rows) mod 8, so that 1 and 3 rows see some too): 0 plain logits; 1 logits rounded to 0.5
    // (ties everywhere, at the cut too); 2 all logits equal (experts 0..n_used-1, equal
    // weights); 3 NaN at expert 0 and -inf / NaN at others (never chosen over finite
    // ones); 4 one expert far ahead (every such row chooses it first); 5 the n_used-th
    // best logit tied with the next two (the lower ids win the cut); 6 only n_used - 1
    // finite logits (then the non-finite ones, lowest id first, weight 0); 7 every
    // fourth expert far behind (never chosen, when enough others).
    void route_case(int n_expert, int n_used, int rows, bool norm_weights = true, float scale = 1.f) {
        const int X = n_expert, K = n_used;
        const int hot = X / 3 + 1;
        std::vector<float> l = randn(size_t(rows) * size_t(X), 2.f);
        for (int r = 0; r < rows; ++r) {
            float* lr = l.data() + size_t(r) * size_t(X);
            switch ((r + rows) % 8) {
                case 1:
                    for (int e = 0; e < X; ++e) lr[e] = std::round(lr[e] * 2.f) / 2.f;
                    break;
                case 2:
                    std::fill(lr, lr + X, 0.25f);
                    break;
                case 3: {
                    const int n_bad = std::min(X - K, 5);
                    for (int i = 0; i < n_bad; ++i) lr[size_t(i) * size_t(X - 1) / size_t(std::max(1, n_bad - 1))] =
                        i % 2 ? -INFINITY : std::nanf("");
                    break;
                }
                case 4:
                    lr[hot] = 12.f;
                    break;
                case 5: {
                    std::vector<int> order(static_cast<size_t>(X));
                    std::iota(order.begin(), order.end(), 0);
                    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return lr[a] > lr[b]; });
                    for (int i = K; i < std::min(X, K + 2); ++i) lr[order[size_t(i)]] = lr[order[size_t(K - 1)]];
                    break;
                }
                case 6:
                    for (int e = K - 1; e < X; ++e) lr[e] = e % 2 ? -INFINITY : std::nanf("");
                    break;
                case 7:
                    for (int e = 3; e < X; e += 4) lr[e] -= 40.f;
                    break;
                default:
                    break;
            }
        }
        ExpertRouting rt;
        rt.n_expert = X, rt.n_used = K, rt.norm_weights = norm_weights, rt.scale = scale;
        auto lp = pair(l);
        auto id = ids_n(size_t(rows) * size_t(K));
        auto w = pair_n(size_t(rows) * size_t(K));
        gpu_->route_experts(lp.g, rows, rt, id.g, w.g);
        cpu_->route_experts(lp.c, rows, rt, id.c, w.c);
        const std::string what = std::to_string(K) + " of " + std::to_string(X) + " experts, " + std::to_string(rows) +
                                 " rows" + (norm_weights ? "" : ", not renormalised") +
                                 (scale != 1.f ? ", scale " + std::to_string(scale) : "");
        std::vector<int32_t> ig;
        same_ids(id, K, "route_experts ids, " + what, &ig);
        std::vector<float> wg, wc;
        fetch(w.g, w.c, w.n, "route_experts weights, " + what, wg, wc);
        int bad = 0;
        for (size_t i = 0; i < w.n; ++i)
            if (!(std::fabs(wg[i] - wc[i]) <= 1e-5f * std::fabs(wc[i])) && bad++ < 5)
                ADD_FAILURE() << "route_experts weights, " << what << ": row " << i / size_t(K) << " slot "
                              << i % size_t(K) << ": GPU " << wg[i] << ", CPU " << wc[i];
        // The rule itself, on the GPU's answer.
        for (int r = 0; r < rows; ++r) {
            const int32_t* id_r = ig.data() + size_t(r) * size_t(K);
            const float* lr = l.data() + size_t(r) * size_t(X);
            const std::string row = what + ", row " + std::to_string(r);
            const int pattern = (r + rows) % 8;
            for (int j = 0; j < K; ++j) {
                ASSERT_TRUE(id_r[j] >= 0 && id_r[j] < X) << row << " slot " << j << ": id " << id_r[j];
                for (int i = 0; i < j; ++i) EXPECT_NE(id_r[i], id_r[j]) << row << ": expert chosen twice";
            }
            int n_finite = 0;
            for (int e = 0; e < X; ++e) n_finite += std::isfinite(lr[e]);
            for (int j = 0; j < std::min(K, n_finite); ++j)
                EXPECT_TRUE(std::isfinite(lr[id_r[j]])) << row << ": a non-finite logit chosen before a finite one";
            if (pattern == 2) {
                for (int j = 0; j < K; ++j) EXPECT_EQ(id_r[j], j) << row << ": equal logits choose the lowest ids";
            }
            if (pattern == 4) {
                EXPECT_EQ(id_r[0], hot) << row;
            }
            if (pattern == 6) {
                EXPECT_EQ(id_r[K - 1], K - 1) << row << ": after the finite ones, the lowest non-finite id";
            }
            if (pattern == 7 && X - X / 4 >= K) {
                for (int j = 0; j < K; ++j) EXPECT_NE(id_r[j] % 4, 3) << row << ": an expert far behind chosen";
            }
            if (norm_weights) {
                float s = 0.f;
                for (int j = 0; j < K; ++j) s += wg[size_t(r) * size_t(K) + size_t(j)];
                EXPECT_NEAR(s, scale, 1e-5 * scale) << row << ": weights do not sum to the scale";
            }
        }
    }

    // ---- matmul_experts / matmul_experts_swiglu ----
    // Stacked weights of n_mat experts [n_out][n_in] (gate/up: tg, tu); for each row
    // count: matmul_experts on one input row per row, matmul_experts_swiglu on the
    // same input, matmul_experts per slot on rows * n_used rows.
    void experts_case(GgmlType tg, GgmlType tu, int64_t n_in, int64_t n_out, int n_mat, int n_used,
                      const std::vector<int>& rows_list) {
        W w = weight(tg, n_in, n_out, n_mat), g = weight(tg, n_in, n_out, n_mat), u = weight(tu, n_in, n_out, n_mat);
        reserve(*std::max_element(rows_list.begin(), rows_list.end()) * n_used, n_in);
        for (int rows : rows_list) {
            const std::string what = std::string(tname(tg)) + (tu != tg ? std::string("/") + tname(tu) : "") +
                                     " n_in " + std::to_string(n_in) + " n_out " + std::to_string(n_out) + ", " +
                                     std::to_string(n_used) + " of " + std::to_string(n_mat) + " experts, " +
                                     std::to_string(rows) + " rows";
            const size_t P = size_t(rows) * size_t(n_used);
            auto id = ids(make_ids(rows, n_used, n_mat));
            auto x = pair(randn(size_t(rows) * size_t(n_in)));
            gpu_->matmul_input(x.g, rows, n_in);
            cpu_->matmul_input(x.c, rows, n_in);
            if (tg == tu) {
                auto y = pair_n(P * size_t(n_out));
                gpu_->matmul_experts(w.g, id.g, rows, n_used, false, y.g);
                cpu_->matmul_experts(w.c, id.c, rows, n_used, false, y.c);
                EXPECT_LT(compare(y, "matmul_experts"), mat_threshold(tg)) << what;
            }
            auto gt = pair_n(P * size_t(n_out)), ut = pair_n(P * size_t(n_out)), h = pair_n(P * size_t(n_out));
            gpu_->matmul_experts_swiglu(g.g, u.g, id.g, rows, n_used, gt.g, ut.g, h.g);
            cpu_->matmul_experts_swiglu(g.c, u.c, id.c, rows, n_used, gt.c, ut.c, h.c);
            EXPECT_LT(compare(h, "matmul_experts_swiglu"), 10 * std::max(mat_threshold(tg), mat_threshold(tu))) << what;
            check_guards(gt, "matmul_experts_swiglu gate scratch");
            check_guards(ut, "matmul_experts_swiglu up scratch");
            if (tg == tu) {
                auto xs = pair(randn(P * size_t(n_in)));
                auto ys = pair_n(P * size_t(n_out));
                gpu_->matmul_input(xs.g, int(P), n_in);
                cpu_->matmul_input(xs.c, int(P), n_in);
                gpu_->matmul_experts(w.g, id.g, rows, n_used, true, ys.g);
                cpu_->matmul_experts(w.c, id.c, rows, n_used, true, ys.c);
                EXPECT_LT(compare(ys, "matmul_experts per slot"), mat_threshold(tg)) << what;
            }
        }
    }

    // ---- ffn_block with experts ----
    struct MoeFfn {
        FfnBlock g, c;
    };
    // Router F32 (as in real files); magnitudes as a real layer's: router logits of
    // sd ~2, gate/up outputs of sd ~1.5, an update of x (sd 1) of rms ~0.2, so a
    // q8 rounding flip between the backends moves the next layer's logits little.
    MoeFfn moe_ffn(GgmlType t, int64_t E, int64_t F, int X, int K) {
        MoeFfn f;
        auto both = [](const W& w, Weight& g, Weight& c) { g = w.g, c = w.c; };
        both(weight(GgmlType::F32, E, 1, 1, 0.1f, true), f.g.norm, f.c.norm);
        both(weight(GgmlType::F32, E, X, 1, 2.f / std::sqrt(float(E))), f.g.router, f.c.router);
        both(weight(t, E, F, X, 1.5f / std::sqrt(float(E))), f.g.gate_exps, f.c.gate_exps);
        both(weight(t, E, F, X, 1.5f / std::sqrt(float(E))), f.g.up_exps, f.c.up_exps);
        both(weight(t, F, E, X, 0.25f / std::sqrt(float(F))), f.g.down_exps, f.c.down_exps);
        for (FfnBlock* b : {&f.g, &f.c}) {
            b->routing.n_expert = X, b->routing.n_used = K;
            b->eps = 1e-6f;
        }
        return f;
    }
    struct Scratch {
        BlockBuffers g, c;
        std::vector<std::pair<Pair, std::string>> floats;
        Ids ids{};
        Pair w{};
    };
    // The buffers an expert FFN block may use, as model/forward.cpp sizes them.
    Scratch scratch(int rows, int64_t E, int64_t F, int X, int K) {
        Scratch s;
        auto add = [&](size_t n, float*& g, float*& c, const char* what) {
            const Pair p = pair_n(n);
            g = p.g, c = p.c;
            s.floats.push_back({p, what});
            return p;
        };
        const size_t R = size_t(rows), RK = R * size_t(K);
        add(R * size_t(E), s.g.tmp, s.c.tmp, "scratch tmp");
        add(RK * size_t(F), s.g.g, s.c.g, "scratch g");
        add(RK * size_t(F), s.g.u, s.c.u, "scratch u");
        add(RK * size_t(F), s.g.h, s.c.h, "scratch h");
        add(R * size_t(X), s.g.router, s.c.router, "scratch router logits");
        add(RK * size_t(E), s.g.expert_out, s.c.expert_out, "scratch expert outputs");
        s.w = add(RK, s.g.expert_w, s.c.expert_w, "scratch expert weights");
        s.ids = ids_n(RK);
        s.g.expert_ids = s.ids.g, s.c.expert_ids = s.ids.c;
        return s;
    }

    // A row's routing may legitimately differ between the backends where its router
    // logits nearly tie at the cut (the logits differ by the f32 matmul's rounding,
    // and after a chained layer by that layer's q8 rounding): such a row (at most one
    // in 8) is excluded from the comparisons from then on. A difference away from a
    // near tie fails. Logits have sd ~2 here; this tolerance is ~1% of that.
    static constexpr float kTieTol = 2e-2f;

    // nmse over the rows [rows][n] not marked in `skip`.
    static double nmse_rows(const std::vector<float>& g, const std::vector<float>& c, size_t n,
                            const std::vector<char>& skip) {
        std::vector<float> a, b;
        for (size_t r = 0; r < skip.size(); ++r) {
            if (skip[r]) continue;
            a.insert(a.end(), g.begin() + std::ptrdiff_t(r * n), g.begin() + std::ptrdiff_t((r + 1) * n));
            b.insert(b.end(), c.begin() + std::ptrdiff_t(r * n), c.begin() + std::ptrdiff_t((r + 1) * n));
        }
        return nmse(a, b);
    }

    // One expert FFN block on both backends. Checked: no guard of x or of the scratch
    // touched, x finite; per row the chosen experts (the same set in the same order,
    // or differing only at near ties of the CPU's router logits; such rows are marked
    // in `diverged`) and their weights; over the rows not diverged, x after the block
    // and the block's update of x (x after - x before, each backend's own) within
    // `bound`.
    void ffn_step(const MoeFfn& f, const BlockLink& lg, const BlockLink& lc, const Pair& x, const Scratch& s, int rows,
                  double bound, const std::string& what, std::vector<char>& diverged) {
        const int X = f.c.routing.n_expert, K = f.c.routing.n_used;
        const size_t E = x.n / size_t(rows);
        std::vector<float> xg0, xc0, xg1, xc1;
        fetch(x.g, x.c, x.n, what + ": x before", xg0, xc0);
        gpu_->ffn_block(f.g, x.g, rows, s.g, lg);
        cpu_->ffn_block(f.c, x.c, rows, s.c, lc);
        fetch(x.g, x.c, x.n, what + ": x", xg1, xc1);
        for (size_t i = 0; i < x.n; ++i) {
            if (!std::isfinite(xg1[i])) {
                ADD_FAILURE() << what << ": GPU x " << i << " is " << xg1[i];
                return;
            }
        }
        for (const auto& [p, name] : s.floats) check_guards(p, what + ": " + name);
        std::vector<int32_t> ig, ic;
        std::vector<float> wg, wc, lgt, lct, wg_m, wc_m;
        fetch(s.ids.g, s.ids.c, s.ids.n, what + ": expert ids", ig, ic);
        fetch(s.w.g, s.w.c, s.w.n, what + ": expert weights", wg, wc);
        fetch(s.g.router, s.c.router, size_t(rows) * size_t(X), what + ": router logits", lgt, lct);
        int n_new = 0;
        for (int r = 0; r < rows; ++r) {
            if (diverged[size_t(r)]) continue;
            const int32_t* a = ig.data() + size_t(r) * size_t(K);
            const int32_t* c = ic.data() + size_t(r) * size_t(K);
            const float* l = lct.data() + size_t(r) * size_t(X);
            const std::string row = what + ", row " + std::to_string(r);
            bool valid = true;
            for (int j = 0; j < K; ++j) valid &= a[j] >= 0 && a[j] < X;
            if (!valid) {
                ADD_FAILURE() << row << ": GPU expert ids out of range (first " << a[0] << ")";
                diverged[size_t(r)] = 1;
                continue;
            }
            std::vector<int32_t> sa(a, a + K), sc(c, c + K), only;
            std::sort(sa.begin(), sa.end()), std::sort(sc.begin(), sc.end());
            std::set_symmetric_difference(sa.begin(), sa.end(), sc.begin(), sc.end(), std::back_inserter(only));
            if (!only.empty()) {  // another set: only at a near tie at the cut
                float cut = INFINITY;
                for (int j = 0; j < K; ++j) cut = std::min(cut, l[c[j]]);
                bool near = true;
                std::string list;
                for (int32_t e : only) {
                    near &= std::fabs(l[e] - cut) <= kTieTol;
                    list += ' ';
                    list += std::to_string(e);
                    list += " (logit ";
                    list += std::to_string(l[e]);
                    list += ')';
                }
                if (!near)
                    ADD_FAILURE() << row << ": the GPU and the CPU chose different experts, not at a near tie: the cut "
                                  << "at logit " << cut << ", chosen by one side only:" << list;
                diverged[size_t(r)] = 1, ++n_new;
                continue;
            }
            for (int j = 0; j < K; ++j) {  // the same set: any order difference at a near tie only
                if (a[j] != c[j] && std::fabs(l[a[j]] - l[c[j]]) > kTieTol)
                    ADD_FAILURE() << row << " slot " << j << ": GPU expert " << a[j] << " (logit " << l[a[j]]
                                  << "), CPU " << c[j] << " (logit " << l[c[j]] << ")";
                const int k = int(std::find(c, c + K, a[j]) - c);
                wg_m.push_back(wg[size_t(r) * size_t(K) + size_t(j)]);
                wc_m.push_back(wc[size_t(r) * size_t(K) + size_t(k)]);
            }
        }
        const int n_div = int(std::count(diverged.begin(), diverged.end(), 1));
        EXPECT_LE(n_div, std::max(1, rows / 8)) << what << ": rows routed differently (" << n_new << " in this block)";
        if (n_div == rows) return;
        EXPECT_LT(nmse(wg_m, wc_m), 1e-5) << what << ": expert weights";
        EXPECT_LT(nmse_rows(xg1, xc1, E, diverged), bound) << what << ": x";
        for (size_t i = 0; i < x.n; ++i) xg1[i] -= xg0[i], xc1[i] -= xc0[i];
        EXPECT_LT(nmse_rows(xg1, xc1, E, diverged), bound) << what << ": the block's update of x";
    }

    // y = W · (the current matmul input) on both backends, compared over the rows not diverged.
    void next_matmul(const W& w, int rows, double bound, const std::string& what, const std::vector<char>& diverged) {
        auto y = pair_n(size_t(rows) * size_t(w.c.n_out));
        gpu_->matmul(w.g, y.g);
        cpu_->matmul(w.c, y.c);
        std::vector<float> g, c;
        fetch(y.g, y.c, y.n, what, g, c);
        for (size_t i = 0; i < y.n; ++i) {
            if (!std::isfinite(g[i])) {
                ADD_FAILURE() << what << ": GPU output " << i << " is " << g[i];
                return;
            }
        }
        if (std::count(diverged.begin(), diverged.end(), 1) < rows) {
            EXPECT_LT(nmse_rows(g, c, size_t(w.c.n_out), diverged), bound) << what;
        }
    }

    // The GPU's x := the CPU's (the next steps start from the same x).
    void resync(const Pair& x) {
        std::vector<float> g, c;
        fetch(x.g, x.c, x.n, "x", g, c);
        gpu_->upload(x.g, c.data(), x.n * 4);
    }

    // Two layers chained as the forward pass chains them: A (its own input norm;
    // leaves B's normed input, not quantized: B's router is F32), then B (input
    // normed; leaves a next norm that a Q8_0 matmul reads). Then from the same x
    // again: A alone (no link); then from the same x: B with a next norm that an F32
    // matmul reads. The matmuls compare the input the next_norm left.
    void ffn_case(GgmlType t, int64_t E, int64_t F, int X, int K, const std::vector<int>& rows_list,
                  bool two_layers = true) {
        const MoeFfn A = moe_ffn(t, E, F, X, K);
        const MoeFfn B = two_layers ? moe_ffn(t, E, F, X, K) : A;
        const W next_norm = weight(GgmlType::F32, E, 1, 1, 0.1f, true);
        const W next_q = weight(GgmlType::Q8_0, E, 301), next_f = weight(GgmlType::F32, E, 301);
        // Float experts: no q8 rounding between the backends (only the f32 sums' order).
        // Quantized: parity_test.cpp's bound for its chained dense blocks without the
        // tensor-core matmul (the expert kernels are matvecs at any row count).
        const double bound = is_float_type(t) ? 1e-6 : 5e-4;
        // The next matmuls: their own dense-matmul bound (1e-5), 10x for an input out
        // of a layer of q8 rounding, or the block's bound if larger.
        const double next_bound = std::max(1e-4, bound);
        reserve(*std::max_element(rows_list.begin(), rows_list.end()) * K, std::max(E, F));
        for (int rows : rows_list) {
            const std::string what = std::string(tname(t)) + " n_embd " + std::to_string(E) + " n_ff_exp " +
                                     std::to_string(F) + ", " + std::to_string(K) + " of " + std::to_string(X) +
                                     " experts, " + std::to_string(rows) + " rows";
            auto x = pair(randn(size_t(rows) * size_t(E)));
            const Scratch s = scratch(rows, E, F, X, K);
            std::vector<char> diverged(static_cast<size_t>(rows), 0);
            BlockLink lg, lc;

            lg = {}, lc = {};
            lg.next_norm = &B.g.norm, lc.next_norm = &B.c.norm;
            lg.next_eps = lc.next_eps = B.g.eps;
            lg.next_quantized = lc.next_quantized = false;
            ffn_step(A, lg, lc, x, s, rows, bound, what + ", layer A (next norm: B's)", diverged);

            lg = {}, lc = {};
            lg.input_normed = lc.input_normed = true;
            lg.next_norm = &next_norm.g, lc.next_norm = &next_norm.c;
            lg.next_eps = lc.next_eps = 1e-5f;
            lg.next_quantized = lc.next_quantized = true;
            ffn_step(B, lg, lc, x, s, rows, bound, what + ", layer B after A (input normed, next norm)", diverged);
            next_matmul(next_q, rows, next_bound, what + ": Q8_0 matmul after B's next norm", diverged);

            resync(x);
            std::fill(diverged.begin(), diverged.end(), 0);
            ffn_step(A, {}, {}, x, s, rows, bound, what + ", layer A (no link)", diverged);

            resync(x);
            std::fill(diverged.begin(), diverged.end(), 0);
            lg = {}, lc = {};
            lg.next_norm = &next_norm.g, lc.next_norm = &next_norm.c;
            lg.next_eps = lc.next_eps = 1e-5f;
            ffn_step(B, lg, lc, x, s, rows, bound, what + ", layer B (next norm, float reader)", diverged);
            next_matmul(next_f, rows, next_bound, what + ": F32 matmul after B's next norm", diverged);
        }
    }

    // A dense FFN block in the attention block's place (its output matmul feeds the
    // expert FFN) leaving the expert FFN's input in the form the backend keeps for one
    // row (GPU: the deferred norm, x * w in f32 and q8 with the chunk sums of x^2; the
    // router and the gate/up experts apply the 1/rms), then the expert FFN reading it.
    void deferred_case(GgmlType t, int64_t E, int64_t F, int X, int K) {
        const MoeFfn B = moe_ffn(t, E, F, X, K);
        FfnBlock dg, dc;
        auto both = [](const W& w, Weight& g, Weight& c) { g = w.g, c = w.c; };
        both(weight(GgmlType::F32, E, 1, 1, 0.1f, true), dg.norm, dc.norm);
        both(weight(t, E, F, 1, 1.5f / std::sqrt(float(E))), dg.gate, dc.gate);
        both(weight(t, E, F, 1, 1.5f / std::sqrt(float(E))), dg.up, dc.up);
        both(weight(t, F, E, 1, 0.25f / std::sqrt(float(F))), dg.down, dc.down);
        dg.eps = dc.eps = 1e-6f;
        const W next_norm = weight(GgmlType::F32, E, 1, 1, 0.1f, true);
        const W next_q = weight(GgmlType::Q8_0, E, 301);
        const int rows = 1;
        reserve(rows * K, std::max(E, F));
        const std::string what = std::string(tname(t)) + " n_embd " + std::to_string(E) + ", " + std::to_string(K) +
                                 " of " + std::to_string(X) + " experts, a dense block's output into the expert FFN";
        auto x = pair(randn(size_t(rows) * size_t(E)));
        const Scratch s = scratch(rows, E, F, X, K);
        std::vector<char> diverged(static_cast<size_t>(rows), 0);
        BlockLink lg, lc;
        lg.next_norm = &B.g.norm, lc.next_norm = &B.c.norm;
        lg.next_eps = lc.next_eps = B.g.eps;
        lg.next_quantized = lc.next_quantized = !is_float_type(t);
        lg.next_router = &B.g.router, lc.next_router = &B.c.router;
        gpu_->ffn_block(dg, x.g, rows, s.g, lg);
        cpu_->ffn_block(dc, x.c, rows, s.c, lc);
        lg = {}, lc = {};
        lg.input_normed = lc.input_normed = true;
        lg.next_norm = &next_norm.g, lc.next_norm = &next_norm.c;
        lg.next_eps = lc.next_eps = 1e-5f;
        lg.next_quantized = lc.next_quantized = true;
        ffn_step(B, lg, lc, x, s, rows, is_float_type(t) ? 1e-6 : 5e-4, what, diverged);
        next_matmul(next_q, rows, 1e-4, what + ": Q8_0 matmul after the expert FFN", diverged);
    }
};

// ---- route_experts ----

TEST_F(MoeParity, RouteExpertsMatchesCpu) {
    for (int n_expert : {8, 64, 128})
        for (int n_used : {2, 4, 8})
            for (int rows : {1, 3, 16, 64, 512}) route_case(n_expert, n_used, rows);
}

TEST_F(MoeParity, RouteExpertsLimitsAndOptions) {
    route_case(512, 8, 64);     // kMaxExperts
    route_case(512, 16, 16);    // kMaxExperts, kMaxExpertsUsed
    route_case(128, 16, 512);   // kMaxExpertsUsed, many rows
    route_case(16, 16, 8);      // every expert chosen
    route_case(64, 4, 16, false);        // not renormalised
    route_case(64, 4, 16, false, 2.5f);  // and scaled
    route_case(128, 8, 16, true, 2.5f);  // renormalised, scaled
}

// Every row choosing the same few experts (all others unused), and rows that all
// choose different ones: both backends agree on ids and weights.
TEST_F(MoeParity, RouteExpertsSharedAndUnusedExperts) {
    const int X = 64, K = 4, rows = 64;
    ExpertRouting rt;
    rt.n_expert = X, rt.n_used = K;
    std::vector<float> l = randn(size_t(rows) * X);
    for (int r = 0; r < rows; ++r) {
        float* lr = l.data() + size_t(r) * X;
        if (r < rows / 2)
            for (int e : {5, 17, 40, 63}) lr[e] += 20.f;  // the same four experts, in varying order
        else
            lr[(r * 7) % X] += 20.f;  // one distinct expert per row first
    }
    auto lp = pair(l);
    auto id = ids_n(size_t(rows) * K);
    auto w = pair_n(size_t(rows) * K);
    gpu_->route_experts(lp.g, rows, rt, id.g, w.g);
    cpu_->route_experts(lp.c, rows, rt, id.c, w.c);
    std::vector<int32_t> ig;
    same_ids(id, K, "route_experts ids", &ig);
    for (int r = 0; r < rows / 2; ++r) {
        std::vector<int32_t> s(ig.begin() + r * K, ig.begin() + (r + 1) * K);
        std::sort(s.begin(), s.end());
        EXPECT_EQ(s, (std::vector<int32_t>{5, 17, 40, 63})) << "row " << r;
    }
    for (int r = rows / 2; r < rows; ++r) EXPECT_EQ(ig[size_t(r) * K], (r * 7) % X) << "row " << r;
    std::vector<float> wg, wc;
    fetch(w.g, w.c, w.n, "route_experts weights", wg, wc);
    for (size_t i = 0; i < w.n; ++i) EXPECT_NEAR(wg[i], wc[i], 1e-5 * std::fabs(wc[i])) << "entry " << i;
}

// ---- matmul_experts / matmul_experts_swiglu ----

// Every type; 8 experts, 2 used (one, a few and many rows per expert: the grouped
// kernels' one-pair and several-pair paths); n_out 301: a partial block of output
// rows; n_in 544 (17 chunks, not a multiple of 4) where the block size allows.
TEST_F(MoeParity, MatmulExpertsEveryType) {
    for (GgmlType t : kMatTypes) {
        experts_case(t, t, 512, 301, 8, 2, {1, 3, 16, 64});
        if (!k_quant(t)) experts_case(t, t, 544, 96, 8, 2, {3, 16});
    }
}

// 64 experts, 8 used (most experts with one or no pair at 1 and 3 rows).
TEST_F(MoeParity, MatmulExpertsManyExperts) {
    for (GgmlType t : kMatTypes) experts_case(t, t, 512, 96, 64, 8, {1, 3, 16, 64});
}

// 512 rows of 8 of 128 experts: 4096 (row, slot) pairs, ~40 per chosen expert.
TEST_F(MoeParity, MatmulExperts512Rows) {
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16, GgmlType::MXFP4,
                       GgmlType::Q2_K})
        experts_case(t, t, 512, 128, 128, 8, {512});
}

// Gate and up of different types: the default two matmul_experts and swiglu.
TEST_F(MoeParity, MatmulExpertsSwigluMixedTypes) {
    experts_case(GgmlType::Q4_0, GgmlType::Q8_0, 512, 128, 8, 2, {1, 16});
    experts_case(GgmlType::Q4_K, GgmlType::Q6_K, 512, 128, 8, 2, {1, 16});
}

// The expert groups on the dot4 GEMM (gfx906's prompt path; forced from 9 pairs per
// expert here, so that NVIDIA runs it too as dp4a): each block one expert's group of 64
// pairs (partial groups, several groups of one expert, experts without pairs), alone and
// with SwiGLU, per row and per slot inputs; the GEMM must have served every product.
TEST_F(MoeParity, MatmulExpertsOnTheDotGemm) {
#ifdef VEGA_HAVE_GPU
    const int saved = gpu::ops::gemm_min_rows();
    gpu::ops::set_gemm_min_rows(9);
    const int64_t before = gpu::ops::gemm_launch_count();
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q4_K, GgmlType::Q6_K,
                       GgmlType::IQ4_XS, GgmlType::MXFP4}) {
        experts_case(t, t, 512, 301, 8, 2, {64, 200});
        experts_case(t, t, 512, 128, 128, 8, {512});
    }
    const int64_t launches = gpu::ops::gemm_launch_count() - before;
    gpu::ops::set_gemm_min_rows(saved);
    EXPECT_GT(launches, 0) << "the dot4 GEMM never served an expert group";
#else
    GTEST_SKIP() << "this build has no GPU backend";
#endif
}

// ---- combine_experts ----

TEST_F(MoeParity, CombineExperts) {
    struct Case {
        int rows, n_used;
        int64_t n;
    };
    std::vector<Case> cases = {{3, 16, 301}, {64, 1, 2048}};
    for (int rows : {1, 3, 16, 64, 512})
        for (int n_used : {2, 8})
            for (int64_t n : {301, 2048}) cases.push_back({rows, n_used, n});
    for (const Case& cs : cases) {
        const size_t RK = size_t(cs.rows) * size_t(cs.n_used);
        auto y = pair(randn(RK * size_t(cs.n)));
        auto w = pair(randn(RK, 0.5f));
        auto out = pair_n(size_t(cs.rows) * size_t(cs.n));
        gpu_->combine_experts(y.g, w.g, cs.rows, cs.n_used, cs.n, out.g);
        cpu_->combine_experts(y.c, w.c, cs.rows, cs.n_used, cs.n, out.c);
        EXPECT_LT(compare(out, "combine_experts"), 1e-12)
            << cs.rows << " rows, " << cs.n_used << " used, n " << cs.n;
    }
}

// ---- ffn_block with experts ----

// Small layers of every type: n_embd 256, n_ff_exp 128 (256 for the K-quants:
// the down projections' rows are n_ff_exp long), 8 experts, 2 used.
TEST_F(MoeParity, FfnBlockExpertsSmall) {
    for (GgmlType t : kMatTypes) ffn_case(t, 256, k_quant(t) ? 256 : 128, 8, 2, {1, 3, 16});
}

// More experts than rows choose: 8 of 64, rows 1 (8 experts read, 56 not) to 64.
TEST_F(MoeParity, FfnBlockExpertsManyExperts) {
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::F16})
        ffn_case(t, 256, 256, 64, 8, {1, 16, 64});
}

// The decode chain through the deferred-norm input (dense output matmul -> router +
// gate/up), and the down projections quantizing h as they load it: every type, and
// the Qwen3-30B-A3B shape.
TEST_F(MoeParity, FfnBlockExpertsAfterDeferredNorm) {
    for (GgmlType t : kMatTypes) deferred_case(t, 256, k_quant(t) ? 256 : 128, 8, 2);
    deferred_case(GgmlType::Q4_0, 2048, 768, 128, 8);
}

// A Qwen3-30B-A3B-like layer: n_embd 2048, n_ff_exp 768, 8 of 128 experts, Q4_0
// (one layer chained to itself: 3 x 128 x 768 x 2048 weights).
TEST_F(MoeParity, FfnBlockExpertsQwen3MoeLayer) {
    ffn_case(GgmlType::Q4_0, 2048, 768, 128, 8, {1, 16}, false);
}

}  // namespace
}  // namespace vega
