// GPU ops against the CPU backend on random inputs. Each GPU output sits between
// guard regions (checked untouched afterwards) and is poisoned with NaN before
// the op (so an unwritten element fails); results must be finite and match the
// CPU by normalized MSE sum((g-c)^2)/sum(c^2) under a per-op threshold.
// Without a GPU backend in the build, or without a device, every test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#ifdef VEGA_HAVE_GPU
#include "backend/gpu/gpu_backend.h"
#include "backend/gpu/gpu_mat.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#endif

namespace vega {
namespace {

constexpr size_t kGuard = 64;          // floats of guard on each side
constexpr uint32_t kGuardBits = 0x7fa5a5a5u;  // a NaN payload no kernel writes

double nmse(const std::vector<float>& g, const std::vector<float>& c) {
    double num = 0, den = 0;
    for (size_t i = 0; i < c.size(); ++i) num += (double(g[i]) - c[i]) * (double(g[i]) - c[i]), den += double(c[i]) * c[i];
    return den > 0 ? num / den : num;
}

double mat_threshold(GgmlType t) { return is_float_type(t) ? 1e-8 : 1e-5; }

class Parity : public ::testing::Test {
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

    // A pair of buffers (GPU with guards, CPU plain) holding `host`.
    struct Pair {
        float* g;  // device pointer to the payload (after the front guard)
        float* c;
        size_t n;
    };
    Pair pair(const std::vector<float>& host) { return pair_n(host.size(), &host); }
    Pair pair_n(size_t n, const std::vector<float>* host = nullptr) {
        std::vector<float> full(n + 2 * kGuard);
        for (size_t i = 0; i < full.size(); ++i) std::memcpy(&full[i], &kGuardBits, 4);
        if (host) std::copy(host->begin(), host->end(), full.begin() + kGuard);
        else for (size_t i = 0; i < n; ++i) full[kGuard + i] = std::nanf("");  // poisoned output
        float* g = static_cast<float*>(gpu_->alloc(full.size() * 4, "test buffer"));
        gpu_->upload(g, full.data(), full.size() * 4);
        gbufs_.push_back(g);
        float* c = static_cast<float*>(cpu_->alloc(std::max<size_t>(n, 1) * 4, "test buffer"));
        if (host) cpu_->upload(c, host->data(), n * 4);
        cbufs_.push_back(c);
        return {g + kGuard, c, n};
    }
    template <typename T>
    std::pair<T*, T*> ints(const std::vector<T>& host) {
        T* g = static_cast<T*>(gpu_->alloc(host.size() * sizeof(T), "test ints"));
        T* c = static_cast<T*>(cpu_->alloc(host.size() * sizeof(T), "test ints"));
        gpu_->upload(g, host.data(), host.size() * sizeof(T));
        cpu_->upload(c, host.data(), host.size() * sizeof(T));
        gbufs_.push_back(g), cbufs_.push_back(c);
        return {g, c};
    }

    // Fills positions [0, n) of sequence sq in layer 1 of both caches.
    void fill(KvCache& cg, KvCache& cc, const KvCacheDesc& d, int sq, int n) {
        const int64_t w = int64_t(d.n_kv_head) * d.head_dim;
        for (int p0 = 0; p0 < n; p0 += 4096) {
            const int m = std::min(4096, n - p0);
            std::vector<int32_t> pos(m), seq(m, sq);
            for (int i = 0; i < m; ++i) pos[i] = p0 + i;
            auto [pg, pc] = ints(pos);
            auto [sg, sc] = ints(seq);
            auto k = pair(randn(size_t(m) * w)), v = pair(randn(size_t(m) * w));
            BatchView bg, bc;
            bg.n_tokens = bc.n_tokens = m;
            bg.pos = pg, bg.seq = sg, bc.pos = pc, bc.seq = sc;
            gpu_->kv_store(cg, 1, k.g, v.g, bg);
            cpu_->kv_store(cc, 1, k.c, v.c, bc);
        }
    }

    // Downloads both sides, checks guards and finiteness, returns the nmse.
    double compare(const Pair& p, const char* what) {
        gpu_->synchronize();
        cpu_->synchronize();
        std::vector<float> full(p.n + 2 * kGuard), c(p.n);
        gpu_->download(full.data(), p.g - kGuard, full.size() * 4);
        cpu_->download(c.data(), p.c, p.n * 4);
        for (size_t i = 0; i < kGuard; ++i) {
            uint32_t a, b;
            std::memcpy(&a, &full[i], 4);
            std::memcpy(&b, &full[kGuard + p.n + i], 4);
            EXPECT_EQ(a, kGuardBits) << what << ": front guard overwritten at " << i;
            EXPECT_EQ(b, kGuardBits) << what << ": back guard overwritten at " << i;
        }
        std::vector<float> g(full.begin() + kGuard, full.begin() + kGuard + p.n);
        for (size_t i = 0; i < p.n; ++i) {
            if (!std::isfinite(g[i])) {
                ADD_FAILURE() << what << ": GPU output " << i << " is " << g[i];
                return 1e30;
            }
        }
        return nmse(g, c);
    }

    // A weight of type t [n_out][n_in] uploaded to both backends.
    struct W {
        Weight g, c;
    };
    W weight(GgmlType t, int64_t n_in, int64_t n_out, float sd = 1.f, bool ones_offset = false) {
        const gguf::TensorInfo& tensor = make_tensor(t, n_in, n_out, sd, ones_offset);
        return W{gpu_->upload_weight(tensor), cpu_->upload_weight(tensor)};
    }
    // A random [n_out][n_in] tensor of type t, kept for the fixture's lifetime.
    const gguf::TensorInfo& make_tensor(GgmlType t, int64_t n_in, int64_t n_out, float sd = 1.f,
                                        bool ones_offset = false) {
        auto tensor = std::make_unique<gguf::TensorInfo>();
        tensor->name = "test." + std::string(type_traits(t).name) + "." + std::to_string(names_++);
        tensor->type = t;
        tensor->n_dims = 2;
        tensor->ne[0] = n_in, tensor->ne[1] = n_out;
        const size_t rb = quant::row_bytes(t, n_in);
        auto data = std::make_unique<std::vector<uint8_t>>(rb * n_out);
        for (int64_t r = 0; r < n_out; ++r) {
            auto row = randn(size_t(n_in), sd);
            if (ones_offset) for (auto& x : row) x += 1.f;
            quant::quantize_row(t, row.data(), data->data() + r * rb, n_in);
        }
        tensor->data = data->data();
        tensor->n_bytes = data->size();
        tensors_.push_back(std::move(tensor));
        datas_.push_back(std::move(data));
        return *tensors_.back();
    }

    // matmul and matmul_swiglu of `rows` random input rows against two random [n_out][n_in]
    // weights of type t, on both backends (buffers reserved for max_rows x max_n): the
    // matmul within mat_threshold(t), SwiGLU within 10x that. label names the ops in
    // messages, what the case.
    void matmul_and_swiglu(GgmlType t, int64_t n_in, int64_t n_out, int rows, int max_rows, int64_t max_n,
                           const std::string& label, const std::string& what) {
        W w = weight(t, n_in, n_out), u = weight(t, n_in, n_out);
        auto x = pair(randn(size_t(rows) * n_in));
        auto y = pair_n(size_t(rows) * n_out);
        auto gt = pair_n(size_t(rows) * n_out), ut = pair_n(size_t(rows) * n_out);
        auto h = pair_n(size_t(rows) * n_out);
        gpu_->reserve(max_rows, max_n);
        cpu_->reserve(max_rows, max_n);
        gpu_->matmul_input(x.g, rows, n_in);
        cpu_->matmul_input(x.c, rows, n_in);
        gpu_->matmul(w.g, y.g);
        cpu_->matmul(w.c, y.c);
        EXPECT_LT(compare(y, label.c_str()), mat_threshold(t)) << what;
        gpu_->matmul_swiglu(w.g, u.g, gt.g, ut.g, h.g, rows);
        cpu_->matmul_swiglu(w.c, u.c, gt.c, ut.c, h.c, rows);
        EXPECT_LT(compare(h, (label + "_swiglu").c_str()), 10 * mat_threshold(t)) << what;
    }

