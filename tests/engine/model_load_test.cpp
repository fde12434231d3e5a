// Model::load rejects models it cannot run with an error that names the problem.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "quant/quant.h"
#include "run_vega.h"

namespace vega {
namespace {

// Writes the tiny synthetic F32 model, then a copy with `edit` applied to each
// (key or tensor) on the way; returns the copy's path.
struct Edit {
    std::function<bool(gguf::KeyValue&)> kv = [](gguf::KeyValue&) { return true; };  // false drops it
    std::function<bool(const gguf::TensorInfo&, gguf::Writer&)> tensor;               // true: handled
};

std::string edited_model(const std::string& name, const Edit& e) {
    const std::string base = test::temp_dir() + "/tiny-f32.gguf";
    write_synth_model(find_synth_shape("tiny"), GgmlType::F32, base, 7);
    auto f = gguf::File::open(base);
    gguf::Writer w;
    for (gguf::KeyValue kv : f->metadata())
        if (kv.key != "general.alignment" && e.kv(kv)) w.set_value(kv.key, kv.value);
    for (const auto& t : f->tensors()) {
        if (e.tensor && e.tensor(t, w)) continue;
        std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
        w.add_tensor(t.name, t.type, ne, t.data, t.n_bytes);
    }
    const std::string out = test::temp_dir() + "/" + name + ".gguf";
    w.write(out);
    return out;
}

std::string load_error(const std::string& path) {
    auto be = make_cpu_backend(1);
    try {
        Model::load(path, *be);
    } catch (const Error& err) {
        return err.what();
    }
    return "";
}

TEST(ModelLoad, UnmodifiedCopyLoads) {
    EXPECT_EQ(load_error(edited_model("copy", {})), "");
}

TEST(ModelLoad, UnsupportedArchitectureIsNamed) {
    Edit e;
    e.kv = [](gguf::KeyValue& kv) {
        if (kv.key == "general.architecture") kv.value.str = "gptneox";
        return true;
    };
    const std::string err = load_error(edited_model("arch", e));
    EXPECT_NE(err.find("unsupported architecture 'gptneox'"), std::string::npos) << err;
}

TEST(ModelLoad, UnsupportedTensorTypeNamesTensorAndType) {
    Edit e;
    e.tensor = [](const gguf::TensorInfo& t, gguf::Writer& w) {
        if (t.name != "blk.1.ffn_up.weight") return false;
        // Same shape stored as IQ2_XS (74 bytes per 256 values): parses, but vega cannot compute with it.
        std::vector<uint8_t> bytes(size_t(t.n_elements() / 256) * 74, 0);
        w.add_tensor(t.name, GgmlType::IQ2_XS, {t.ne[0], t.ne[1]}, bytes.data(), bytes.size());
        return true;
    };
    const std::string err = load_error(edited_model("iq2xs", e));
    EXPECT_NE(err.find("blk.1.ffn_up.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("IQ2_XS"), std::string::npos) << err;
}

// Checked before anything is loaded: the type error wins over an earlier tensor's
// wrong shape, and names the type, the tensor and the supported list.
TEST(ModelLoad, UnsupportedTypesAreRefusedBeforeAnyWeightLoads) {
    for (GgmlType type : {GgmlType::IQ3_S, GgmlType::IQ2_XXS, GgmlType::TQ1_0}) {
        const TypeTraits tt = type_traits(type);
        Edit e;
        e.tensor = [&](const gguf::TensorInfo& t, gguf::Writer& w) {
            if (t.name == "blk.0.attn_q.weight") {  // loaded early; its shape is wrong
                std::vector<float> v(size_t(t.n_elements() * 2), 0.f);
                w.add_tensor(t.name, GgmlType::F32, {t.ne[0], t.ne[1] * 2}, v.data(), v.size() * 4);
                return true;
            }
            if (t.name != "blk.1.ffn_down.weight") return false;
            std::vector<uint8_t> bytes(size_t(t.n_elements() / tt.block_size) * tt.type_size, 0);
            w.add_tensor(t.name, type, {t.ne[0], t.ne[1]}, bytes.data(), bytes.size());
            return true;
        };
        const std::string err = load_error(edited_model(std::string("type-") + tt.name, e));
        EXPECT_NE(err.find("tensor 'blk.1.ffn_down.weight' has type " + std::string(tt.name) +
                           " which vega does not support yet"),
                  std::string::npos)
            << err;
        EXPECT_NE(err.find("(supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
                           "IQ4_XS, BF16, MXFP4)"), std::string::npos)
            << err;
        EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    }
}

TEST(ModelLoad, MissingTensorIsNamed) {
    Edit e;
    e.tensor = [](const gguf::TensorInfo& t, gguf::Writer&) { return t.name == "blk.0.attn_k.weight"; };
    const std::string err = load_error(edited_model("missing", e));
    EXPECT_NE(err.find("missing tensor 'blk.0.attn_k.weight'"), std::string::npos) << err;
}

TEST(ModelLoad, WrongShapeIsNamed) {
    Edit e;
    e.tensor = [](const gguf::TensorInfo& t, gguf::Writer& w) {
        if (t.name != "blk.0.attn_v.weight") return false;
        std::vector<float> v(size_t(t.ne[0]) * 64, 0.5f);
        w.add_tensor(t.name, GgmlType::F32, {t.ne[0], 64}, v.data(), v.size() * 4);
        return true;
    };
    const std::string err = load_error(edited_model("shape", e));
    EXPECT_NE(err.find("blk.0.attn_v.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("expected"), std::string::npos) << err;
}

TEST(ModelLoad, MissingHyperParameterIsNamed) {
    Edit e;
    e.kv = [](gguf::KeyValue& kv) { return kv.key != "llama.block_count"; };
    const std::string err = load_error(edited_model("nokey", e));
    EXPECT_NE(err.find("llama.block_count"), std::string::npos) << err;
}

}  // namespace
}  // namespace vega
