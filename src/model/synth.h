// Synthetic models: GGUF files with the shapes of real models (tiny to 8B),
// random weights and a made-up SentencePiece vocabulary, so that benchmarks
// and end-to-end plumbing run without downloading anything. The files carry
// llama.cpp-compatible metadata and tensor names and load in llama.cpp too.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/types.h"

namespace vega {

struct SynthShape {
    std::string name;  // "tiny", "llama2-7b", ...
    std::string arch;  // general.architecture: llama, qwen2, qwen3
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base;
    bool qkv_bias;  // qwen2: attn_{q,k,v}.bias
    bool qk_norm;   // qwen3: attn_{q,k}_norm.weight [head_dim]
};

// The built-in shapes: tiny, qwen3-tiny, 1b, llama2-7b, llama3-8b, qwen2-7b.
const std::vector<SynthShape>& synth_shapes();
// Throws vega::Error listing the known names.
const SynthShape& find_synth_shape(const std::string& name);

// How the weight matrices are stored. A plain GgmlType converts implicitly
// (every matrix in that type); mix_m asks for llama.cpp's "_M" recipe on top of
// a K-quant base (Q4_K -> "Q4_K_M", Q5_K -> "Q5_K_M"):
//   output.weight                      -> Q6_K
//   attn_v and ffn_down of layer i     -> Q6_K when use_more_bits(i, n_layer):
//       i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2   (exactly half of 32 layers)
//   every other matrix                 -> the base type.
// Norms and biases are always F32. A matrix whose row length (ne[0]) is not a
// multiple of the type's block size falls back as llama.cpp does:
//   Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; and to F16 when not a multiple of 32.
struct SynthFormat {
    GgmlType type = GgmlType::F16;
    bool mix_m = false;
    SynthFormat(GgmlType t = GgmlType::F16, bool m = false) : type(t), mix_m(m) {}
};
// "f32", "F16", "bf16", "q4_0", "Q4_K_M", ... (case-insensitive). Throws vega::Error.
SynthFormat parse_synth_format(const std::string& s);
std::string synth_format_name(const SynthFormat& f);  // "Q4_K_M", "Q8_0", ...
// The type one tensor gets under format f (the rule above). ne0 = row length.
GgmlType synth_tensor_type(const SynthFormat& f, const std::string& tensor_name, int layer, int n_layer,
                           int64_t ne0);

// Writes the model to `path` (via path.tmp, renamed at the end), tensor by
// tensor: each is generated and quantized (on all hardware threads) straight
// into the output buffer and written before the next, so memory stays at about
// one tensor. Weights: token_embd ~ N(0, 1); matrices ~ N(0, 1/sqrt(fan_in)) with
// fan_in = ne[0]; norms 1 + N(0, 0.02); biases N(0, 0.02). Deterministic in
// (shape, format, seed), independent of the thread count. progress(fraction of
// bytes written), if set, is called after each tensor. Throws vega::Error.
void write_synth_model(const SynthShape& shape, SynthFormat format, const std::string& path, uint64_t seed,
                       std::function<void(float)> progress = {});

// The vocabulary alone (exposed for tests): n_vocab tokens,
// <unk> <s> </s>, <0x00>..<0xFF>, "▁", printable ASCII, ▁-words and subwords,
// then generated letter-combination filler. Scores: 0 for special/byte tokens,
// then strictly decreasing. Types: 2 unknown, 3 control, 6 byte, 1 normal.
struct SynthVocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
};
SynthVocab synth_vocab(int n_vocab);

}  // namespace vega
