// Synthetic GGUF models (see synth.h): shapes, the type recipe, the weight
// generator and the streaming write through gguf::Writer::add_tensor_lazy.
#include "model/synth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <thread>
#include <unordered_set>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"

namespace vega {

namespace {

// ---- shapes -------------------------------------------------------------------

SynthShape moe_shape(SynthShape s, int head_dim, int n_expert, int n_expert_used, int n_ff_exp) {
    s.head_dim = head_dim;
    s.n_expert = n_expert;
    s.n_expert_used = n_expert_used;
    s.n_ff_exp = n_ff_exp;
    return s;
}

std::vector<SynthShape> make_shapes() {
    //        name          arch     embd  L   head kv   n_ff   vocab   ctx    rope     bias   qknorm
    std::vector<SynthShape> v = {
        {"tiny",       "llama", 256,  2,  4,  2,  768,   512,    512,   10000.f,   false, false},
        {"qwen3-tiny", "qwen3", 256,  2,  4,  2,  768,   512,    512,   1000000.f, false, true},
        {"1b",         "llama", 2048, 16, 32, 8,  8192,  32000,  4096,  10000.f,   false, false},
        {"llama2-7b",  "llama", 4096, 32, 32, 32, 11008, 32000,  4096,  10000.f,   false, false},
        {"llama3-8b",  "llama", 4096, 32, 32, 8,  14336, 128256, 8192,  500000.f,  false, false},
        {"llama3-70b", "llama", 8192, 80, 64, 8,  28672, 128256, 8192,  500000.f,  false, false},
        {"qwen2-7b",   "qwen2", 3584, 28, 28, 4,  18944, 152064, 32768, 1000000.f, true,  false},
    };
    // Mixtures of experts, columns as above, then head_dim, experts, used per token and
    // the experts' FFN length. n_ff is only the feed_forward_length key (Qwen3-30B-A3B's
    // GGUF says 6144 = 8 x 768). qwen3moe-tiny is the shared moe/ test models' shape;
    // qwen3moe-30b-a3b is Qwen3-30B-A3B (q is 32 x 128 = 4096 wide from n_embd 2048).
    v.insert(v.begin() + 2,
             moe_shape({"qwen3moe-tiny", "qwen3moe", 256, 2, 4, 2, 256, 512, 512, 1000000.f, false, true},
                       64, 8, 2, 128));
    v.push_back(
        moe_shape({"qwen3moe-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 151936, 40960, 1000000.f, false, true},
                  128, 128, 8, 768));
    return v;
}

void check_shape(const SynthShape& s) {
    if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "qwen3moe")
        fail("synth: shape '{}': architecture '{}' is not one of llama, qwen2, qwen3, qwen3moe", s.name, s.arch);
    if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 || s.n_ctx <= 0 ||
        s.head_dim < 0)
        fail("synth: shape '{}': every dimension must be positive", s.name);
    if (s.head_dim == 0 && (s.n_embd % s.n_head != 0 || (s.n_embd / s.n_head) % 2 != 0))
        fail("synth: shape '{}': n_embd {} must split into {} heads of even size", s.name, s.n_embd, s.n_head);
    if (s.head_size() % 2 != 0) fail("synth: shape '{}': head_dim {} must be even", s.name, s.head_size());
    if (s.n_head % s.n_head_kv != 0)
        fail("synth: shape '{}': n_head {} is not a multiple of n_head_kv {}", s.name, s.n_head, s.n_head_kv);
    if (s.n_vocab < 260) fail("synth: shape '{}': n_vocab {} is below the 260 the vocabulary needs", s.name, s.n_vocab);
    if (s.arch == "qwen3moe") {
        if (s.n_expert <= 0 || s.n_ff_exp <= 0 || s.n_expert_used <= 0 || s.n_expert_used > s.n_expert)
            fail("synth: shape '{}': qwen3moe needs experts (n_expert {}, n_expert_used {} of them, n_ff_exp {})",
                 s.name, s.n_expert, s.n_expert_used, s.n_ff_exp);
    } else if (s.n_expert != 0 || s.n_expert_used != 0 || s.n_ff_exp != 0) {
        fail("synth: shape '{}': architecture '{}' has no experts (only qwen3moe does)", s.name, s.arch);
    }
}

// ---- the type recipe ------------------------------------------------------------

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every
// third layer in between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::char_traits<char>::length(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// llama_ftype numbering for general.file_type.
uint32_t file_type_id(const SynthFormat& f) {
    switch (f.type) {
        case GgmlType::F32: return 0;
        case GgmlType::F16: return 1;
        case GgmlType::Q4_0: return 2;
        case GgmlType::Q4_1: return 3;
        case GgmlType::Q8_0: return 7;
        case GgmlType::Q5_0: return 8;
        case GgmlType::Q5_1: return 9;
        case GgmlType::Q4_K: return f.mix_m ? 15 : 14;  // Q4_K_M : Q4_K_S
        case GgmlType::Q5_K: return f.mix_m ? 17 : 16;  // Q5_K_M : Q5_K_S
        case GgmlType::Q6_K: return 18;
        case GgmlType::Q2_K: return 10;
        case GgmlType::Q3_K: return 11;  // (Q3_K_S: every matrix Q3_K)
        case GgmlType::IQ4_NL: return 25;
        case GgmlType::IQ4_XS: return 30;
        case GgmlType::MXFP4: return 38;  // (MXFP4_MOE)
        case GgmlType::BF16: return 32;
        default: fail("synth: weight type {} is not supported", type_traits(f.type).name ? type_traits(f.type).name : "?");
    }
}

void check_format(const SynthFormat& f) {
    file_type_id(f);  // rejects unsupported base types
    if (f.mix_m && f.type != GgmlType::Q4_K && f.type != GgmlType::Q5_K)
        fail("synth: the _M mix needs a Q4_K or Q5_K base, not {}", type_traits(f.type).name);
}

// ---- the vocabulary ---------------------------------------------------------------

const char* const kWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "with",
    "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "not", "word",
    "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your",
    "how", "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way", "about", "many",
    "then", "them", "write", "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him",
    "two", "has", "look", "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most",
    "people", "my", "over", "know", "water", "than", "call", "first", "who", "may", "down", "side", "been",
    "now", "find", "any", "new", "work", "part", "take", "get", "place", "made", "live", "where", "after",
    "back", "little", "only", "round", "man", "year", "came", "show", "every", "good", "me", "give", "our",
    "under", "name", "very", "through", "just", "form", "sentence", "great", "think", "say", "help", "low",
    "line", "differ", "turn", "cause", "much", "mean", "before", "move", "right", "boy", "old", "too",
    "same", "tell", "does", "set", "three", "want", "air", "well", "also", "play", "small", "end", "put",
    "home", "read", "hand", "port", "large", "spell", "add", "even", "land", "here", "must", "big", "high",
    "such", "follow", "act", "why", "ask", "men", "change", "went", "light", "kind", "off", "need", "house",
    "picture", "try", "us", "again", "animal", "point", "mother", "world", "near", "build", "self", "earth",
    "father", "head", "stand", "own", "page", "should", "country", "found", "answer", "school", "grow",
    "study", "still", "learn", "plant", "cover", "food", "sun", "four", "between", "state", "keep", "eye",
    "never", "last", "let", "thought", "city", "tree", "cross", "farm", "hard", "start", "might", "story",
    "Hello", "The", "In", "It", "This", "A", "model", "language", "token", "data", "system", "text",
};
const char* const kSubwords[] = {
    "ing", "ed", "er", "es", "ly", "tion", "ment", "ness", "able", "al", "ic", "ous", "ive", "ful", "less",
    "est", "th", "he", "an", "re", "on", "at", "en", "nd", "ti", "or", "te", "of", "it", "is", "ou", "ar",
    "as", "de", "rt", "ve", "'s", "'t", "'re", "'ll", "'ve", "'d", "'m", "un", "in", "ex", "pre", "pro",
};

}  // namespace

