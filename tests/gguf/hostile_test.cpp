// Hand-crafted malformed GGUF files: each must fail with a vega::Error that names
// the problem, the file and the byte offset (and the key/tensor where relevant).
#include <gtest/gtest.h>

#include <chrono>

#include "gguf_test_util.h"

namespace vega::gguf {
namespace {

using testutil::Bytes;
using testutil::expect_parse_error;
using testutil::parse;

constexpr uint32_t kF32 = uint32_t(GgmlType::F32);

// A valid v3 file with one F32 tensor [8] at offset 0; the base for small mutations.
Bytes one_tensor_file(std::initializer_list<int64_t> ne = {8}, uint32_t type = kF32, uint64_t offset = 0,
                      size_t data_bytes = 32) {
    Bytes b;
    b.header(1, 1).kv_str("general.architecture", "llama").tensor("w", ne, type, offset).pad(32).zeros(data_bytes);
    return b;
}

TEST(GgufHostile, BaseFileIsValid) {
    auto f = parse(one_tensor_file().b);
    ASSERT_EQ(f->tensors().size(), 1u);
    EXPECT_EQ(f->tensors()[0].n_bytes, 32u);
}

TEST(GgufHostile, BadMagic) {
    Bytes b;
    b.raw("GGML").put<uint32_t>(3).count(0).count(0);
    const std::string msg = expect_parse_error(b.b, {"magic", "GGML", "at byte offset 0"});
}

TEST(GgufHostile, UnsupportedVersion) {
    Bytes b;
    b.raw("GGUF").put<uint32_t>(4).count(0).count(0);
    expect_parse_error(b.b, {"version 4", "at byte offset 4"});
    Bytes z;
    z.raw("GGUF").put<uint32_t>(0).count(0).count(0);
    expect_parse_error(z.b, {"version 0"});
    Bytes be;  // version 3 written big-endian
    be.raw("GGUF").put<uint32_t>(0x03000000u).count(0).count(0);
    expect_parse_error(be.b, {"version", "big-endian"});
}

TEST(GgufHostile, EmptyAndTinyFiles) {
    expect_parse_error({}, {"truncated", "magic", "at byte offset 0"});
    expect_parse_error({'G', 'G'}, {"truncated"});
    expect_parse_error({'G', 'G', 'U', 'F', 3, 0}, {"truncated", "version", "at byte offset 4"});
}

TEST(GgufHostile, HugeCountsFailFastWithoutAllocating) {
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t n : {uint64_t(1) << 60, ~uint64_t(0), uint64_t(1) << 32}) {
        Bytes kv;
        kv.header(0, n).kv_u32("a", 1);
        expect_parse_error(kv.b, {"metadata count", "at byte offset 16"});
        Bytes t;
        t.header(n, 0);
        expect_parse_error(t.b, {"tensor count", "at byte offset 8"});
    }
    // v1: 32-bit counts near the top of their range.
    Bytes v1(1);
    v1.header(0, 0xFFFFFFFFu).kv_u32("a", 1);
    expect_parse_error(v1.b, {"metadata count 4294967295"});
    // Tensor count that fits the header bytes but not what is left after the metadata.
    Bytes late;
    late.header(2, 1).str("k").put<uint32_t>(uint32_t(ValueType::STRING)).str(std::string(80, 'x'));
    expect_parse_error(late.b, {"tensor count 2"});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 1000.0);
}

TEST(GgufHostile, StringLengthPastEof) {
    Bytes key;
    key.header(0, 1).count(uint64_t(1) << 60).raw("general");
    expect_parse_error(key.b, {"key length 1152921504606846976", "past the end", "at byte offset 24"});
    Bytes val;
    val.header(0, 1).str("general.name").put<uint32_t>(uint32_t(ValueType::STRING)).count(100).raw("short");
    const size_t at = 24 + 8 + 12 + 4;
    expect_parse_error(val.b, {"string length 100", "general.name", fmt::format("at byte offset {}", at).c_str()});
}

TEST(GgufHostile, InvalidValueType) {
    Bytes b;
    b.header(0, 1).str("my.key").put<uint32_t>(13).put<uint32_t>(0);
    expect_parse_error(b.b, {"invalid value type 13", "my.key", "at byte offset 38"});
    Bytes arr;
    arr.header(0, 1).str("my.arr").put<uint32_t>(uint32_t(ValueType::ARRAY)).put<uint32_t>(99).count(1).put<uint32_t>(0);
    expect_parse_error(arr.b, {"invalid array element type 99", "my.arr"});
}

TEST(GgufHostile, InvalidBool) {
    Bytes b;
    b.header(0, 1).str("flag").put<uint32_t>(uint32_t(ValueType::BOOL)).put<uint8_t>(7);
    expect_parse_error(b.b, {"bool", "flag"});
}

