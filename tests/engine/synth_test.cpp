// Synthetic model writer: the files reopen with gguf::File and carry the
// llama.cpp metadata, tensor names/shapes/types and tokenizer arrays the shape
// and format ask for; weights have the documented statistics; the _M recipe
// and K-quant fallbacks follow the documented rule.
#include "model/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unordered_set>

#include <unistd.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test_data.h"

namespace vega {
namespace {

namespace fs = std::filesystem;

class SynthTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::path(::testing::TempDir()) /
               ("vega_synth_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    fs::path dir_;
};

std::vector<float> dequant(const gguf::TensorInfo& t) {
    std::vector<float> out(size_t(t.n_elements()));
    const size_t rb = quant::row_bytes(t.type, t.ne[0]);
    const int64_t rows = t.n_elements() / t.ne[0];
    for (int64_t r = 0; r < rows; ++r)
        quant::dequantize_row(t.type, t.data + size_t(r) * rb, out.data() + size_t(r * t.ne[0]), t.ne[0]);
    return out;
}

void mean_sd(const std::vector<float>& x, double* mean, double* sd) {
    double s = 0, s2 = 0;
    for (float v : x) s += v, s2 += double(v) * v;
    *mean = s / double(x.size());
    *sd = std::sqrt(s2 / double(x.size()) - *mean * *mean);
}

// Expected tensors of a llama-style shape: name -> GGUF ne.
std::map<std::string, std::vector<int64_t>> expected_tensors(const SynthShape& s) {
    const int64_t hd = s.n_embd / s.n_head, q = hd * s.n_head, kv = hd * s.n_head_kv;
    std::map<std::string, std::vector<int64_t>> m;
    m["token_embd.weight"] = {s.n_embd, s.n_vocab};
    m["output_norm.weight"] = {s.n_embd};
    m["output.weight"] = {s.n_embd, s.n_vocab};
    for (int l = 0; l < s.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        m[b + "attn_norm.weight"] = {s.n_embd};
        m[b + "attn_q.weight"] = {s.n_embd, q};
        m[b + "attn_k.weight"] = {s.n_embd, kv};
        m[b + "attn_v.weight"] = {s.n_embd, kv};
        m[b + "attn_output.weight"] = {q, s.n_embd};
        m[b + "ffn_norm.weight"] = {s.n_embd};
        m[b + "ffn_gate.weight"] = {s.n_embd, s.n_ff};
        m[b + "ffn_up.weight"] = {s.n_embd, s.n_ff};
        m[b + "ffn_down.weight"] = {s.n_ff, s.n_embd};
        if (s.qkv_bias) {
            m[b + "attn_q.bias"] = {q};
            m[b + "attn_k.bias"] = {kv};
            m[b + "attn_v.bias"] = {kv};
        }
        if (s.qk_norm) {
            m[b + "attn_q_norm.weight"] = {hd};
            m[b + "attn_k_norm.weight"] = {hd};
        }
    }
    return m;
}

void check_file(const gguf::File& f, const SynthShape& s, GgmlType matrix_type, int64_t file_type) {
    const std::string a = s.arch + ".";
    EXPECT_EQ(f.get_string("general.architecture"), s.arch);
    EXPECT_FALSE(f.get_string("general.name").empty());
    EXPECT_EQ(f.get_int("general.file_type"), file_type);
    EXPECT_EQ(f.get_int(a + "context_length"), s.n_ctx);
    EXPECT_EQ(f.get_int(a + "embedding_length"), s.n_embd);
    EXPECT_EQ(f.get_int(a + "block_count"), s.n_layer);
    EXPECT_EQ(f.get_int(a + "feed_forward_length"), s.n_ff);
    EXPECT_EQ(f.get_int(a + "attention.head_count"), s.n_head);
    EXPECT_EQ(f.get_int(a + "attention.head_count_kv"), s.n_head_kv);
    EXPECT_GT(f.get_float(a + "attention.layer_norm_rms_epsilon"), 0.0);
    EXPECT_LE(f.get_float(a + "attention.layer_norm_rms_epsilon"), 1e-5);
    EXPECT_FLOAT_EQ(float(f.get_float(a + "rope.freq_base")), s.rope_base);
    EXPECT_EQ(f.get_int(a + "rope.dimension_count"), s.n_embd / s.n_head);

    // Tokenizer arrays, all n_vocab long.
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    const auto scores = f.get_float_array("tokenizer.ggml.scores");
    const auto types = f.get_int_array("tokenizer.ggml.token_type");
    ASSERT_EQ(tokens.size(), size_t(s.n_vocab));
    ASSERT_EQ(scores.size(), size_t(s.n_vocab));
    ASSERT_EQ(types.size(), size_t(s.n_vocab));
    EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
    EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
    EXPECT_EQ(tokens[1], "<s>");
    EXPECT_EQ(tokens[2], "</s>");

    // Tensors: exactly the expected names, shapes and types.
    const auto want = expected_tensors(s);
    EXPECT_EQ(f.tensors().size(), want.size());
    for (const auto& [name, ne] : want) {
        const gguf::TensorInfo* t = f.tensor(name);
        ASSERT_NE(t, nullptr) << name;
        ASSERT_EQ(t->n_dims, int(ne.size())) << name;
        for (size_t d = 0; d < ne.size(); ++d) EXPECT_EQ(t->ne[d], ne[d]) << name << " ne[" << d << "]";
        const GgmlType expect = ne.size() == 1 ? GgmlType::F32 : matrix_type;
        EXPECT_EQ(t->type, expect) << name;
    }
}

TEST_F(SynthTest, TinyF32HasMetadataTensorsTokenizerAndStatistics) {
    const SynthShape& s = find_synth_shape("tiny");
    EXPECT_EQ(s.n_embd, 256);
    std::vector<float> prog;
    write_synth_model(s, GgmlType::F32, path("tiny-f32.gguf"), 42, [&](float p) { prog.push_back(p); });
    auto f = gguf::File::open(path("tiny-f32.gguf"));
    check_file(*f, s, GgmlType::F32, 0);

    // Progress rises to 1.
    ASSERT_FALSE(prog.empty());
    EXPECT_TRUE(std::is_sorted(prog.begin(), prog.end()));
    EXPECT_FLOAT_EQ(prog.back(), 1.f);

    // Statistics: token_embd ~ N(0,1), matrices sd 1/sqrt(fan_in), norms ~ 1.
    double m, sd;
    mean_sd(dequant(*f->tensor("token_embd.weight")), &m, &sd);
    EXPECT_NEAR(m, 0.0, 0.02);
    EXPECT_NEAR(sd, 1.0, 0.03);
    mean_sd(dequant(*f->tensor("blk.1.attn_q.weight")), &m, &sd);
    EXPECT_NEAR(sd, 1.0 / 16, 0.003);  // fan_in 256
    mean_sd(dequant(*f->tensor("blk.0.ffn_down.weight")), &m, &sd);
    EXPECT_NEAR(sd, 1.0 / std::sqrt(768.0), 0.002);
    const auto norm = dequant(*f->tensor("blk.0.attn_norm.weight"));
    for (float v : norm) EXPECT_NEAR(v, 1.f, 0.1f);
    // Different tensors get different values.
    const auto q0 = dequant(*f->tensor("blk.0.attn_q.weight"));
    const auto q1 = dequant(*f->tensor("blk.1.attn_q.weight"));
    EXPECT_NE(q0, q1);
}

TEST_F(SynthTest, TinyQ4_0MatchesTheF32WeightsAndIsDeterministic) {
    const SynthShape& s = find_synth_shape("tiny");
    write_synth_model(s, GgmlType::F32, path("a-f32.gguf"), 7);
    write_synth_model(s, GgmlType::Q4_0, path("a-q4.gguf"), 7);
    write_synth_model(s, GgmlType::Q4_0, path("b-q4.gguf"), 7);
    write_synth_model(s, GgmlType::Q4_0, path("c-q4.gguf"), 8);
    auto f32 = gguf::File::open(path("a-f32.gguf"));
    auto q4 = gguf::File::open(path("a-q4.gguf"));
    check_file(*q4, s, GgmlType::Q4_0, 2);
    EXPECT_EQ(q4->get_int("general.quantization_version"), 2);

    // Same seed: the Q4_0 weights are the F32 ones, quantized (Q4_0 NMSE ~ 1%).
    for (const char* name : {"token_embd.weight", "blk.0.attn_v.weight", "blk.1.ffn_down.weight", "output.weight"}) {
        const auto a = dequant(*f32->tensor(name)), b = dequant(*q4->tensor(name));
        double num = 0, den = 0;
        for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += a[i] * a[i];
        EXPECT_LT(num / den, 0.02) << name;
        EXPECT_GT(num / den, 0.0) << name;  // it really was quantized
    }
    // Same seed, same bytes; another seed, other weights.
    const std::string a = test::read_file(path("a-q4.gguf"));
    EXPECT_EQ(a, test::read_file(path("b-q4.gguf")));
    const std::string c = test::read_file(path("c-q4.gguf"));
    ASSERT_EQ(a.size(), c.size());
    EXPECT_NE(a, c);
    // No temp file left behind.
    EXPECT_FALSE(fs::exists(path("a-q4.gguf.tmp")));
}

TEST_F(SynthTest, Qwen3TinyHasQkNormAndQwen2StyleBias) {
    const SynthShape& s3 = find_synth_shape("qwen3-tiny");
    EXPECT_TRUE(s3.qk_norm);
    write_synth_model(s3, GgmlType::F16, path("q3.gguf"), 1);
    auto f = gguf::File::open(path("q3.gguf"));
    check_file(*f, s3, GgmlType::F16, 1);
    EXPECT_FLOAT_EQ(float(f->get_float("qwen3.attention.layer_norm_rms_epsilon")), 1e-6f);

    SynthShape s2 = s3;  // a tiny qwen2: biases on q, k, v
    s2.name = "qwen2-tiny";
    s2.arch = "qwen2";
    s2.qk_norm = false;
    s2.qkv_bias = true;
    write_synth_model(s2, GgmlType::BF16, path("q2.gguf"), 1);
    auto g = gguf::File::open(path("q2.gguf"));
    check_file(*g, s2, GgmlType::BF16, 32);
    double m, sd;
    mean_sd(dequant(*g->tensor("blk.0.attn_k.bias")), &m, &sd);
    EXPECT_NEAR(sd, 0.02, 0.01);
}

TEST_F(SynthTest, Q4_K_MRecipeOnATinyFile) {
    const SynthShape& s = find_synth_shape("tiny");
    write_synth_model(s, parse_synth_format("q4_k_m"), path("km.gguf"), 3);
    auto f = gguf::File::open(path("km.gguf"));
    EXPECT_EQ(f->get_int("general.file_type"), 15);
    EXPECT_EQ(f->tensor("output.weight")->type, GgmlType::Q6_K);
    EXPECT_EQ(f->tensor("token_embd.weight")->type, GgmlType::Q4_K);
    EXPECT_EQ(f->tensor("blk.0.attn_q.weight")->type, GgmlType::Q4_K);
    // Two layers: use_more_bits(0, 2) is false, use_more_bits(1, 2) is true (i >= 7n/8).
    EXPECT_EQ(f->tensor("blk.0.attn_v.weight")->type, GgmlType::Q4_K);
    EXPECT_EQ(f->tensor("blk.1.attn_v.weight")->type, GgmlType::Q6_K);
    EXPECT_EQ(f->tensor("blk.1.ffn_down.weight")->type, GgmlType::Q6_K);
    EXPECT_EQ(f->tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
}

// The streaming Writer path synth relies on (add_tensor_lazy, an additive
// gguf::Writer API): same bytes as eager tensors, via write() and to_bytes().
TEST_F(SynthTest, LazyTensorsSerialiseLikeEagerOnes) {
    std::vector<float> a(64), b(96);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.5f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i);
    auto fill_from = [](const std::vector<float>& v) {
        return [&v](uint8_t* dst) { std::memcpy(dst, v.data(), v.size() * sizeof(float)); };
    };
    gguf::Writer eager, lazy;
    for (gguf::Writer* w : {&eager, &lazy}) {
        w->set_string("general.architecture", "llama");
        w->set_alignment(64);
    }
    eager.add_tensor("a", GgmlType::F32, {64}, a.data(), 256);
    eager.add_tensor("b", GgmlType::F32, {32, 3}, b.data(), 384);
    lazy.add_tensor_lazy("a", GgmlType::F32, {64}, 256, fill_from(a));
    lazy.add_tensor("b", GgmlType::F32, {32, 3}, b.data(), 384);
    const auto want = eager.to_bytes();
    EXPECT_EQ(lazy.to_bytes(), want);
    lazy.write(path("lazy.gguf"));
    const std::string got = test::read_file(path("lazy.gguf"));
    EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), want);
    auto f = gguf::File::open(path("lazy.gguf"));
    ASSERT_NE(f->tensor("a"), nullptr);
    EXPECT_EQ(std::memcmp(f->tensor("a")->data, a.data(), 256), 0);

