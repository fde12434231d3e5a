// GGUF parser: header, metadata, tensor infos, then validation of the tensor
// data layout. Every read is bounds-checked; every count is checked against the
// bytes that remain before anything is allocated from it.
//
// Layout (little-endian; "count" is u32 in v1, u64 in v2/v3):
//   "GGUF" u32 version, count n_tensors, count n_kv
//   n_kv x { string key, u32 value_type, value }        string = count len, bytes
//   n_tensors x { string name, u32 n_dims, n_dims x dim, u32 ggml_type, u64 offset }
//                                                       dim = u32 in v1, i64 in v2/v3
//   padding to general.alignment (default 32), then the tensor data section.
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "gguf/gguf.h"

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace vega::gguf {

namespace {

constexpr int kMaxArrayDepth = 8;  // arrays of arrays deeper than this are refused
constexpr uint64_t kDefaultAlignment = 32;

bool valid_value_type(uint32_t t) { return t <= uint32_t(ValueType::FLOAT64); }

// Encoded size of a scalar value type, 0 for STRING/ARRAY.
size_t scalar_size(ValueType t) {
    switch (t) {
        case ValueType::UINT8:
        case ValueType::INT8:
        case ValueType::BOOL: return 1;
        case ValueType::UINT16:
        case ValueType::INT16: return 2;
        case ValueType::UINT32:
        case ValueType::INT32:
        case ValueType::FLOAT32: return 4;
        case ValueType::UINT64:
        case ValueType::INT64:
        case ValueType::FLOAT64: return 8;
        default: return 0;
    }
}

// A key or tensor name as shown in an error message: control bytes escaped (a
// NUL would cut the message short), capped at 120 bytes.
std::string shown_name(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i == 120) return out + "...";
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f)
            out += fmt::format("\\x{:02x}", c);
        else
            out += char(c);
    }
    return out;
}

}  // namespace

class Parser {
public:
    Parser(File& f) : f_(f), p_(f.base_), size_(f.size_) {}

    void run() {
        read_header();
        read_metadata();
        read_alignment();
        read_tensor_infos();
        layout_tensors();
    }

private:
    File& f_;
    const uint8_t* p_;
    size_t size_;
    size_t pos_ = 0;
    bool v1_ = false;
    std::string ctx_;  // "key 'x'" / "tensor 'y'" while reading that entry

    uint64_t n_tensors_ = 0, n_kv_ = 0;
    size_t alignment_pos_ = 0;
    std::vector<size_t> tensor_pos_;  // file offset of each tensor info entry

    [[noreturn]] void fail_at(size_t off, const std::string& problem) const {
        if (ctx_.empty()) fail("{}: {} at byte offset {}", f_.path_, problem, off);
        fail("{}: {} in {} at byte offset {}", f_.path_, problem, ctx_, off);
    }

    size_t remaining() const { return size_ - pos_; }

    void need(size_t n, const char* what) const {
        if (remaining() < n)
            fail_at(pos_, fmt::format("truncated file: {} needs {} bytes, {} left", what, n, remaining()));
    }

    template <typename T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, p_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    size_t count_size() const { return v1_ ? 4 : 8; }
    uint64_t read_count(const char* what) { return v1_ ? read<uint32_t>(what) : read<uint64_t>(what); }

    std::string read_string(const char* what) {
        const size_t at = pos_;
        const uint64_t len = read_count(what);
        if (len > remaining())
            fail_at(at, fmt::format("{} length {} runs past the end of the file ({} bytes left)", what, len, remaining()));
        std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
        pos_ += size_t(len);
        return s;
    }

    // Fewest bytes one encoded value of type t can occupy (bounds array counts).
    size_t min_value_size(ValueType t) const {
        if (t == ValueType::STRING) return count_size();
        if (t == ValueType::ARRAY) return 4 + count_size();
        return scalar_size(t);
    }

