// Writes a few small valid GGUF files (v1, v2, v3; every value type; nested
// arrays; quantized tensors; non-default alignment) as a seed corpus:
//   vega_gguf_fuzz_seeds DIR
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"

using namespace vega;
using namespace vega::gguf;

namespace {

Value leaf(ValueType t, uint64_t bits) {
    Value v;
    v.type = t;
    v.num.u64 = bits;
    return v;
}

Writer base(uint32_t version) {
    Writer w;
    w.set_version(version);
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 1);
    w.set_i32("i32", -3);
    w.set_u64("u64", 1ull << 40);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_bool("flag", true);
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a"});
    w.set_f32_array("tokenizer.ggml.scores", {0.f, 0.f, 0.f, -1.f});
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
    Value nested;
    nested.type = ValueType::ARRAY;
    nested.elem_type = ValueType::ARRAY;
    Value inner;
    inner.type = ValueType::ARRAY;
    inner.elem_type = ValueType::UINT8;
    inner.arr = {leaf(ValueType::UINT8, 1), leaf(ValueType::UINT8, 2)};
    nested.arr = {inner, inner};
    w.set_value("nested", nested);
    for (ValueType t : {ValueType::INT8, ValueType::UINT16, ValueType::INT16, ValueType::INT64, ValueType::FLOAT64})
        w.set_value(std::string("scalar.") + value_type_name(t), leaf(t, 1));
    return w;
}

void save(const std::string& dir, const std::string& name, const std::vector<uint8_t>& b) {
    std::ofstream(dir + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), long(b.size()));
}

template <typename T>
void put(std::vector<uint8_t>& b, T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
}

// GGUF v1 by hand (the writer only writes v2/v3): one key, one F32 tensor [4].
std::vector<uint8_t> v1_file() {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    put<uint32_t>(b, 1);
    put<uint32_t>(b, 1);  // tensors
    put<uint32_t>(b, 1);  // kv
    const std::string key = "general.architecture", val = "llama", name = "w";
    put<uint32_t>(b, uint32_t(key.size()));
    b.insert(b.end(), key.begin(), key.end());
    put<uint32_t>(b, uint32_t(ValueType::STRING));
    put<uint32_t>(b, uint32_t(val.size()));
    b.insert(b.end(), val.begin(), val.end());
    put<uint32_t>(b, uint32_t(name.size()));
    b.insert(b.end(), name.begin(), name.end());
    put<uint32_t>(b, 1);  // n_dims
    put<uint32_t>(b, 4);  // ne[0]
    put<uint32_t>(b, uint32_t(GgmlType::F32));
    put<uint64_t>(b, 0);  // offset
    while (b.size() % 32) b.push_back(0);
    for (int i = 0; i < 4; ++i) put<float>(b, float(i));
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    try {
        std::vector<uint8_t> d(1024);
        for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 13);
        for (uint32_t v : {2u, 3u}) {
            Writer w = base(v);
            w.add_tensor("token_embd.weight", GgmlType::F32, {4, 4}, d.data(), 64);
            w.add_tensor("blk.0.attn_q.weight", GgmlType::Q4_0, {32, 2}, d.data(), 36);
            w.add_tensor("blk.0.ffn_up.weight", GgmlType::Q4_K, {256}, d.data(), 144);
            w.add_tensor("output_norm.weight", GgmlType::F16, {4}, d.data(), 8);
            save(dir, "tensors-v" + std::to_string(v) + ".gguf", w.to_bytes());
        }
        Writer a = base(3);
        a.set_alignment(64);
        a.add_tensor("x", GgmlType::Q8_0, {32}, d.data(), 34);
        save(dir, "align64.gguf", a.to_bytes());
        save(dir, "metadata-only.gguf", base(3).to_bytes());
        save(dir, "v1.gguf", v1_file());
        for (const char* n : {"tensors-v2.gguf", "tensors-v3.gguf", "align64.gguf", "metadata-only.gguf", "v1.gguf"})
            File::open(dir + "/" + n);  // every seed must be valid
    } catch (const Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