    // Wrong byte count is refused up front; a throwing fill leaves no file behind.
    EXPECT_THROW(lazy.add_tensor_lazy("c", GgmlType::F32, {64}, 100, fill_from(a)), Error);
    gguf::Writer bad;
    bad.add_tensor_lazy("x", GgmlType::F32, {8}, 32, [](uint8_t*) { fail("fill failed"); });
    EXPECT_THROW(bad.write(path("bad.gguf")), Error);
    EXPECT_FALSE(fs::exists(path("bad.gguf")));
    EXPECT_FALSE(fs::exists(path("bad.gguf.tmp")));
}

TEST(Synth, TypeRuleMixAndFallbacks) {
    const SynthFormat km(GgmlType::Q4_K, true);
    int v6 = 0, d6 = 0;
    for (int l = 0; l < 32; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        v6 += synth_tensor_type(km, b + "attn_v.weight", l, 32, 4096) == GgmlType::Q6_K;
        d6 += synth_tensor_type(km, b + "ffn_down.weight", l, 32, 11008) == GgmlType::Q6_K;
        EXPECT_EQ(synth_tensor_type(km, b + "attn_q.weight", l, 32, 4096), GgmlType::Q4_K);
    }
    EXPECT_EQ(v6, 16);  // half of 32 layers
    EXPECT_EQ(d6, 16);
    // Layer 0..3 (first eighth) and 28..31 (last eighth) always get more bits.
    EXPECT_EQ(synth_tensor_type(km, "blk.0.attn_v.weight", 0, 32, 4096), GgmlType::Q6_K);
    EXPECT_EQ(synth_tensor_type(km, "blk.31.attn_v.weight", 31, 32, 4096), GgmlType::Q6_K);
    EXPECT_EQ(synth_tensor_type(km, "blk.4.attn_v.weight", 4, 32, 4096), GgmlType::Q4_K);
    EXPECT_EQ(synth_tensor_type(km, "output.weight", -1, 32, 4096), GgmlType::Q6_K);
    EXPECT_EQ(synth_tensor_type(km, "token_embd.weight", -1, 32, 4096), GgmlType::Q4_K);
    // Rows that are not a multiple of 256 (but are of 32): llama.cpp's fallbacks.
    EXPECT_EQ(synth_tensor_type(GgmlType::Q4_K, "x", 0, 1, 96), GgmlType::Q5_0);
    EXPECT_EQ(synth_tensor_type(GgmlType::Q5_K, "x", 0, 1, 96), GgmlType::Q5_1);
    EXPECT_EQ(synth_tensor_type(GgmlType::Q6_K, "x", 0, 1, 96), GgmlType::Q8_0);
    EXPECT_EQ(synth_tensor_type(km, "output.weight", -1, 1, 96), GgmlType::Q8_0);
    EXPECT_EQ(synth_tensor_type(GgmlType::Q4_0, "x", 0, 1, 100), GgmlType::F16);
    EXPECT_EQ(synth_tensor_type(GgmlType::Q4_0, "x", 0, 1, 96), GgmlType::Q4_0);
}