    std::mt19937 rng_{12345};
    std::unique_ptr<Backend> gpu_, cpu_;
    std::vector<void*> gbufs_, cbufs_;
    std::vector<std::unique_ptr<gguf::TensorInfo>> tensors_;
    std::vector<std::unique_ptr<std::vector<uint8_t>>> datas_;
    int names_ = 0;
};

const GgmlType kMatTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0, GgmlType::Q4_1,
                              GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::Q8_0,   GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::IQ4_NL,
                              GgmlType::IQ4_XS, GgmlType::MXFP4};


TEST_F(Parity, MatmulEveryTypeAndBatch) {
    for (GgmlType t : kMatTypes) {
        // 9.. rows: the tensor-core matmul on NVIDIA (column groups of 16, 32 or 64
        // activation rows: 19, 33 and 70 rows have partial groups); n_out 301: a
        // partial 32-row block. Widths: 16 chunks, 20 (scale rows only 8-byte
        // aligned), 17 (not a multiple of 4: the matvec serves every batch).
        const bool k_quant = type_traits(t).block_size == 256;
        for (int64_t n_in : {512, 640, 544}) {
            if (k_quant && n_in != 512) continue;
            for (int rows : {1, 2, 3, 5, 8, 9, 19, 33, 70}) {
                const int64_t n_out = 301;
                W w = weight(t, n_in, n_out);
                auto x = pair(randn(size_t(rows) * n_in));
                auto y = pair_n(size_t(rows) * n_out);
                gpu_->reserve(80, 1024);
                cpu_->reserve(80, 1024);
                gpu_->matmul_input(x.g, rows, n_in);
                cpu_->matmul_input(x.c, rows, n_in);
                gpu_->matmul(w.g, y.g);
                cpu_->matmul(w.c, y.c);
                const double e = compare(y, "matmul");
                EXPECT_LT(e, mat_threshold(t)) << type_traits(t).name << " n_in " << n_in << " rows " << rows;
            }
        }
    }
}

// Rows of 80, 88 and 128 chunks (model widths): the tensor-core matmul streams
// several stages of 16 or 32 chunks per block (80, 88: a short last stage; the
// widths above fit in one), alone and with SwiGLU. 88 chunks: 11 K-quant
// super-blocks per row, so Q6_K's 2-byte super-block scales of odd rows start at
// an odd half word.
TEST_F(Parity, MatmulLongRows) {
    for (GgmlType t : kMatTypes) {
        if (is_float_type(t)) continue;
        for (int64_t n_in : {2560, 2816, 4096}) {
            for (int rows : {9, 19, 64})
                matmul_and_swiglu(t, n_in, 301, rows, 64, 4096, "matmul",
                                  std::string(type_traits(t).name) + " n_in " + std::to_string(n_in) + " rows " +
                                      std::to_string(rows));
        }
    }
}

// More row tiles than SMs: a tensor-core block walks several tiles with its copy
// ring running on across them (odd super-block counts per row: Q6_K's scale
// parity changes from tile to tile), and the last tile is partial.
TEST_F(Parity, MatmulManyTiles) {
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                       GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
        const int64_t n_in = 1280, n_out = 9013;  // 40 chunks (5 super-blocks): a short second stage
        for (int rows : {19, 64})
            matmul_and_swiglu(t, n_in, n_out, rows, 64, n_out, "matmul",
                              std::string(type_traits(t).name) + " rows " + std::to_string(rows));
    }
}

// Blocks of 4 row groups (128 weight rows, kernels/matmul_mma.cu row_groups): a prompt's
// launches with a 128-row tile per SM for every 64-row column group. 520 rows (9 column
// groups, the last of 8 rows) x 4500 outputs (a partial last tile of 20 rows, plain
// and SwiGLU); 44 chunks a row for the 32-element types (a short last stage
// of 4), 5 super-blocks (40 chunks) for the K-quants and MXFP4 (Q6_K's scale parity
// changes per row).
TEST_F(Parity, MatmulFourRowGroups) {
#ifdef VEGA_HAVE_GPU
    // The 4-group path where it can run: NVIDIA sm_80+ lending a block sm_90's 227 KB (its
    // ring), unless VEGA_GPU_MMA_GROUPS caps the groups; elsewhere the other paths serve.
    const bool wide = gpu::ops::mma_min_rows() > 0 && gpu::rt::device_info(0).smem_block >= 227 * 1024 &&
                      gpu::ops::mma_max_row_groups() >= 4;
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                       GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
        // (MXFP4: rows of 8 chunks at a time, ops::mma_row_multiple)
        const int64_t n_in = type_traits(t).block_size == 256 || gpu::ops::mma_row_multiple(t) == 256 ? 1280 : 1408;
        const int64_t n_out = 4500;
        const int rows = 520;
        const int64_t before = gpu::ops::mma_wide_launch_count();
        matmul_and_swiglu(t, n_in, n_out, rows, rows, n_out, "matmul", type_traits(t).name);
        if (wide) EXPECT_EQ(gpu::ops::mma_wide_launch_count() - before, 2) << type_traits(t).name << ": 4 row groups ran";
    }
#else
    GTEST_SKIP() << "this build has no GPU backend";
#endif
}

// q, k and v of one type in one launch (the tensor-core matmul walks the row tiles
// of all three: partial tiles at each matrix's end, and with 4100 rows of q more
// tiles than SMs, so blocks cross from one matrix into the next); with v of
// another type, q and k in one launch and v alone.
TEST_F(Parity, MatmulQkvOneLaunch) {
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                       GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
        for (int64_t nq : {301, 4100}) {
            for (int rows : {9, 33, 70}) {
                const int64_t n_in = 1280, nk = 77, nv = 45;
                const GgmlType tv = nq == 301 ? t : GgmlType::Q6_K;
                W wq = weight(t, n_in, nq), wk = weight(t, n_in, nk), wv = weight(tv, n_in, nv);
                auto x = pair(randn(size_t(rows) * n_in));
                auto q = pair_n(size_t(rows) * nq), k = pair_n(size_t(rows) * nk), v = pair_n(size_t(rows) * nv);
                gpu_->reserve(70, 4100);
                cpu_->reserve(70, 4100);
                gpu_->matmul_input(x.g, rows, n_in);
                cpu_->matmul_input(x.c, rows, n_in);
                gpu_->matmul_qkv(wq.g, wk.g, wv.g, q.g, k.g, v.g);
                cpu_->matmul_qkv(wq.c, wk.c, wv.c, q.c, k.c, v.c);
                const std::string what = std::string(type_traits(t).name) + " v " + type_traits(tv).name + " q rows " +
                                         std::to_string(nq) + " rows " + std::to_string(rows);
                EXPECT_LT(compare(q, "q"), mat_threshold(t)) << what;
                EXPECT_LT(compare(k, "k"), mat_threshold(t)) << what;
                EXPECT_LT(compare(v, "v"), mat_threshold(tv)) << what;
            }
        }
    }
}

TEST_F(Parity, MatmulFusedNormAndSwiglu) {
    for (GgmlType t : kMatTypes) {
        for (int rows : {1, 4, 9, 40}) {
            const int64_t n_in = 768, n_out = 200;
            W norm = weight(GgmlType::F32, n_in, 1, 0.1f, true);
            W g = weight(t, n_in, n_out), u = weight(t, n_in, n_out);
            auto x = pair(randn(size_t(rows) * n_in, 3.f));
            auto res = pair(randn(size_t(rows) * n_in));
            auto gt = pair_n(size_t(rows) * n_out), ut = pair_n(size_t(rows) * n_out);
            auto h = pair_n(size_t(rows) * n_out);
            gpu_->reserve(48, 1024);
            cpu_->reserve(48, 1024);
            gpu_->add(x.g, res.g, int64_t(rows) * n_in);
            cpu_->add(x.c, res.c, int64_t(rows) * n_in);
            gpu_->matmul_input_rms_norm(x.g, norm.g, 1e-5f, rows, n_in);
            cpu_->matmul_input_rms_norm(x.c, norm.c, 1e-5f, rows, n_in);
            gpu_->matmul_swiglu(g.g, u.g, gt.g, ut.g, h.g, rows);
            cpu_->matmul_swiglu(g.c, u.c, gt.c, ut.c, h.c, rows);
            EXPECT_LT(compare(h, "matmul_swiglu"), 10 * mat_threshold(t)) << type_traits(t).name << " rows " << rows;
            EXPECT_LT(compare(x, "residual add fused into the norm"), 1e-14) << type_traits(t).name;
        }
    }
}

