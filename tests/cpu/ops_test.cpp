// CPU backend ops against straightforward double-precision computations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/cpu/kv_rows.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "random.h"

namespace vega {
namespace {

using test::randn;

double nmse(const std::vector<float>& got, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) num += (got[i] - ref[i]) * (got[i] - ref[i]), den += ref[i] * ref[i];
    return num / den;
}

Weight vector_weight(Backend& be, gguf::TensorInfo& ti, const std::vector<float>& v) {
    ti.type = GgmlType::F32;
    ti.n_dims = 1;
    ti.ne[0] = int64_t(v.size());
    ti.data = reinterpret_cast<const uint8_t*>(v.data());
    ti.n_bytes = v.size() * 4;
    return be.upload_weight(ti);
}

TEST(CpuOps, HeadRmsNormMatchesDouble) {  // the qwen3 q/k norm step
    auto be = make_cpu_backend(2);
    const int rows = 3, n_head = 4, hd = 64;
    std::vector<float> x = randn(size_t(rows) * n_head * hd, 1, 3.f), w = randn(hd, 2);
    for (auto& v : w) v += 1.f;
    gguf::TensorInfo ti;
    Weight wt = vector_weight(*be, ti, w);
    std::vector<double> ref(x.size());
    const float eps = 1e-6f;
    for (int r = 0; r < rows * n_head; ++r) {
        double ss = 0;
        for (int i = 0; i < hd; ++i) ss += double(x[r * hd + i]) * x[r * hd + i];
        const double s = 1.0 / std::sqrt(ss / hd + eps);
        for (int i = 0; i < hd; ++i) ref[r * hd + i] = x[r * hd + i] * s * w[i];
    }
    be->head_rms_norm(x.data(), wt, rows, n_head, hd, eps);
    EXPECT_LT(nmse(x, ref), 1e-12);
}

void check_rope(bool neox) {
    auto be = make_cpu_backend(1);
    const int T = 3, n_head = 2, hd = 16, n_rot = 16;
    std::vector<float> x = randn(size_t(T) * n_head * hd, 3);
    std::vector<double> ref(x.begin(), x.end());
    std::vector<int32_t> pos = {0, 7, 300};
    BatchView b;
    b.n_tokens = T;
    b.pos = pos.data();
    RopeParams p;
    p.n_rot = n_rot;
    p.freq_base = 10000.f;
    p.neox = neox;
    for (int t = 0; t < T; ++t)
        for (int h = 0; h < n_head; ++h)
            for (int i = 0; i < n_rot / 2; ++i) {
                const double th = pos[t] * std::pow(10000.0, -2.0 * i / n_rot);
                double* v = &ref[(size_t(t) * n_head + h) * hd];
                const int a = neox ? i : 2 * i, c = neox ? i + n_rot / 2 : 2 * i + 1;
                const double x0 = v[a], x1 = v[c];
                v[a] = x0 * std::cos(th) - x1 * std::sin(th);
                v[c] = x0 * std::sin(th) + x1 * std::cos(th);
            }
    be->rope(x.data(), n_head, hd, p, b);
    EXPECT_LT(nmse(x, ref), 1e-12);
    // Position 0 is the identity.
    for (int i = 0; i < n_head * hd; ++i) EXPECT_FLOAT_EQ(x[i], float(ref[i]));
}

TEST(CpuOps, RopeNormalMatchesDouble) { check_rope(false); }
TEST(CpuOps, RopeNeoxMatchesDouble) { check_rope(true); }

// prompt_rows 0: every row through the per-row loop; 10: every row through the tiled
// prompt path (prompt_attention.h); 4: the last 4 rows tiled, the first 6 per row.
TEST(CpuOps, AttentionGqaTwoSequencesMatchesDouble) {
    for (int prompt_rows : {0, 10, 4})
    for (GgmlType kv : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0}) {
        auto be = make_cpu_backend(2);
        KvCacheDesc d;
        d.n_layer = 2;
        d.n_seq = 2;
        d.n_ctx = 16;
        d.n_kv_head = 2;
        d.head_dim = 32;
        d.type = kv;
        auto cache = be->create_kv_cache(d);
        const int n_head = 4, T = 10;  // tokens 0..5 in seq 0 (pos 0..5), 6..9 in seq 1 (pos 0..3)
        std::vector<int32_t> pos(T), seq(T);
        for (int t = 0; t < T; ++t) seq[t] = t < 6 ? 0 : 1, pos[t] = t < 6 ? t : t - 6;
        BatchView b;
        b.n_tokens = T;
        b.pos = pos.data();
        b.seq = seq.data();
        b.n_kv_max = 6;
        b.prompt_rows = prompt_rows;
        const int kvdim = d.n_kv_head * d.head_dim, qdim = n_head * d.head_dim;
        std::vector<float> k = randn(size_t(T) * kvdim, 4), v = randn(size_t(T) * kvdim, 5), q = randn(size_t(T) * qdim, 6);
        be->kv_store(*cache, 1, k.data(), v.data(), b);
        std::vector<float> out(size_t(T) * qdim);
        const float scale = 1.f / std::sqrt(float(d.head_dim));
        be->attention(*cache, 1, q.data(), out.data(), n_head, scale, b);
        std::vector<double> ref(out.size());
        for (int t = 0; t < T; ++t)
            for (int h = 0; h < n_head; ++h) {
                const int kvh = h / (n_head / d.n_kv_head);
                std::vector<double> s;
                std::vector<int> js;
                for (int j = 0; j < T; ++j)
                    if (seq[j] == seq[t] && pos[j] <= pos[t]) {
                        double acc = 0;
                        for (int i = 0; i < d.head_dim; ++i)
                            acc += double(q[(t * n_head + h) * d.head_dim + i]) * k[(j * d.n_kv_head + kvh) * d.head_dim + i];
                        s.push_back(acc * scale);
                        js.push_back(j);
                    }
                double mx = *std::max_element(s.begin(), s.end()), sum = 0;
                for (auto& e : s) sum += (e = std::exp(e - mx));
                for (int i = 0; i < d.head_dim; ++i) {
                    double o = 0;
                    for (size_t m = 0; m < js.size(); ++m) o += s[m] / sum * v[(js[m] * d.n_kv_head + kvh) * d.head_dim + i];
                    ref[(t * n_head + h) * d.head_dim + i] = o;
                }
            }
        // q8_0: K and V in 8-bit blocks (about 3e-5 relative error each against these
        // unquantized inputs); measured 1e-5 to 2e-5 here.
        const double bound = kv == GgmlType::F32 ? 1e-12 : kv == GgmlType::F16 ? 1e-6 : 2e-4;
        EXPECT_LT(nmse(out, ref), bound) << type_traits(kv).name << " prompt rows " << prompt_rows;
        EXPECT_EQ(be->attention_stats().tiled, prompt_rows > 0 ? 1 : 0);
        EXPECT_EQ(be->attention_stats().other, prompt_rows < T ? 1 : 0);
    }
}

