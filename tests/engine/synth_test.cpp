// Synthetic model writer: the files reopen with gguf::File and carry the
// llama.cpp metadata, tensor names/shapes/types and tokenizer arrays the shape
// and format ask for; weights have the documented statistics; the _M recipe
// and K-quant fallbacks follow the documented rule.
#include "model/synth.h"

#include <gtest/gtest.h>

#include <algorithm>
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
#include "run_vega.h"
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

// Expected tensors of a shape (llama-style, or qwen3moe's experts): name -> GGUF ne.
std::map<std::string, std::vector<int64_t>> expected_tensors(const SynthShape& s) {
    const int64_t hd = s.head_size(), q = hd * s.n_head, kv = hd * s.n_head_kv;
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
        if (s.n_expert > 0) {  // llama.cpp's LLM_ARCH_QWEN3MOE layout
            m[b + "ffn_gate_inp.weight"] = {s.n_embd, s.n_expert};
            m[b + "ffn_gate_exps.weight"] = {s.n_embd, s.n_ff_exp, s.n_expert};
            m[b + "ffn_up_exps.weight"] = {s.n_embd, s.n_ff_exp, s.n_expert};
            m[b + "ffn_down_exps.weight"] = {s.n_ff_exp, s.n_embd, s.n_expert};
        } else {
            m[b + "ffn_gate.weight"] = {s.n_embd, s.n_ff};
            m[b + "ffn_up.weight"] = {s.n_embd, s.n_ff};
            m[b + "ffn_down.weight"] = {s.n_ff, s.n_embd};
        }
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
    EXPECT_EQ(f.get_int(a + "rope.dimension_count"), s.head_size());
    if (s.head_dim > 0) {
        EXPECT_EQ(f.get_int(a + "attention.key_length"), s.head_dim);
        EXPECT_EQ(f.get_int(a + "attention.value_length"), s.head_dim);
    } else {
        EXPECT_EQ(f.find(a + "attention.key_length"), nullptr);
    }
    if (s.n_expert > 0) {
        EXPECT_EQ(f.get_int(a + "expert_count"), s.n_expert);
        EXPECT_EQ(f.get_int(a + "expert_used_count"), s.n_expert_used);
        EXPECT_EQ(f.get_int(a + "expert_feed_forward_length"), s.n_ff_exp);
    } else {
        EXPECT_EQ(f.find(a + "expert_count"), nullptr);
    }

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
        const bool router = name.find("ffn_gate_inp") != std::string::npos;  // F32 in every format
        const GgmlType expect = ne.size() == 1 || router ? GgmlType::F32 : matrix_type;
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

// The types after the first eleven: every matrix in the type (the tiny shape's rows are
// multiples of 256), the weights the F32 ones quantized (each format's error, not ~1), and
// the file runs on the CPU.
TEST_F(SynthTest, LowBitTypesQuantizeTheF32WeightsAndRun) {
    const SynthShape& s = find_synth_shape("tiny");
    write_synth_model(s, GgmlType::F32, path("f32.gguf"), 7);
    auto f32 = gguf::File::open(path("f32.gguf"));
    const std::pair<GgmlType, double> cases[] = {{GgmlType::Q2_K, 0.15},
                                                 {GgmlType::Q3_K, 0.04},
                                                 {GgmlType::IQ4_NL, 0.01},
                                                 {GgmlType::IQ4_XS, 0.01},
                                                 {GgmlType::MXFP4, 0.02}};
    for (const auto& [t, bound] : cases) {
        const std::string name = type_traits(t).name, file = path(name + ".gguf");
        write_synth_model(s, t, file, 7);
        auto q = gguf::File::open(file);
        EXPECT_EQ(q->tensor("blk.0.ffn_up.weight")->type, t) << name;
        for (const char* w : {"token_embd.weight", "blk.0.attn_v.weight", "blk.1.ffn_down.weight", "output.weight"}) {
            const auto a = dequant(*f32->tensor(w)), b = dequant(*q->tensor(w));
            double num = 0, den = 0;
            for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += a[i] * a[i];
            EXPECT_LT(num / den, bound) << name << " " << w;
            EXPECT_GT(num / den, 0.0) << name << " " << w;
        }
        const test::CmdResult r = test::run_vega("run -q -m " + test::quote(file) + " -p the -n 4 --temp 0 --device cpu");
        EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    }
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
    EXPECT_EQ(parse_synth_format("iq4_xs").type, GgmlType::IQ4_XS);
    EXPECT_THROW(parse_synth_format("IQ2_XS"), Error);
    EXPECT_THROW(write_synth_model(find_synth_shape("tiny"), GgmlType::Q4_0, "/nonexistent/x.gguf", 1), Error);
}

// ---- qwen3moe --------------------------------------------------------------------

// The standard deviation of one expert's slice of a 3-D tensor.
double expert_sd(const gguf::TensorInfo& t, int64_t expert) {
    const auto all = dequant(t);
    const size_t n = size_t(t.ne[0] * t.ne[1]);
    std::vector<float> slice(all.begin() + long(n * size_t(expert)), all.begin() + long(n * size_t(expert + 1)));
    double m, sd;
    mean_sd(slice, &m, &sd);
    return sd;
}

TEST_F(SynthTest, Qwen3MoeTinyF32HasExpertTensorsAndStatistics) {
    const SynthShape& s = find_synth_shape("qwen3moe-tiny");
    EXPECT_EQ(s.arch, "qwen3moe");
    EXPECT_EQ(s.n_embd, 256);
    EXPECT_EQ(s.n_layer, 2);
    EXPECT_EQ(s.n_head, 4);
    EXPECT_EQ(s.n_head_kv, 2);
    EXPECT_EQ(s.head_size(), 64);
    EXPECT_EQ(s.n_expert, 8);
    EXPECT_EQ(s.n_expert_used, 2);
    EXPECT_EQ(s.n_ff_exp, 128);
    EXPECT_TRUE(s.qk_norm);
    EXPECT_TRUE(s.moe());
    write_synth_model(s, GgmlType::F32, path("moe-f32.gguf"), 5);
    auto f = gguf::File::open(path("moe-f32.gguf"));
    check_file(*f, s, GgmlType::F32, 0);
    EXPECT_FLOAT_EQ(float(f->get_float("qwen3moe.attention.layer_norm_rms_epsilon")), 1e-6f);
    EXPECT_EQ(f->tensor("blk.0.ffn_gate.weight"), nullptr);  // no dense FFN
    EXPECT_EQ(f->tensor("blk.0.ffn_down.weight"), nullptr);

    // The router is wide (N(0, 10/sqrt(n_embd))), the experts N(0, 1/sqrt(fan_in)),
    // every expert's slice alike, and different experts hold different weights.
    double m, sd;
    mean_sd(dequant(*f->tensor("blk.0.ffn_gate_inp.weight")), &m, &sd);
    EXPECT_NEAR(sd, 10.0 / 16, 0.03);
    for (int64_t e : {0, 7}) {
        EXPECT_NEAR(expert_sd(*f->tensor("blk.1.ffn_gate_exps.weight"), e), 1.0 / 16, 0.003) << e;
        EXPECT_NEAR(expert_sd(*f->tensor("blk.1.ffn_up_exps.weight"), e), 1.0 / 16, 0.003) << e;
        EXPECT_NEAR(expert_sd(*f->tensor("blk.1.ffn_down_exps.weight"), e), 1.0 / std::sqrt(128.0), 0.004) << e;
    }
    const auto down = dequant(*f->tensor("blk.0.ffn_down_exps.weight"));
    const size_t per_expert = 128 * 256;
    EXPECT_FALSE(std::equal(down.begin(), down.begin() + long(per_expert), down.begin() + long(per_expert)));
    EXPECT_NE(dequant(*f->tensor("blk.0.ffn_gate_exps.weight")), dequant(*f->tensor("blk.0.ffn_up_exps.weight")));
}

TEST_F(SynthTest, Qwen3MoeTinyQ4_0QuantizesTheExpertsRowByRow) {
    const SynthShape& s = find_synth_shape("qwen3moe-tiny");
    write_synth_model(s, GgmlType::F32, path("f32.gguf"), 9);
    write_synth_model(s, GgmlType::Q4_0, path("q4.gguf"), 9);
    write_synth_model(s, GgmlType::Q4_0, path("q4-again.gguf"), 9);
    auto f32 = gguf::File::open(path("f32.gguf"));
    auto q4 = gguf::File::open(path("q4.gguf"));
    check_file(*q4, s, GgmlType::Q4_0, 2);
    // 3-D tensors: (ne[1] * ne[2]) rows of ne[0], each quantized on its own.
    const gguf::TensorInfo* d = q4->tensor("blk.1.ffn_down_exps.weight");
    EXPECT_EQ(d->n_bytes, uint64_t(128 / 32 * 18) * 256 * 8);
    for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight"}) {
        const auto a = dequant(*f32->tensor(name)), b = dequant(*q4->tensor(name));
        ASSERT_EQ(a.size(), b.size());
        double num = 0, den = 0;
        for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += a[i] * a[i];
        EXPECT_LT(num / den, 0.02) << name;
        EXPECT_GT(num / den, 0.0) << name;
    }
    // The router is F32 in a Q4_0 file too, bit for bit the F32 file's.
    const gguf::TensorInfo* r = q4->tensor("blk.0.ffn_gate_inp.weight");
    EXPECT_EQ(r->type, GgmlType::F32);
    EXPECT_EQ(std::memcmp(r->data, f32->tensor("blk.0.ffn_gate_inp.weight")->data, r->n_bytes), 0);
    EXPECT_EQ(test::read_file(path("q4.gguf")), test::read_file(path("q4-again.gguf")));
}

