// gguf::Writer: GGUF v2/v3 serialisation. Metadata in insertion order (setting a
// key again replaces its value in place), tensor data padded to the alignment,
// files written to PATH.tmp and renamed over PATH.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "gguf/gguf.h"

namespace vega::gguf {

namespace {

Value scalar(ValueType t) {
    Value v;
    v.type = t;
    return v;
}

// Little-endian byte sink.
struct Out {
    std::vector<uint8_t>& b;
    template <typename T>
    void put(T v) {
        const size_t at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
    }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
    }
    void pad_to(uint64_t a) {
        while (b.size() % a) b.push_back(0);
    }
};

void check_value(const std::string& key, const Value& v, int depth) {
    if (uint32_t(v.type) > uint32_t(ValueType::FLOAT64)) fail("gguf writer: key '{}': invalid value type {}", key, uint32_t(v.type));
    if (v.type != ValueType::ARRAY) return;
    if (uint32_t(v.elem_type) > uint32_t(ValueType::FLOAT64))
        fail("gguf writer: key '{}': invalid array element type {}", key, uint32_t(v.elem_type));
    if (depth >= 8) fail("gguf writer: key '{}': arrays nested deeper than 8", key);
    for (const auto& e : v.arr) {
        if (e.type != v.elem_type)
            fail("gguf writer: key '{}': array of {} holds a {} element", key, value_type_name(v.elem_type),
                 value_type_name(e.type));
        check_value(key, e, depth + 1);
    }
}

void put_value(Out& o, const Value& v) {
    switch (v.type) {
        case ValueType::UINT8: o.put(uint8_t(v.num.u64)); break;
        case ValueType::INT8: o.put(int8_t(v.num.i64)); break;
        case ValueType::UINT16: o.put(uint16_t(v.num.u64)); break;
        case ValueType::INT16: o.put(int16_t(v.num.i64)); break;
        case ValueType::UINT32: o.put(uint32_t(v.num.u64)); break;
        case ValueType::INT32: o.put(int32_t(v.num.i64)); break;
        case ValueType::UINT64: o.put(uint64_t(v.num.u64)); break;
        case ValueType::INT64: o.put(int64_t(v.num.i64)); break;
        case ValueType::FLOAT32: o.put(float(v.num.f64)); break;
        case ValueType::FLOAT64: o.put(double(v.num.f64)); break;
        case ValueType::BOOL: o.put(uint8_t(v.num.b ? 1 : 0)); break;
        case ValueType::STRING: o.str(v.str); break;
        case ValueType::ARRAY:
            o.put(uint32_t(v.elem_type));
            o.put(uint64_t(v.arr.size()));
            for (const auto& e : v.arr) put_value(o, e);
            break;
    }
}

}  // namespace

void Writer::set_value(const std::string& key, const Value& v) {
    check_value(key, v, 0);
    for (auto& kv : kv_)
        if (kv.key == key) {
            kv.value = v;
            return;
        }
    kv_.push_back({key, v});
}

void Writer::set_u32(const std::string& key, uint32_t x) {
    Value v = scalar(ValueType::UINT32);
    v.num.u64 = x;
    set_value(key, v);
}
void Writer::set_i32(const std::string& key, int32_t x) {
    Value v = scalar(ValueType::INT32);
    v.num.i64 = x;
    set_value(key, v);
}
void Writer::set_u64(const std::string& key, uint64_t x) {
    Value v = scalar(ValueType::UINT64);
    v.num.u64 = x;
    set_value(key, v);
}
void Writer::set_f32(const std::string& key, float x) {
    Value v = scalar(ValueType::FLOAT32);
    v.num.f64 = x;
    set_value(key, v);
}
void Writer::set_bool(const std::string& key, bool x) {
    Value v = scalar(ValueType::BOOL);
    v.num.b = x;
    set_value(key, v);
}
void Writer::set_string(const std::string& key, const std::string& x) {
    Value v = scalar(ValueType::STRING);
    v.str = x;
    set_value(key, v);
}
void Writer::set_string_array(const std::string& key, const std::vector<std::string>& xs) {
    Value v = scalar(ValueType::ARRAY);
    v.elem_type = ValueType::STRING;
    v.arr.reserve(xs.size());
    for (const auto& x : xs) {
        v.arr.push_back(scalar(ValueType::STRING));
        v.arr.back().str = x;
    }
    set_value(key, v);
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& xs) {
    Value v = scalar(ValueType::ARRAY);
    v.elem_type = ValueType::FLOAT32;
    v.arr.reserve(xs.size());
    for (float x : xs) {
        v.arr.push_back(scalar(ValueType::FLOAT32));
        v.arr.back().num.f64 = x;
    }
    set_value(key, v);
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& xs) {
    Value v = scalar(ValueType::ARRAY);
    v.elem_type = ValueType::INT32;
    v.arr.reserve(xs.size());
    for (int32_t x : xs) {
        v.arr.push_back(scalar(ValueType::INT32));
        v.arr.back().num.i64 = x;
    }
    set_value(key, v);
}

void Writer::check_new_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                              size_t n_bytes) const {
    const TypeTraits tt = type_traits(type);
    if (!tt.name) fail("gguf writer: tensor '{}': unknown type id {}", name, uint32_t(type));
    if (ne.empty() || ne.size() > 4) fail("gguf writer: tensor '{}': {} dimensions (must be 1 to 4)", name, ne.size());
    for (const auto& t : tensors_)
        if (t.name == name) fail("gguf writer: duplicate tensor name '{}'", name);
    uint64_t bytes = 0;
    for (size_t d = 0; d < ne.size(); ++d) {
        if (ne[d] < 0) fail("gguf writer: tensor '{}': negative dimension ne[{}] = {}", name, d, ne[d]);
        if (d == 0) {
            if (ne[0] % tt.block_size)
                fail("gguf writer: tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", name, ne[0],
                     tt.name, tt.block_size);
            if (__builtin_mul_overflow(uint64_t(ne[0] / tt.block_size), uint64_t(tt.type_size), &bytes))
                fail("gguf writer: tensor '{}': size overflows", name);
        } else if (__builtin_mul_overflow(bytes, uint64_t(ne[d]), &bytes)) {
            fail("gguf writer: tensor '{}': size overflows", name);
        }
    }
    if (bytes != n_bytes)
        fail("gguf writer: tensor '{}': {} bytes given, its {} shape needs {}", name, n_bytes, tt.name, bytes);
}