    // ---- header ----------------------------------------------------------------
    void read_header() {
        need(4, "magic");
        if (std::memcmp(p_, "GGUF", 4) != 0) {
            std::string shown;
            for (int i = 0; i < 4; ++i)
                shown += (p_[i] >= 0x20 && p_[i] < 0x7f) ? fmt::format("{}", char(p_[i])) : fmt::format("\\x{:02x}", p_[i]);
            fail_at(0, fmt::format("bad magic '{}' (expected 'GGUF'; not a GGUF file)", shown));
        }
        pos_ = 4;
        const uint32_t version = read<uint32_t>("version");
        if (version < 1 || version > 3) {
            const uint32_t swapped = __builtin_bswap32(version);
            fail_at(4, fmt::format("unsupported GGUF version {}{}", version,
                                   swapped >= 1 && swapped <= 3 ? " (a big-endian file? only little-endian is supported)"
                                                                : " (supported: 1, 2, 3)"));
        }
        f_.version_ = version;
        v1_ = version == 1;

        const size_t tensors_at = pos_;
        n_tensors_ = read_count("tensor count");
        const size_t kv_at = pos_;
        n_kv_ = read_count("metadata count");
        // Every entry takes some bytes; counts that could not fit in the file fail here.
        if (n_kv_ > remaining() / min_kv_size())
            fail_at(kv_at, fmt::format("metadata count {} is impossible: {} bytes left hold at most {} entries", n_kv_,
                                       remaining(), remaining() / min_kv_size()));
        if (n_tensors_ > remaining() / min_tensor_info_size())
            fail_at(tensors_at, fmt::format("tensor count {} is impossible: {} bytes left hold at most {} tensor infos",
                                            n_tensors_, remaining(), remaining() / min_tensor_info_size()));
    }

    size_t min_kv_size() const { return count_size() + 4 + 1; }  // key length, type, 1-byte value
    size_t min_tensor_info_size() const {
        return count_size() + 4 + (v1_ ? 4 : 8) + 4 + 8;  // name length, n_dims, one dim, type, offset
    }

    // ---- metadata ----------------------------------------------------------------
    void read_metadata() {
        f_.kv_.reserve(size_t(n_kv_));
        std::unordered_set<std::string> seen;
        seen.reserve(size_t(n_kv_));
        for (uint64_t i = 0; i < n_kv_; ++i) {
            ctx_ = fmt::format("metadata entry {}", i);
            const size_t key_at = pos_;
            KeyValue kv;
            kv.key = read_string("key");
            ctx_ = fmt::format("key '{}'", shown_name(kv.key));
            if (!seen.insert(kv.key).second) fail_at(key_at, "duplicate metadata key");
            const size_t type_at = pos_;
            const uint32_t t = read<uint32_t>("value type");
            if (!valid_value_type(t)) fail_at(type_at, fmt::format("invalid value type {}", t));
            if (kv.key == "general.alignment") alignment_pos_ = type_at;
            read_value(ValueType(t), 0, kv.value);
            f_.kv_.push_back(std::move(kv));
        }
        ctx_.clear();
    }

    void read_value(ValueType t, int depth, Value& out) {
        out.type = t;
        switch (t) {
            case ValueType::UINT8: out.num.u64 = read<uint8_t>("uint8 value"); break;
            case ValueType::INT8: out.num.i64 = read<int8_t>("int8 value"); break;
            case ValueType::UINT16: out.num.u64 = read<uint16_t>("uint16 value"); break;
            case ValueType::INT16: out.num.i64 = read<int16_t>("int16 value"); break;
            case ValueType::UINT32: out.num.u64 = read<uint32_t>("uint32 value"); break;
            case ValueType::INT32: out.num.i64 = read<int32_t>("int32 value"); break;
            case ValueType::UINT64: out.num.u64 = read<uint64_t>("uint64 value"); break;
            case ValueType::INT64: out.num.i64 = read<int64_t>("int64 value"); break;
            case ValueType::FLOAT32: out.num.f64 = read<float>("float32 value"); break;
            case ValueType::FLOAT64: out.num.f64 = read<double>("float64 value"); break;
            case ValueType::BOOL: {
                const size_t at = pos_;
                const uint8_t b = read<uint8_t>("bool value");
                if (b > 1) fail_at(at, fmt::format("invalid bool value {} (must be 0 or 1)", b));
                out.num.b = b != 0;
                break;
            }
            case ValueType::STRING: out.str = read_string("string"); break;
            case ValueType::ARRAY: read_array(depth, out); break;
        }
    }