TEST(Synth, ShapesAndFormats) {
    const auto& l2 = find_synth_shape("llama2-7b");
    EXPECT_EQ(l2.n_ff, 11008);
    EXPECT_EQ(l2.n_head_kv, 32);
    const auto& l3 = find_synth_shape("llama3-8b");
    EXPECT_EQ(l3.n_vocab, 128256);
    EXPECT_EQ(l3.n_head_kv, 8);
    EXPECT_FLOAT_EQ(l3.rope_base, 500000.f);
    const auto& q2 = find_synth_shape("qwen2-7b");
    EXPECT_EQ(q2.arch, "qwen2");
    EXPECT_TRUE(q2.qkv_bias);
    EXPECT_EQ(q2.n_ff % 256, 0);
    EXPECT_EQ(find_synth_shape("1b").n_embd, 2048);
    EXPECT_THROW(find_synth_shape("nope"), Error);

    EXPECT_EQ(parse_synth_format("q8_0").type, GgmlType::Q8_0);
    EXPECT_EQ(parse_synth_format("BF16").type, GgmlType::BF16);
    EXPECT_TRUE(parse_synth_format("Q5_K_M").mix_m);
    EXPECT_EQ(synth_format_name(parse_synth_format("q4_k_m")), "Q4_K_M");
    EXPECT_EQ(synth_format_name(GgmlType::Q6_K), "Q6_K");
    EXPECT_THROW(parse_synth_format("Q3_K"), Error);
    EXPECT_THROW(write_synth_model(find_synth_shape("tiny"), GgmlType::Q2_K, "/nonexistent/x.gguf", 1), Error);
}

