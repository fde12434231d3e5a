// gguf::Writer round trips (every value type, nested arrays, v2 and v3, tensor
// data and alignment) and atomic file writing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <unistd.h>

#include "gguf_test_util.h"

namespace vega::gguf {
namespace {

using testutil::parse;
using testutil::same_value;

Value scalar(ValueType t) {
    Value v;
    v.type = t;
    return v;
}
Value u(ValueType t, uint64_t x) {
    Value v = scalar(t);
    v.num.u64 = x;
    return v;
}
Value i(ValueType t, int64_t x) {
    Value v = scalar(t);
    v.num.i64 = x;
    return v;
}
Value f(ValueType t, double x) {
    Value v = scalar(t);
    v.num.f64 = x;
    return v;
}
Value b(bool x) {
    Value v = scalar(ValueType::BOOL);
    v.num.b = x;
    return v;
}
Value s(std::string x) {
    Value v = scalar(ValueType::STRING);
    v.str = std::move(x);
    return v;
}
Value arr(ValueType et, std::vector<Value> xs) {
    Value v = scalar(ValueType::ARRAY);
    v.elem_type = et;
    v.arr = std::move(xs);
    return v;
}

// Every value type with its extreme values, plus arrays of each and nested arrays.
std::vector<KeyValue> all_values() {
    using T = ValueType;
    std::vector<KeyValue> kv = {
        {"u8", u(T::UINT8, 255)},
        {"i8", i(T::INT8, -128)},
        {"u16", u(T::UINT16, 65535)},
        {"i16", i(T::INT16, -32768)},
        {"u32", u(T::UINT32, 4294967295u)},
        {"i32", i(T::INT32, std::numeric_limits<int32_t>::min())},
        {"u64", u(T::UINT64, std::numeric_limits<uint64_t>::max())},
        {"i64", i(T::INT64, std::numeric_limits<int64_t>::min())},
        {"f32", f(T::FLOAT32, double(1e-5f))},
        {"f32.neg0", f(T::FLOAT32, -0.0)},
        {"f32.inf", f(T::FLOAT32, double(std::numeric_limits<float>::infinity()))},
        {"f64", f(T::FLOAT64, 3.141592653589793)},
        {"f64.tiny", f(T::FLOAT64, std::numeric_limits<double>::denorm_min())},
        {"bool.t", b(true)},
        {"bool.f", b(false)},
        {"str", s("h\xc3\xa9llo \xe2\x96\x81world")},
        {"str.empty", s("")},
        {"str.nul", s(std::string("a\0b", 3))},
        {"arr.u8", arr(T::UINT8, {u(T::UINT8, 0), u(T::UINT8, 7), u(T::UINT8, 255)})},
        {"arr.i8", arr(T::INT8, {i(T::INT8, -1), i(T::INT8, 127)})},
        {"arr.u16", arr(T::UINT16, {u(T::UINT16, 1)})},
        {"arr.i16", arr(T::INT16, {i(T::INT16, -300), i(T::INT16, 300)})},
        {"arr.u32", arr(T::UINT32, {u(T::UINT32, 123456789)})},
        {"arr.i32", arr(T::INT32, {i(T::INT32, -5), i(T::INT32, 5), i(T::INT32, 0)})},
        {"arr.u64", arr(T::UINT64, {u(T::UINT64, uint64_t(1) << 63)})},
        {"arr.i64", arr(T::INT64, {i(T::INT64, -(int64_t(1) << 40))})},
        {"arr.f32", arr(T::FLOAT32, {f(T::FLOAT32, 0.5), f(T::FLOAT32, -2.25)})},
        {"arr.f64", arr(T::FLOAT64, {f(T::FLOAT64, 1e300)})},
        {"arr.bool", arr(T::BOOL, {b(true), b(false), b(true)})},
        {"arr.str", arr(T::STRING, {s("<s>"), s(""), s("\xe2\x96\x81the")})},
        {"arr.empty", arr(T::FLOAT32, {})},
        {"arr.nested",
         arr(T::ARRAY, {arr(T::INT32, {i(T::INT32, 1), i(T::INT32, 2)}), arr(T::INT32, {}), arr(T::INT32, {i(T::INT32, 3)})})},
        {"arr.nested.str", arr(T::ARRAY, {arr(T::STRING, {s("a"), s("b")}), arr(T::STRING, {s("c")})})},
    };
    // Eight levels of arrays (the reader's limit).
    Value deep = u(T::UINT16, 9);
    Value leaf = arr(T::UINT16, {deep});
    for (int d = 1; d < 8; ++d) leaf = arr(T::ARRAY, {leaf});
    kv.push_back({"arr.depth8", leaf});
    return kv;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& x : v) x = uint8_t(rng());
    return v;
}

class GgufRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufRoundTrip, AllValueTypesAndTensors) {
    const uint32_t version = GetParam();
    Writer w;
    w.set_version(version);
    const auto kvs = all_values();
    for (const auto& kv : kvs) w.set_value(kv.key, kv.value);

