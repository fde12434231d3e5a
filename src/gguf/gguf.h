// GGUF reader (v1, v2, v3; mmap, no copy of tensor data; strict validation)
// and writer. Every malformed input raises vega::Error naming the file, the
// problem and the byte offset; nothing is allocated from an unchecked count.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/types.h"

namespace vega::gguf {

enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Scalars live in the union fields; strings in `str`;
// arrays in `arr` (elements of `elem_type`, which may itself be ARRAY).
struct Value {
    ValueType type = ValueType::UINT8;
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
    } num{};
    std::string str;
    ValueType elem_type = ValueType::UINT8;  // for ARRAY
    std::vector<Value> arr;                  // for ARRAY

    bool is_integer() const;
    bool is_number() const;       // integer, float or bool
    int64_t as_int() const;       // integer/bool types; throws vega::Error otherwise
    double as_double() const;     // any numeric type
    std::string to_string(size_t max_items = 8) const;  // human-readable, arrays abbreviated
};

struct KeyValue {
    std::string key;
    Value value;
};

struct TensorInfo {
    std::string name;
    GgmlType type = GgmlType::F32;
    int n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
    uint64_t offset = 0;           // relative to the data section
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr; // points into the mapping

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
public:
    // Maps and validates the whole file. Throws vega::Error.
    static std::unique_ptr<File> open(const std::string& path);
    // Parses a caller-owned buffer (tests, fuzzing); the buffer must outlive the File.
    static std::unique_ptr<File> parse(const uint8_t* data, size_t size, std::string name = "<memory>");
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // byte offset of the tensor data section
    size_t file_size() const { return size_; }

    const std::vector<KeyValue>& metadata() const { return kv_; }
    const Value* find(std::string_view key) const;
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* tensor(std::string_view name) const;

    // Typed getters: throw vega::Error naming the key if missing or of the wrong type.
    std::string get_string(std::string_view key) const;
    int64_t get_int(std::string_view key) const;
    double get_float(std::string_view key) const;
    bool get_bool(std::string_view key) const;
    // With default when the key is absent (still throws when present with a wrong type).
    std::string get_string(std::string_view key, std::string_view dflt) const;
    int64_t get_int(std::string_view key, int64_t dflt) const;
    double get_float(std::string_view key, double dflt) const;
    bool get_bool(std::string_view key, bool dflt) const;
    std::vector<std::string> get_string_array(std::string_view key) const;  // empty if absent
    std::vector<float> get_float_array(std::string_view key) const;         // numeric arrays
    std::vector<int64_t> get_int_array(std::string_view key) const;

private:
    File() = default;
    std::string path_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    void* mapping_ = nullptr;  // non-null when we own an mmap
    std::vector<KeyValue> kv_;
    std::vector<TensorInfo> tensors_;
    friend class Parser;
};

// Writes GGUF v3 (or v2) files: metadata in insertion order, tensors aligned.
class Writer {
public:
    void set_u32(const std::string& key, uint32_t v);
    void set_i32(const std::string& key, int32_t v);
    void set_u64(const std::string& key, uint64_t v);
    void set_f32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_string(const std::string& key, const std::string& v);
    void set_string_array(const std::string& key, const std::vector<std::string>& v);
    void set_f32_array(const std::string& key, const std::vector<float>& v);
    void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
    void set_value(const std::string& key, const Value& v);  // any value, arrays nested
    // ne[0] is the row length. `data` must hold exactly the tensor's bytes; it is copied.
    void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, const void* data, size_t n_bytes);
    // Streaming variant for files larger than memory (e.g. `vega synth` of a 7B model):
    // nothing is stored now; when the file is serialised, fill(dst) must write exactly
    // n_bytes into dst. Tensors are filled one at a time in insertion order, and write()
    // streams each to disk before filling the next, so at most one tensor is in memory.
    void add_tensor_lazy(const std::string& name, GgmlType type, std::vector<int64_t> ne, size_t n_bytes,
                         std::function<void(uint8_t* dst)> fill);
    void set_alignment(uint32_t a);  // also written as general.alignment
    void set_version(uint32_t v);    // 2 or 3 (default 3)
    // Serialises to memory / to a file (written to PATH.tmp then renamed).
    std::vector<uint8_t> to_bytes() const;
    void write(const std::string& path) const;

private:
    struct PendingTensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> ne;
        std::vector<uint8_t> data;
        uint64_t n_bytes = 0;                    // == data.size() unless lazy
        std::function<void(uint8_t*)> fill;      // set for add_tensor_lazy tensors
    };
    void check_new_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne, size_t n_bytes) const;
    std::vector<uint8_t> header_bytes(uint64_t* align) const;  // everything before the tensor data, padded
    uint32_t version_ = 3;
    uint32_t alignment_ = 32;
    std::vector<KeyValue> kv_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace vega::gguf