// The dot4 GEMM (kernels/gemm_dot4.cu: gfx906's prompt matmul; float weights
// kernels/gemm_float.cu), served from 9 rows on
// for this test on every target (on NVIDIA it displaces the tensor cores: the dp4a
// path forced). Rows 9..4096 (partial 64-row tiles: 9, 65, 130), widths of 16, 17
// (a short last K step of 2 chunks) and 20 chunks (K-quants: 8, 16 and 24), 301 outputs (a
// partial 64-row tile; with SwiGLU a partial 32-row one), alone, with SwiGLU and as
// q, k and v.
class DotGemmRows {
public:
    explicit DotGemmRows(int rows) {
#ifdef VEGA_HAVE_GPU
        saved_ = gpu::ops::gemm_min_rows();
        gpu::ops::set_gemm_min_rows(rows);
#else
        (void)rows;
#endif
    }
    ~DotGemmRows() {
#ifdef VEGA_HAVE_GPU
        gpu::ops::set_gemm_min_rows(saved_);
#endif
    }
    // GEMM launches since construction (a passing comparison must have run the GEMM).
    int64_t launches() const {
#ifdef VEGA_HAVE_GPU
        return gpu::ops::gemm_launch_count() - start_;
#else
        return 0;
#endif
    }

private:
    int saved_ = 0;
#ifdef VEGA_HAVE_GPU
    int64_t start_ = gpu::ops::gemm_launch_count();
#else
    int64_t start_ = 0;
#endif
};

TEST_F(Parity, DotGemmEveryTypeRowsAndWidths) {
    DotGemmRows forced(9);
    int64_t cases = 0;
    for (GgmlType t : kMatTypes) {  // (float weights: gemm_float.cu, f32 FMA)
        const bool k_quant = type_traits(t).block_size == 256;
        // (float weights: 516 is not a multiple of gemm_float's K step of 16 either)
        const std::vector<int64_t> widths = k_quant           ? std::vector<int64_t>{256, 512, 768}
                                            : is_float_type(t) ? std::vector<int64_t>{512, 516, 544}
                                                               : std::vector<int64_t>{512, 544, 640};
        for (int64_t n_in : widths) {
            for (int rows : {9, 16, 65, 130}) {
                ++cases;
                matmul_and_swiglu(t, n_in, 301, rows, 130, 1024, "gemm",
                                  std::string(type_traits(t).name) + " n_in " + std::to_string(n_in) + " rows " +
                                      std::to_string(rows));
            }
        }
    }
    EXPECT_EQ(forced.launches(), 2 * cases) << "the dot4 GEMM did not serve every product";
}

TEST_F(Parity, DotGemmManyRowsAndQkv) {
    DotGemmRows forced(9);
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q4_K, GgmlType::Q6_K,
                       GgmlType::IQ4_XS, GgmlType::MXFP4}) {
        // 4096 rows of a prompt (64 activation tiles), 2 super-blocks per row.
        {
            const int rows = 4096;
            const int64_t n_in = 512, n_out = 77;
            W w = weight(t, n_in, n_out);
            auto x = pair(randn(size_t(rows) * n_in));
            auto y = pair_n(size_t(rows) * n_out);
            gpu_->reserve(rows, n_in);
            cpu_->reserve(rows, n_in);
            gpu_->matmul_input(x.g, rows, n_in);
            cpu_->matmul_input(x.c, rows, n_in);
            gpu_->matmul(w.g, y.g);
            cpu_->matmul(w.c, y.c);
            EXPECT_LT(compare(y, "gemm 4096 rows"), mat_threshold(t)) << type_traits(t).name;
        }
        // q, k and v (one launch each), v of another type.
        const int rows = 33;
        const int64_t n_in = 1280, nq = 4100, nk = 77, nv = 45;
        W wq = weight(t, n_in, nq), wk = weight(t, n_in, nk), wv = weight(GgmlType::Q6_K, n_in, nv);
        auto x = pair(randn(size_t(rows) * n_in));
        auto q = pair_n(size_t(rows) * nq), k = pair_n(size_t(rows) * nk), v = pair_n(size_t(rows) * nv);
        gpu_->reserve(rows, nq);
        cpu_->reserve(rows, nq);
        gpu_->matmul_input(x.g, rows, n_in);
        cpu_->matmul_input(x.c, rows, n_in);
        gpu_->matmul_qkv(wq.g, wk.g, wv.g, q.g, k.g, v.g);
        cpu_->matmul_qkv(wq.c, wk.c, wv.c, q.c, k.c, v.c);
        EXPECT_LT(compare(q, "q"), mat_threshold(t)) << type_traits(t).name;
        EXPECT_LT(compare(k, "k"), mat_threshold(t)) << type_traits(t).name;
        EXPECT_LT(compare(v, "v"), mat_threshold(GgmlType::Q6_K)) << type_traits(t).name;
    }
    EXPECT_EQ(forced.launches(), 7 * 4) << "the dot4 GEMM did not serve every matrix";
}

TEST_F(Parity, EmbedEveryType) {
    for (GgmlType t : kMatTypes) {
        const int64_t n_embd = 256, n_vocab = 50;
        W table = weight(t, n_embd, n_vocab);
        std::vector<int32_t> tok = {0, 7, 49, 7, 13};
        auto [tg, tc] = ints(tok);
        auto out = pair_n(tok.size() * n_embd);
        gpu_->embed(table.g, tg, int(tok.size()), out.g);
        cpu_->embed(table.c, tc, int(tok.size()), out.c);
        EXPECT_LT(compare(out, "embed"), 1e-12) << type_traits(t).name;
    }
}

TEST_F(Parity, ElementwiseAndNorms) {
    const int rows = 5, n = 4096 + 96;
    W w = weight(GgmlType::F32, n, 1, 0.1f, true);
    W b = weight(GgmlType::F32, n, 1);
    auto x = pair(randn(size_t(rows) * n, 2.f));
    auto y = pair_n(size_t(rows) * n);
    gpu_->rms_norm(x.g, w.g, y.g, rows, n, 1e-6f);
    cpu_->rms_norm(x.c, w.c, y.c, rows, n, 1e-6f);
    EXPECT_LT(compare(y, "rms_norm"), 1e-10);

    auto z = pair(randn(size_t(rows) * n));
    gpu_->add(z.g, x.g, int64_t(rows) * n);
    cpu_->add(z.c, x.c, int64_t(rows) * n);
    EXPECT_LT(compare(z, "add"), 1e-12);
    gpu_->add_bias(z.g, b.g, rows, n);
    cpu_->add_bias(z.c, b.c, rows, n);
    EXPECT_LT(compare(z, "add_bias"), 1e-12);

    auto g = pair(randn(size_t(rows) * n, 3.f)), u = pair(randn(size_t(rows) * n));
    auto h = pair_n(size_t(rows) * n);
    gpu_->swiglu(g.g, u.g, h.g, int64_t(rows) * n);
    cpu_->swiglu(g.c, u.c, h.c, int64_t(rows) * n);
    EXPECT_LT(compare(h, "swiglu"), 1e-10);

    for (int hd : {64, 128}) {
        const int n_head = 6;
        W hw = weight(GgmlType::F32, hd, 1, 0.1f, true);
        auto q = pair(randn(size_t(rows) * n_head * hd, 2.f));
        gpu_->head_rms_norm(q.g, hw.g, rows, n_head, hd, 1e-6f);
        cpu_->head_rms_norm(q.c, hw.c, rows, n_head, hd, 1e-6f);
        EXPECT_LT(compare(q, "head_rms_norm"), 1e-10) << "hd " << hd;
    }

    std::vector<int32_t> idx = {4, 0, 2};
    auto [ig, ic] = ints(idx);
    auto gr = pair_n(idx.size() * n);
    gpu_->gather_rows(x.g, ig, int(idx.size()), n, gr.g);
    cpu_->gather_rows(x.c, ic, int(idx.size()), n, gr.c);
    EXPECT_LT(compare(gr, "gather_rows"), 1e-14);
}

TEST_F(Parity, ArgmaxWithTies) {
    const int rows = 4, n = 32000;
    auto l = randn(size_t(rows) * n);
    l[size_t(1) * n + 100] = 50.f, l[size_t(1) * n + 31000] = 50.f;  // tie: lowest index wins
    l[size_t(2) * n + n - 1] = 60.f;
    auto lp = pair(l);
    std::vector<int32_t> zero(rows, -1);
    auto [og, oc] = ints(zero);
    auto mp = pair(std::vector<float>(rows, 0.f));  // each row's maximum (a vocabulary split's merge)
    gpu_->argmax(lp.g, rows, n, og, mp.g);
    cpu_->argmax(lp.c, rows, n, oc, mp.c);
    std::vector<int32_t> a(rows), b(rows);
    gpu_->download(a.data(), og, rows * 4);
    cpu_->download(b.data(), oc, rows * 4);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a[1], 100);
    EXPECT_EQ(a[2], n - 1);
    std::vector<float> ma(rows), mb(rows);
    gpu_->download(ma.data(), mp.g, rows * 4);
    cpu_->download(mb.data(), mp.c, rows * 4);
    EXPECT_EQ(ma, mb);
    EXPECT_EQ(ma[1], 50.f);
    EXPECT_EQ(ma[2], 60.f);
    // A llama3-sized vocabulary (float4 loads) and an odd one (one float at a time), a
    // tie between indexes a block's threads reach in different rounds.
    for (const int64_t m : {int64_t(128256), int64_t(128257)}) {
        auto v = randn(size_t(m));
        v[size_t(m - 3)] = 40.f, v[5] = 40.f, v[size_t(m / 2)] = 39.f;
        auto vp = pair(v);
        std::vector<int32_t> one(1, -1);
        auto [g1, c1] = ints(one);
        gpu_->argmax(vp.g, 1, m, g1);
        cpu_->argmax(vp.c, 1, m, c1);
        int32_t ga = -1, ca = -1;
        gpu_->download(&ga, g1, 4);
        cpu_->download(&ca, c1, 4);
        EXPECT_EQ(ga, 5) << "vocabulary " << m;
        EXPECT_EQ(ca, 5) << "vocabulary " << m;
    }
}

