// libFuzzer entry point for the GGUF parser. Any input must either parse or
// throw vega::Error; a parsed file must survive the getters, to_string, and a
// round trip through gguf::Writer that re-parses to the same content.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"

using namespace vega;

namespace {

bool same(const gguf::Value& a, const gguf::Value& b) {
    if (a.type != b.type) return false;
    if (a.type == gguf::ValueType::STRING) return a.str == b.str;
    if (a.type == gguf::ValueType::ARRAY) {
        if (a.elem_type != b.elem_type || a.arr.size() != b.arr.size()) return false;
        for (size_t i = 0; i < a.arr.size(); ++i)
            if (!same(a.arr[i], b.arr[i])) return false;
        return true;
    }
    if (a.type == gguf::ValueType::BOOL) return a.num.b == b.num.b;
    return std::memcmp(&a.num, &b.num, sizeof(a.num)) == 0;
}

void check(bool ok) {
    if (!ok) std::abort();  // a property failed: libFuzzer records the input
}

void exercise(const gguf::File& f, const uint8_t* data, size_t size) {
    for (const auto& kv : f.metadata()) {
        (void)kv.value.to_string();
        // Getters may throw vega::Error on type mismatch, nothing else.
        try { (void)f.get_int(kv.key); } catch (const Error&) {}
        try { (void)f.get_float(kv.key); } catch (const Error&) {}
        try { (void)f.get_string(kv.key); } catch (const Error&) {}
        try { (void)f.get_string_array(kv.key); } catch (const Error&) {}
        try { (void)f.get_float_array(kv.key); } catch (const Error&) {}
        try { (void)f.get_int_array(kv.key); } catch (const Error&) {}
    }
    uint64_t sum = 0;
    for (const auto& t : f.tensors()) {
        check(t.data >= data + f.data_offset() && t.n_bytes <= size && t.data + t.n_bytes <= data + size);
        for (uint64_t i = 0; i < t.n_bytes; i += 4096) sum += t.data[i];  // touch the data (ASan checks bounds)
        if (t.n_bytes) sum += t.data[t.n_bytes - 1];
    }
    (void)sum;
}

void round_trip(const gguf::File& f) {
    gguf::Writer w;
    for (const auto& kv : f.metadata()) w.set_value(kv.key, kv.value);
    for (const auto& t : f.tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.n_bytes);
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto g = gguf::File::parse(bytes.data(), bytes.size(), "round-trip");
    check(g->metadata().size() == f.metadata().size() && g->tensors().size() == f.tensors().size());
    for (size_t i = 0; i < f.metadata().size(); ++i)
        check(g->metadata()[i].key == f.metadata()[i].key && same(g->metadata()[i].value, f.metadata()[i].value));
    for (size_t i = 0; i < f.tensors().size(); ++i) {
        const auto &a = f.tensors()[i], &b = g->tensors()[i];
        check(a.name == b.name && a.type == b.type && a.n_bytes == b.n_bytes &&
              std::memcmp(a.data, b.data, a.n_bytes) == 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<gguf::File> f;
    try {
        f = gguf::File::parse(data, size, "fuzz");
    } catch (const Error&) {
        return 0;  // rejected cleanly
    }
    exercise(*f, data, size);
    round_trip(*f);  // throws nothing for a file the parser accepted
    return 0;
}