    void read_array(int depth, Value& out) {
        const size_t at = pos_;
        if (depth + 1 > kMaxArrayDepth)
            fail_at(at, fmt::format("arrays nested deeper than the limit of {}", kMaxArrayDepth));
        const uint32_t et = read<uint32_t>("array element type");
        if (!valid_value_type(et)) fail_at(at, fmt::format("invalid array element type {}", et));
        out.elem_type = ValueType(et);
        const size_t count_at = pos_;
        const uint64_t n = read_count("array length");
        const size_t min = min_value_size(out.elem_type);
        if (n > remaining() / min)
            fail_at(count_at, fmt::format("array length {} of {} runs past the end of the file ({} bytes left)", n,
                                          value_type_name(out.elem_type), remaining()));
        out.arr.resize(size_t(n));
        for (auto& e : out.arr) read_value(out.elem_type, depth + 1, e);
    }

    // general.alignment: an integer, nonzero power of two. Default 32.
    void read_alignment() {
        for (const auto& kv : f_.kv_) {
            if (kv.key != "general.alignment") continue;
            ctx_ = "key 'general.alignment'";
            if (!kv.value.is_integer())
                fail_at(alignment_pos_, fmt::format("alignment must be an integer, got {}", value_type_name(kv.value.type)));
            const bool neg = kv.value.type == ValueType::INT8 || kv.value.type == ValueType::INT16 ||
                             kv.value.type == ValueType::INT32 || kv.value.type == ValueType::INT64;
            const uint64_t a = kv.value.num.u64;
            if ((neg && kv.value.num.i64 <= 0) || a == 0 || (a & (a - 1)) != 0 || a > (uint64_t(1) << 30))
                fail_at(alignment_pos_, fmt::format("alignment {} is not a power of two between 1 and 2^30", kv.value.to_string()));
            f_.alignment_ = a;
            ctx_.clear();
            return;
        }
        f_.alignment_ = kDefaultAlignment;
    }

    // ---- tensor infos ------------------------------------------------------------
    void read_tensor_infos() {
        if (n_tensors_ > remaining() / min_tensor_info_size())
            fail_at(pos_, fmt::format("tensor count {} is impossible: {} bytes left after the metadata", n_tensors_,
                                      remaining()));
        f_.tensors_.reserve(size_t(n_tensors_));
        tensor_pos_.reserve(size_t(n_tensors_));
        std::unordered_set<std::string> seen;
        seen.reserve(size_t(n_tensors_));
        for (uint64_t i = 0; i < n_tensors_; ++i) {
            ctx_ = fmt::format("tensor info {}", i);
            const size_t at = pos_;
            TensorInfo ti;
            ti.name = read_string("tensor name");
            ctx_ = fmt::format("tensor '{}'", shown_name(ti.name));
            if (!seen.insert(ti.name).second) fail_at(at, "duplicate tensor name");

            const size_t dims_at = pos_;
            const uint32_t n_dims = read<uint32_t>("n_dims");
            if (n_dims == 0 || n_dims > 4) fail_at(dims_at, fmt::format("n_dims {} (must be 1 to 4)", n_dims));
            ti.n_dims = int(n_dims);
            for (uint32_t d = 0; d < n_dims; ++d) {
                const size_t ne_at = pos_;
                const int64_t ne = v1_ ? int64_t(read<uint32_t>("dimension")) : read<int64_t>("dimension");
                if (ne < 0) fail_at(ne_at, fmt::format("negative dimension ne[{}] = {}", d, ne));
                ti.ne[d] = ne;
            }
            const size_t type_at = pos_;
            const uint32_t type = read<uint32_t>("tensor type");
            if (!is_known_type(type)) fail_at(type_at, fmt::format("unknown tensor type id {}", type));
            ti.type = GgmlType(type);
            ti.offset = read<uint64_t>("tensor data offset");
            f_.tensors_.push_back(std::move(ti));
            tensor_pos_.push_back(at);
        }
        ctx_.clear();
    }