SynthVocab synth_vocab(int n_vocab) {
    if (n_vocab < 260) fail("synth: n_vocab {} is below the 260 the vocabulary needs", n_vocab);
    const std::string sp = "\xE2\x96\x81";  // U+2581, SentencePiece's space marker
    SynthVocab v;
    v.tokens.reserve(size_t(n_vocab));
    std::unordered_set<std::string> seen;  // normal tokens, to keep them unique
    auto add = [&](const std::string& text, int32_t type, float score) {
        v.tokens.push_back(text);
        v.types.push_back(type);
        v.scores.push_back(score);
    };
    add("<unk>", 2, 0.f);
    add("<s>", 3, 0.f);
    add("</s>", 3, 0.f);
    for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 6, 0.f);

    // Normal tokens, unique, scores -1, -2, ... in order of appearance.
    std::vector<std::string> normal;
    auto push = [&](const std::string& t) {
        if (v.tokens.size() + normal.size() >= size_t(n_vocab)) return false;
        if (!seen.insert(t).second) return true;
        normal.push_back(t);
        return true;
    };
    push(sp);
    for (int c = 0x21; c < 0x7F; ++c) push(std::string(1, char(c)));
    for (const char* w : kWords) push(sp + w);
    for (const char* s : kSubwords) push(s);
    for (const char* w : kWords) push(w);
    // Filler: lowercase letter combinations of growing length, bare then ▁-prefixed.
    for (int len = 2; v.tokens.size() + normal.size() < size_t(n_vocab); ++len) {
        size_t count = 1;
        for (int i = 0; i < len; ++i) count *= 26;
        for (int prefixed = 0; prefixed < 2; ++prefixed) {
            std::string t(size_t(len), 'a');
            for (size_t k = 0; k < count; ++k) {
                size_t x = k;
                for (int i = len - 1; i >= 0; --i, x /= 26) t[size_t(i)] = char('a' + x % 26);
                if (!push(prefixed ? sp + t : t)) break;
            }
        }
    }
    for (size_t i = 0; i < normal.size(); ++i) add(normal[i], 1, -float(i + 1));
    return v;
}

