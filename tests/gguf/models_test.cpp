// Real GGUF files from $VEGA_TEST_DATA: every model and vocabulary opens, the v1
// and v3 stories260K files agree, and tensor data points into the mapping.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gguf_test_util.h"
#include "test_data.h"

namespace vega::gguf {
namespace {

using testutil::same_value;

std::vector<std::string> gguf_files_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".gguf") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

TEST(GgufModels, EveryTestFileOpens) {
    VEGA_REQUIRE_TEST_DATA();
    size_t n_files = 0;
    for (const char* sub : {"models", "vocab"}) {
        const std::string dir = test::data_file(sub);
        for (const auto& path : gguf_files_in(dir)) {
            SCOPED_TRACE(path);
            std::unique_ptr<File> f;
            ASSERT_NO_THROW(f = File::open(path));
            ++n_files;
            EXPECT_EQ(f->file_size(), std::filesystem::file_size(path));
            if (path.ends_with("-v1.gguf"))
                EXPECT_EQ(f->version(), 1u);
            else
                EXPECT_GE(f->version(), 2u);
            EXPECT_EQ(f->data_offset() % f->alignment(), 0u);
            EXPECT_FALSE(f->get_string("general.architecture").empty());
            EXPECT_FALSE(f->get_string_array("tokenizer.ggml.tokens").empty());
            EXPECT_FALSE(f->get_string("tokenizer.ggml.model").empty());
            for (const auto& t : f->tensors()) {
                ASSERT_NE(t.data, nullptr) << t.name;
                EXPECT_GE(t.n_elements(), 1) << t.name;
                EXPECT_LE(f->data_offset() + t.offset + t.n_bytes, f->file_size()) << t.name;
                EXPECT_NE(type_traits(t.type).name, nullptr) << t.name;
            }
            if (sub == std::string("models")) {
                EXPECT_FALSE(f->tensors().empty());
            }
        }
    }
    EXPECT_GE(n_files, 25u);  // 18 models + 7 vocabularies at the time of writing
}

TEST(GgufModels, Stories260KV1AndV3Agree) {
    VEGA_REQUIRE_TEST_DATA();
    auto v1 = File::open(test::data_file("models/stories260K-v1.gguf"));
    auto v3 = File::open(test::data_file("models/stories260K.gguf"));
    EXPECT_EQ(v1->version(), 1u);
    EXPECT_EQ(v3->version(), 3u);

    ASSERT_EQ(v1->metadata().size(), v3->metadata().size());
    for (size_t i = 0; i < v1->metadata().size(); ++i) {
        EXPECT_EQ(v1->metadata()[i].key, v3->metadata()[i].key);
        EXPECT_TRUE(same_value(v1->metadata()[i].value, v3->metadata()[i].value)) << v1->metadata()[i].key;
    }
    ASSERT_EQ(v1->tensors().size(), v3->tensors().size());
    for (size_t i = 0; i < v1->tensors().size(); ++i) {
        const TensorInfo& a = v1->tensors()[i];
        const TensorInfo& b = v3->tensors()[i];
        SCOPED_TRACE(a.name);
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.type, b.type);
        EXPECT_EQ(a.n_dims, b.n_dims);
        for (int d = 0; d < 4; ++d) EXPECT_EQ(a.ne[d], b.ne[d]);
        EXPECT_EQ(a.offset, b.offset);
        ASSERT_EQ(a.n_bytes, b.n_bytes);
        EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0);
    }
}

TEST(GgufModels, Stories260KLayoutAndMetadata) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string path = test::data_file("models/stories260K.gguf");
    auto f = File::open(path);
    // Facts from the test data README.
    EXPECT_EQ(f->data_offset(), 14144u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
    EXPECT_EQ(f->get_int("llama.block_count"), 5);
    EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
    EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
    EXPECT_EQ(f->get_int("llama.feed_forward_length"), 172);
    EXPECT_EQ(f->get_int("llama.context_length"), 512);
    EXPECT_FLOAT_EQ(float(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 512u);
    EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").size(), 512u);
    EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id"), 1);
    EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id"), 2);

    uint64_t total = 0;
    for (const auto& t : f->tensors()) {
        EXPECT_EQ(t.type, GgmlType::F32) << t.name;
        total += t.n_bytes;
    }
    EXPECT_EQ(total, 1171200u);  // "the 1,171,200 bytes of tensor data"
    const TensorInfo* emb = f->tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->ne[0], 64);
    EXPECT_EQ(emb->ne[1], 512);

    // Tensor data pointers are views of the file: compare with bytes read independently.
    const std::string raw = test::read_file(path);
    ASSERT_EQ(raw.size(), f->file_size());
    const uint8_t* first = nullptr;
    for (const auto& t : f->tensors()) {
        if (t.offset == 0) first = t.data;
        EXPECT_EQ(std::memcmp(t.data, raw.data() + 14144 + t.offset, t.n_bytes), 0) << t.name;
    }
    ASSERT_NE(first, nullptr);
    for (const auto& t : f->tensors()) EXPECT_EQ(t.data - first, ptrdiff_t(t.offset)) << t.name;
}

TEST(GgufModels, ParseOfABufferEqualsOpen) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string path = test::data_file("models/synth-llama-q4_k_m.gguf");
    const std::string raw = test::read_file(path);
    auto a = File::open(path);
    auto b = File::parse(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), "buf");
    EXPECT_EQ(b->path(), "buf");
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    for (size_t i = 0; i < a->tensors().size(); ++i) {
        EXPECT_EQ(a->tensors()[i].n_bytes, b->tensors()[i].n_bytes);
        EXPECT_EQ(std::memcmp(a->tensors()[i].data, b->tensors()[i].data, a->tensors()[i].n_bytes), 0);
        EXPECT_EQ(b->tensors()[i].data, reinterpret_cast<const uint8_t*>(raw.data()) + b->data_offset() + b->tensors()[i].offset);
    }
}

}  // namespace
}  // namespace vega::gguf
