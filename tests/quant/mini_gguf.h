// A minimal GGUF v2/v3 tensor-table reader for the quant tests only (so they
// depend on vega_quant alone, not on the real loader): skips every metadata
// value, reads general.alignment, and returns each tensor's name, type, shape
// and bytes. No validation beyond bounds checks; test data only.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace vega::test {

struct MiniTensor {
    std::string name;
    uint32_t type = 0;
    std::vector<uint64_t> ne;  // ne[0] = row length
    const uint8_t* data = nullptr;
};

class MiniGguf {
public:
    explicit MiniGguf(std::string bytes) : buf_(std::move(bytes)) {
        if (buf_.size() < 24 || std::memcmp(buf_.data(), "GGUF", 4) != 0) throw std::runtime_error("not a GGUF file");
        pos_ = 4;
        const uint32_t version = u32();
        if (version < 2) throw std::runtime_error("GGUF v1 not handled here");
        const uint64_t n_tensors = u64(), n_kv = u64();
        uint64_t alignment = 32;
        for (uint64_t i = 0; i < n_kv; ++i) {
            const std::string key = str();
            const uint32_t type = u32();
            if (key == "general.alignment" && type == 4) {
                alignment = u32();
            } else {
                skip_value(type);
            }
        }
        std::vector<uint64_t> offsets;
        for (uint64_t i = 0; i < n_tensors; ++i) {
            MiniTensor t;
            t.name = str();
            const uint32_t nd = u32();
            for (uint32_t d = 0; d < nd; ++d) t.ne.push_back(u64());
            t.type = u32();
            offsets.push_back(u64());
            tensors_.push_back(std::move(t));
        }
        const uint64_t data_start = (pos_ + alignment - 1) / alignment * alignment;
        for (size_t i = 0; i < tensors_.size(); ++i) {
            if (data_start + offsets[i] > buf_.size()) throw std::runtime_error("tensor offset out of range");
            tensors_[i].data = reinterpret_cast<const uint8_t*>(buf_.data()) + data_start + offsets[i];
        }
    }
    const std::vector<MiniTensor>& tensors() const { return tensors_; }
    const MiniTensor* find(const std::string& name) const {
        for (const auto& t : tensors_)
            if (t.name == name) return &t;
        return nullptr;
    }

private:
    void need(size_t n) {
        if (pos_ + n > buf_.size()) throw std::runtime_error("truncated GGUF");
    }
    template <typename T>
    T get() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, buf_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    uint32_t u32() { return get<uint32_t>(); }
    uint64_t u64() { return get<uint64_t>(); }
    std::string str() {
        const uint64_t n = u64();
        need(n);
        std::string s = buf_.substr(pos_, n);
        pos_ += n;
        return s;
    }
    void skip_value(uint32_t type) {
        static const size_t sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
        if (type == 8) {
            str();
        } else if (type == 9) {
            const uint32_t et = u32();
            const uint64_t n = u64();
            for (uint64_t i = 0; i < n; ++i) skip_value(et);
        } else if (type < 13) {
            need(sizes[type]);
            pos_ += sizes[type];
        } else {
            throw std::runtime_error("bad GGUF value type");
        }
    }

    std::string buf_;
    size_t pos_ = 0;
    std::vector<MiniTensor> tensors_;
};

}  // namespace vega::test