// Q4_K_M on 8 experts: llama.cpp's Mixtral rules (n_expert == 8) and the fallbacks
// for expert rows of 128 (not a multiple of 256).
TEST_F(SynthTest, Qwen3MoeTinyQ4_K_MRecipe) {
    const SynthShape& s = find_synth_shape("qwen3moe-tiny");
    write_synth_model(s, parse_synth_format("Q4_K_M"), path("km.gguf"), 3);
    auto f = gguf::File::open(path("km.gguf"));
    EXPECT_EQ(f->get_int("general.file_type"), 15);
    EXPECT_EQ(f->tensor("output.weight")->type, GgmlType::Q6_K);
    EXPECT_EQ(f->tensor("token_embd.weight")->type, GgmlType::Q4_K);
    for (int l = 0; l < 2; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        EXPECT_EQ(f->tensor(b + "attn_q.weight")->type, GgmlType::Q4_K);
        EXPECT_EQ(f->tensor(b + "attn_k.weight")->type, GgmlType::Q8_0);       // n_expert == 8
        EXPECT_EQ(f->tensor(b + "attn_v.weight")->type, GgmlType::Q8_0);       // n_expert == 8
        EXPECT_EQ(f->tensor(b + "attn_output.weight")->type, GgmlType::Q5_K);  // n_expert == 8, Q4_K_M
        EXPECT_EQ(f->tensor(b + "ffn_gate_inp.weight")->type, GgmlType::F32);
        EXPECT_EQ(f->tensor(b + "ffn_gate_exps.weight")->type, GgmlType::Q4_K);
        EXPECT_EQ(f->tensor(b + "ffn_up_exps.weight")->type, GgmlType::Q4_K);
        EXPECT_EQ(f->tensor(b + "attn_q_norm.weight")->type, GgmlType::F32);
    }
    // ffn_down_exps rows are 128 long: Q4_K -> Q5_0 (layer 0), Q6_K -> Q8_0 (layer 1, use_more_bits).
    EXPECT_EQ(f->tensor("blk.0.ffn_down_exps.weight")->type, GgmlType::Q5_0);
    EXPECT_EQ(f->tensor("blk.1.ffn_down_exps.weight")->type, GgmlType::Q8_0);
}