TEST_F(Parity, TopKMatchesCpuWithTiesAndNan) {
    for (int n : {512, 32000, 152064}) {
        for (int k : {1, 40, 64}) {
            const int rows = 3;
            auto l = randn(size_t(rows) * n);
            for (int i = 0; i < 30; ++i) l[size_t(i) * 7] = 4.5f;  // exact ties among the best
            l[size_t(1) * n + 3] = std::nanf("");                   // NaN is never picked
            l[size_t(2) * n + n - 1] = 1e6f;                        // best at the last index
            auto lp = pair(l);
            const size_t m = size_t(rows) * k;
            auto [ig, ic] = ints(std::vector<int32_t>(m, -1));
            auto vg = pair_n(m);
            gpu_->top_k(lp.g, rows, n, k, ig, vg.g);
            cpu_->top_k(lp.c, rows, n, k, ic, vg.c);
            gpu_->synchronize();
            std::vector<int32_t> a(m), b(m);
            gpu_->download(a.data(), ig, m * 4);
            cpu_->download(b.data(), ic, m * 4);
            EXPECT_EQ(a, b) << "n " << n << " k " << k;
            EXPECT_EQ(a[size_t(2) * k], n - 1);
            EXPECT_LT(compare(vg, "top_k values"), 1e-14) << "n " << n << " k " << k;
        }
    }
}

TEST_F(Parity, RopeBothStyles) {
    const int rows = 3, n_head = 4, hd = 128;
    std::vector<int32_t> pos = {0, 17, 3999};
    auto [pg, pc] = ints(pos);
    for (bool neox : {false, true}) {
        for (int n_rot : {128, 64}) {
            auto ff = randn(size_t(n_rot / 2), 0.2f);
            for (auto& f : ff) f = 1.f + std::fabs(f);
            auto ffp = pair(ff);
            for (bool use_ff : {false, true}) {
                auto x = pair(randn(size_t(rows) * n_head * hd));
                BatchView bg, bc;
                bg.n_tokens = bc.n_tokens = rows;
                bg.pos = pg, bc.pos = pc;
                RopeParams rg, rc;
                rg.n_rot = rc.n_rot = n_rot;
                rg.freq_base = rc.freq_base = 500000.f;
                rg.neox = rc.neox = neox;
                rg.freq_scale = rc.freq_scale = 0.5f;
                rg.freq_factors = use_ff ? ffp.g : nullptr;
                rc.freq_factors = use_ff ? ffp.c : nullptr;
                gpu_->rope(x.g, n_head, hd, rg, bg);
                cpu_->rope(x.c, n_head, hd, rc, bc);
                EXPECT_LT(compare(x, "rope"), 1e-9) << "neox " << neox << " n_rot " << n_rot << " ff " << use_ff;
            }
        }
    }
}

TEST_F(Parity, KvStoreAndAttention) {
    // head_dim 128 and 64 take the kernel variant for <= 128 dims, 256 the other;
    // 17000 positions: 266 splits, walked by attention_parts' one wave of blocks for
    // 32 (row, head) pairs (H200, f16: 16 parts a head). Many more parts a head:
    // Parity.AttentionManyParts.
    // q8_0: both backends quantize the same K/V by one rule (kv_q8_quantize), so the
    // caches agree and so must the attention.
    for (GgmlType kv : {GgmlType::F16, GgmlType::F32, GgmlType::Q8_0}) {
        for (auto [n_ctx, hd] : {std::pair{40, 128}, std::pair{1100, 128}, std::pair{70, 64}, std::pair{300, 256},
                                 std::pair{17000, 128}, std::pair{90, 80}, std::pair{50, 8}, std::pair{40, 200}}) {
            // (q8_0's 16- and 8-element blocks; 200 dims: 8-dim chunks over 128 dims)
            if (hd % 32 && kv != GgmlType::Q8_0) continue;
            KvCacheDesc d;
            d.n_layer = 2, d.n_seq = 2, d.n_ctx = n_ctx, d.n_kv_head = 2, d.head_dim = hd, d.type = kv;
            auto cg = gpu_->create_kv_cache(d);
            auto cc = cpu_->create_kv_cache(d);
            const int n_head = 8;  // GQA 4:1
            const int64_t wkv = int64_t(d.n_kv_head) * d.head_dim, wq = int64_t(n_head) * d.head_dim;
            // Fill positions 0..n_ctx-1 of both sequences of layer 1.
            for (int sq = 0; sq < 2; ++sq) {
                std::vector<int32_t> pos(n_ctx), seq(n_ctx, sq), tok(n_ctx, 0);
                for (int i = 0; i < n_ctx; ++i) pos[i] = i;
                auto [pg, pc] = ints(pos);
                auto [sg, sc] = ints(seq);
                auto k = pair(randn(size_t(n_ctx) * wkv)), v = pair(randn(size_t(n_ctx) * wkv));
                BatchView bg, bc;
                bg.n_tokens = bc.n_tokens = n_ctx;
                bg.pos = pg, bg.seq = sg, bc.pos = pc, bc.seq = sc;
                bg.n_kv_max = bc.n_kv_max = n_ctx;
                gpu_->kv_store(*cg, 1, k.g, v.g, bg);
                cpu_->kv_store(*cc, 1, k.c, v.c, bc);
            }
            // 4 query rows (32 (row, head) pairs: each head's positions split over
            // blocks and merged), and 64 (512 pairs, at least 2 per SM on any current
            // GPU: one block per pair walks all its splits and writes out directly);
            // with fresh, blocks load their first rows before the wait (PDL targets)
            // and those from pos on again after it.
            for (const auto& [n_q, with_fresh] : {std::pair{4, false}, std::pair{4, true}, std::pair{64, true}}) {
                std::vector<int32_t> qpos = {0, 5, n_ctx / 2, n_ctx - 1}, qseq = {0, 1, 1, 0};
                for (int i = 4; i < n_q; ++i) qpos.push_back(int32_t(int64_t(i) * (n_ctx - 1) / (n_q - 1))), qseq.push_back(i % 2);
                auto [pg, pc] = ints(qpos);
                auto [sg, sc] = ints(qseq);
                BatchView bg, bc;
                bg.n_tokens = bc.n_tokens = int(qpos.size());
                bg.pos = pg, bg.seq = sg, bc.pos = pc, bc.seq = sc;
                bg.n_kv_max = bc.n_kv_max = n_ctx;
                if (with_fresh) bg.fresh = pg;
                auto q = pair(randn(qpos.size() * wq));
                auto out = pair_n(qpos.size() * wq);
                gpu_->attention(*cg, 1, q.g, out.g, n_head, 1.f / std::sqrt(float(hd)), bg);
                cpu_->attention(*cc, 1, q.c, out.c, n_head, 1.f / std::sqrt(float(hd)), bc);
                EXPECT_LT(compare(out, "attention"), kv == GgmlType::F32 ? 1e-9 : 1e-6)
                    << type_traits(kv).name << " n_ctx " << n_ctx << " head_dim " << hd << " query rows " << n_q << (with_fresh ? " (fresh)" : "");
            }
        }
    }
}