const std::vector<SynthShape>& synth_shapes() {
    static const std::vector<SynthShape> shapes = make_shapes();
    return shapes;
}

const SynthShape& find_synth_shape(const std::string& name) {
    std::string known;
    for (const auto& s : synth_shapes()) {
        if (s.name == name) return s;
        known += (known.empty() ? "" : ", ") + s.name;
    }
    fail("synth: unknown shape '{}' (known: {})", name, known);
}

SynthShape tensor_parallel_share(const SynthShape& s, int n) {
    if (n < 1) fail("synth: a tensor-parallel share over {} devices (needs 1 or more)", n);
    if (s.moe())
        fail("synth: shape '{}': a mixture of experts has no tensor-parallel share file (its experts split by "
             "expert, routed over all of them)",
             s.name);
    if (s.n_head % n != 0 || s.n_head_kv % n != 0 || s.n_ff % n != 0)
        fail("synth: shape '{}': {} heads, {} KV heads and FFN {} do not all divide by {} devices", s.name, s.n_head,
             s.n_head_kv, s.n_ff, n);
    SynthShape r = s;
    r.head_dim = s.head_size();
    r.n_head = s.n_head / n, r.n_head_kv = s.n_head_kv / n, r.n_ff = s.n_ff / n;
    // The widest rank's logits (the slowest rank sets the step; its embedding: the same
    // rows), at least the 260 tokens a synth vocabulary needs (only tiny shapes are below).
    const std::vector<int64_t> vocab = split_vocab(s.n_vocab, n);
    int64_t widest = 0;
    for (int i = 0; i < n; ++i) widest = std::max(widest, vocab[size_t(i) + 1] - vocab[size_t(i)]);
    r.n_vocab = std::max(260, int(widest));
    r.name = s.name + "/tp" + std::to_string(n);
    return r;
}