// The recipe against llama-quantize itself: the shared moe/ reference was made by
// llama-quantize Q4_K_M (llama.cpp 2026-08) from a qwen3moe of qwen3moe-tiny's shape, so
// vega synth's Q4_K_M must give every tensor the same shape and type.
TEST_F(SynthTest, Qwen3MoeTinyQ4_K_MMatchesLlamaQuantize) {
    VEGA_REQUIRE_TEST_DATA();
    auto ref = gguf::File::open(test::data_file("moe/synth-qwen3moe-q4_k_m.gguf"));
    write_synth_model(find_synth_shape("qwen3moe-tiny"), parse_synth_format("Q4_K_M"), path("km.gguf"), 3);
    auto f = gguf::File::open(path("km.gguf"));
    ASSERT_EQ(f->tensors().size(), ref->tensors().size());
    for (const auto& r : ref->tensors()) {
        const gguf::TensorInfo* t = f->tensor(r.name);
        ASSERT_NE(t, nullptr) << r.name;
        EXPECT_EQ(t->n_dims, r.n_dims) << r.name;
        for (int d = 0; d < 4; ++d) EXPECT_EQ(t->ne[d], r.ne[d]) << r.name << " ne[" << d << "]";
        EXPECT_EQ(t->type, r.type) << r.name << ": " << type_traits(t->type).name << " vs llama-quantize's "
                                   << type_traits(r.type).name;
    }
    for (const char* k : {"general.file_type", "qwen3moe.embedding_length", "qwen3moe.block_count",
                          "qwen3moe.feed_forward_length", "qwen3moe.expert_feed_forward_length",
                          "qwen3moe.attention.head_count", "qwen3moe.attention.head_count_kv",
                          "qwen3moe.attention.key_length", "qwen3moe.attention.value_length",
                          "qwen3moe.expert_count", "qwen3moe.expert_used_count"})
        EXPECT_EQ(f->get_int(k), ref->get_int(k)) << k;
}