// One query row of one head over a long context: attention_parts gives the head
// hundreds of parts (min(splits, the blocks the device holds at once); H200, 40000
// positions: f16 min(625, 132 SMs x 4) = 528, q8_0 625), so combine_head runs many
// rounds of kAttnMergeAhead parts and every remainder chunk. Rows at the start and the end
// of the context (a head whose parts mostly saw no position, and all of them).
TEST_F(Parity, AttentionManyParts) {
    for (GgmlType kv : {GgmlType::F16, GgmlType::Q8_0}) {
        for (auto [n_ctx, hd] : {std::pair{40000, 128}, std::pair{16500, 256}, std::pair{20013, 80}}) {
            if (hd % 32 && kv != GgmlType::Q8_0) continue;
            KvCacheDesc d;
            d.n_layer = 2, d.n_seq = 1, d.n_ctx = n_ctx, d.n_kv_head = 1, d.head_dim = hd, d.type = kv;
            auto cg = gpu_->create_kv_cache(d);
            auto cc = cpu_->create_kv_cache(d);
            fill(*cg, *cc, d, 0, n_ctx);
            for (int qp : {n_ctx - 1, n_ctx / 3, 100}) {
                auto [pg, pc] = ints(std::vector<int32_t>{qp});
                auto [sg, sc] = ints(std::vector<int32_t>{0});
                BatchView bg, bc;
                bg.n_tokens = bc.n_tokens = 1;
                bg.pos = pg, bg.seq = sg, bc.pos = pc, bc.seq = sc;
                bg.n_kv_max = bc.n_kv_max = n_ctx;
                // Scores scaled up (x4): a sharp softmax, so the parts' maxima differ.
                auto q = pair(randn(size_t(hd)));
                auto out = pair_n(size_t(hd));
                gpu_->attention(*cg, 1, q.g, out.g, 1, 4.f / std::sqrt(float(hd)), bg);
                cpu_->attention(*cc, 1, q.c, out.c, 1, 4.f / std::sqrt(float(hd)), bc);
                EXPECT_LT(compare(out, "attention"), 1e-6)
                    << type_traits(kv).name << " n_ctx " << n_ctx << " head_dim " << hd << " query at " << qp;
            }
        }
    }
}

// rope + cache store into a q8_0 cache (the rope_store kernel quantizes each rotated
// head's blocks; the CPU ropes, then quantizes in kv_store), read back by decode
// attention: head dims 128 (32-element blocks) and 80 (16), both rope styles.
TEST_F(Parity, RopeStoreIntoQ8Cache) {
    for (int hd : {128, 80})
        for (bool neox : {false, true}) {
            KvCacheDesc d;
            d.n_layer = 1, d.n_seq = 1, d.n_ctx = 300, d.n_kv_head = 2, d.head_dim = hd, d.type = GgmlType::Q8_0;
            auto cg = gpu_->create_kv_cache(d);
            auto cc = cpu_->create_kv_cache(d);
            const int n_head = 4, rows = d.n_ctx;
            std::vector<int32_t> pos(rows), seq(rows, 0);
            for (int i = 0; i < rows; ++i) pos[i] = i;
            auto [pg, pc] = ints(pos);
            auto [sg, sc] = ints(seq);
            BatchView bg, bc;
            bg.n_tokens = bc.n_tokens = rows;
            bg.pos = pg, bg.seq = sg, bc.pos = pc, bc.seq = sc;
            bg.n_kv_max = bc.n_kv_max = rows;
            RopeParams rp;
            rp.n_rot = hd, rp.neox = neox, rp.freq_base = 10000.f;
            auto q = pair(randn(size_t(rows) * n_head * hd)), k = pair(randn(size_t(rows) * d.n_kv_head * hd)),
                 v = pair(randn(size_t(rows) * d.n_kv_head * hd));
            gpu_->rope_kv_store(*cg, 0, q.g, k.g, v.g, n_head, d.n_kv_head, hd, rp, bg);
            cpu_->rope_kv_store(*cc, 0, q.c, k.c, v.c, n_head, d.n_kv_head, hd, rp, bc);
            EXPECT_LT(compare(q, "rope(q)"), 1e-9);
            auto out = pair_n(size_t(rows) * n_head * hd);
            gpu_->attention(*cg, 0, q.g, out.g, n_head, 1.f / std::sqrt(float(hd)), bg);
            cpu_->attention(*cc, 0, q.c, out.c, n_head, 1.f / std::sqrt(float(hd)), bc);
            // (a rotated value on a rounding edge may take the next int8 on one backend)
            EXPECT_LT(compare(out, "attention over the q8_0 cache"), 1e-5) << "head_dim " << hd << " neox " << neox;
        }
}

// Prompt attention through the tiled (flash) kernel: the batch's last rows are prompt
// rows (BatchView::prompt_rows). Every head dim it serves, GQA 1, 4 and 8, chunks
// shorter and longer than a tile and not multiples of it, depths 0 to 16384, the
// causal edge inside the chunk, prompt rows of two sequences in one tile (one pass
// per sequence), and generated rows ahead of the prompt rows (the split kernel).
class PromptAttention : public Parity {
protected:
    struct Case {
        int hd, n_kv_head, group, depth, chunk;
        bool mixed = false;   // prompt rows of a second sequence between the chunk's
        int generated = 0;    // generated (decode) rows of the second sequence before the prompt rows
        GgmlType kv = GgmlType::F16;  // q8_0: staged in f16 for the tiled kernel (kv_dequant_f16)
    };
    // nmse of the GPU's output against the CPU's for one case.
    double run(const Case& c) {
        KvCacheDesc d;
        d.n_layer = 2, d.n_seq = 2, d.n_ctx = c.depth + c.chunk + 1, d.n_kv_head = c.n_kv_head, d.head_dim = c.hd;
        d.type = c.kv;
        auto cg = gpu_->create_kv_cache(d);
        auto cc = cpu_->create_kv_cache(d);
        fill(*cg, *cc, d, 0, c.depth + c.chunk);
        if (c.mixed || c.generated) fill(*cg, *cc, d, 1, d.n_ctx);
        // Generated rows of sequence 1 first, then the chunk: positions depth.. of
        // sequence 0 (its own K/V already in the cache, as the rope + store kernel
        // leaves them); mixed: a row of sequence 1 after every 37 rows of the chunk.
        std::vector<int32_t> pos, seq;
        for (int i = 0; i < c.generated; ++i) pos.push_back(int32_t((i * 104729 + 11) % d.n_ctx)), seq.push_back(1);
        for (int i = 0; i < c.chunk; ++i) {
            pos.push_back(c.depth + i), seq.push_back(0);
            if (c.mixed && i % 37 == 36) pos.push_back(int32_t((i * 7919) % d.n_ctx)), seq.push_back(1);
        }
        const int rows = int(pos.size()), n_head = c.n_kv_head * c.group;
        auto [pg, pc] = ints(pos);
        auto [sg, sc] = ints(seq);
        BatchView bg, bc;
        bg.n_tokens = bc.n_tokens = rows;
        bg.pos = pg, bg.seq = sg, bc.pos = pc, bc.seq = sc;
        bg.n_kv_max = bc.n_kv_max = d.n_ctx;
        bg.prompt_rows = bc.prompt_rows = rows - c.generated;
        auto q = pair(randn(size_t(rows) * n_head * c.hd));
        auto out = pair_n(size_t(rows) * n_head * c.hd);
        const float scale = 1.f / std::sqrt(float(c.hd));
        const Backend::AttentionStats before = gpu_->attention_stats();
        gpu_->attention(*cg, 1, q.g, out.g, n_head, scale, bg);
        cpu_->attention(*cc, 1, q.c, out.c, n_head, scale, bc);
        // Every target has a tiled kernel for these shapes: one launch for the prompt
        // rows, and the split kernel for the generated rows when there are any.
        EXPECT_EQ(gpu_->attention_stats().tiled - before.tiled, 1) << name(c);
        EXPECT_EQ(gpu_->attention_stats().other - before.other, c.generated > 0 ? 1 : 0) << name(c);
        return compare(out, "prompt attention");
    }
    static std::string name(const Case& c) {
        return "head_dim " + std::to_string(c.hd) + " kv heads " + std::to_string(c.n_kv_head) + " GQA " +
               std::to_string(c.group) + " depth " + std::to_string(c.depth) + " chunk " + std::to_string(c.chunk) +
               (c.mixed ? " (two sequences)" : "") +
               (c.generated ? " after " + std::to_string(c.generated) + " generated rows" : "") +
               (c.kv == GgmlType::Q8_0 ? " q8_0" : "");
    }
    // f16 q and p (the tensor cores' and v_dot2's inputs): ~1e-7 typical.
    static constexpr double kBound = 2e-5;
};

TEST_F(PromptAttention, EveryHeadDimAndGqaRatio) {
    for (int hd : {64, 80, 96, 112, 128, 256})
        for (int group : {1, 4, 8}) {
            const Case c{hd, 2, group, 37, 77};
            const double e = run(c);
            EXPECT_LT(e, kBound) << name(c);
            std::printf("  %-50s nmse %.2e\n", name(c).c_str(), e);
        }
}