SynthFormat parse_synth_format(const std::string& s) {
    std::string u = s;
    for (auto& c : u) c = char(std::toupper(static_cast<unsigned char>(c)));
    if (u == "Q4_K_M") return {GgmlType::Q4_K, true};
    if (u == "Q5_K_M") return {GgmlType::Q5_K, true};
    if (u == "Q4_K_S") u = "Q4_K";
    if (u == "Q5_K_S") u = "Q5_K";
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                       GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K,
                       GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4})
        if (u == type_traits(t).name) return {t, false};
    fail("synth: unknown weight format '{}' (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K Q4_K_M Q5_K_M Q2_K "
         "Q3_K IQ4_NL IQ4_XS MXFP4)",
         s);
}

std::string synth_format_name(const SynthFormat& f) {
    const char* n = type_traits(f.type).name;
    return std::string(n ? n : "?") + (f.mix_m ? "_M" : "");
}

GgmlType synth_tensor_type(const SynthFormat& f, const std::string& name, int layer, int n_layer, int64_t ne0,
                           int n_expert) {
    GgmlType t = f.type;
    if (f.mix_m) {
        const bool more = layer >= 0 && use_more_bits(layer, n_layer);
        if (name == "output.weight") t = GgmlType::Q6_K;
        else if (ends_with(name, ".attn_v.weight")) t = n_expert == 8 ? GgmlType::Q8_0 : more ? GgmlType::Q6_K : t;
        else if (ends_with(name, ".attn_k.weight") && n_expert == 8) t = GgmlType::Q8_0;
        else if (ends_with(name, ".attn_output.weight") && n_expert == 8 && f.type == GgmlType::Q4_K) t = GgmlType::Q5_K;
        else if ((ends_with(name, ".ffn_down.weight") || ends_with(name, ".ffn_down_exps.weight")) && more)
            t = GgmlType::Q6_K;
    }
    if (ne0 % type_traits(t).block_size != 0) {
        switch (t) {
            case GgmlType::Q4_K: t = GgmlType::Q5_0; break;
            case GgmlType::Q5_K: t = GgmlType::Q5_1; break;
            case GgmlType::Q6_K: t = GgmlType::Q8_0; break;
            case GgmlType::Q2_K:
            case GgmlType::Q3_K:
            case GgmlType::IQ4_XS: t = GgmlType::IQ4_NL; break;  // llama.cpp's fallback for these
            default: t = GgmlType::F16; break;
        }
        if (ne0 % type_traits(t).block_size != 0) t = GgmlType::F16;
    }
    return t;
}

namespace {

// ---- weight generation --------------------------------------------------------------

uint64_t splitmix64(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
    return h;
}

enum class Init { Normal, Norm, Bias };

struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;  // GGUF order: ne[0] = row length (input dim)
    int layer;                // -1 outside the blocks
    Init init;
    float sd;                 // standard deviation of the random part
    GgmlType type;

    int64_t rows() const {
        int64_t r = 1;
        for (size_t d = 1; d < ne.size(); ++d) r *= ne[d];
        return r;
    }
    uint64_t n_bytes() const { return uint64_t(quant::row_bytes(type, ne[0])) * uint64_t(rows()); }
};

// One row of values. Each row has its own stream seeded from (seed, tensor
// name, row), so the result does not depend on how rows are split over threads.
// Rows run over every dimension past ne[0] (a 3-D expert tensor's row r is row
// r % ne[1] of expert r / ne[1]).
// Normals are Irwin-Hall sums of four 16-bit uniforms scaled to unit variance:
// cheap (one 64-bit draw per value) and close enough for synthetic weights.
void gen_row(const TensorSpec& t, uint64_t seed, int64_t row, float* out) {
    uint64_t s = seed ^ fnv1a(t.name) ^ (uint64_t(row) * 0xD1B54A32D192ED03ull);
    splitmix64(s);
    const float scale = t.sd * std::sqrt(3.f) / 65536.f;
    const float base = t.init == Init::Norm ? 1.f : 0.f;
    for (int64_t i = 0; i < t.ne[0]; ++i) {
        const uint64_t r = splitmix64(s);
        const float sum = float((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48)) - 2.f * 65535.f;
        out[i] = base + sum * scale;
    }
}