// The tiled prompt path against the per-row loop at prompt sizes: chunks shorter and
// longer than a tile of rows (16) and of positions (64), at depth, GQA 1, 4, 8, head dims
// 64, 80, 128, f16 and q8_0 caches (head dim 80: 16-element q8_0 blocks), and two
// sequences' prompts in one batch.
TEST(CpuOps, PromptAttentionTilesMatchThePerRowLoop) {
    struct Case {
        int hd, n_kv_head, group, depth, chunk;
    };
    auto be = make_cpu_backend(2);
    for (GgmlType kv : {GgmlType::F16, GgmlType::Q8_0})
    for (const Case c : {Case{64, 2, 1, 0, 1}, Case{128, 1, 4, 0, 15}, Case{128, 1, 4, 5, 16}, Case{80, 2, 8, 63, 17},
                         Case{64, 1, 1, 200, 100}, Case{128, 2, 4, 1000, 70}}) {
        KvCacheDesc d;
        d.n_layer = 1, d.n_seq = 2, d.n_ctx = c.depth + c.chunk, d.n_kv_head = c.n_kv_head, d.head_dim = c.hd;
        d.type = kv;
        auto cache = be->create_kv_cache(d);
        const int n_head = c.n_kv_head * c.group, kvdim = c.n_kv_head * c.hd, qdim = n_head * c.hd;
        // Both sequences filled to depth + chunk; the batch: sequence 0's chunk, then sequence 1's.
        for (int sq = 0; sq < 2; ++sq) {
            std::vector<int32_t> pos(size_t(d.n_ctx)), seq(size_t(d.n_ctx), sq);
            for (int i = 0; i < d.n_ctx; ++i) pos[size_t(i)] = i;
            BatchView b;
            b.n_tokens = d.n_ctx, b.pos = pos.data(), b.seq = seq.data();
            const std::vector<float> k = randn(size_t(d.n_ctx) * kvdim, 20 + sq), v = randn(size_t(d.n_ctx) * kvdim, 30 + sq);
            be->kv_store(*cache, 0, k.data(), v.data(), b);
        }
        std::vector<int32_t> pos, seq;
        for (int sq = 0; sq < 2; ++sq)
            for (int i = 0; i < c.chunk; ++i) pos.push_back(c.depth + i), seq.push_back(sq);
        const int T = int(pos.size());
        const std::vector<float> q = randn(size_t(T) * qdim, 40);
        std::vector<float> tiled(size_t(T) * qdim), per_row(tiled.size());
        BatchView b;
        b.n_tokens = T, b.pos = pos.data(), b.seq = seq.data(), b.n_kv_max = d.n_ctx;
        const float scale = 1.f / std::sqrt(float(c.hd));
        b.prompt_rows = T;
        be->attention(*cache, 0, q.data(), tiled.data(), n_head, scale, b);
        b.prompt_rows = 0;
        be->attention(*cache, 0, q.data(), per_row.data(), n_head, scale, b);
        const std::vector<double> ref(per_row.begin(), per_row.end());
        EXPECT_LT(nmse(tiled, ref), 1e-11) << type_traits(kv).name << " head_dim " << c.hd << " GQA " << c.group
                                           << " depth " << c.depth << " chunk " << c.chunk;
    }
}