TEST_F(PromptAttention, ChunkLengthsAndDepths) {
    for (const Case& c : {Case{128, 1, 4, 0, 1}, Case{128, 1, 4, 0, 8}, Case{128, 1, 4, 5, 63}, Case{128, 1, 4, 0, 64},
                          Case{128, 1, 4, 64, 65}, Case{128, 2, 8, 1000, 200}, Case{64, 1, 1, 0, 4096},
                          Case{128, 1, 1, 300, 2048}, Case{128, 1, 4, 8192, 512}, Case{128, 1, 1, 16384, 100},
                          Case{256, 1, 2, 4000, 129}}) {
        const double e = run(c);
        EXPECT_LT(e, kBound) << name(c);
        std::printf("  %-50s nmse %.2e\n", name(c).c_str(), e);
    }
}

// A q8_0 cache: the same cases' shapes; both backends hold the same 8-bit blocks, and
// the GPU stages them in f16 for the tiled kernel (one more rounding, of q * scale).
TEST_F(PromptAttention, Q8CacheStagedInF16) {
    const GgmlType q8 = GgmlType::Q8_0;
    for (const Case& c : {Case{64, 2, 1, 37, 77, false, 0, q8}, Case{80, 2, 4, 37, 77, false, 0, q8},
                          Case{128, 2, 8, 37, 77, false, 0, q8}, Case{256, 1, 2, 4000, 129, false, 0, q8},
                          Case{128, 1, 4, 8192, 512, false, 0, q8}, Case{128, 1, 1, 0, 2048, false, 0, q8},
                          Case{96, 2, 8, 3000, 90, true, 0, q8}, Case{128, 2, 4, 500, 200, false, 5, q8}}) {
        const double e = run(c);
        EXPECT_LT(e, kBound) << name(c);
        std::printf("  %-50s nmse %.2e\n", name(c).c_str(), e);
    }
}

TEST_F(PromptAttention, ChunkMixedWithOtherSequences) {
    for (const Case& c : {Case{128, 2, 4, 100, 300, true}, Case{64, 1, 1, 0, 150, true}, Case{96, 2, 8, 3000, 90, true},
                          Case{128, 2, 4, 500, 200, false, 5}, Case{64, 1, 8, 0, 1, false, 16}}) {
        const double e = run(c);
        EXPECT_LT(e, kBound) << name(c);
        std::printf("  %-50s nmse %.2e\n", name(c).c_str(), e);
    }
}

// The fused decode path: one-launch QKV, rope + cache write in one kernel (the
// prompt) or in the QKV kernel's epilogue (decode steps, NVIDIA), and the attention
// combine writing the q8 input of the output projection, against
// the CPU backend's unfused defaults: a prompt of `rows` tokens, then two decode
// steps (the second reads the cache entry the first one wrote).
// The GPU's block ops (fused decode kernels for one row, unfused kernels over all
// rows otherwise) against the reference compositions the CPU runs: two layers
// chained by BlockLinks as the forward chains them (the o and down projections
// leave the next block's normed input), a prompt step then two one-token steps
// (the cache written by each step is read by the next), every quantized type, a
// float type, llama / qwen2 (biases) / qwen3 (q/k norm) blocks, mixed q/k/v types
// (as Q4_K_M's Q6_K attn_v) and a float FFN after a quantized attention block.
TEST_F(Parity, BlockOpsMatchReferenceCompositions) {
    struct Case {
        GgmlType t;          // every matrix
        GgmlType wv, ffn;    // attn_v, the FFN's matrices
        int style;           // 0 llama, 1 qwen2 biases, 2 qwen3 q/k norm
    };
    std::vector<Case> cases;
    for (GgmlType t : kMatTypes)
        if (t != GgmlType::F32 && t != GgmlType::BF16) cases.push_back({t, t, t, 0});
    cases.push_back({GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 1});
    cases.push_back({GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q4_K, 2});
    // qwen3's decode steps take the q+k+v kernel with its per-head norm + rope tail.
    cases.push_back({GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::Q4_0, 2});
    cases.push_back({GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 2});
    // v of its own type (Q4_K_M's Q6_K attn_v, IQ4_XS's Q5_K): decode steps take the one
    // q+k+v rope launch with v's blocks on v's type (VEGA_GPU_QKV_MIXED_TYPES), with and
    // without qwen3's head norms; Q4_0 with a Q8_0 v is no listed pair (three kernels).
    cases.push_back({GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K, 0});
    cases.push_back({GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K, 2});
    cases.push_back({GgmlType::IQ4_XS, GgmlType::Q5_K, GgmlType::IQ4_XS, 0});
    cases.push_back({GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_0, 0});
    cases.push_back({GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::F16, 0});
    const int n_head = 8, n_kv_head = 2, hd = 64, n_layer = 2;
    const int64_t E = 512, Dq = int64_t(n_head) * hd, Dkv = int64_t(n_kv_head) * hd, F = 768;
    for (const Case& cs : cases) {
        for (int rows : {1, 3, 9}) {
            std::vector<AttentionBlock> ag(n_layer), ac(n_layer);
            std::vector<FfnBlock> fg(n_layer), fc(n_layer);
            std::vector<W> keep;
            auto both = [&](const W& w, Weight& g, Weight& c) { g = w.g, c = w.c, keep.push_back(w); };
            for (int l = 0; l < n_layer; ++l) {
                AttentionBlock &g = ag[size_t(l)], &c = ac[size_t(l)];
                both(weight(GgmlType::F32, E, 1, 0.1f, true), g.norm, c.norm);
                both(weight(cs.t, E, Dq), g.wq, c.wq);
                both(weight(cs.t, E, Dkv), g.wk, c.wk);
                both(weight(cs.wv, E, Dkv), g.wv, c.wv);
                both(weight(cs.t, Dq, E, 0.5f), g.wo, c.wo);
                if (cs.style == 1) {
                    both(weight(GgmlType::F32, Dq, 1, 0.5f), g.bq, c.bq);
                    both(weight(GgmlType::F32, Dkv, 1, 0.5f), g.bk, c.bk);
                    both(weight(GgmlType::F32, Dkv, 1, 0.5f), g.bv, c.bv);
                }
                if (cs.style == 2) {
                    both(weight(GgmlType::F32, hd, 1, 0.1f, true), g.q_norm, c.q_norm);
                    both(weight(GgmlType::F32, hd, 1, 0.1f, true), g.k_norm, c.k_norm);
                }
                for (AttentionBlock* a : {&g, &c}) {
                    a->n_head = n_head, a->n_kv_head = n_kv_head, a->head_dim = hd, a->eps = 1e-5f;
                    a->scale = 1.f / std::sqrt(float(hd));
                    a->rope.n_rot = rows == 9 ? hd / 2 : hd, a->rope.freq_base = 10000.f, a->rope.neox = rows != 1;
                }
                FfnBlock &h = fg[size_t(l)], &d = fc[size_t(l)];
                both(weight(GgmlType::F32, E, 1, 0.1f, true), h.norm, d.norm);
                both(weight(cs.ffn, E, F), h.gate, d.gate);
                both(weight(cs.ffn, E, F), h.up, d.up);
                both(weight(cs.ffn, F, E, 0.5f), h.down, d.down);
            }
            // The links of the forward pass (model/forward.cpp).
            auto links = [&](const std::vector<AttentionBlock>& A, const std::vector<FfnBlock>& Fb, int l,
                             BlockLink& la, BlockLink& lf) {
                la = {}, lf = {};
                la.input_normed = l > 0;
                la.next_norm = &Fb[size_t(l)].norm, la.next_quantized = !is_float_type(cs.ffn);
                la.next_readers = {&Fb[size_t(l)].gate, &Fb[size_t(l)].up, nullptr};
                lf.input_normed = true;
                if (l + 1 < n_layer) {
                    const AttentionBlock& nx = A[size_t(l) + 1];
                    lf.next_norm = &nx.norm, lf.next_quantized = !is_float_type(cs.t);
                    lf.next_readers = {&nx.wq, &nx.wk, &nx.wv};
                }
            };
            gpu_->reserve(rows, F);
            cpu_->reserve(rows, F);
            KvCacheDesc d;
            d.n_layer = n_layer, d.n_seq = 1, d.n_ctx = 64, d.n_kv_head = n_kv_head, d.head_dim = hd;
            auto cg = gpu_->create_kv_cache(d);
            auto cc = cpu_->create_kv_cache(d);
            for (int step = 0; step < 3; ++step) {
                const int nt = step == 0 ? rows : 1;
                std::vector<int32_t> pos(static_cast<size_t>(nt)), seq(static_cast<size_t>(nt), 0);
                for (int i = 0; i < nt; ++i) pos[size_t(i)] = step == 0 ? i : rows + step - 1;
                auto [pg, pc] = ints(pos);
                auto [sg, sc] = ints(seq);
                BatchView bg, bc;
                bg.n_tokens = bc.n_tokens = nt;
                bg.pos = pg, bg.seq = sg, bc.pos = pc, bc.seq = sc;
                bg.n_kv_max = bc.n_kv_max = pos.back() + 1;
                auto x = pair(randn(size_t(nt) * E));
                BlockBuffers g, c;
                auto scratch = [&](int64_t n, float*& gp, float*& cp) {
                    const Pair p = pair_n(size_t(nt) * size_t(n));
                    gp = p.g, cp = p.c;
                };
                scratch(Dq, g.q, c.q), scratch(Dkv, g.k, c.k), scratch(Dkv, g.v, c.v), scratch(Dq, g.att, c.att);
                scratch(E, g.tmp, c.tmp), scratch(F, g.g, c.g), scratch(F, g.u, c.u), scratch(F, g.h, c.h);
                for (int l = 0; l < n_layer; ++l) {
                    BlockLink la, lf;
                    links(ag, fg, l, la, lf);
                    gpu_->attention_block(ag[size_t(l)], *cg, l, bg, x.g, g, la);
                    gpu_->ffn_block(fg[size_t(l)], x.g, nt, g, lf);
                    links(ac, fc, l, la, lf);
                    cpu_->attention_block(ac[size_t(l)], *cc, l, bc, x.c, c, la);
                    cpu_->ffn_block(fc[size_t(l)], x.c, nt, c, lf);
                }
                const std::string what = std::string(type_traits(cs.t).name) + "/" + type_traits(cs.wv).name + "/" +
                                         type_traits(cs.ffn).name + " style " + std::to_string(cs.style) + " prompt " +
                                         std::to_string(rows) + " step " + std::to_string(step);
                // A prompt of 8+ rows takes the tensor-core matmul on NVIDIA, whose operands
                // are f16 (the q8 activation values and the dequantized weights, each
                // rounded to 11 bits: ~1e-4 relative per output, 25x under the q8
                // quantization's own error); the random weights here turn that into q8
                // rounding flips downstream: measured 3e-4 to 1.2e-3 after two layers for
                // most cases, 2.6e-3 for one draw of Q4_0/F16 (the step after the prompt)
                // and 3.6e-3 for Q2_K (H100, 2026-11-26). A wrong scale or layout gives 1e-2
                // and more (Q2_K's mma with its f16-rounded per-half mins gave 1.1e-2).
                const double bound = rows >= 8 ? 5e-3 : 5e-4;
                const double e = compare(x, "residual stream after two layers");
                std::printf("[ %s ] residual stream NMSE %.3g\n", what.c_str(), e);
                EXPECT_LT(e, bound) << what;
            }
        }
    }
}

