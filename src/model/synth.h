// Synthetic models: GGUF files with the shapes of real models (tiny to 30B),
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

namespace gguf { class Writer; }

struct SynthShape {
    std::string name;  // "tiny", "llama2-7b", ...
    std::string arch;  // general.architecture: llama, qwen2, qwen3, qwen3moe
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base;
    bool qkv_bias;  // qwen2: attn_{q,k,v}.bias
    bool qk_norm;   // qwen3, qwen3moe: attn_{q,k}_norm.weight [head_dim]
    // Per-head size. 0: n_embd / n_head, and no attention.key_length/value_length keys
    // (the dense shapes). Nonzero: q is n_head x head_dim wide, which need not be n_embd
    // (qwen3moe-30b-a3b: 32 x 128 = 4096 from n_embd 2048), and the file carries
    // <arch>.attention.key_length = value_length = head_dim.
    int head_dim = 0;
    // Mixture of experts (qwen3moe only): each layer's FFN is n_expert stacked FFNs of
    // length n_ff_exp, n_expert_used of them per token. 0 experts: a dense FFN of
    // length n_ff. A MoE shape's n_ff is only the feed_forward_length metadata.
    int n_expert = 0;
    int n_expert_used = 0;
    int n_ff_exp = 0;

    int head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
    bool moe() const { return n_expert > 0; }
};

// The built-in shapes: tiny, qwen3-tiny, qwen3moe-tiny, 1b, llama2-7b, llama3-8b, llama3-70b,
// qwen2-7b, qwen3moe-30b-a3b.
//
// qwen3moe (llama.cpp's LLM_ARCH_QWEN3MOE) tensors per layer, GGUF order (ne0 first),
// E = n_embd, H = n_head, KV = n_head_kv, hd = head_size(), X = n_expert, F = n_ff_exp:
//   attn_norm [E], attn_q [E, H*hd], attn_k [E, KV*hd], attn_v [E, KV*hd],
//   attn_q_norm [hd], attn_k_norm [hd], attn_output [H*hd, E], ffn_norm [E],
//   ffn_gate_inp [E, X] (the router, always F32: llama-quantize never quantizes it),
//   ffn_gate_exps [E, F, X], ffn_up_exps [E, F, X], ffn_down_exps [F, E, X]
// and no dense ffn_gate/ffn_up/ffn_down. Metadata adds <arch>.expert_count,
// expert_used_count and expert_feed_forward_length.
const std::vector<SynthShape>& synth_shapes();
// Throws vega::Error listing the known names.
const SynthShape& find_synth_shape(const std::string& name);
// One device's share of a dense shape under tensor parallel over n devices, as a model
// of its own: n_head / n heads and n_head_kv / n KV heads of the same head_dim (written
// as attention.key_length), n_ff / n FFN rows, and the widest rank's share of the
// vocabulary (split_vocab: the output matrix's rows it computes; the embedding, one row a
// token, shrinks with it; at least the 260 tokens of a synth vocabulary). Its decode on
// one device is a rank's step with free all-reduces: the ceiling of tensor parallel's
// decode, measured on one GPU. Named "<shape>/tp<n>". Throws vega::Error for a mixture of
// experts (its experts split by expert, with routing over all of them) and for counts
// that do not divide.
SynthShape tensor_parallel_share(const SynthShape& s, int n);

