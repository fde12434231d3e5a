// Corrupted inputs: truncation at every byte offset and seeded random byte flips.
// The only acceptable outcomes are a successful parse with in-bounds tensors or a
// vega::Error — never another exception, a crash or a sanitizer report.
#include <gtest/gtest.h>

#include <random>

#include "gguf_test_util.h"
#include "test_data.h"

namespace vega::gguf {
namespace {

using testutil::Bytes;

// A small file with every kind of metadata and three tensors; the last tensor is
// 64 bytes so the file ends exactly at the end of its data (no trailing padding
// that a truncation could remove without harm).
std::vector<uint8_t> small_file(uint32_t version) {
    Writer w;
    w.set_version(version);
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_bool("flag", true);
    w.set_u64("big", 123456789012345ull);
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    w.set_f32_array("tokenizer.ggml.scores", {0.f, -1.f, -2.f, -3.f});
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
    Value nested;
    nested.type = ValueType::ARRAY;
    nested.elem_type = ValueType::ARRAY;
    Value inner;
    inner.type = ValueType::ARRAY;
    inner.elem_type = ValueType::INT16;
    inner.arr.resize(3);
    for (auto& e : inner.arr) e.type = ValueType::INT16;
    nested.arr = {inner, inner};
    w.set_value("nested", nested);
    std::vector<uint8_t> d(256);
    for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 7);
    w.add_tensor("a", GgmlType::F32, {4, 3}, d.data(), 48);
    w.add_tensor("b", GgmlType::Q8_0, {32}, d.data(), 34);
    w.add_tensor("c", GgmlType::F16, {16, 2}, d.data(), 64);
    return w.to_bytes();
}

// A hand-built v1 file (32-bit counts and dims): one key, one F32 tensor [8].
std::vector<uint8_t> small_v1_file() {
    Bytes b(1);
    b.header(1, 1).kv_str("general.architecture", "llama").tensor("w", {8}, uint32_t(GgmlType::F32), 0).pad(32);
    for (int i = 0; i < 8; ++i) b.put<float>(float(i));
    return b.b;
}

// Parses; returns true on success (after checking tensors lie inside the buffer),
// false on vega::Error. Any other exception fails the test.
bool parse_ok(const std::vector<uint8_t>& buf, size_t size) {
    try {
        auto f = File::parse(buf.data(), size, "fuzz.gguf");
        for (const auto& kv : f->metadata()) (void)kv.value.to_string();
        for (const auto& t : f->tensors()) {
            EXPECT_GE(t.data, buf.data() + f->data_offset());
            EXPECT_LE(t.data + t.n_bytes, buf.data() + size);
            EXPECT_GE(t.n_elements(), 0);
        }
        return true;
    } catch (const vega::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("fuzz.gguf: "), std::string::npos) << msg;
        EXPECT_NE(msg.find(" at byte offset "), std::string::npos) << msg;
        return false;
    }
}

TEST(GgufRobustness, SmallFilesAreValid) {
    for (uint32_t v : {2u, 3u}) {
        const auto bytes = small_file(v);
        auto f = testutil::parse(bytes);
        ASSERT_EQ(f->tensors().size(), 3u);
        const TensorInfo* c = f->tensor("c");
        EXPECT_EQ(f->data_offset() + c->offset + c->n_bytes, bytes.size());  // no trailing padding
    }
    const auto v1 = small_v1_file();
    auto f = testutil::parse(v1);
    EXPECT_EQ(f->version(), 1u);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->tensor("w")->ne[0], 8);
    EXPECT_EQ(reinterpret_cast<const float*>(f->tensor("w")->data)[7], 7.f);
}

TEST(GgufRobustness, TruncationAtEveryByteFails) {
    for (const auto& bytes : {small_file(3), small_file(2), small_v1_file()}) {
        for (size_t n = 0; n < bytes.size(); ++n) {
            // Copy the prefix so reads past it would be caught by ASan.
            const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + long(n));
            try {
                File::parse(prefix.data(), prefix.size(), "cut.gguf");
                ADD_FAILURE() << "truncation at byte " << n << " of " << bytes.size() << " parsed";
            } catch (const vega::Error& e) {
                const std::string msg = e.what();
                ASSERT_NE(msg.find("cut.gguf: "), std::string::npos) << msg;
                ASSERT_NE(msg.find(" at byte offset "), std::string::npos) << msg;
            }
        }
    }
}

TEST(GgufRobustness, TruncatedStories260K) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string raw = test::read_file(test::data_file("models/stories260K.gguf"));
    ASSERT_GT(raw.size(), 14144u);
    const std::vector<uint8_t> bytes(raw.begin(), raw.end());
    // Every 3rd byte of the header, then points in the data section.
    for (size_t n = 0; n < raw.size(); n += (n < 14200 ? 3 : 65537)) EXPECT_FALSE(parse_ok(bytes, n)) << n;
    EXPECT_FALSE(parse_ok(bytes, raw.size() - 1));
    EXPECT_TRUE(parse_ok(bytes, raw.size()));
}

// Flips 1-4 random bytes in [0, limit) to random values, parses, restores.
void random_flips(std::vector<uint8_t>& buf, size_t limit, int iterations, uint32_t seed, int* n_ok) {
    std::mt19937 rng(seed);
    for (int it = 0; it < iterations; ++it) {
        const int n_flips = 1 + int(rng() % 4);
        std::vector<std::pair<size_t, uint8_t>> saved;
        for (int k = 0; k < n_flips; ++k) {
            const size_t pos = rng() % limit;
            saved.push_back({pos, buf[pos]});
            // Half the time a single bit, otherwise a whole random byte (0xFF often: huge counts).
            const uint32_t r = rng();
            buf[pos] = (r & 1) ? uint8_t(buf[pos] ^ (1u << ((r >> 1) % 8))) : ((r & 2) ? 0xFF : uint8_t(r >> 8));
        }
        *n_ok += parse_ok(buf, buf.size()) ? 1 : 0;
        for (auto it2 = saved.rbegin(); it2 != saved.rend(); ++it2) buf[it2->first] = it2->second;
        if (::testing::Test::HasFailure()) {
            ADD_FAILURE() << "seed " << seed << " iteration " << it;
            return;
        }
    }
}

TEST(GgufRobustness, RandomFlipsInSmallFiles) {
    for (uint32_t v : {2u, 3u}) {
        auto bytes = small_file(v);
        int ok = 0;
        random_flips(bytes, bytes.size(), 3000, 1234 + v, &ok);
        // Flips in tensor data parse fine; flips in the header mostly do not.
        EXPECT_GT(ok, 0);
        EXPECT_LT(ok, 3000);
    }
    auto v1 = small_v1_file();
    int ok = 0;
    random_flips(v1, v1.size(), 2000, 99, &ok);
    EXPECT_LT(ok, 2000);
}

TEST(GgufRobustness, RandomFlipsInStories260KHeader) {
    VEGA_REQUIRE_TEST_DATA();
    for (const char* name : {"models/stories260K.gguf", "models/stories260K-v1.gguf"}) {
        const std::string raw = test::read_file(test::data_file(name));
        std::vector<uint8_t> bytes(raw.begin(), raw.end());
        auto f = File::parse(bytes.data(), bytes.size());
        const size_t header = f->data_offset();
        int ok = 0;
        random_flips(bytes, header, 1500, 4321, &ok);
        EXPECT_GT(ok, 0);  // flips inside token strings are harmless
        EXPECT_LT(ok, 1500);
    }
}

}  // namespace
}  // namespace vega::gguf
