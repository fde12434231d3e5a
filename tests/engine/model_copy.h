// Edited copies of a test model: the engine tests' variants of one GGUF file (its output
// tied to the embedding, its output rows made equal, ...) written to the test temp dir.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace vega::test {

// A copy of the GGUF `src` as TempDir()/name: every key (but the alignment) and tensor as
// it is, except what `edit` says of each tensor: false drops it; it may point `data` at
// other bytes of the tensor's size, which must live until this returns. Returns the path.
inline std::string model_copy(const std::string& src, const std::string& name,
                              const std::function<bool(const gguf::TensorInfo& t, const uint8_t*& data)>& edit) {
    auto f = gguf::File::open(src);
    gguf::Writer w;
    for (const gguf::KeyValue& kv : f->metadata())
        if (kv.key != "general.alignment") w.set_value(kv.key, kv.value);
    for (const gguf::TensorInfo& t : f->tensors()) {
        const uint8_t* data = t.data;
        if (edit(t, data))
            w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), data, size_t(t.n_bytes));
    }
    const std::string path = ::testing::TempDir() + name;
    w.write(path);
    return path;
}

// A copy of `src` without output.weight: its output is tied to the embedding.
inline std::string tied_copy(const std::string& src, const std::string& name) {
    return model_copy(src, name, [](const gguf::TensorInfo& t, const uint8_t*&) { return t.name != "output.weight"; });
}

}  // namespace vega::test