// The q8_0 cache's rows are ggml's q8_0 blocks (values and f16 scale, in two planes):
// 32-element blocks bit for bit as quant::quantize_row makes them, and back as
// quant::dequantize_row decodes them; head dims 80 and 8 take 16- and 8-element
// blocks, within about half a step of the input; a head dim of 4 has no q8_0 form.
TEST(KvCacheQ8, RowsAreGgmlQ8_0Blocks) {
    for (int hd : {64, 128, 80, 8}) {
        KvLayout L{1, 4, 2, hd, KvElem::Q8_0};
        const int B = L.q8_block();
        EXPECT_EQ(B, hd % 32 == 0 ? 32 : hd % 16 == 0 ? 16 : 8);
        const size_t n = size_t(L.layer_elems());
        std::vector<uint8_t> vals(n);
        std::vector<uint16_t> scales(2 * n / size_t(B));  // (K, V) pairs: this plays K's side
        std::vector<float> x = randn(n, 50, 2.f), back(n);
        x[3] = 0.f;
        for (int i = 0; i < hd; ++i) x[size_t(L.row(0, 1, 2)) + size_t(i)] = 0.f;  // an all-zero row: scale 0
        for (size_t r = 0; r < n; r += size_t(hd)) cpu::encode_kv_row(vals.data(), scales.data(), L, r, hd, x.data() + r);
        for (size_t r = 0; r < n; r += size_t(hd)) cpu::decode_kv_row(vals.data(), scales.data(), L, r, hd, back.data() + r);
        for (size_t b = 0; b < n / size_t(B); ++b) {
            const float d = f16_to_f32(scales[size_t(L.scale_index(int64_t(b) * B))]);
            for (int i = 0; i < B; ++i) {
                const size_t e = b * size_t(B) + size_t(i);
                // half a step, plus |q| <= 127 times the scale's f16 rounding (2^-11 relative):
                // values are quantized with the unrounded scale, as ggml does
                ASSERT_LE(std::fabs(back[e] - x[e]), (0.5f + 127.f / 2048.f) * d + 1e-7f)
                    << "head_dim " << hd << " element " << e;
            }
        }
        if (B != 32) continue;
        std::vector<uint8_t> ggml(quant::row_bytes(GgmlType::Q8_0, int64_t(n)));
        quant::quantize_row(GgmlType::Q8_0, x.data(), ggml.data(), int64_t(n));
        std::vector<float> ggml_back(n);
        quant::dequantize_row(GgmlType::Q8_0, ggml.data(), ggml_back.data(), int64_t(n));
        for (size_t b = 0; b < n / 32; ++b) {
            BlockQ8_0 blk;
            std::memcpy(&blk, ggml.data() + b * sizeof(BlockQ8_0), sizeof blk);
            ASSERT_EQ(blk.d, scales[2 * b]) << "block " << b;
            ASSERT_EQ(std::memcmp(blk.qs, vals.data() + b * 32, 32), 0) << "block " << b;
        }
        EXPECT_EQ(back, ggml_back);
    }
    KvCacheDesc d;
    d.n_layer = 1, d.n_ctx = 8, d.n_kv_head = 2, d.head_dim = 4, d.type = GgmlType::Q8_0;
    try {
        check_kv_cache_desc(d);
        ADD_FAILURE() << "a q8_0 cache of head dim 4 was accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("multiple of 8"), std::string::npos) << e.what();
    }
    d.head_dim = 64;
    EXPECT_EQ(kv_cache_bytes(d), size_t(2) * 8 * 2 * 64 * 1 + size_t(2) * 8 * 2 * 64 / 32 * 2);
}