// head_dim != n_embd / n_head (as in the 30B shape, 32 x 128 from 2048) on a file small
// enough to write: q is 512 wide from n_embd 256.
TEST_F(SynthTest, ExplicitHeadDimWidensAttention) {
    SynthShape s = find_synth_shape("qwen3moe-tiny");
    s.name = "qwen3moe-wide-heads";
    s.head_dim = 128;
    write_synth_model(s, GgmlType::Q8_0, path("wide.gguf"), 2);
    auto f = gguf::File::open(path("wide.gguf"));
    check_file(*f, s, GgmlType::Q8_0, 7);
    EXPECT_EQ(f->tensor("blk.0.attn_q.weight")->ne[1], 512);
    EXPECT_EQ(f->tensor("blk.0.attn_k.weight")->ne[1], 256);
    EXPECT_EQ(f->tensor("blk.0.attn_output.weight")->ne[0], 512);
    EXPECT_EQ(f->tensor("blk.0.attn_q_norm.weight")->ne[0], 128);
    EXPECT_EQ(f->get_int("qwen3moe.attention.key_length"), 128);
}

// vega synth writes the MoE shapes; vega inspect sums their expert layout from the
// metadata and the tensor table (and prints nothing of the kind for a dense file).
TEST_F(SynthTest, CliSynthAndInspectShowTheExperts) {
    const std::string m = path("cli-moe.gguf");
    test::CmdResult r = test::run_vega("synth --shape qwen3moe-tiny --type Q4_0 -o " + test::quote(m));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = test::run_vega("inspect --no-tensors " + test::quote(m));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    uint64_t total = 0, experts = 0, embd = 0;
    for (const auto& t : synth_tensor_table(find_synth_shape("qwen3moe-tiny"), GgmlType::Q4_0)) {
        total += t.n_bytes;
        if (t.name.find("_exps") != std::string::npos) experts += t.n_bytes;
        if (t.name == "token_embd.weight") embd = t.n_bytes;
    }
    const double active = double(total - experts - embd) + double(experts) * 2 / 8;
    char want[256];
    std::snprintf(want, sizeof want,
                  "experts: 8 per layer, 2 used per token, expert FFN 128; expert weights %.1f KiB of %.1f MiB "
                  "(active per token ~ %.1f KiB: 2/8 of the expert weights, all other weights but token_embd)\n",
                  double(experts) / 1024, double(total) / (1024 * 1024), active / 1024);
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("qwen3moe.expert_count"), std::string::npos);

    const std::string d = path("cli-dense.gguf");
    ASSERT_EQ(test::run_vega("synth --shape qwen3-tiny --type Q4_0 -o " + test::quote(d)).exit_code, 0);
    r = test::run_vega("inspect --no-tensors " + test::quote(d));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("experts:"), std::string::npos) << r.out;

    r = test::run_vega("synth --help");
    EXPECT_NE(r.out.find("qwen3moe-30b-a3b"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("128 experts (8 used per token) of FFN 768"), std::string::npos) << r.out;
}