void Writer::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, const void* data,
                        size_t n_bytes) {
    check_new_tensor(name, type, ne, n_bytes);
    const auto* p = static_cast<const uint8_t*>(data);
    tensors_.push_back({name, type, std::move(ne), std::vector<uint8_t>(p, p + n_bytes), n_bytes, {}});
}

void Writer::add_tensor_lazy(const std::string& name, GgmlType type, std::vector<int64_t> ne, size_t n_bytes,
                             std::function<void(uint8_t* dst)> fill) {
    if (!fill) fail("gguf writer: tensor '{}': lazy tensor without a fill function", name);
    check_new_tensor(name, type, ne, n_bytes);
    tensors_.push_back({name, type, std::move(ne), {}, n_bytes, std::move(fill)});
}

void Writer::set_alignment(uint32_t a) {
    if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 30)) fail("gguf writer: alignment {} is not a power of two", a);
    alignment_ = a;
    if (a != 32) {
        set_u32("general.alignment", a);
    } else {
        for (size_t i = 0; i < kv_.size(); ++i)
            if (kv_[i].key == "general.alignment") kv_.erase(kv_.begin() + long(i));
    }
}

void Writer::set_version(uint32_t v) {
    if (v != 2 && v != 3) fail("gguf writer: can only write GGUF version 2 or 3, not {}", v);
    version_ = v;
}

std::vector<uint8_t> Writer::header_bytes(uint64_t* align_out) const {
    // A general.alignment set through set_value/set_u32 rules the padding too.
    uint64_t align = alignment_;
    for (const auto& kv : kv_)
        if (kv.key == "general.alignment") {
            const Value& v = kv.value;
            if (!v.is_integer() || v.as_int() <= 0 || (v.as_int() & (v.as_int() - 1)) != 0 || v.as_int() > (1 << 30))
                fail("gguf writer: general.alignment = {} is not a positive power of two", v.to_string());
            align = uint64_t(v.as_int());
        }

    std::vector<uint8_t> buf;
    Out o{buf};
    o.put<uint32_t>(0x46554747);  // "GGUF"
    o.put<uint32_t>(version_);
    o.put<uint64_t>(tensors_.size());
    o.put<uint64_t>(kv_.size());
    for (const auto& kv : kv_) {
        o.str(kv.key);
        o.put<uint32_t>(uint32_t(kv.value.type));
        put_value(o, kv.value);
    }
    uint64_t offset = 0;  // relative to the data section
    for (const auto& t : tensors_) {
        o.str(t.name);
        o.put<uint32_t>(uint32_t(t.ne.size()));
        for (int64_t d : t.ne) o.put<int64_t>(d);
        o.put<uint32_t>(uint32_t(t.type));
        o.put<uint64_t>(offset);
        offset += (t.n_bytes + align - 1) / align * align;
    }
    if (!tensors_.empty()) o.pad_to(align);
    *align_out = align;
    return buf;
}

std::vector<uint8_t> Writer::to_bytes() const {
    uint64_t align = 0;
    std::vector<uint8_t> buf = header_bytes(&align);
    Out o{buf};
    for (const auto& t : tensors_) {
        if (t.fill) {
            const size_t at = buf.size();
            buf.resize(at + t.n_bytes);
            t.fill(buf.data() + at);
        } else {
            buf.insert(buf.end(), t.data.begin(), t.data.end());
        }
        o.pad_to(align);
    }
    return buf;
}

void Writer::write(const std::string& path) const {
    // Header first, then each tensor streamed (lazy ones filled into one reused buffer).
    uint64_t align = 0;
    const std::vector<uint8_t> header = header_bytes(&align);
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("{}: cannot create: {}", tmp, std::strerror(errno));
    uint64_t done = 0;
    auto put = [&](const uint8_t* p, size_t n) {
        size_t at = 0;
        while (at < n) {
            const ssize_t k = ::write(fd, p + at, n - at);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) fail("{}: write failed at byte {}: {}", tmp, done + at, std::strerror(errno));
            at += size_t(k);
        }
        done += n;
    };
    try {
        put(header.data(), header.size());
        std::vector<uint8_t> scratch;
        static const uint8_t zeros[4096] = {};
        for (const auto& t : tensors_) {
            if (t.fill) {
                scratch.resize(t.n_bytes);
                t.fill(scratch.data());
                put(scratch.data(), scratch.size());
            } else {
                put(t.data.data(), t.data.size());
            }
            while (done % align) put(zeros, size_t(std::min<uint64_t>(sizeof zeros, align - done % align)));
        }
    } catch (...) {  // a failed write or fill: leave no half-written temp file behind
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    const bool synced = ::fsync(fd) == 0;
    int e = errno;
    const bool closed = ::close(fd) == 0;
    if (!closed) e = errno;
    if (!synced || !closed) {
        ::unlink(tmp.c_str());
        fail("{}: cannot flush: {}", tmp, std::strerror(e));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp.c_str());
        fail("{}: cannot rename {} over it: {}", path, tmp, std::strerror(e));
    }
}

}  // namespace vega::gguf