// The tensor-core matmul makes its chunk scales with f16 arithmetic on the scale bits
// (kernels/scale_f16.h), where the f32 route computes f16(f32(d) * f32(byte)). Both are
// one rounding of an exact product, so they must agree bit for bit: every f16 pattern
// of d (and of dmin) against all 64 values of the bytes' low 6 bits (the K-quants' range;
// the top two bits drawn at random), at every position of the entry in its word.
TEST_F(Parity, MmaScalesMatchF32Route) {
#ifdef VEGA_HAVE_GPU
    if (gpu::ops::mma_min_rows() <= 0) GTEST_SKIP() << "no tensor-core matmul on this target";
    constexpr int n = 1 << 22;  // 65536 d patterns x 64 byte values
    std::vector<uint32_t> word(n), sb(n), got(size_t(n) * 4);
    // (device buffers released by TearDown, also after a failed assertion; copies and the
    // kernel on the default stream, in order)
    auto device_words = [&](size_t words) {
        auto* p = static_cast<uint32_t*>(gpu_->alloc(words * 4, "test buffer"));
        gbufs_.push_back(p);
        return p;
    };
    uint32_t *dw = device_words(size_t(n)), *dsb = device_words(size_t(n)), *dout = device_words(size_t(n) * 4);
    ASSERT_TRUE(dw && dsb && dout);
    auto f16 = [](float f) { return uint32_t(f32_to_f16(f)); };
    auto hf = [](uint32_t h) { return f16_to_f32(uint16_t(h)); };
    auto is_nan16 = [](uint32_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; };
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                       GgmlType::IQ4_XS, GgmlType::MXFP4}) {
        const gpu::GpuFormat F = gpu::gpu_format(t);
        const int size = F.ps.sc;  // bytes of a chunk's entry
        for (int b0 = 0; b0 < 4; b0 += size) {
            for (int i = 0; i < n; ++i) {
                const uint32_t d = uint32_t(i) & 0xFFFFu, dmin = (d * 40503u + 12345u) & 0xFFFFu;
                const uint32_t lo6 = uint32_t(i) >> 16, r = uint32_t(rng_());
                word[size_t(i)] = r;
                uint32_t& w = word[size_t(i)];
                // every byte of the entry: the value under test in its low 6 bits
                for (int j = 0; j < size && size < 4; ++j) {
                    const int at = 8 * (b0 + j);
                    const uint32_t v = (lo6 + 17u * uint32_t(j)) % 64u | (r >> (24 + 2 * j) & 3u) << 6;
                    w = (w & ~(0xFFu << at)) | v << at;
                }
                if (F.scales == gpu::GpuScales::kD || F.scales == gpu::GpuScales::kDM) w = (w & ~(0xFFFFu << 8 * b0)) | d << 8 * b0;
                sb[size_t(i)] = d | dmin << 16;
            }
            gpu::rt::h2d(dw, word.data(), size_t(n) * 4, nullptr);
            gpu::rt::h2d(dsb, sb.data(), size_t(n) * 4, nullptr);
            ASSERT_TRUE(gpu::ops::mma_chunk_scales(t, dw, dsb, n, b0, dout, nullptr)) << type_traits(t).name;
            gpu::rt::check("mma_chunk_scales");
            gpu::rt::d2h(got.data(), dout, got.size() * 4, nullptr);
            int64_t bad = 0;
            for (int i = 0; i < n; ++i) {
                const uint32_t w = word[size_t(i)], e = w >> (8 * b0), d = sb[size_t(i)] & 0xFFFFu, dmin = sb[size_t(i)] >> 16;
                uint32_t s0 = 0, s1 = 0, m = 0;  // expected f16 bits
                switch (F.scales) {
                    case gpu::GpuScales::kD: s0 = s1 = e & 0xFFFFu; break;
                    case gpu::GpuScales::kDM: s0 = s1 = w & 0xFFFFu, m = w >> 16; break;
                    case gpu::GpuScales::kK4:
                        s0 = s1 = f16(hf(d) * float(e & 0xFFu)), m = f16(-(hf(dmin) * float(e >> 8 & 0xFFu)));
                        break;
                    case gpu::GpuScales::kI8x2:
                        s0 = f16(hf(d) * float(int8_t(e & 0xFFu))), s1 = f16(hf(d) * float(int8_t(e >> 8 & 0xFFu)));
                        break;
                    case gpu::GpuScales::kI8: s0 = s1 = f16(hf(d) * float(int8_t(e & 0xFFu))); break;
                    case gpu::GpuScales::kE8M0: {
                        const uint32_t bits = (e & 0xFFu) << 23;
                        float v;
                        std::memcpy(&v, &bits, 4);
                        s0 = s1 = f16(v * 0.5f);
                        break;
                    }
                    default: FAIL() << type_traits(t).name << ": no scale kind";
                }
                const uint32_t want[4] = {s0 * 0x10001u, s1 * 0x10001u, m * 0x10001u, m * 0x10001u};
                for (int k = 0; k < 4; ++k) {
                    const uint32_t g = got[size_t(i) * 4 + size_t(k)];
                    const bool same = g == want[k] || (is_nan16(g & 0xFFFFu) && is_nan16(want[k] & 0xFFFFu) &&
                                                       is_nan16(g >> 16) && is_nan16(want[k] >> 16));
                    if (!same && bad++ < 5)
                        ADD_FAILURE() << type_traits(t).name << " b0 " << b0 << " word 0x" << std::hex << w << " sb 0x" << sb[size_t(i)]
                                      << " output " << std::dec << k << ": got 0x" << std::hex << g << ", want 0x" << want[k];
                }
            }
            EXPECT_EQ(bad, 0) << type_traits(t).name << " b0 " << b0;
        }
    }
#else
    GTEST_SKIP() << "this build has no GPU backend";
#endif
}

