// Typed metadata getters (conversions, wrong-type errors naming the key and both
// types, defaults) and Value::to_string.
#include <gtest/gtest.h>

#include <functional>

#include "gguf_test_util.h"

namespace vega::gguf {
namespace {

using testutil::Bytes;
using testutil::parse;

// Raw file with one key of every scalar type (written by hand, not by Writer).
std::vector<uint8_t> scalars_file() {
    Bytes b;
    b.header(0, 12);
    auto key = [&](const char* k, ValueType t) -> Bytes& { return b.str(k).put<uint32_t>(uint32_t(t)); };
    key("u8", ValueType::UINT8).put<uint8_t>(200);
    key("i8", ValueType::INT8).put<int8_t>(-100);
    key("u16", ValueType::UINT16).put<uint16_t>(60000);
    key("i16", ValueType::INT16).put<int16_t>(-30000);
    key("u32", ValueType::UINT32).put<uint32_t>(4000000000u);
    key("i32", ValueType::INT32).put<int32_t>(-2000000000);
    key("u64.big", ValueType::UINT64).put<uint64_t>(uint64_t(1) << 63);
    key("i64", ValueType::INT64).put<int64_t>(-(int64_t(1) << 50));
    key("f32", ValueType::FLOAT32).put<float>(1e-5f);
    key("f64", ValueType::FLOAT64).put<double>(10000.5);
    key("flag", ValueType::BOOL).put<uint8_t>(1);
    key("name", ValueType::STRING).str("tiny");
    return b.b;
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const vega::Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a vega::Error";
    return {};
}

TEST(GgufGetters, IntegersOfEveryWidth) {
    const auto bytes = scalars_file();
    auto f = parse(bytes);
    EXPECT_EQ(f->get_int("u8"), 200);
    EXPECT_EQ(f->get_int("i8"), -100);
    EXPECT_EQ(f->get_int("u16"), 60000);
    EXPECT_EQ(f->get_int("i16"), -30000);
    EXPECT_EQ(f->get_int("u32"), 4000000000);
    EXPECT_EQ(f->get_int("i32"), -2000000000);
    EXPECT_EQ(f->get_int("i64"), -(int64_t(1) << 50));
    const std::string big = error_of([&] { f->get_int("u64.big"); });
    EXPECT_NE(big.find("u64.big"), std::string::npos) << big;
    EXPECT_NE(big.find("int64"), std::string::npos) << big;
}

TEST(GgufGetters, FloatsAcceptFloatsAndInts) {
    const auto bytes = scalars_file();
    auto f = parse(bytes);
    EXPECT_EQ(float(f->get_float("f32")), 1e-5f);
    EXPECT_EQ(f->get_float("f64"), 10000.5);
    EXPECT_EQ(f->get_float("u32"), 4000000000.0);
    EXPECT_EQ(f->get_float("i8"), -100.0);
}

TEST(GgufGetters, WrongTypeNamesKeyAndBothTypes) {
    const auto bytes = scalars_file();
    auto f = parse(bytes, "m.gguf");
    std::string e = error_of([&] { f->get_int("f32"); });
    for (const char* w : {"m.gguf", "'f32'", "float32", "integer"}) EXPECT_NE(e.find(w), std::string::npos) << e;
    e = error_of([&] { f->get_string("u16"); });
    for (const char* w : {"'u16'", "uint16", "string"}) EXPECT_NE(e.find(w), std::string::npos) << e;
    e = error_of([&] { f->get_float("name"); });
    for (const char* w : {"'name'", "string", "float"}) EXPECT_NE(e.find(w), std::string::npos) << e;
    e = error_of([&] { f->get_bool("u8"); });
    for (const char* w : {"'u8'", "uint8", "bool"}) EXPECT_NE(e.find(w), std::string::npos) << e;
    e = error_of([&] { f->get_int("flag"); });
    for (const char* w : {"'flag'", "bool"}) EXPECT_NE(e.find(w), std::string::npos) << e;
    e = error_of([&] { f->get_string_array("name"); });
    for (const char* w : {"'name'", "string", "array"}) EXPECT_NE(e.find(w), std::string::npos) << e;
}

TEST(GgufGetters, MissingKeysAndDefaults) {
    const auto bytes = scalars_file();
    auto f = parse(bytes);
    const std::string e = error_of([&] { f->get_string("general.architecture"); });
    EXPECT_NE(e.find("general.architecture"), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
    EXPECT_THROW(f->get_int("nope"), vega::Error);
    EXPECT_THROW(f->get_float("nope"), vega::Error);
    EXPECT_THROW(f->get_bool("nope"), vega::Error);
    EXPECT_EQ(f->get_string("nope", "dflt"), "dflt");
    EXPECT_EQ(f->get_int("nope", 42), 42);
    EXPECT_EQ(f->get_float("nope", 0.25), 0.25);
    EXPECT_TRUE(f->get_bool("nope", true));
    EXPECT_EQ(f->get_string("name", "dflt"), "tiny");
    EXPECT_EQ(f->get_int("u8", 0), 200);
    EXPECT_TRUE(f->get_bool("flag", false));
    // Present with a wrong type still fails.
    EXPECT_THROW(f->get_int("name", 1), vega::Error);
    EXPECT_TRUE(f->get_string_array("nope").empty());
    EXPECT_TRUE(f->get_float_array("nope").empty());
    EXPECT_TRUE(f->get_int_array("nope").empty());
    EXPECT_EQ(f->find("nope"), nullptr);
    EXPECT_EQ(f->tensor("nope"), nullptr);
}

TEST(GgufGetters, Arrays) {
    Writer w;
    w.set_i32_array("ints", {1, -2, 3});
    w.set_f32_array("floats", {0.5f, 1.5f});
    w.set_string_array("strs", {"x", "y"});
    auto f = parse(w.to_bytes());
    EXPECT_EQ(f->get_float_array("ints"), (std::vector<float>{1.f, -2.f, 3.f}));  // ints convert to float
    EXPECT_EQ(f->get_int_array("ints"), (std::vector<int64_t>{1, -2, 3}));
    const std::string e = error_of([&] { f->get_int_array("floats"); });
    EXPECT_NE(e.find("'floats'"), std::string::npos) << e;
    EXPECT_NE(e.find("float32"), std::string::npos) << e;
    EXPECT_THROW(f->get_float_array("strs"), vega::Error);
    EXPECT_THROW(f->get_string_array("ints"), vega::Error);
}

TEST(GgufValue, ToString) {
    const auto bytes = scalars_file();
    auto f = parse(bytes);
    EXPECT_EQ(f->find("u8")->to_string(), "200");
    EXPECT_EQ(f->find("i64")->to_string(), "-1125899906842624");
    EXPECT_EQ(f->find("f32")->to_string(), "1e-05");
    EXPECT_EQ(f->find("f64")->to_string(), "10000.5");
    EXPECT_EQ(f->find("flag")->to_string(), "true");
    EXPECT_EQ(f->find("name")->to_string(), "tiny");

    Writer w;
    std::vector<int32_t> ten(10);
    for (int k = 0; k < 10; ++k) ten[size_t(k)] = k;
    w.set_i32_array("ten", ten);
    w.set_i32_array("three", {1, 2, 3});
    w.set_string_array("strs", {"<s>", "a\"b", "\n"});
    w.set_i32_array("empty", {});
    Value nested;
    nested.type = ValueType::ARRAY;
    nested.elem_type = ValueType::ARRAY;
    Value inner;
    inner.type = ValueType::ARRAY;
    inner.elem_type = ValueType::UINT8;
    inner.arr.resize(2);
    inner.arr[0].num.u64 = 1;
    inner.arr[1].num.u64 = 2;
    nested.arr = {inner, inner};
    w.set_value("nested", nested);
    auto g = parse(w.to_bytes());
    EXPECT_EQ(g->find("three")->to_string(), "[3 items] 1, 2, 3");
    EXPECT_EQ(g->find("ten")->to_string(), "[10 items] 0, 1, 2, 3, 4, 5, 6, 7, ...");
    EXPECT_EQ(g->find("ten")->to_string(2), "[10 items] 0, 1, ...");
    EXPECT_EQ(g->find("strs")->to_string(), "[3 items] \"<s>\", \"a\\\"b\", \"\\n\"");
    EXPECT_EQ(g->find("empty")->to_string(), "[0 items]");
    EXPECT_EQ(g->find("nested")->to_string(), "[2 items] [1, 2], [1, 2]");
    EXPECT_STREQ(value_type_name(ValueType::FLOAT64), "float64");
    EXPECT_STREQ(value_type_name(ValueType::ARRAY), "array");
}

}  // namespace
}  // namespace vega::gguf