    // F32 [8][3], Q4_0 [64][2] (2 blocks per row), Q8_0 [32] (34 bytes: not a multiple of 32).
    const auto d0 = random_bytes(8 * 3 * 4, 1), d1 = random_bytes(2 * 2 * 18, 2), d2 = random_bytes(34, 3);
    w.add_tensor("t.f32", GgmlType::F32, {8, 3}, d0.data(), d0.size());
    w.add_tensor("t.q4_0", GgmlType::Q4_0, {64, 2}, d1.data(), d1.size());
    w.add_tensor("t.q8_0", GgmlType::Q8_0, {32}, d2.data(), d2.size());

    const auto bytes = w.to_bytes();
    auto file = parse(bytes);
    EXPECT_EQ(file->version(), version);
    EXPECT_EQ(file->alignment(), 32u);
    EXPECT_EQ(file->find("general.alignment"), nullptr);  // default alignment is not written
    ASSERT_EQ(file->metadata().size(), kvs.size());
    for (size_t k = 0; k < kvs.size(); ++k) {
        EXPECT_EQ(file->metadata()[k].key, kvs[k].key);  // insertion order
        EXPECT_TRUE(same_value(file->metadata()[k].value, kvs[k].value)) << kvs[k].key;
    }
    ASSERT_EQ(file->tensors().size(), 3u);
    const std::vector<const std::vector<uint8_t>*> data = {&d0, &d1, &d2};
    const char* names[] = {"t.f32", "t.q4_0", "t.q8_0"};
    for (size_t t = 0; t < 3; ++t) {
        const TensorInfo& ti = file->tensors()[t];
        EXPECT_EQ(ti.name, names[t]);
        EXPECT_EQ(ti.offset % 32, 0u);
        ASSERT_EQ(ti.n_bytes, data[t]->size());
        EXPECT_EQ(std::memcmp(ti.data, data[t]->data(), ti.n_bytes), 0);
        EXPECT_EQ(ti.data, bytes.data() + file->data_offset() + ti.offset);  // no copy
    }
    EXPECT_EQ(file->tensor("t.q4_0")->ne[0], 64);
    EXPECT_EQ(file->tensor("t.q4_0")->ne[1], 2);
    EXPECT_EQ(file->tensor("t.q4_0")->ne[2], 1);
    EXPECT_EQ(file->tensor("t.q4_0")->n_dims, 2);
    EXPECT_EQ(file->tensor("t.q4_0")->n_elements(), 128);
    EXPECT_EQ(file->tensor("t.f32")->type, GgmlType::F32);
    EXPECT_EQ(file->data_offset() % 32, 0u);
}

INSTANTIATE_TEST_SUITE_P(Versions, GgufRoundTrip, ::testing::Values(2u, 3u));