// Generates and converts every row of t into dst (rows * row_bytes bytes), rows
// split over the hardware threads.
void fill_tensor(const TensorSpec& t, uint64_t seed, uint8_t* dst) {
    const int64_t rows = t.rows();
    const size_t rb = quant::row_bytes(t.type, t.ne[0]);
    auto work = [&](int64_t r0, int64_t r1) {
        std::vector<float> buf(size_t(t.ne[0]));
        for (int64_t r = r0; r < r1; ++r) {
            gen_row(t, seed, r, buf.data());
            quant::quantize_row(t.type, buf.data(), dst + size_t(r) * rb, t.ne[0]);
        }
    };
    const int64_t elems = rows * t.ne[0];
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const int64_t n_threads = std::min<int64_t>({hw, rows, std::max<int64_t>(1, elems / (1 << 16))});
    if (n_threads <= 1) {
        work(0, rows);
        return;
    }
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
    for (int64_t i = 0; i < n_threads; ++i) {
        threads.emplace_back([&, i] {
            try {
                work(rows * i / n_threads, rows * (i + 1) / n_threads);
            } catch (...) {
                errors[size_t(i)] = std::current_exception();
            }
        });
    }
    for (auto& th : threads) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

std::vector<TensorSpec> tensor_list(const SynthShape& s, const SynthFormat& f) {
    const int64_t hd = s.head_size(), q_dim = hd * s.n_head, kv_dim = hd * s.n_head_kv;
    std::vector<TensorSpec> ts;
    auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out, int layer, float sd) {
        ts.push_back({name, {n_in, n_out}, layer, Init::Normal, sd,
                      synth_tensor_type(f, name, layer, s.n_layer, n_in, s.n_expert)});
    };
    // n_expert stacked [n_out][n_in] matrices, one 3-D tensor, typed like a matrix.
    auto experts = [&](const std::string& name, int64_t n_in, int64_t n_out, int layer, float sd) {
        ts.push_back({name, {n_in, n_out, s.n_expert}, layer, Init::Normal, sd,
                      synth_tensor_type(f, name, layer, s.n_layer, n_in, s.n_expert)});
    };
    auto vec = [&](const std::string& name, int64_t n, int layer, Init init) {
        ts.push_back({name, {n}, layer, init, 0.02f, GgmlType::F32});
    };
    auto w = [](int64_t fan_in) { return float(1.0 / std::sqrt(double(fan_in))); };

    matrix("token_embd.weight", s.n_embd, s.n_vocab, -1, 1.f);
    for (int l = 0; l < s.n_layer; ++l) {
        const std::string b = fmt::format("blk.{}.", l);
        vec(b + "attn_norm.weight", s.n_embd, l, Init::Norm);
        matrix(b + "attn_q.weight", s.n_embd, q_dim, l, w(s.n_embd));
        matrix(b + "attn_k.weight", s.n_embd, kv_dim, l, w(s.n_embd));
        matrix(b + "attn_v.weight", s.n_embd, kv_dim, l, w(s.n_embd));
        if (s.qkv_bias) {
            vec(b + "attn_q.bias", q_dim, l, Init::Bias);
            vec(b + "attn_k.bias", kv_dim, l, Init::Bias);
            vec(b + "attn_v.bias", kv_dim, l, Init::Bias);
        }
        if (s.qk_norm) {
            vec(b + "attn_q_norm.weight", hd, l, Init::Norm);
            vec(b + "attn_k_norm.weight", hd, l, Init::Norm);
        }
        matrix(b + "attn_output.weight", q_dim, s.n_embd, l, w(q_dim));
        vec(b + "ffn_norm.weight", s.n_embd, l, Init::Norm);
        if (s.moe()) {
            // The router stays F32 in every format (llama-quantize skips ffn_gate_inp).
            ts.push_back({b + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, l, Init::Normal, 10.f * w(s.n_embd),
                          GgmlType::F32});
            experts(b + "ffn_gate_exps.weight", s.n_embd, s.n_ff_exp, l, w(s.n_embd));
            experts(b + "ffn_up_exps.weight", s.n_embd, s.n_ff_exp, l, w(s.n_embd));
            experts(b + "ffn_down_exps.weight", s.n_ff_exp, s.n_embd, l, w(s.n_ff_exp));
        } else {
            matrix(b + "ffn_gate.weight", s.n_embd, s.n_ff, l, w(s.n_embd));
            matrix(b + "ffn_up.weight", s.n_embd, s.n_ff, l, w(s.n_embd));
            matrix(b + "ffn_down.weight", s.n_ff, s.n_embd, l, w(s.n_ff));
        }
    }
    vec("output_norm.weight", s.n_embd, -1, Init::Norm);
    matrix("output.weight", s.n_embd, s.n_vocab, -1, w(s.n_embd));
    return ts;
}

}  // namespace

