// Block ops (backend.h) over a batch of B rows, each row a different sequence at
// its own position, against the same op called one row at a time (B = 1, 3, 8,
// 33): the attention block (norm, q/k/v, bias, q/k norm, rope, cache store,
// attention, o projection, residual) and the FFN block. On $VEGA_TEST_DEVICE
// (default cpu): bitwise on the CPU, the end-to-end NMSE bound elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "model/model.h"
#include "nmse.h"
#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

struct Fixture {
    std::unique_ptr<Backend> be;
    std::unique_ptr<Model> model;
    AttentionBlock attn;
    FfnBlock ffn;
    BlockBuffers buf;
    std::vector<void*> owned;
    int E = 0, rows = 0;
    float* x = nullptr;
    int32_t *tok = nullptr, *pos = nullptr, *seq = nullptr;

    Fixture(const std::string& rel, int max_rows) : rows(max_rows) {
        be = create_backend(test_device(), 2);
        model = Model::load(data_file(rel), *be, nullptr);
        const HParams& hp = model->hparams();
        const LayerWeights& L = model->weights().layers[0];
        E = hp.n_embd;
        attn.norm = L.attn_norm, attn.wq = L.wq, attn.wk = L.wk, attn.wv = L.wv, attn.wo = L.wo;
        attn.bq = L.bq, attn.bk = L.bk, attn.bv = L.bv;
        if (hp.qk_norm) attn.q_norm = L.q_norm, attn.k_norm = L.k_norm;
        attn.n_head = hp.n_head, attn.n_kv_head = hp.n_head_kv, attn.head_dim = hp.head_dim;
        attn.eps = hp.rms_eps, attn.scale = 1.f / std::sqrt(float(hp.head_dim));
        attn.rope.n_rot = hp.n_rot, attn.rope.freq_base = hp.rope_base, attn.rope.neox = hp.rope_neox;
        ffn.norm = L.ffn_norm, ffn.gate = L.ffn_gate, ffn.up = L.ffn_up, ffn.down = L.ffn_down, ffn.eps = hp.rms_eps;
        const size_t R = size_t(max_rows);
        auto f = [&](size_t n) {
            void* p = be->alloc(n * sizeof(float), "test");
            owned.push_back(p);
            return static_cast<float*>(p);
        };
        const size_t Dq = size_t(hp.n_head) * hp.head_dim, Dkv = size_t(hp.n_head_kv) * hp.head_dim;
        buf = {f(R * Dq), f(R * Dkv), f(R * Dkv), f(R * Dq), f(R * E), f(R * hp.n_ff), f(R * hp.n_ff), f(R * hp.n_ff)};
        x = f(R * E);
        tok = reinterpret_cast<int32_t*>(f(R));
        pos = reinterpret_cast<int32_t*>(f(R));
        seq = reinterpret_cast<int32_t*>(f(R));
        be->reserve(max_rows, std::max<int64_t>({int64_t(E), int64_t(Dq), int64_t(hp.n_ff)}));
    }
    ~Fixture() {
        for (void* p : owned) be->release(p);
    }
    std::unique_ptr<KvCache> cache(int n_seq) {
        const HParams& hp = model->hparams();
        KvCacheDesc d;
        d.n_layer = 1, d.n_seq = n_seq, d.n_ctx = 64, d.n_kv_head = hp.n_head_kv, d.head_dim = hp.head_dim;
        return be->create_kv_cache(d);
    }
    // Runs the attention block over rows (x rows, positions, sequences) and returns the new x.
    std::vector<float> attention(KvCache& c, const std::vector<float>& xin, const std::vector<int32_t>& p,
                                 const std::vector<int32_t>& s) {
        const int n = int(p.size());
        be->upload(x, xin.data(), xin.size() * 4);
        be->upload(pos, p.data(), size_t(n) * 4);
        be->upload(seq, s.data(), size_t(n) * 4);
        BatchView b;
        b.n_tokens = n, b.tokens = nullptr, b.pos = pos, b.seq = seq;
        b.n_kv_max = 0;
        for (int32_t q : p) b.n_kv_max = std::max(b.n_kv_max, q + 1);
        be->attention_block(attn, c, 0, b, x, buf);
        std::vector<float> out(xin.size());
        be->download(out.data(), x, out.size() * 4);
        be->synchronize();
        return out;
    }
};

