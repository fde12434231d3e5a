#include "model/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "core/env.h"
#include "core/error.h"
#include "quant/quant.h"

namespace vega {

namespace {

std::string shape_str(const gguf::TensorInfo& t) {
    std::string s = "[";
    for (int i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
    return s + "]";
}

// Finds, checks and uploads the weights named by llama.cpp's GGUF convention.
class WeightLoader {
public:
    WeightLoader(const gguf::File& f, std::vector<std::vector<uint8_t>>& host_slices)
        : f_(f), host_slices_(host_slices) {}
    // The stage whose backend takes the following uploads, and its part of a tensor-parallel
    // split: part `part` of `parts` (0 of 1: whole tensors).
    void use(ModelStage& stage, int part = 0, int parts = 1) { stage_ = &stage, part_ = part, parts_ = parts; }

    // Matrix W [n_out][n_in] (GGUF ne = [n_in, n_out]), whole.
    Weight matrix(const std::string& name, int64_t n_in, int64_t n_out, bool required = true) {
        const gguf::TensorInfo* t = find_matrix(name, n_in, n_out, required);
        return t ? upload(*t) : Weight{};
    }
    // This part's rows of W (q, k, v, gate, up: its heads or FFN rows).
    Weight rows(const std::string& name, int64_t n_in, int64_t n_out) {
        if (parts_ == 1) return matrix(name, n_in, n_out);
        const int64_t count = n_out / parts_;
        return row_range(name, n_in, n_out, count * part_, count);
    }
    // Rows [first, first + count) of W (a vocabulary share of the output matrix).
    Weight row_range(const std::string& name, int64_t n_in, int64_t n_out, int64_t first, int64_t count) {
        const gguf::TensorInfo& t = *find_matrix(name, n_in, n_out, true);
        if (first == 0 && count == n_out) return upload(t);
        const size_t row = quant::row_bytes(t.type, n_in);
        gguf::TensorInfo s = t;
        s.ne[1] = count;
        s.n_bytes = uint64_t(count) * row;
        s.data = t.data + size_t(first) * row;
        return upload(s, &t);
    }
    // This part's columns of W (o, down: the inputs of its heads or FFN rows), which must
    // start and end on the type's block boundaries.
    Weight cols(const std::string& name, int64_t n_in, int64_t n_out) {
        const gguf::TensorInfo& t = *find_matrix(name, n_in, n_out, true);
        if (parts_ == 1) return upload(t);
        const TypeTraits tr = type_traits(t.type);
        const int64_t count = n_in / parts_, first = count * part_;
        const int64_t unit = quant::uses_q8_activations(t.type) ? std::max<int64_t>(tr.block_size, QK_ACT) : tr.block_size;
        if (count % unit != 0)
            fail("{}: tensor '{}' ({}, {} inputs) cannot be split {} ways by columns: {} inputs per device is not a "
                 "multiple of {}; use --split-mode layer",
                 f_.path(), name, tr.name, n_in, parts_, count, unit);
        const size_t row = quant::row_bytes(t.type, n_in), part = quant::row_bytes(t.type, count),
                     skip = quant::row_bytes(t.type, first);
        std::vector<uint8_t> buf(part * size_t(n_out));
        for (int64_t o = 0; o < n_out; ++o)
            std::memcpy(buf.data() + size_t(o) * part, t.data + size_t(o) * row + skip, part);
        gguf::TensorInfo s = t;
        s.ne[0] = count;
        s.n_bytes = buf.size();
        s.data = buf.data();
        Weight w = upload(s, &t);
        // A backend that computes from host memory (the CPU) keeps pointing at the slice.
        if (stage_->backend->computes_from_host_memory()) host_slices_.push_back(std::move(buf));
        return w;
    }

    // n_mat stacked matrices [n_out][n_in] (a mixture of experts' 3-D tensor,
    // GGUF ne = [n_in, n_out, n_mat]); of a tensor-parallel split, this part's share of
    // the matrices (whole experts, each contiguous in the file).
    Weight stacked(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat) {
        const gguf::TensorInfo* t = f_.tensor(name);
        if (!t) fail("{}: missing tensor '{}'", f_.path(), name);
        if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_mat)
            fail("{}: tensor '{}' has shape {}, expected [{}, {}, {}]", f_.path(), name, shape_str(*t), n_in, n_out,
                 n_mat);
        check_row_length(*t, n_in);
        const int64_t count = n_mat / parts_, first = count * part_;
        gguf::TensorInfo s = *t;
        const size_t mat_bytes = quant::row_bytes(t->type, n_in) * size_t(n_out);
        s.ne[2] = count;
        s.n_bytes = uint64_t(count) * mat_bytes;
        s.data = t->data + size_t(first) * mat_bytes;
        Weight w = parts_ == 1 ? upload(*t) : upload(s, t);
        w.n_out = n_out, w.n_mat = count;
        return w;
    }

    // Vector [n] in F32 (norm weights, biases), whole.
    Weight vector(const std::string& name, int64_t n, bool required = true) {
        const gguf::TensorInfo* t = find_vector(name, n, required);
        return t ? upload(*t) : Weight{};
    }
    // This part's entries of vector [n] (the biases of q, k, v).
    Weight vector_part(const std::string& name, int64_t n, bool required = true) {
        const gguf::TensorInfo* t = find_vector(name, n, required);
        if (!t || parts_ == 1) return t ? upload(*t) : Weight{};
        const int64_t count = n / parts_;
        gguf::TensorInfo s = *t;
        s.ne[0] = count;
        s.n_bytes = uint64_t(count) * sizeof(float);
        s.data = t->data + size_t(count * part_) * sizeof(float);
        return upload(s, t);
    }

    // Bytes of the distinct tensors uploaded (a tensor uploaded to two stages counts once).
    size_t bytes() const { return bytes_; }

private:
    const gguf::TensorInfo* find_matrix(const std::string& name, int64_t n_in, int64_t n_out, bool required) {
        const gguf::TensorInfo* t = f_.tensor(name);
        if (!t) {
            if (required) fail("{}: missing tensor '{}'", f_.path(), name);
            return nullptr;
        }
        if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
            fail("{}: tensor '{}' has shape {}, expected [{}, {}]", f_.path(), name, shape_str(*t), n_in, n_out);
        check_row_length(*t, n_in);
        return t;
    }
    const gguf::TensorInfo* find_vector(const std::string& name, int64_t n, bool required) {
        const gguf::TensorInfo* t = f_.tensor(name);
        if (!t) {
            if (required) fail("{}: missing tensor '{}'", f_.path(), name);
            return nullptr;
        }
        if (t->n_elements() != n || t->ne[0] != n)
            fail("{}: tensor '{}' has shape {}, expected [{}]", f_.path(), name, shape_str(*t), n);
        if (t->type != GgmlType::F32)
            fail("{}: tensor '{}' has type {}, expected F32", f_.path(), name, type_traits(t->type).name);
        return t;
    }
    void check_row_length(const gguf::TensorInfo& t, int64_t n_in) {
        if (quant::uses_q8_activations(t.type) && n_in % QK_ACT != 0)
            fail("{}: tensor '{}' of type {} has rows of {} values, not a multiple of {}", f_.path(), t.name,
                 type_traits(t.type).name, n_in, QK_ACT);
    }
    // Uploads t (or a slice of the file's tensor `whole`) to the current stage's backend.
    Weight upload(const gguf::TensorInfo& t, const gguf::TensorInfo* whole = nullptr) {
        if (seen_.insert(whole ? whole : &t).second) bytes_ += (whole ? whole : &t)->n_bytes;
        stage_->weight_bytes += t.n_bytes;
        Weight w = stage_->backend->upload_weight(t);
        w.name = (whole ? whole : &t)->name.c_str();
        return w;
    }

    const gguf::File& f_;
    std::vector<std::vector<uint8_t>>& host_slices_;
    ModelStage* stage_ = nullptr;
    int part_ = 0, parts_ = 1;
    std::set<const gguf::TensorInfo*> seen_;
    size_t bytes_ = 0;
};

// The weight types vega computes with, from the type table: "F32, F16, Q4_0, ...".
std::string supported_type_names(const Backend* be = nullptr) {
    std::string out;
    for (uint32_t id = 0; id < 64; ++id) {
        const TypeTraits tr = type_traits(GgmlType(id));
        if (!tr.name || !tr.supported || (be && !be->supports_type(GgmlType(id)))) continue;
        out += (out.empty() ? "" : ", ") + std::string(tr.name);
    }
    return out;
}

// Every tensor's type, before any weight is read or any memory allocated: a file with a
// type vega cannot compute with (IQ2_XXS, TQ1_0, ...) anywhere in it is one line naming
// the first such tensor, its type and what is supported; likewise a type vega computes
// with on the CPU but this backend does not.
void check_tensor_types(const gguf::File& f, const Backend& be) {
    for (const gguf::TensorInfo& t : f.tensors()) {
        const TypeTraits tr = type_traits(t.type);
        if (!tr.supported)
            fail("{}: tensor '{}' has type {} which vega does not support yet (supported: {})", f.path(), t.name,
                 tr.name ? tr.name : "unknown", supported_type_names());
        if (!be.supports_type(t.type))
            fail("{}: tensor '{}' has type {} which the {} backend does not support yet (it runs {}; the CPU runs "
                 "every type: --device cpu)",
                 f.path(), t.name, tr.name, be.name(), supported_type_names(&be));
    }
}

}  // namespace

std::vector<int64_t> split_vocab(int64_t n_vocab, int parts) {
    if (parts < 1) fail("a vocabulary split needs at least one part (got {})", parts);
    // Part i starts at n_vocab * i / parts rounded down to 64 rows (so no part is empty
    // while each gets 64 or more); a vocabulary too small for that splits by rows.
    const int64_t unit = n_vocab >= int64_t(parts) * 64 ? 64 : 1;
    std::vector<int64_t> first;
    for (int i = 0; i < parts; ++i) first.push_back(n_vocab * i / parts / unit * unit);
    first.push_back(n_vocab);
    return first;
}

std::vector<size_t> Model::output_stages() const {
    std::vector<size_t> out;
    for (size_t s = 0; s < stages_.size(); ++s)
        if (stages_[s].computes_logits()) out.push_back(s);
    return out;
}

std::vector<int> split_layers(int n_layer, const std::vector<double>& shares) {
    if (shares.empty()) fail("a layer split needs at least one device");
    double total = 0;
    for (double s : shares) {
        if (!(s >= 0) || !std::isfinite(s)) fail("layer split share {} is not a finite non-negative number", s);
        total += s;
    }
    if (total <= 0) fail("the layer split shares are all zero");
    // Stage i ends at round(n_layer * (share 0 + .. + share i) / total), moved so that
    // each device keeps at least one layer while there are enough.
    const int n = int(shares.size());
    std::vector<int> first{0};
    double cum = 0;
    for (int i = 0; i < n; ++i) {
        cum += shares[size_t(i)];
        int end = i + 1 == n ? n_layer : int(std::lround(double(n_layer) * cum / total));
        if (shares[size_t(i)] > 0) end = std::min(std::max(end, first.back() + 1), n_layer - (n - 1 - i));
        if (end <= first.back() || shares[size_t(i)] == 0)
            fail("a layer split of {} layers over {} devices in shares {} gives device {} (share {:.3g}) no layer; "
                 "use fewer devices or change --tensor-split",
                 n_layer, n, fmt::join(shares, ","), i, shares[size_t(i)]);
        first.push_back(end);
    }
    return first;
}

std::unique_ptr<Model> Model::load(const std::string& path, Backend& backend,
                                   const std::function<void(float)>& progress) {
    return load(path, std::vector<Backend*>{&backend}, {}, progress);
}

std::unique_ptr<Model> Model::load(const std::string& path, const std::vector<Backend*>& devices,
                                   const std::vector<double>& shares, const std::function<void(float)>& progress) {
    Placement p;
    p.devices = devices, p.shares = shares;
    return load(path, p, progress);
}

std::unique_ptr<Model> Model::load(const std::string& path, const Placement& place,
                                   const std::function<void(float)>& progress) {
    const std::vector<Backend*>& devices = place.devices;
    if (devices.empty()) fail("no device to load {} on", path);
    auto m = std::unique_ptr<Model>(new Model());
    m->file_ = gguf::File::open(path);
    const gguf::File& f = *m->file_;
    m->hp_ = HParams::from_gguf(f);
    HParams& hp = m->hp_;
    m->tok_ = Tokenizer::from_gguf(f);

    const gguf::TensorInfo* embd = f.tensor("token_embd.weight");
    if (!embd) fail("{}: missing tensor 'token_embd.weight'", path);
    hp.n_vocab = int(embd->ne[1]);
    if (m->tok_->n_vocab() > hp.n_vocab)
        fail("{}: tokenizer has {} tokens but token_embd.weight has {} rows", path, m->tok_->n_vocab(), hp.n_vocab);

    for (Backend* be : devices) check_tensor_types(f, *be);
    const bool tp = place.mode == SplitMode::kTensor && devices.size() > 1;
    const int R = tp ? int(devices.size()) : 1;  // tensor-parallel parts
    if (tp) {
        if (!place.shares.empty()) fail("--tensor-split weighs a layer split; tensor parallel splits evenly");
        if (hp.n_head % R || hp.n_head_kv % R || (!hp.moe() && hp.n_ff % R))
            fail("{}: tensor parallel over {} devices needs the heads ({}), the KV heads ({}) and the FFN rows ({}) "
                 "to divide by {}; use --split-mode layer",
                 path, R, hp.n_head, hp.n_head_kv, hp.n_ff, R);
        if (hp.moe() && hp.n_expert % R)
            fail("{}: tensor parallel over {} devices splits the {} experts by device: they must divide by {}; use "
                 "--split-mode layer",
                 path, R, hp.n_expert, R);
        // Each device's logits: its share of the vocabulary (VEGA_TP_VOCAB_SPLIT=0, an A/B
        // switch: device 0 computes every logit).
        const std::vector<int64_t> vocab = split_vocab(hp.n_vocab, env::flag("VEGA_TP_VOCAB_SPLIT", true) ? R : 1);
        for (size_t i = 0; i < devices.size(); ++i) {
            ModelStage st;
            st.backend = devices[i], st.first_layer = 0, st.end_layer = hp.n_layer;
            st.n_head = hp.n_head / R, st.n_head_kv = hp.n_head_kv / R, st.n_ff = hp.moe() ? 0 : hp.n_ff / R;
            if (hp.moe()) st.n_expert = hp.n_expert / R, st.first_expert = st.n_expert * int(i);
            if (i + 1 < vocab.size()) st.first_vocab = vocab[i], st.n_vocab = vocab[i + 1] - vocab[i];
            m->stages_.push_back(st);
        }
    } else {
        // Every layer on one device, or contiguous ranges in proportion to the shares.
        std::vector<double> sh = place.shares;
        if (sh.empty()) {
            // Host memory is no measure of a GPU's share: a mix needs the shares said.
            bool cpu = false, gpu = false;
            for (Backend* be : devices) (be->device_index() < 0 ? cpu : gpu) = true;
            if (cpu && gpu)
                fail("a layer split over the CPU and GPUs needs --tensor-split (each device's share of the layers, "
                     "e.g. 1,3 for a quarter on the first)");
            for (Backend* be : devices) sh.push_back(double(be->free_memory()));
            if (std::find(sh.begin(), sh.end(), 0.0) != sh.end()) sh.assign(devices.size(), 1.0);  // unknown: equal
        }
        if (sh.size() != devices.size())
            fail("--tensor-split has {} value(s) for {} device(s)", sh.size(), devices.size());
        const std::vector<int> bounds = split_layers(hp.n_layer, sh);
        for (size_t i = 0; i < devices.size(); ++i) {
            ModelStage st;
            st.backend = devices[i], st.first_layer = bounds[i], st.end_layer = bounds[i + 1];
            st.n_head = hp.n_head, st.n_head_kv = hp.n_head_kv, st.n_ff = hp.n_ff;
            if (hp.moe()) st.n_expert = hp.n_expert;
            if (i + 1 == devices.size()) st.n_vocab = hp.n_vocab;
            m->stages_.push_back(st);
        }
    }

    WeightLoader L(f, m->host_slices_);
    const int64_t E = hp.n_embd, Dq = int64_t(hp.n_head) * hp.head_dim, Dkv = int64_t(hp.n_head_kv) * hp.head_dim;
    const bool has_output = f.tensor("output.weight") != nullptr;
    hp.tied_output = !has_output;
    // The ends: the embedding on the first stage (tensor parallel: on every one, each
    // embeds), the output norm and the output matrix's rows of its logits on each stage
    // that computes some (a tied output reads the embedding table: the same tensor on
    // the first stage when it takes every row, else a copy of its rows).
    m->shards_.resize(tp ? size_t(R) : 0);
    auto weights_of = [&](size_t s) -> ModelWeights& { return tp ? m->shards_[s] : m->w_; };
    for (size_t s = 0; s < m->stages_.size(); ++s) {
        ModelWeights& w = weights_of(s);
        const ModelStage& st = m->stages_[s];
        L.use(m->stages_[s]);
        const bool embeds = tp || s == 0;  // (a layer split's stages share w: only stage 0's embedding is its own)
        if (embeds) w.token_embd = L.matrix("token_embd.weight", E, hp.n_vocab);
        if (!st.computes_logits()) continue;
        w.output_norm = L.vector("output_norm.weight", E);
        if (!has_output && embeds && st.n_vocab == hp.n_vocab) w.output = w.token_embd;
        else w.output = L.row_range(has_output ? "output.weight" : "token_embd.weight", E, hp.n_vocab, st.first_vocab,
                                    st.n_vocab);
    }

    const int total = hp.n_layer;
    const bool rope_freqs = f.tensor("rope_freqs.weight") != nullptr;
    std::vector<Weight> stage_rope(m->stages_.size());  // each stage's copy of rope_freqs
    for (int i = 0; i < hp.n_layer; ++i) {
        const std::string p = fmt::format("blk.{}.", i);
        for (size_t s = 0; s < m->stages_.size(); ++s) {
            ModelStage& st = m->stages_[s];
            if (i < st.first_layer || i >= st.end_layer) continue;
            L.use(st, tp ? int(s) : 0, R);
            if (rope_freqs && !stage_rope[s]) stage_rope[s] = L.vector("rope_freqs.weight", hp.n_rot / 2);
            LayerWeights l;
            l.rope_freqs = stage_rope[s];
            l.attn_norm = L.vector(p + "attn_norm.weight", E);
            l.wq = L.rows(p + "attn_q.weight", E, Dq);
            l.wk = L.rows(p + "attn_k.weight", E, Dkv);
            l.wv = L.rows(p + "attn_v.weight", E, Dkv);
            l.wo = L.cols(p + "attn_output.weight", Dq, E);
            l.bq = L.vector_part(p + "attn_q.bias", Dq, false);
            l.bk = L.vector_part(p + "attn_k.bias", Dkv, false);
            l.bv = L.vector_part(p + "attn_v.bias", Dkv, false);
            if (hp.qk_norm) {
                l.q_norm = L.vector(p + "attn_q_norm.weight", hp.head_dim);
                l.k_norm = L.vector(p + "attn_k_norm.weight", hp.head_dim);
            }
            l.ffn_norm = L.vector(p + "ffn_norm.weight", E);
            if (hp.moe()) {
                const int64_t X = hp.n_expert, F = hp.n_ff_exp;
                l.ffn_router = L.matrix(p + "ffn_gate_inp.weight", E, X);
                l.ffn_gate_exps = L.stacked(p + "ffn_gate_exps.weight", E, F, X);
                l.ffn_up_exps = L.stacked(p + "ffn_up_exps.weight", E, F, X);
                l.ffn_down_exps = L.stacked(p + "ffn_down_exps.weight", F, E, X);
            } else {
                l.ffn_gate = L.rows(p + "ffn_gate.weight", E, hp.n_ff);
                l.ffn_up = L.rows(p + "ffn_up.weight", E, hp.n_ff);
                l.ffn_down = L.cols(p + "ffn_down.weight", hp.n_ff, E);
            }
            if (l.bq || l.bk || l.bv) hp.qkv_bias = true;
            weights_of(s).layers.push_back(l);
        }
        if (progress) progress(float(i + 1) / float(total));
    }
    if (tp) m->w_ = m->shards_[0];
    m->weight_bytes_ = L.bytes();
    return m;
}

std::string Model::describe_placement() const {
    if (stages_.size() == 1) return stages_[0].backend->name();
    if (split_mode() == SplitMode::kTensor) {
        const ModelStage& s0 = stages_[0];
        const std::string ffn = hp_.moe() ? fmt::format("{} of {} experts", s0.n_expert, hp_.n_expert)
                                          : fmt::format("{} of {} FFN rows", s0.n_ff, hp_.n_ff);
        std::string out = fmt::format("{} devices (tensor parallel, {} of {} heads and {} each): ", stages_.size(),
                                      s0.n_head, hp_.n_head, ffn);
        for (size_t i = 0; i < stages_.size(); ++i) {
            const ModelStage& st = stages_[i];
            out += fmt::format("{}{} ({:.2f} GB", i ? "; " : "", st.backend->name(), double(st.weight_bytes) / 1e9);
            if (st.computes_logits())
                out += fmt::format(", logits {}-{}", st.first_vocab, st.first_vocab + st.n_vocab - 1);
            out += ")";
        }
        return out;
    }
    std::string out = fmt::format("{} devices (layer split): ", stages_.size());
    for (size_t i = 0; i < stages_.size(); ++i) {
        const ModelStage& st = stages_[i];
        const double mb = double(st.weight_bytes) / 1e6;
        out += fmt::format("{}layers {}-{} ({:.2f} {}) on {}", i ? "; " : "", st.first_layer, st.end_layer - 1,
                           mb < 1000 ? mb : mb / 1000, mb < 1000 ? "MB" : "GB", st.backend->name());
    }
    return out;
}

std::string Model::describe() const {
    // The most common matrix type names the model ("Q4_0", "Q4_K", ...).
    const Weight* up = w_.layers.empty() ? &w_.token_embd : hp_.moe() ? &w_.layers[0].ffn_up_exps : &w_.layers[0].ffn_up;
    const std::string type = type_traits(up->type).name;
    const std::string ff = hp_.moe() ? fmt::format("{} experts (top {}) ff{}", hp_.n_expert, hp_.n_expert_used,
                                                   hp_.n_ff_exp)
                                     : fmt::format("ff{}", hp_.n_ff);
    return fmt::format("{} {}L {}d {}h/{}kv {} vocab {} {} ({:.2f} MB)", hp_.arch, hp_.n_layer, hp_.n_embd,
                       hp_.n_head, hp_.n_head_kv, ff, hp_.n_vocab, type, double(weight_bytes_) / 1e6);
}

}  // namespace vega