// How the weight matrices are stored. A plain GgmlType converts implicitly
// (every matrix in that type, like llama-quantize --pure); mix_m asks for
// llama.cpp's "_M" recipe on top of a K-quant base (Q4_K -> "Q4_K_M",
// Q5_K -> "Q5_K_M"), as llama-quantize's llama_tensor_get_type_impl picks it
// (src/llama-quant.cpp, llama.cpp 2026-08):
//   output.weight                      -> Q6_K
//   attn_v, ffn_down and ffn_down_exps of layer i
//                                      -> Q6_K when use_more_bits(i, n_layer):
//       i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2   (exactly half of 32 layers)
//       (ffn_down_exps is in llama.cpp's ffn_down category: its name holds
//       "ffn_down"; the layer comes from the name, as for every MoE file)
//   ffn_gate_exps, ffn_up_exps         -> the base type (llama.cpp's ffn_gate and
//       ffn_up categories change nothing for Q4_K_M/Q5_K_M)
//   only when n_expert == 8 (llama.cpp's Mixtral rules; 128-expert qwen3moe files
//   get none of them):
//       attn_v and attn_k              -> Q8_0 (every layer)
//       attn_output                    -> Q5_K under Q4_K_M (Q5_K_M: the base Q5_K)
//   every other matrix                 -> the base type.
// (qwen3moe-tiny in Q4_K_M matches llama-quantize's Q4_K_M of the shared moe/ test
// model tensor for tensor, fallbacks and 8-expert rules included: synth_test.cpp.)
// Norms, biases and the MoE router (ffn_gate_inp) are always F32. A matrix whose
// row length (ne[0]) is not a multiple of the type's block size falls back as
// llama.cpp does, 3-D expert tensors included:
//   Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; and to F16 when not a multiple of 32.
struct SynthFormat {
    GgmlType type = GgmlType::F16;
    bool mix_m = false;
    SynthFormat(GgmlType t = GgmlType::F16, bool m = false) : type(t), mix_m(m) {}
};
// "f32", "F16", "bf16", "q4_0", "Q4_K_M", ... (case-insensitive). Throws vega::Error.
SynthFormat parse_synth_format(const std::string& s);
std::string synth_format_name(const SynthFormat& f);  // "Q4_K_M", "Q8_0", ...
// The type one weight matrix gets under format f (the rule above). ne0 = row
// length; n_expert = the model's expert count (0 for a dense model).
GgmlType synth_tensor_type(const SynthFormat& f, const std::string& tensor_name, int layer, int n_layer,
                           int64_t ne0, int n_expert = 0);

// One tensor of a synthetic file, as write_synth_model writes it, in file order.
struct SynthTensor {
    std::string name;
    std::vector<int64_t> ne;  // GGUF order, ne[0] = row length; 1 to 3 dimensions
    int layer;                // -1 outside the blocks
    GgmlType type;
    uint64_t n_bytes;         // the tensor's data bytes (unpadded)
};
// The tensor table without generating any weight (cheap for every shape: tests
// check the 30B layout with it). Throws vega::Error like write_synth_model.
std::vector<SynthTensor> synth_tensor_table(const SynthShape& shape, SynthFormat format);
// The metadata write_synth_model puts in a file (architecture keys, vocabulary).
void write_synth_metadata(gguf::Writer& w, const SynthShape& shape, SynthFormat format);

// Writes the model to `path` (via path.tmp, renamed at the end), tensor by
// tensor: each is generated row by row and quantized (on all hardware threads)
// straight into the output buffer and written before the next, so memory stays at
// about one tensor in its stored type (no float copy of it). The largest are
// token_embd/output (qwen3moe-30b-a3b: 151936 x 2048, 1.2 GB in F32, 175 MB in
// Q4_0) and a 30B expert tensor (2048 x 768 x 128 = 201M weights: 805 MB in F32,
// 113 MB in Q4_0): the whole 30B in Q4_0 (17.2 GB) took 2 minutes on 2 cores and
// 240 MB resident. Weights: token_embd ~ N(0, 1); matrices and expert tensors
// ~ N(0, 1/sqrt(fan_in)) with fan_in = ne[0]; the MoE router ~ N(0, 10/sqrt(n_embd))
// (wide, so that each token's top experts stand clear of the rest); norms
// 1 + N(0, 0.02); biases N(0, 0.02). Deterministic in (shape, format, seed),
// independent of the thread count. progress(fraction of bytes written), if set,
// is called after each tensor. Throws vega::Error.
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