std::vector<float> random_rows(std::mt19937& rng, size_t n) {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> v(n);
    for (float& f : v) f = nd(rng);
    return v;
}

class BlockOps : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(BlockOps, BatchedRowsEqualOneRowAtATime) {
    VEGA_REQUIRE_TEST_DATA();
    const auto& [rel, B] = GetParam();
    Fixture fx(rel, 64);
    const int E = fx.E;
    std::mt19937 rng(uint32_t(B) * 977u + 5u);
    const double tol = test_device() == "cpu" ? 0.0 : 5e-3;
    // Attention: sequence i first gets a prefix of 1 + (5i mod 13) rows, then one more row.
    std::vector<int> plen(B);
    for (int i = 0; i < B; ++i) plen[size_t(i)] = 1 + (5 * i) % 13;
    std::vector<std::vector<float>> prefix(B), step(B);
    for (int i = 0; i < B; ++i) prefix[size_t(i)] = random_rows(rng, size_t(plen[size_t(i)]) * E), step[size_t(i)] = random_rows(rng, E);
    auto batched_cache = fx.cache(B);
    {
        std::vector<float> xs;
        std::vector<int32_t> p, s;
        for (int i = 0; i < B; ++i)
            for (int r = 0; r < plen[size_t(i)]; ++r) {
                xs.insert(xs.end(), prefix[size_t(i)].begin() + size_t(r) * E, prefix[size_t(i)].begin() + size_t(r + 1) * E);
                p.push_back(r), s.push_back(i);
                if (int(p.size()) == 64) fx.attention(*batched_cache, xs, p, s), xs.clear(), p.clear(), s.clear();
            }
        if (!p.empty()) fx.attention(*batched_cache, xs, p, s);
    }
    std::vector<float> xs;
    std::vector<int32_t> p, s;
    for (int i = 0; i < B; ++i) xs.insert(xs.end(), step[size_t(i)].begin(), step[size_t(i)].end()), p.push_back(plen[size_t(i)]), s.push_back(i);
    const std::vector<float> got = fx.attention(*batched_cache, xs, p, s);
    for (int i = 0; i < B; ++i) {
        auto single = fx.cache(1);
        for (int r = 0; r < plen[size_t(i)]; ++r)
            fx.attention(*single, std::vector<float>(prefix[size_t(i)].begin() + size_t(r) * E, prefix[size_t(i)].begin() + size_t(r + 1) * E), {r}, {0});
        const std::vector<float> ref = fx.attention(*single, step[size_t(i)], {plen[size_t(i)]}, {0});
        const std::vector<float> row(got.begin() + size_t(i) * E, got.begin() + size_t(i + 1) * E);
        const double e = nmse(row, ref);
        if (tol == 0.0) EXPECT_EQ(e, 0.0) << "attention block, row " << i;
        else EXPECT_LT(e, tol) << "attention block, row " << i;
    }
    // FFN: B rows at once against one at a time.
    const std::vector<float> xin = random_rows(rng, size_t(B) * E);
    fx.be->upload(fx.x, xin.data(), xin.size() * 4);
    fx.be->ffn_block(fx.ffn, fx.x, B, fx.buf);
    std::vector<float> all(xin.size());
    fx.be->download(all.data(), fx.x, all.size() * 4);
    fx.be->synchronize();
    for (int i = 0; i < B; ++i) {
        fx.be->upload(fx.x, xin.data() + size_t(i) * E, size_t(E) * 4);
        fx.be->ffn_block(fx.ffn, fx.x, 1, fx.buf);
        std::vector<float> one(static_cast<size_t>(E));
        fx.be->download(one.data(), fx.x, size_t(E) * 4);
        fx.be->synchronize();
        const std::vector<float> row(all.begin() + size_t(i) * E, all.begin() + size_t(i + 1) * E);
        const double e = nmse(row, one);
        if (tol == 0.0) EXPECT_EQ(e, 0.0) << "ffn block, row " << i;
        else EXPECT_LT(e, tol) << "ffn block, row " << i;
        // The block changed x (a residual was added).
        EXPECT_GT(nmse(one, std::vector<float>(xin.begin() + size_t(i) * E, xin.begin() + size_t(i + 1) * E)), 1e-8);
    }
}