// The 30B shape without writing 17 GB: its tensor table and its metadata.
TEST(Synth, Qwen3Moe30bA3bTableMetadataAndQ4_K_M) {
    const SynthShape& s = find_synth_shape("qwen3moe-30b-a3b");
    EXPECT_EQ(s.arch, "qwen3moe");
    EXPECT_EQ(s.n_embd, 2048);
    EXPECT_EQ(s.n_layer, 48);
    EXPECT_EQ(s.n_head, 32);
    EXPECT_EQ(s.n_head_kv, 4);
    EXPECT_EQ(s.head_dim, 128);
    EXPECT_NE(s.head_dim * s.n_head, s.n_embd);
    EXPECT_EQ(s.n_expert, 128);
    EXPECT_EQ(s.n_expert_used, 8);
    EXPECT_EQ(s.n_ff_exp, 768);
    EXPECT_EQ(s.n_ff, 6144);
    EXPECT_EQ(s.n_vocab, 151936);
    EXPECT_FLOAT_EQ(s.rope_base, 1e6f);
    EXPECT_TRUE(s.qk_norm);
    EXPECT_FALSE(s.qkv_bias);

    // Q4_0: every name and shape; the expert tensors' sizes.
    const auto q4 = synth_tensor_table(s, GgmlType::Q4_0);
    const auto want = expected_tensors(s);
    ASSERT_EQ(q4.size(), want.size());
    EXPECT_EQ(q4.size(), size_t(3 + 48 * 12));
    uint64_t total = 0, experts = 0;
    for (const auto& t : q4) {
        ASSERT_TRUE(want.count(t.name)) << t.name;
        EXPECT_EQ(t.ne, want.at(t.name)) << t.name;
        const bool f32 = t.ne.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
        EXPECT_EQ(t.type, f32 ? GgmlType::F32 : GgmlType::Q4_0) << t.name;
        int64_t n = 1;
        for (int64_t d : t.ne) n *= d;
        EXPECT_EQ(t.n_bytes, t.type == GgmlType::F32 ? uint64_t(n) * 4 : uint64_t(n) / 32 * 18) << t.name;
        total += t.n_bytes;
        if (t.name.find("_exps") != std::string::npos) experts += t.n_bytes;
    }
    EXPECT_EQ(experts, uint64_t(48) * 3 * 2048 * 768 * 128 / 32 * 18);  // 16.3 GB
    EXPECT_GT(total, experts);
    EXPECT_LT(total - experts, uint64_t(1) << 30);  // attention, router, embeddings: under 1 GiB

    // Q4_K_M (128 experts: no Mixtral rules): ffn_down_exps like ffn_down, Q6_K on
    // the use_more_bits half of the layers; gate/up experts and attn_k/q/output Q4_K.
    int down6 = 0, v6 = 0;
    for (const auto& t : synth_tensor_table(s, parse_synth_format("Q4_K_M"))) {
        const std::string& n = t.name;
        const bool more = t.layer >= 0 && (t.layer < 6 || t.layer >= 42 || (t.layer - 6) % 3 == 2);
        if (n.find("ffn_down_exps") != std::string::npos) {
            EXPECT_EQ(t.type, more ? GgmlType::Q6_K : GgmlType::Q4_K) << n;
            down6 += t.type == GgmlType::Q6_K;
        } else if (n.find("attn_v.weight") != std::string::npos) {
            EXPECT_EQ(t.type, more ? GgmlType::Q6_K : GgmlType::Q4_K) << n;
            v6 += t.type == GgmlType::Q6_K;
        } else if (n.find("ffn_gate_exps") != std::string::npos || n.find("ffn_up_exps") != std::string::npos ||
                   n.find("attn_k.weight") != std::string::npos || n.find("attn_q.weight") != std::string::npos ||
                   n.find("attn_output.weight") != std::string::npos || n == "token_embd.weight") {
            EXPECT_EQ(t.type, GgmlType::Q4_K) << n;
        } else if (n == "output.weight") {
            EXPECT_EQ(t.type, GgmlType::Q6_K);
        } else {
            EXPECT_EQ(t.type, GgmlType::F32) << n;  // norms and the router
        }
    }
    EXPECT_EQ(down6, 24);
    EXPECT_EQ(v6, 24);

    // The metadata the file would carry (header only).
    gguf::Writer w;
    write_synth_metadata(w, s, parse_synth_format("Q4_K_M"));
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto f = gguf::File::parse(bytes.data(), bytes.size());
    EXPECT_EQ(f->get_string("general.architecture"), "qwen3moe");
    EXPECT_EQ(f->get_int("general.file_type"), 15);
    EXPECT_EQ(f->get_int("qwen3moe.embedding_length"), 2048);
    EXPECT_EQ(f->get_int("qwen3moe.block_count"), 48);
    EXPECT_EQ(f->get_int("qwen3moe.feed_forward_length"), 6144);
    EXPECT_EQ(f->get_int("qwen3moe.attention.head_count"), 32);
    EXPECT_EQ(f->get_int("qwen3moe.attention.head_count_kv"), 4);
    EXPECT_EQ(f->get_int("qwen3moe.attention.key_length"), 128);
    EXPECT_EQ(f->get_int("qwen3moe.attention.value_length"), 128);
    EXPECT_EQ(f->get_int("qwen3moe.rope.dimension_count"), 128);
    EXPECT_FLOAT_EQ(float(f->get_float("qwen3moe.rope.freq_base")), 1e6f);
    EXPECT_FLOAT_EQ(float(f->get_float("qwen3moe.attention.layer_norm_rms_epsilon")), 1e-6f);
    EXPECT_EQ(f->get_int("qwen3moe.context_length"), s.n_ctx);
    EXPECT_EQ(f->get_int("qwen3moe.expert_count"), 128);
    EXPECT_EQ(f->get_int("qwen3moe.expert_used_count"), 8);
    EXPECT_EQ(f->get_int("qwen3moe.expert_feed_forward_length"), 768);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), size_t(151936));
    EXPECT_TRUE(f->tensors().empty());
}