TEST(GgufWriter, VersionFieldAndWidths) {
    for (uint32_t v : {2u, 3u}) {
        Writer w;
        w.set_version(v);
        w.set_u32("k", 7);
        const auto bytes = w.to_bytes();
        // "GGUF", u32 version, u64 n_tensors = 0, u64 n_kv = 1, u64 key length 1.
        ASSERT_GE(bytes.size(), 33u);
        EXPECT_EQ(std::memcmp(bytes.data(), "GGUF", 4), 0);
        EXPECT_EQ(bytes[4], v);
        EXPECT_EQ(bytes[16], 1);
        EXPECT_EQ(bytes[24], 1);
        EXPECT_EQ(bytes.size(), 24u + 8 + 1 + 4 + 4);  // no padding without tensors
    }
    Writer w;
    EXPECT_THROW(w.set_version(1), vega::Error);
    EXPECT_THROW(w.set_version(4), vega::Error);
}

TEST(GgufWriter, NonDefaultAlignment) {
    Writer w;
    w.set_string("general.architecture", "llama");
    w.set_alignment(128);
    const auto d = random_bytes(20 * 4, 5);
    w.add_tensor("a", GgmlType::F32, {20}, d.data(), d.size());
    w.add_tensor("b", GgmlType::F32, {20}, d.data(), d.size());
    const auto bytes = w.to_bytes();
    auto file = parse(bytes);
    EXPECT_EQ(file->alignment(), 128u);
    EXPECT_EQ(file->get_int("general.alignment"), 128);
    EXPECT_EQ(file->data_offset() % 128, 0u);
    EXPECT_EQ(file->tensor("b")->offset, 128u);
    EXPECT_EQ(bytes.size(), file->data_offset() + 256);

    // Setting it back to the default removes the key.
    w.set_alignment(32);
    auto back = parse(w.to_bytes());
    EXPECT_EQ(back->find("general.alignment"), nullptr);
    EXPECT_EQ(back->tensor("b")->offset, 96u);
    EXPECT_THROW(w.set_alignment(0), vega::Error);
    EXPECT_THROW(w.set_alignment(24), vega::Error);
}

TEST(GgufWriter, SettingAKeyAgainKeepsItsPlace) {
    Writer w;
    w.set_u32("a", 1);
    w.set_string("b", "x");
    w.set_u32("a", 2);
    auto file = parse(w.to_bytes());
    ASSERT_EQ(file->metadata().size(), 2u);
    EXPECT_EQ(file->metadata()[0].key, "a");
    EXPECT_EQ(file->get_int("a"), 2);
}

TEST(GgufWriter, TypedSetters) {
    Writer w;
    w.set_u32("u32", 4000000000u);
    w.set_i32("i32", -7);
    w.set_u64("u64", uint64_t(1) << 40);
    w.set_f32("f32", 1e-6f);
    w.set_bool("bool", true);
    w.set_string("str", "llama");
    w.set_string_array("strs", {"a", "bb", ""});
    w.set_f32_array("fs", {0.5f, -1.f});
    w.set_i32_array("is", {3, -4});
    auto file = parse(w.to_bytes());
    EXPECT_EQ(file->find("u32")->type, ValueType::UINT32);
    EXPECT_EQ(file->get_int("u32"), 4000000000);
    EXPECT_EQ(file->find("i32")->type, ValueType::INT32);
    EXPECT_EQ(file->get_int("i32"), -7);
    EXPECT_EQ(file->find("u64")->type, ValueType::UINT64);
    EXPECT_EQ(file->get_int("u64"), int64_t(1) << 40);
    EXPECT_EQ(file->find("f32")->type, ValueType::FLOAT32);
    EXPECT_EQ(float(file->get_float("f32")), 1e-6f);
    EXPECT_TRUE(file->get_bool("bool"));
    EXPECT_EQ(file->get_string("str"), "llama");
    EXPECT_EQ(file->get_string_array("strs"), (std::vector<std::string>{"a", "bb", ""}));
    EXPECT_EQ(file->get_float_array("fs"), (std::vector<float>{0.5f, -1.f}));
    EXPECT_EQ(file->get_int_array("is"), (std::vector<int64_t>{3, -4}));
}

