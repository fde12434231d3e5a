// Helpers for the GGUF tests: a raw little-endian byte builder (to craft valid
// and hostile files by hand, independent of gguf::Writer), deep Value equality,
// and an assertion that parsing fails with a vega::Error mentioning given words.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"

namespace vega::gguf::testutil {

// Raw GGUF bytes. `count` fields (lengths, counts, v1 dims) are u32 in v1, u64 in v2/v3.
struct Bytes {
    uint32_t version = 3;
    std::vector<uint8_t> b;

    explicit Bytes(uint32_t v = 3) : version(v) {}
    size_t size() const { return b.size(); }
    template <typename T>
    Bytes& put(T v) {
        const size_t at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
        return *this;
    }
    Bytes& count(uint64_t n) { return version == 1 ? put<uint32_t>(uint32_t(n)) : put<uint64_t>(n); }
    Bytes& str(const std::string& s) {
        count(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Bytes& raw(const std::string& s) {
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    // "GGUF", version, tensor count, kv count.
    Bytes& header(uint64_t n_tensors, uint64_t n_kv) {
        raw("GGUF");
        put<uint32_t>(version);
        count(n_tensors);
        count(n_kv);
        return *this;
    }
    Bytes& kv_u32(const std::string& key, uint32_t v) {
        str(key);
        put<uint32_t>(uint32_t(ValueType::UINT32));
        return put<uint32_t>(v);
    }
    Bytes& kv_str(const std::string& key, const std::string& v) {
        str(key);
        put<uint32_t>(uint32_t(ValueType::STRING));
        return str(v);
    }
    // One tensor info: name, n_dims, dims, type, offset.
    Bytes& tensor(const std::string& name, std::initializer_list<int64_t> ne, uint32_t type, uint64_t offset) {
        str(name);
        put<uint32_t>(uint32_t(ne.size()));
        for (int64_t d : ne) version == 1 ? put<uint32_t>(uint32_t(d)) : put<int64_t>(d);
        put<uint32_t>(type);
        return put<uint64_t>(offset);
    }
    Bytes& pad(size_t a) {
        while (b.size() % a) b.push_back(0);
        return *this;
    }
    Bytes& zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
};

inline bool same_value(const Value& a, const Value& b) {
    if (a.type != b.type) return false;
    switch (a.type) {
        case ValueType::STRING: return a.str == b.str;
        case ValueType::ARRAY:
            if (a.elem_type != b.elem_type || a.arr.size() != b.arr.size()) return false;
            for (size_t i = 0; i < a.arr.size(); ++i)
                if (!same_value(a.arr[i], b.arr[i])) return false;
            return true;
        case ValueType::BOOL: return a.num.b == b.num.b;
        case ValueType::FLOAT32:
        case ValueType::FLOAT64: return std::memcmp(&a.num.f64, &b.num.f64, sizeof(double)) == 0;  // bitwise: NaN, -0
        default: return a.num.u64 == b.num.u64;
    }
}

inline std::unique_ptr<File> parse(const std::vector<uint8_t>& v, const std::string& name = "test.gguf") {
    return File::parse(v.data(), v.size(), name);
}

// Parses `bytes`; expects a vega::Error whose message contains every word in `words`,
// the file name and "at byte offset". Returns the message.
inline std::string expect_parse_error(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> words) {
    try {
        parse(bytes, "hostile.gguf");
    } catch (const vega::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("hostile.gguf: "), std::string::npos) << msg;
        EXPECT_NE(msg.find(" at byte offset "), std::string::npos) << msg;
        for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << "missing '" << w << "' in: " << msg;
        return msg;
    }
    ADD_FAILURE() << "parse succeeded, expected an error mentioning " << *words.begin();
    return {};
}

}  // namespace vega::gguf::testutil