// depth levels of ARRAY-of-ARRAY wrapping a one-element uint8 array.
Bytes nested(int depth) {
    Bytes b;
    b.header(0, 1).str("deep").put<uint32_t>(uint32_t(ValueType::ARRAY));
    for (int i = 1; i < depth; ++i) b.put<uint32_t>(uint32_t(ValueType::ARRAY)).count(1);
    b.put<uint32_t>(uint32_t(ValueType::UINT8)).count(1).put<uint8_t>(42);
    return b;
}

TEST(GgufHostile, NestingDepthLimit) {
    auto f = parse(nested(8).b);  // 8 levels of arrays: allowed
    const Value* v = f->find("deep");
    ASSERT_TRUE(v);
    int depth = 0;
    while (v->type == ValueType::ARRAY) {
        ++depth;
        ASSERT_EQ(v->arr.size(), 1u);
        v = &v->arr[0];
    }
    EXPECT_EQ(depth, 8);
    EXPECT_EQ(v->num.u64, 42u);
    expect_parse_error(nested(9).b, {"nested", "deep"});
    expect_parse_error(nested(100000).b, {"nested", "deep"});  // no stack overflow
}

TEST(GgufHostile, ArrayLengthPastEof) {
    for (auto et : {ValueType::UINT8, ValueType::FLOAT64, ValueType::STRING, ValueType::ARRAY}) {
        Bytes b;
        b.header(0, 1).str("arr").put<uint32_t>(uint32_t(ValueType::ARRAY)).put<uint32_t>(uint32_t(et));
        b.count(uint64_t(1) << 60).zeros(16);
        expect_parse_error(b.b, {"array length 1152921504606846976", "arr", "at byte offset 43"});
    }
    // An array of empty strings whose count fits byte-wise but whose lengths do not.
    Bytes s;
    s.header(0, 1).str("arr").put<uint32_t>(uint32_t(ValueType::ARRAY)).put<uint32_t>(uint32_t(ValueType::STRING));
    s.count(3).str("").str("").count(5);
    expect_parse_error(s.b, {"string length 5", "arr"});
}

TEST(GgufHostile, DuplicateKey) {
    Bytes b;
    b.header(0, 2).kv_u32("general.x", 1);
    const size_t at = b.size();
    b.kv_u32("general.x", 2);
    expect_parse_error(b.b, {"duplicate", "general.x", fmt::format("at byte offset {}", at).c_str()});
}

TEST(GgufHostile, DuplicateTensorName) {
    Bytes b;
    b.header(2, 0).tensor("blk.0.w", {8}, kF32, 0);
    const size_t at = b.size();
    b.tensor("blk.0.w", {8}, kF32, 32).pad(32).zeros(64);
    expect_parse_error(b.b, {"duplicate tensor", "blk.0.w", fmt::format("at byte offset {}", at).c_str()});
}

TEST(GgufHostile, BadNDims) {
    Bytes zero;
    zero.header(1, 0).str("t0").put<uint32_t>(0).put<uint32_t>(kF32).put<uint64_t>(0).pad(32);
    expect_parse_error(zero.b, {"n_dims 0", "t0", "at byte offset 34"});
    Bytes five;
    five.header(1, 0).tensor("t5", {1, 1, 1, 1, 1}, kF32, 0).pad(32).zeros(32);
    expect_parse_error(five.b, {"n_dims 5", "t5"});
}

TEST(GgufHostile, NegativeAndOverflowingDims) {
    expect_parse_error(one_tensor_file({8, -1}).b, {"negative", "ne[1]", "'w'"});
    // Element count 2^96 overflows int64.
    expect_parse_error(one_tensor_file({int64_t(1) << 32, int64_t(1) << 32, int64_t(1) << 32}).b, {"overflow", "'w'"});
    // Element count fits (2^62) but bytes (x4 for F32) do not.
    expect_parse_error(one_tensor_file({int64_t(1) << 31, int64_t(1) << 31}).b, {"overflow", "'w'"});
    // Fits everything but is far larger than the file.
    expect_parse_error(one_tensor_file({1024, 1024}).b, {"outside the file", "'w'"});
}

TEST(GgufHostile, UnknownTensorTypeIsNamed) {
    for (uint32_t id : {4u, 5u, 31u, 36u, 99u, 0xFFFFFFFFu}) {
        const std::string msg = expect_parse_error(one_tensor_file({8}, id).b, {"unknown tensor type", "'w'"});
        EXPECT_NE(msg.find(fmt::format("id {}", id)), std::string::npos) << msg;
    }
}