TEST(CpuOps, QuantizedMatmulMatchesDequantizedDouble) {
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16}) {
        auto be = make_cpu_backend(2);
        const int n_in = 512, n_out = 40, rows = 3;
        std::vector<float> wf = randn(size_t(n_in) * n_out, 7, 0.05f), x = randn(size_t(rows) * n_in, 8);
        const size_t rb = quant::row_bytes(t, n_in);
        std::vector<uint8_t> wq(rb * n_out);
        for (int o = 0; o < n_out; ++o) quant::quantize_row(t, wf.data() + size_t(o) * n_in, wq.data() + o * rb, n_in);
        std::vector<float> wd(wf.size());
        for (int o = 0; o < n_out; ++o) quant::dequantize_row(t, wq.data() + o * rb, wd.data() + size_t(o) * n_in, n_in);
        gguf::TensorInfo ti;
        ti.type = t;
        ti.n_dims = 2;
        ti.ne[0] = n_in;
        ti.ne[1] = n_out;
        ti.data = wq.data();
        ti.n_bytes = wq.size();
        Weight w = be->upload_weight(ti);
        be->reserve(rows, n_in);
        std::vector<float> y(size_t(rows) * n_out);
        be->matmul_input(x.data(), rows, n_in);
        be->matmul(w, y.data());
        std::vector<double> ref(y.size());
        for (int r = 0; r < rows; ++r)
            for (int o = 0; o < n_out; ++o) {
                double acc = 0;
                for (int i = 0; i < n_in; ++i) acc += double(wd[size_t(o) * n_in + i]) * x[size_t(r) * n_in + i];
                ref[size_t(r) * n_out + o] = acc;
            }
        // Activations are quantized to 8 bits for the integer paths (~1e-4 relative
        // error) and rounded to f16 for F16 weights (~1e-8), as llama.cpp does.
        EXPECT_LT(nmse(y, ref), t == GgmlType::F16 ? 1e-6 : 1e-3) << type_traits(t).name;
    }
}

}  // namespace
}  // namespace vega