// A matmul input is written in the forms its readers read (GpuBackend::h_only): from
// 8 rows on NVIDIA, an input read only by the tensor-core matmul gets its f16 form
// alone. That may not change a bit: two linked layers (with the forward pass's
// next_readers) of 80 rows give the same residual stream bit for bit as a backend
// made with VEGA_GPU_H_ONLY=0, and it matches the CPU.
TEST_F(Parity, InputFormsFollowTheirReaders) {
#ifdef VEGA_HAVE_GPU
    if (gpu::ops::mma_min_rows() <= 0) GTEST_SKIP() << "no tensor-core matmul on this target: every input has all forms";
    const int n_head = 8, n_kv_head = 2, hd = 64, n_layer = 2, rows = 80;
    const int64_t E = 512, Dq = int64_t(n_head) * hd, Dkv = int64_t(n_kv_head) * hd, F = 4096;
    struct Layer {
        const gguf::TensorInfo *an, *wq, *wk, *wv, *wo, *fn, *gate, *up, *down;
    };
    std::vector<Layer> ts;
    for (int l = 0; l < n_layer; ++l) {
        Layer t;
        t.an = &make_tensor(GgmlType::F32, E, 1, 0.1f, true), t.fn = &make_tensor(GgmlType::F32, E, 1, 0.1f, true);
        t.wq = &make_tensor(GgmlType::Q4_K, E, Dq), t.wk = &make_tensor(GgmlType::Q4_K, E, Dkv);
        t.wv = &make_tensor(GgmlType::Q6_K, E, Dkv), t.wo = &make_tensor(GgmlType::Q4_K, Dq, E, 0.5f);
        t.gate = &make_tensor(GgmlType::Q4_K, E, F), t.up = &make_tensor(GgmlType::Q4_K, E, F);
        t.down = &make_tensor(GgmlType::Q6_K, F, E, 0.2f);
        ts.push_back(t);
    }
    const std::vector<float> x0 = randn(size_t(rows) * E);
    // One run of the two layers on `be`: the residual stream.
    auto run = [&](Backend& be) {
        std::vector<AttentionBlock> A(n_layer);
        std::vector<FfnBlock> Fb(n_layer);
        for (int l = 0; l < n_layer; ++l) {
            const Layer& t = ts[size_t(l)];
            AttentionBlock& a = A[size_t(l)];
            a.norm = be.upload_weight(*t.an), a.wq = be.upload_weight(*t.wq), a.wk = be.upload_weight(*t.wk);
            a.wv = be.upload_weight(*t.wv), a.wo = be.upload_weight(*t.wo);
            a.n_head = n_head, a.n_kv_head = n_kv_head, a.head_dim = hd, a.eps = 1e-5f;
            a.scale = 1.f / std::sqrt(float(hd));
            a.rope.n_rot = hd, a.rope.freq_base = 10000.f, a.rope.neox = true;
            FfnBlock& f = Fb[size_t(l)];
            f.norm = be.upload_weight(*t.fn), f.gate = be.upload_weight(*t.gate), f.up = be.upload_weight(*t.up);
            f.down = be.upload_weight(*t.down);
        }
        be.reserve(rows, F);
        KvCacheDesc d;
        d.n_layer = n_layer, d.n_seq = 1, d.n_ctx = 128, d.n_kv_head = n_kv_head, d.head_dim = hd;
        auto cache = be.create_kv_cache(d);
        std::vector<void*> owned;
        auto buf = [&](int64_t n, const std::vector<float>* host = nullptr) {
            auto* p = static_cast<float*>(be.alloc(size_t(n) * 4, "test buffer"));
            std::vector<float> init = host ? *host : std::vector<float>(size_t(n), std::nanf(""));
            be.upload(p, init.data(), init.size() * 4);
            owned.push_back(p);
            return p;
        };
        std::vector<int32_t> pos(rows), seq(rows, 0);
        for (int i = 0; i < rows; ++i) pos[size_t(i)] = i;
        auto* pg = static_cast<int32_t*>(be.alloc(rows * 4, "pos")), *sg = static_cast<int32_t*>(be.alloc(rows * 4, "seq"));
        be.upload(pg, pos.data(), rows * 4), be.upload(sg, seq.data(), rows * 4);
        owned.push_back(pg), owned.push_back(sg);
        BatchView b;
        b.n_tokens = rows, b.pos = pg, b.seq = sg, b.n_kv_max = rows, b.prompt_rows = rows;  // (the tiled attention)
        float* x = buf(int64_t(rows) * E, &x0);
        BlockBuffers bb;
        bb.q = buf(rows * Dq), bb.k = buf(rows * Dkv), bb.v = buf(rows * Dkv), bb.att = buf(rows * Dq);
        bb.tmp = buf(rows * E), bb.g = buf(rows * F), bb.u = buf(rows * F), bb.h = buf(rows * F);
        for (int l = 0; l < n_layer; ++l) {  // linked as model/forward.cpp links them
            BlockLink la, lf;
            la.input_normed = l > 0;
            la.next_norm = &Fb[size_t(l)].norm, la.next_quantized = true;
            la.next_readers = {&Fb[size_t(l)].gate, &Fb[size_t(l)].up, nullptr};
            lf.input_normed = true;
            if (l + 1 < n_layer) {
                const AttentionBlock& nx = A[size_t(l) + 1];
                lf.next_norm = &nx.norm, lf.next_quantized = true, lf.next_readers = {&nx.wq, &nx.wk, &nx.wv};
            }
            be.attention_block(A[size_t(l)], *cache, l, b, x, bb, la);
            be.ffn_block(Fb[size_t(l)], x, rows, bb, lf);
        }
        be.synchronize();
        std::vector<float> out(size_t(rows) * E);
        be.download(out.data(), x, out.size() * 4);
        for (void* p : owned) be.release(p);
        return out;
    };
    const int64_t before = gpu::ops::h_only_launch_count();
    const std::vector<float> only_h = run(*gpu_);
    // Every matmul input of the two layers (all their readers are quantized matrices the
    // tensor cores take): the first norm, then per layer the attention output, the FFN's
    // norm and h, and the next layer's norm.
    EXPECT_EQ(gpu::ops::h_only_launch_count() - before, 4 * n_layer) << "inputs written as h alone";
    setenv("VEGA_GPU_H_ONLY", "0", 1);  // (read once, as a backend is made)
    const auto all_forms_gpu = make_gpu_backend(0);
    unsetenv("VEGA_GPU_H_ONLY");
    const int64_t before_all = gpu::ops::h_only_launch_count();
    const std::vector<float> all_forms = run(*all_forms_gpu);
    EXPECT_EQ(gpu::ops::h_only_launch_count(), before_all) << "VEGA_GPU_H_ONLY=0 wrote an input as h alone";
    for (size_t i = 0; i < only_h.size(); ++i)
        ASSERT_EQ(std::memcmp(&only_h[i], &all_forms[i], 4), 0)
            << "element " << i << ": " << only_h[i] << " with h_only, " << all_forms[i] << " with every form";
    const std::vector<float> cpu = run(*cpu_);
    const double e = nmse(only_h, cpu);
    std::printf("[ InputFormsFollowTheirReaders ] residual stream NMSE against the CPU %.3g\n", e);
    EXPECT_LT(e, 5e-3);  // the tensor-core bound of BlockOpsMatchReferenceCompositions
#else
    GTEST_SKIP() << "this build has no GPU backend";
#endif
}

TEST_F(Parity, GraphReplaySeesNewInputs) {
    if (!gpu_->supports_capture()) GTEST_SKIP() << "backend does not record graphs";
    const int64_t n_in = 1024, n_out = 257;
    W w = weight(GgmlType::Q4_0, n_in, n_out);
    gpu_->reserve(4, n_in);
    cpu_->reserve(4, n_in);
    auto x = pair(randn(size_t(n_in)));
    auto y = pair_n(size_t(n_out));
    gpu_->synchronize();
    gpu_->capture_begin();
    gpu_->matmul_input(x.g, 1, n_in);
    gpu_->matmul(w.g, y.g);
    const int graph = gpu_->capture_end();
    for (int it = 0; it < 3; ++it) {
        auto xs = randn(size_t(n_in));
        gpu_->upload(x.g, xs.data(), xs.size() * 4);
        cpu_->upload(x.c, xs.data(), xs.size() * 4);
        gpu_->replay(graph);
        cpu_->matmul_input(x.c, 1, n_in);
        cpu_->matmul(w.c, y.c);
        EXPECT_LT(compare(y, "graph replay"), 1e-5) << "iteration " << it;
    }
    gpu_->release_graph(graph);
}

}  // namespace
}  // namespace vega