    // ---- data section --------------------------------------------------------------
    void layout_tensors() {
        const uint64_t a = f_.alignment_;
        const uint64_t header_end = pos_;
        // header_end <= size_ and a <= 2^30, so this cannot overflow.
        f_.data_offset_ = (header_end + a - 1) / a * a;
        if (f_.tensors_.empty()) return;  // a file without tensors may end without padding
        if (f_.data_offset_ > size_)
            fail_at(header_end, fmt::format("truncated file: padding to the data section (alignment {}) needs {} bytes, "
                                            "{} left",
                                            a, f_.data_offset_ - header_end, size_ - header_end));
        const uint64_t data_size = size_ - f_.data_offset_;

        for (size_t i = 0; i < f_.tensors_.size(); ++i) {
            TensorInfo& t = f_.tensors_[i];
            ctx_ = fmt::format("tensor '{}'", shown_name(t.name));
            const size_t at = tensor_pos_[i];
            const TypeTraits tt = type_traits(t.type);

            int64_t n_el = 1;
            for (int d = 0; d < 4; ++d)
                if (__builtin_mul_overflow(n_el, t.ne[d], &n_el))
                    fail_at(at, fmt::format("element count overflows (shape {})", shape(t)));
            if (t.ne[0] % tt.block_size != 0)
                fail_at(at, fmt::format("ne[0] = {} is not a multiple of the {} block size {}", t.ne[0], tt.name,
                                        tt.block_size));
            // bytes = blocks per row * block bytes * rows; checked in uint64.
            uint64_t bytes = 0;
            if (__builtin_mul_overflow(uint64_t(t.ne[0] / tt.block_size), uint64_t(tt.type_size), &bytes))
                fail_at(at, fmt::format("byte size overflows (shape {})", shape(t)));
            for (int d = 1; d < 4; ++d)
                if (__builtin_mul_overflow(bytes, uint64_t(t.ne[d]), &bytes))
                    fail_at(at, fmt::format("byte size overflows (shape {})", shape(t)));
            t.n_bytes = bytes;

            if (t.offset % a != 0)
                fail_at(at, fmt::format("data offset {} is not a multiple of the alignment {}", t.offset, a));
            if (t.offset > data_size || bytes > data_size - t.offset)
                fail_at(at, fmt::format("tensor data [{}, +{}) lies outside the file (data section is {} bytes at "
                                        "byte {}, file is {} bytes)",
                                        t.offset, bytes, data_size, f_.data_offset_, size_));
            t.data = f_.base_ + f_.data_offset_ + t.offset;
        }

        // Overlap: sort the non-empty tensors by offset; each must start at or after
        // the previous one's end. (Empty tensors occupy no bytes.)
        std::vector<size_t> order;
        order.reserve(f_.tensors_.size());
        for (size_t i = 0; i < f_.tensors_.size(); ++i)
            if (f_.tensors_[i].n_bytes > 0) order.push_back(i);
        std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
            return f_.tensors_[x].offset < f_.tensors_[y].offset;
        });
        for (size_t k = 1; k < order.size(); ++k) {
            const TensorInfo& prev = f_.tensors_[order[k - 1]];
            const TensorInfo& cur = f_.tensors_[order[k]];
            if (cur.offset < prev.offset + prev.n_bytes) {
                ctx_ = fmt::format("tensor '{}'", shown_name(cur.name));
                fail_at(tensor_pos_[order[k]],
                        fmt::format("data [{}, +{}) overlaps tensor '{}' [{}, +{})", cur.offset, cur.n_bytes, shown_name(prev.name),
                                    prev.offset, prev.n_bytes));
            }
        }
        ctx_.clear();
    }

    static std::string shape(const TensorInfo& t) {
        std::string s = "[";
        for (int d = 0; d < t.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
        return s + "]";
    }
};

std::unique_ptr<File> File::parse(const uint8_t* data, size_t size, std::string name) {
    std::unique_ptr<File> f(new File());
    f->path_ = std::move(name);
    f->base_ = data;
    f->size_ = size;
    Parser(*f).run();
    return f;
}

}  // namespace vega::gguf