TEST(Synth, ExpertShapesAreChecked) {
    SynthShape moe = find_synth_shape("qwen3moe-tiny");
    moe.n_expert_used = 9;  // more than the 8 experts
    EXPECT_THROW(synth_tensor_table(moe, GgmlType::F16), Error);
    moe.n_expert_used = 2;
    moe.n_ff_exp = 0;
    EXPECT_THROW(synth_tensor_table(moe, GgmlType::F16), Error);
    moe = find_synth_shape("qwen3moe-tiny");
    moe.n_expert = 0;
    moe.n_expert_used = 0;
    moe.n_ff_exp = 0;
    EXPECT_THROW(synth_tensor_table(moe, GgmlType::F16), Error);  // qwen3moe without experts
    SynthShape dense = find_synth_shape("qwen3-tiny");
    dense.n_expert = 8;
    dense.n_expert_used = 2;
    dense.n_ff_exp = 128;
    EXPECT_THROW(synth_tensor_table(dense, GgmlType::F16), Error);  // experts on a dense arch
    dense = find_synth_shape("qwen3-tiny");
    dense.head_dim = 33;
    EXPECT_THROW(synth_tensor_table(dense, GgmlType::F16), Error);  // odd head size
    // The dense shapes keep their layout: no router, no key_length.
    for (const auto& t : synth_tensor_table(find_synth_shape("qwen3-tiny"), GgmlType::F16))
        EXPECT_EQ(t.name.find("_exps"), std::string::npos) << t.name;
}