TEST(Synth, VocabularyLayout) {
    for (int n : {512, 32000, 152064}) {
        const SynthVocab v = synth_vocab(n);
        ASSERT_EQ(v.tokens.size(), size_t(n));
        ASSERT_EQ(v.scores.size(), size_t(n));
        ASSERT_EQ(v.types.size(), size_t(n));
        EXPECT_EQ(v.tokens[0], "<unk>");
        EXPECT_EQ(v.types[0], 2);
        EXPECT_EQ(v.types[1], 3);
        EXPECT_EQ(v.types[2], 3);
        for (int b = 0; b < 256; ++b) {
            char want[8];
            std::snprintf(want, sizeof want, "<0x%02X>", b);
            EXPECT_EQ(v.tokens[size_t(3 + b)], want);
            EXPECT_EQ(v.types[size_t(3 + b)], 6);
        }
        EXPECT_EQ(v.tokens[259], "\xE2\x96\x81");
        for (size_t i = 259; i < v.tokens.size(); ++i) {
            EXPECT_EQ(v.types[i], 1);
            if (i > 259) {
                EXPECT_LT(v.scores[i], v.scores[i - 1]) << i;
            }
        }
        std::unordered_set<std::string> uniq(v.tokens.begin(), v.tokens.end());
        EXPECT_EQ(uniq.size(), size_t(n));
        // Printable ASCII and some ▁-words are in.
        EXPECT_TRUE(uniq.count("a") && uniq.count("~") && uniq.count("\xE2\x96\x81the"));
    }
    EXPECT_THROW(synth_vocab(100), Error);
}

}  // namespace
}  // namespace vega