// BlockLink: an attention block that leaves the FFN's normed input behind
// (next_norm), followed by an FFN block told so (input_normed), equals the two
// blocks unlinked; rows at different positions after a short prompt. On the GPU
// this is where one row takes the residual + norm + q8 epilogue.
TEST_P(BlockOps, LinkedBlocksEqualUnlinked) {
    const auto [rel, B] = GetParam();
    Fixture fx(rel, std::max(B, 4));
    const int E = fx.E;
    std::mt19937 rng(11);
    const std::vector<float> prompt = random_rows(rng, size_t(4) * E), step = random_rows(rng, size_t(B) * E);
    auto run = [&](bool linked) {
        auto c = fx.cache(B);
        std::vector<int32_t> p1, s1;
        for (int i = 0; i < B; ++i) {  // each sequence's prompt (2..4 rows), unlinked
            const int n = 2 + i % 3;
            std::vector<int32_t> p0, s0(size_t(n), i);
            for (int r = 0; r < n; ++r) p0.push_back(r);
            fx.attention(*c, std::vector<float>(prompt.begin(), prompt.begin() + size_t(n) * E), p0, s0);
            p1.push_back(n), s1.push_back(i);
        }
        fx.be->upload(fx.x, step.data(), step.size() * 4);
        fx.be->upload(fx.pos, p1.data(), size_t(B) * 4);
        fx.be->upload(fx.seq, s1.data(), size_t(B) * 4);
        BatchView b;
        b.n_tokens = B, b.pos = fx.pos, b.seq = fx.seq, b.n_kv_max = 5;
        BlockLink la, lf;
        if (linked) {
            la.next_norm = &fx.ffn.norm, la.next_eps = fx.ffn.eps;
            la.next_quantized = !is_float_type(fx.ffn.gate.type) && !is_float_type(fx.ffn.up.type);
            lf.input_normed = true;
        }
        fx.be->attention_block(fx.attn, *c, 0, b, fx.x, fx.buf, la);
        fx.be->ffn_block(fx.ffn, fx.x, B, fx.buf, lf);
        std::vector<float> out(step.size());
        fx.be->download(out.data(), fx.x, out.size() * 4);
        fx.be->synchronize();
        return out;
    };
    const std::vector<float> plain = run(false), linked = run(true);
    const double e = nmse(linked, plain), tol = test_device() == "cpu" ? 0.0 : 5e-3;
    if (tol == 0.0) EXPECT_EQ(e, 0.0);
    else EXPECT_LT(e, tol);
    EXPECT_GT(nmse(plain, step), 1e-8);  // the blocks did change x
}

// A part whose sum over the devices the block's output takes itself (BlockLink::
// sum_output, tensor parallel's fused decode sums) is the GPU backend's to take; the
// reference compositions refuse it by name rather than add a part as a sum.
TEST(BlockLinks, CpuRefusesAPartTheOutputSumsOverDevices) {
    if (test_device() != "cpu") GTEST_SKIP() << "the CPU's reference compositions only";
    VEGA_REQUIRE_TEST_DATA();
    Fixture fx("models/synth-llama-q4_0.gguf", 4);
    const int one = 0;
    BlockLink lf;
    lf.sum_output = reinterpret_cast<const FusedSum*>(&one);  // (never dereferenced: refused first)
    const std::vector<float> before(fx.x, fx.x + fx.ffn.n_embd());
    try {
        fx.be->ffn_block(fx.ffn, fx.x, 1, fx.buf, lf);
        ADD_FAILURE() << "the CPU backend took a sum_output";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("sum_output"), std::string::npos) << e.what();
    }
    EXPECT_EQ(before, std::vector<float>(fx.x, fx.x + fx.ffn.n_embd())) << "x changed before the refusal";
}

INSTANTIATE_TEST_SUITE_P(Models, BlockOps,
                         ::testing::Combine(::testing::Values("models/synth-llama-q4_0.gguf", "models/synth-qwen2-q8_0.gguf",
                                                              "models/synth-qwen3-f32.gguf"),
                                            ::testing::Values(1, 3, 8, 33)),
                         [](const auto& info) {
                             return data_file_id(std::get<0>(info.param)) + "_B" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace vega::test