TEST(GgufHostile, KnownUnsupportedTypesParse) {
    // Every known type parses (sizes from type_traits), computable or not (IQ2_XXS,
    // IQ1_M, TQ2_0): the model loader decides what it runs.
    for (GgmlType t : {GgmlType::Q2_K, GgmlType::IQ2_XXS, GgmlType::IQ4_NL, GgmlType::IQ1_M, GgmlType::TQ2_0, GgmlType::MXFP4}) {
        const TypeTraits tt = type_traits(t);
        const size_t bytes = size_t(tt.type_size) * 2;
        auto f = parse(one_tensor_file({tt.block_size, 2}, uint32_t(t), 0, (bytes + 31) / 32 * 32).b);
        ASSERT_EQ(f->tensors().size(), 1u);
        EXPECT_EQ(f->tensors()[0].type, t);
        EXPECT_EQ(f->tensors()[0].n_bytes, bytes);
    }
}

TEST(GgufHostile, RowNotMultipleOfBlock) {
    expect_parse_error(one_tensor_file({33}, uint32_t(GgmlType::Q4_0)).b, {"ne[0] = 33", "Q4_0", "block size 32", "'w'"});
    expect_parse_error(one_tensor_file({128}, uint32_t(GgmlType::Q4_K), 0, 256).b, {"block size 256", "'w'"});
}

TEST(GgufHostile, UnalignedOffset) {
    Bytes b;
    b.header(2, 0).tensor("a", {8}, kF32, 0).tensor("b", {8}, kF32, 40).pad(32).zeros(128);
    expect_parse_error(b.b, {"offset 40", "alignment 32", "'b'"});
}

TEST(GgufHostile, DataOutsideFile) {
    expect_parse_error(one_tensor_file({8}, kF32, 0, 31).b, {"outside the file", "'w'"});
    expect_parse_error(one_tensor_file({8}, kF32, uint64_t(1) << 62, 32).b, {"outside the file", "'w'"});
    expect_parse_error(one_tensor_file({8}, kF32, ~uint64_t(31), 32).b, {"outside the file", "'w'"});
    // Header ends off-alignment and the padding itself is missing.
    Bytes b;
    b.header(1, 0).tensor("w", {8}, kF32, 0);
    expect_parse_error(b.b, {"truncated", "padding"});
}

TEST(GgufHostile, OverlappingTensors) {
    Bytes b;
    b.header(3, 0).tensor("a", {8}, kF32, 0).tensor("b", {16}, kF32, 64).tensor("c", {16}, kF32, 96).pad(32).zeros(160);
    expect_parse_error(b.b, {"overlaps", "'c'", "'b'"});
    // Zero-sized tensors may share an offset with their neighbours.
    Bytes ok;
    ok.header(3, 0).tensor("a", {8}, kF32, 0).tensor("e", {0}, kF32, 32).tensor("f", {8}, kF32, 32).pad(32).zeros(64);
    EXPECT_EQ(parse(ok.b)->tensors().size(), 3u);
}

TEST(GgufHostile, BadAlignment) {
    auto with_alignment = [](auto write_kv) {
        Bytes b;
        b.header(1, 1);
        write_kv(b);
        b.tensor("w", {8}, kF32, 0).pad(64).zeros(64);
        return b;
    };
    expect_parse_error(with_alignment([](Bytes& b) { b.kv_u32("general.alignment", 0); }).b,
                       {"alignment 0", "general.alignment", "at byte offset 49"});
    expect_parse_error(with_alignment([](Bytes& b) { b.kv_u32("general.alignment", 48); }).b,
                       {"alignment 48", "power of two"});
    expect_parse_error(with_alignment([](Bytes& b) { b.kv_str("general.alignment", "32"); }).b,
                       {"alignment", "integer", "string"});
    expect_parse_error(with_alignment([](Bytes& b) {
                           b.str("general.alignment").put<uint32_t>(uint32_t(ValueType::FLOAT32)).put<float>(32.f);
                       }).b,
                       {"alignment", "float32"});
    expect_parse_error(with_alignment([](Bytes& b) {
                           b.str("general.alignment").put<uint32_t>(uint32_t(ValueType::INT32)).put<int32_t>(-32);
                       }).b,
                       {"alignment -32"});
    // A valid non-default alignment moves the data section.
    auto f = parse(with_alignment([](Bytes& b) {
                       b.str("general.alignment").put<uint32_t>(uint32_t(ValueType::UINT64)).put<uint64_t>(64);
                   }).b);
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->data_offset() % 64, 0u);
}

TEST(GgufHostile, ErrorsNameTheKeyBeingRead) {
    // Truncated in the middle of the second key's value.
    Bytes b;
    b.header(0, 2).kv_u32("first", 1).str("second.key").put<uint32_t>(uint32_t(ValueType::UINT64)).put<uint32_t>(0);
    expect_parse_error(b.b, {"truncated", "second.key"});
}

}  // namespace
}  // namespace vega::gguf