TEST(Synth, ExpertTypeRule) {
    const SynthFormat km(GgmlType::Q4_K, true), k5m(GgmlType::Q5_K, true);
    int d6 = 0;
    for (int l = 0; l < 48; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        const GgmlType down = synth_tensor_type(km, b + "ffn_down_exps.weight", l, 48, 768, 128);
        EXPECT_EQ(down, synth_tensor_type(km, b + "ffn_down.weight", l, 48, 768, 128)) << l;
        EXPECT_EQ(synth_tensor_type(k5m, b + "ffn_down_exps.weight", l, 48, 768, 128),
                  down == GgmlType::Q6_K ? GgmlType::Q6_K : GgmlType::Q5_K) << l;
        d6 += down == GgmlType::Q6_K;
        EXPECT_EQ(synth_tensor_type(km, b + "ffn_gate_exps.weight", l, 48, 2048, 128), GgmlType::Q4_K);
        EXPECT_EQ(synth_tensor_type(km, b + "ffn_up_exps.weight", l, 48, 2048, 128), GgmlType::Q4_K);
    }
    EXPECT_EQ(d6, 24);
    // llama.cpp's 8-expert (Mixtral) rules, and only there.
    EXPECT_EQ(synth_tensor_type(km, "blk.4.attn_v.weight", 4, 32, 4096, 8), GgmlType::Q8_0);
    EXPECT_EQ(synth_tensor_type(km, "blk.4.attn_k.weight", 4, 32, 4096, 8), GgmlType::Q8_0);
    EXPECT_EQ(synth_tensor_type(km, "blk.4.attn_output.weight", 4, 32, 4096, 8), GgmlType::Q5_K);
    EXPECT_EQ(synth_tensor_type(k5m, "blk.4.attn_output.weight", 4, 32, 4096, 8), GgmlType::Q5_K);
    EXPECT_EQ(synth_tensor_type(km, "blk.4.attn_k.weight", 4, 32, 4096, 128), GgmlType::Q4_K);
    EXPECT_EQ(synth_tensor_type(km, "blk.4.attn_v.weight", 4, 32, 4096, 128), GgmlType::Q4_K);
    EXPECT_EQ(synth_tensor_type(km, "blk.4.attn_output.weight", 4, 32, 4096, 128), GgmlType::Q4_K);
    // Plain types are the same everywhere (no recipe), experts or not.
    EXPECT_EQ(synth_tensor_type(GgmlType::Q4_0, "blk.4.attn_k.weight", 4, 32, 4096, 8), GgmlType::Q4_0);
    EXPECT_EQ(synth_tensor_type(GgmlType::Q4_0, "blk.0.ffn_down_exps.weight", 0, 32, 768, 128), GgmlType::Q4_0);
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
