// gguf::File: opening (read-only mmap, no copy of tensor data), lookups and the
// typed metadata getters.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"

namespace vega::gguf {

std::unique_ptr<File> File::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        fail("{}: cannot stat: {}", path, std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("{}: not a regular file", path);
    }
    const size_t size = size_t(st.st_size);
    void* map = nullptr;
    if (size > 0) {
        map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            fail("{}: cannot map {} bytes: {}", path, size, std::strerror(e));
        }
    }
    ::close(fd);  // the mapping stays valid without the descriptor

    // The File owns the mapping from here on, so a parse error unmaps it.
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    f->mapping_ = map;
    f->base_ = static_cast<const uint8_t*>(map);
    f->size_ = size;
    std::unique_ptr<File> parsed = parse(f->base_, f->size_, path);
    // Move the parsed contents into the owning File.
    f->version_ = parsed->version_;
    f->alignment_ = parsed->alignment_;
    f->data_offset_ = parsed->data_offset_;
    f->kv_ = std::move(parsed->kv_);
    f->tensors_ = std::move(parsed->tensors_);  // data pointers already point into the mapping
    return f;
}

File::~File() {
    if (mapping_) ::munmap(mapping_, size_);
}

const Value* File::find(std::string_view key) const {
    for (const auto& kv : kv_)
        if (kv.key == key) return &kv.value;
    return nullptr;
}

const TensorInfo* File::tensor(std::string_view name) const {
    for (const auto& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const char* want, const Value& v) {
    if (v.type == ValueType::ARRAY)
        fail("{}: metadata key '{}' has type array of {}, expected {}", path, key, value_type_name(v.elem_type), want);
    fail("{}: metadata key '{}' has type {}, expected {}", path, key, value_type_name(v.type), want);
}

bool is_float(const Value& v) { return v.type == ValueType::FLOAT32 || v.type == ValueType::FLOAT64; }

int64_t int_of(const std::string& path, std::string_view key, const Value& v) {
    if (!v.is_integer()) wrong_type(path, key, "an integer", v);
    if ((v.type == ValueType::UINT64) && v.num.u64 > uint64_t(INT64_MAX))
        fail("{}: metadata key '{}' value {} (uint64) does not fit in int64", path, key, v.num.u64);
    return v.as_int();
}

double float_of(const std::string& path, std::string_view key, const Value& v) {
    if (!is_float(v) && !v.is_integer()) wrong_type(path, key, "a number (float32/float64/integer)", v);
    return v.as_double();
}

}  // namespace

std::string File::get_string(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail("{}: metadata key '{}' is missing", path_, key);
    if (v->type != ValueType::STRING) wrong_type(path_, key, "string", *v);
    return v->str;
}

int64_t File::get_int(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail("{}: metadata key '{}' is missing", path_, key);
    return int_of(path_, key, *v);
}

double File::get_float(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail("{}: metadata key '{}' is missing", path_, key);
    return float_of(path_, key, *v);
}

bool File::get_bool(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail("{}: metadata key '{}' is missing", path_, key);
    if (v->type != ValueType::BOOL) wrong_type(path_, key, "bool", *v);
    return v->num.b;
}

std::string File::get_string(std::string_view key, std::string_view dflt) const {
    return find(key) ? get_string(key) : std::string(dflt);
}
int64_t File::get_int(std::string_view key, int64_t dflt) const { return find(key) ? get_int(key) : dflt; }
double File::get_float(std::string_view key, double dflt) const { return find(key) ? get_float(key) : dflt; }
bool File::get_bool(std::string_view key, bool dflt) const { return find(key) ? get_bool(key) : dflt; }

std::vector<std::string> File::get_string_array(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return {};
    if (v->type != ValueType::ARRAY || v->elem_type != ValueType::STRING) wrong_type(path_, key, "array of string", *v);
    std::vector<std::string> out;
    out.reserve(v->arr.size());
    for (const auto& e : v->arr) out.push_back(e.str);
    return out;
}

std::vector<float> File::get_float_array(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return {};
    if (v->type != ValueType::ARRAY) wrong_type(path_, key, "array of numbers", *v);
    Value probe;
    probe.type = v->elem_type;
    if (!is_float(probe) && !probe.is_integer()) wrong_type(path_, key, "array of numbers", *v);
    std::vector<float> out;
    out.reserve(v->arr.size());
    for (const auto& e : v->arr) out.push_back(float(e.as_double()));
    return out;
}

std::vector<int64_t> File::get_int_array(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return {};
    if (v->type != ValueType::ARRAY) wrong_type(path_, key, "array of integers", *v);
    Value probe;
    probe.type = v->elem_type;
    if (!probe.is_integer()) wrong_type(path_, key, "array of integers", *v);
    std::vector<int64_t> out;
    out.reserve(v->arr.size());
    for (const auto& e : v->arr) out.push_back(int_of(path_, key, e));
    return out;
}

}  // namespace vega::gguf