void write_synth_metadata(gguf::Writer& w, const SynthShape& s, SynthFormat f) {
    check_shape(s);
    check_format(f);
    const std::string a = s.arch + ".";
    const int head_dim = s.head_size();
    w.set_string("general.architecture", s.arch);
    w.set_string("general.name", "vega-synth-" + s.name);
    w.set_u32("general.file_type", file_type_id(f));
    if (!is_float_type(f.type)) w.set_u32("general.quantization_version", 2);
    w.set_u32(a + "vocab_size", uint32_t(s.n_vocab));
    w.set_u32(a + "context_length", uint32_t(s.n_ctx));
    w.set_u32(a + "embedding_length", uint32_t(s.n_embd));
    w.set_u32(a + "block_count", uint32_t(s.n_layer));
    w.set_u32(a + "feed_forward_length", uint32_t(s.n_ff));
    w.set_u32(a + "attention.head_count", uint32_t(s.n_head));
    w.set_u32(a + "attention.head_count_kv", uint32_t(s.n_head_kv));
    if (s.head_dim > 0) {
        w.set_u32(a + "attention.key_length", uint32_t(head_dim));
        w.set_u32(a + "attention.value_length", uint32_t(head_dim));
    }
    w.set_f32(a + "attention.layer_norm_rms_epsilon", s.arch == "llama" ? 1e-5f : 1e-6f);
    w.set_f32(a + "rope.freq_base", s.rope_base);
    w.set_u32(a + "rope.dimension_count", uint32_t(head_dim));
    if (s.moe()) {
        w.set_u32(a + "expert_count", uint32_t(s.n_expert));
        w.set_u32(a + "expert_used_count", uint32_t(s.n_expert_used));
        w.set_u32(a + "expert_feed_forward_length", uint32_t(s.n_ff_exp));
    }

    const SynthVocab v = synth_vocab(s.n_vocab);
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    w.set_f32_array("tokenizer.ggml.scores", v.scores);
    w.set_i32_array("tokenizer.ggml.token_type", v.types);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_bool("tokenizer.ggml.add_eos_token", false);
}

std::vector<SynthTensor> synth_tensor_table(const SynthShape& shape, SynthFormat format) {
    check_shape(shape);
    check_format(format);
    std::vector<SynthTensor> out;
    for (const auto& t : tensor_list(shape, format)) out.push_back({t.name, t.ne, t.layer, t.type, t.n_bytes()});
    return out;
}

void write_synth_model(const SynthShape& shape, SynthFormat format, const std::string& path, uint64_t seed,
                       std::function<void(float)> progress) {
    gguf::Writer w;
    write_synth_metadata(w, shape, format);  // checks the shape and the format

    const std::vector<TensorSpec> specs = tensor_list(shape, format);
    uint64_t total = 0;
    for (const auto& t : specs) total += t.n_bytes();
    uint64_t done = 0;
    for (const auto& t : specs) {
        const size_t n_bytes = size_t(t.n_bytes());
        // The Writer calls fill in insertion order while streaming the file.
        w.add_tensor_lazy(t.name, t.type, t.ne, n_bytes, [&t, &done, &progress, total, seed, n_bytes](uint8_t* dst) {
            fill_tensor(t, seed, dst);
            done += n_bytes;
            if (progress) progress(float(double(done) / double(total)));
        });
    }
    w.write(path);
    if (progress) progress(1.f);
}

}  // namespace vega