TEST(GgufWriter, RejectsBadTensors) {
    Writer w;
    const std::vector<uint8_t> d(1024);
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {8}, d.data(), 31), vega::Error);         // wrong byte count
    EXPECT_THROW(w.add_tensor("x", GgmlType::Q4_0, {33}, d.data(), 18), vega::Error);       // not a block multiple
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {}, d.data(), 0), vega::Error);           // no dims
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}, d.data(), 4), vega::Error);
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {-4}, d.data(), 0), vega::Error);
    EXPECT_THROW(w.add_tensor("x", GgmlType(4), {8}, d.data(), 32), vega::Error);           // unknown type
    w.add_tensor("x", GgmlType::F32, {8}, d.data(), 32);
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {8}, d.data(), 32), vega::Error);         // duplicate
    Value bad = arr(ValueType::INT32, {u(ValueType::UINT8, 1)});                            // mixed array
    EXPECT_THROW(w.set_value("k", bad), vega::Error);
}

TEST(GgufWriter, WritesFilesAtomically) {
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("vega_gguf_writer_{}", ::getpid());
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "m.gguf").string();
    Writer w;
    w.set_string("general.name", "first");
    w.write(path);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    EXPECT_EQ(File::open(path)->get_string("general.name"), "first");
    // Overwriting replaces the whole file.
    Writer w2;
    w2.set_string("general.name", "second");
    const auto d = random_bytes(64, 9);
    w2.add_tensor("t", GgmlType::F32, {16}, d.data(), d.size());
    w2.write(path);
    auto file = File::open(path);
    EXPECT_EQ(file->get_string("general.name"), "second");
    EXPECT_EQ(file->path(), path);
    EXPECT_EQ(file->file_size(), std::filesystem::file_size(path));
    EXPECT_EQ(std::memcmp(file->tensor("t")->data, d.data(), 64), 0);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    EXPECT_THROW(w.write((dir / "no_such_dir" / "x.gguf").string()), vega::Error);
    std::filesystem::remove_all(dir);
}

TEST(GgufWriter, LazyTensorsMatchEagerOnes) {
    const auto a = random_bytes(40 * 4, 11), q = random_bytes(2 * 34, 12);
    Writer eager, lazy;
    for (Writer* w : {&eager, &lazy}) w->set_string("general.architecture", "llama");
    eager.add_tensor("a", GgmlType::F32, {40}, a.data(), a.size());
    eager.add_tensor("q", GgmlType::Q8_0, {64}, q.data(), q.size());
    lazy.add_tensor_lazy("a", GgmlType::F32, {40}, a.size(), [&](uint8_t* dst) { std::memcpy(dst, a.data(), a.size()); });
    lazy.add_tensor("q", GgmlType::Q8_0, {64}, q.data(), q.size());
    const auto want = eager.to_bytes();
    EXPECT_EQ(lazy.to_bytes(), want);
    const auto path = std::filesystem::temp_directory_path() / fmt::format("vega_gguf_lazy_{}.gguf", ::getpid());
    lazy.write(path.string());
    auto f = File::open(path.string());
    ASSERT_EQ(f->file_size(), want.size());
    EXPECT_EQ(std::memcmp(f->tensor("a")->data, a.data(), a.size()), 0);
    EXPECT_EQ(std::memcmp(f->tensor("q")->data, q.data(), q.size()), 0);
    std::filesystem::remove(path);
    EXPECT_THROW(lazy.add_tensor_lazy("b", GgmlType::F32, {8}, 31, [](uint8_t*) {}), vega::Error);
}

TEST(GgufFile, OpenErrors) {
    try {
        File::open("/nonexistent/dir/model.gguf");
        ADD_FAILURE() << "expected an error";
    } catch (const vega::Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
    }
    EXPECT_THROW(File::open("/"), vega::Error);  // a directory
    const auto path = std::filesystem::temp_directory_path() / fmt::format("vega_gguf_empty_{}.gguf", ::getpid());
    { FILE* fp = std::fopen(path.c_str(), "wb"); std::fclose(fp); }
    try {
        File::open(path.string());
        ADD_FAILURE() << "expected an error";
    } catch (const vega::Error& e) {
        EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace vega::gguf
