// The backend interface: everything the forward pass asks of a device. The CPU
// backend is the reference; the GPU backend implements the same calls with one
// kernel source for HIP (gfx906) and CUDA. All pointers handed to ops are the
// backend's own memory (from alloc / upload_weight); activations are float32,
// row-major [rows][n]. Ops are issued in order; results are visible to later
// ops and, after synchronize(), to download().
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/expert_routing.h"
#include "backend/kv_layout.h"
#include "quant/types.h"

namespace vega {

namespace gguf { struct TensorInfo; }

// A weight tensor resident on a backend. Matrices: W [n_out][n_in] in rows of
// `type`; vectors (norms, biases): n_out == 1, F32. Stacked matrices (a mixture of
// experts' 3-D tensors, GGUF ne = [n_in, n_out, n_mat]): n_mat matrices of
// [n_out][n_in] one after another, matrix e's row o at row e * n_out + o.
struct Weight {
    GgmlType type = GgmlType::F32;
    int64_t n_in = 0;    // row length (ne[0])
    int64_t n_out = 0;   // rows of one matrix (ne[1])
    int64_t n_mat = 1;   // stacked matrices (ne[2]; 1 for a plain matrix)
    size_t row_bytes = 0;
    const void* data = nullptr;
    const char* name = "";  // points into the model's tensor table
    explicit operator bool() const { return data != nullptr; }
};

// Token metadata of one batch, in backend memory. Token i sits at position
// pos[i] of sequence seq[i]; it attends to positions 0..pos[i] of its sequence.
struct BatchView {
    int n_tokens = 0;
    const int32_t* tokens = nullptr;
    const int32_t* pos = nullptr;
    const int32_t* seq = nullptr;
    int n_kv_max = 0;  // host-side upper bound of max(pos)+1 over the batch (grid sizing)
    // Host-side: rows [n_tokens - prompt_rows, n_tokens) are prompt (prefill) rows, the
    // rows before them generated tokens fed back (Session stages them so). A backend
    // may attend the prompt rows with a tiled (flash) kernel, which reads each K/V row
    // once per tile of query rows; generated rows keep its decode kernel. The choice
    // follows the row, never the batch's make-up, so a row computes the same whatever
    // shares its batch. 0 (the default): every row is a decode row.
    int prompt_rows = 0;
    // Optional, device [n_tokens], host-written: per token, the first position of its
    // sequence that this step writes (the cache below it was written by earlier
    // steps, so attention may read it before this step's earlier kernels finish).
    // Null: unknown (every cache row is read after them).
    const int32_t* fresh = nullptr;
};

struct KvCacheDesc {
    int n_layer = 0;
    int n_seq = 1;      // independent sequences, each with n_ctx cells
    int n_ctx = 0;
    int n_kv_head = 0;
    int head_dim = 0;
    GgmlType type = GgmlType::F16;  // F16, F32 or Q8_0 (kv_layout.h)
};

// The cache element of a KV cache type; fails (naming it) for a type a cache cannot hold.
KvElem kv_elem(GgmlType t);
// The layout of one layer's K (or V) of a cache described by d (kv_layout.h).
inline KvLayout kv_layout(const KvCacheDesc& d) { return {d.n_seq, d.n_ctx, d.n_kv_head, d.head_dim, kv_elem(d.type)}; }
// Bytes of K and V over all layers of a cache described by d (what create_kv_cache allocates).
inline size_t kv_cache_bytes(const KvCacheDesc& d) { return 2 * size_t(d.n_layer) * size_t(kv_layout(d).layer_bytes()); }
// Checks that a cache of d can be made: its type is one a cache holds, and q8_0 has
// a head dimension it can block (a multiple of 8). Fails naming what to change.
void check_kv_cache_desc(const KvCacheDesc& d);

// Opaque per-backend KV cache: K and V per layer laid out as kv_layout.h says.
class KvCache {
public:
    virtual ~KvCache() = default;
    const KvCacheDesc& desc() const { return desc_; }
    virtual size_t bytes() const = 0;

protected:
    KvCacheDesc desc_;
};

struct RopeParams {
    int n_rot = 0;              // rotated dims per head (<= head_dim), pairs (2i,2i+1) or (i, i+n_rot/2)
    float freq_base = 10000.f;
    float freq_scale = 1.f;     // linear position scaling (1 = none)
    bool neox = false;          // NEOX style: rotate (i, i + n_rot/2)
    const float* freq_factors = nullptr;  // optional [n_rot/2] divisors of theta (llama3 rope_freqs)
};

// ---- block ops: whole steps of a layer, inputs and outputs as arguments ----
//
// The forward pass calls one attention_block and one ffn_block per layer. Each
// has a reference composition from the primitive ops below (Backend's default,
// backend/blocks.cpp), which the CPU uses and parity tests compare a backend's
// own version against. A backend that fuses does so inside one block call, from
// the arguments it is given, never by holding an op back until a later call.

// Activation scratch a block may use, [rows][...] floats, owned by the caller.
struct BlockBuffers {
    float* q = nullptr;    // [rows][n_head * head_dim]
    float* k = nullptr;    // [rows][n_kv_head * head_dim]
    float* v = nullptr;    // [rows][n_kv_head * head_dim]
    float* att = nullptr;  // [rows][n_head * head_dim]
    float* tmp = nullptr;  // [rows][n_embd]
    float* g = nullptr;    // [rows][n_ff], or [rows][n_used][n_ff_exp] with experts
    float* u = nullptr;    // same
    float* h = nullptr;    // same
    // Mixture of experts only (else null):
    float* router = nullptr;      // [rows][n_expert] router logits
    int32_t* expert_ids = nullptr;  // [rows][n_used] chosen experts
    float* expert_w = nullptr;      // [rows][n_used] their weights
    float* expert_out = nullptr;    // [rows][n_used][n_embd] each chosen expert's output
};

// x += Wo · attention(rope(Wq·n(x) + bq), rope(Wk·n(x) + bk), Wv·n(x) + bv), with
// n = RMS norm by `norm`, optional biases, optional per-head q/k norm (qwen3),
// and the batch's K/V written into the cache first.
struct AttentionBlock {
    Weight norm, wq, wk, wv, wo;
    Weight bq, bk, bv;        // optional (qwen2)
    Weight q_norm, k_norm;    // optional (qwen3)
    int n_head = 0, n_kv_head = 0, head_dim = 0;
    float eps = 1e-5f;
    float scale = 1.f;        // attention logit scale (1/sqrt(head_dim))
    RopeParams rope;
};

// How a block meets its neighbours, said explicitly by the forward pass (never
// inferred by matching pointers): whether the block's input norm was already
// applied, and which norm to apply after its residual add. Consecutive blocks so
// share one kernel for "residual add + next norm + q8 of the next input".
//   input_normed: the previous block already made rms_norm(x) * (this block's norm)
//                 the matmul input (it was given this block's norm as next_norm).
//   next_norm:    after x += ..., make rms_norm(x) * next_norm (eps next_eps) the
//                 matmul input of the next block; next_quantized says that block
//                 reads it only through quantized weights (a backend may then keep
//                 it in a deferred-norm q8 form only quantized readers understand),
//                 apart from next_router.
//   next_router:  the next block's expert router when it is routed (it reads the
//                 same input first; an F32 router reads it in f32, so a deferred
//                 form must serve it too, or not be used).
//   next_readers: every matrix of the next block that reads that input (wq, wk, wv;
//                 gate, up; a routed block's router), null past the last: a backend
//                 may write only the form they all read.
// Tensor parallel (each device computes a part of every block; an all-reduce between
// blocks sums the parts) links blocks through the all-reduced part instead:
//   part_only:    leave x alone and write this device's part of the block's output
//                 [rows][n_embd] to buf.tmp (the all-reduce sums them); no next_norm.
//   pending:      x += pending [rows][n_embd] (the previous block's all-reduced
//                 output) before this block's norm; never with input_normed.
// Or, where the collective offers it (decode: Collective::fused_sum), as on one device
// with the sum inside the output:
//   sum_output:   the block's output is this device's part; the backend sums it over
//                 the devices itself (the collective's state for that) before x += it
//                 and the next norm, so the links are the one-device ones (next_norm,
//                 input_normed) and no all-reduce runs between the blocks. Not with
//                 part_only; needs next_norm. GPU backends only.
struct FusedSum;  // (opaque outside the GPU backend: backend/gpu/collective_peer.h)
struct BlockLink {
    bool input_normed = false;
    const Weight* next_norm = nullptr;
    float next_eps = 1e-5f;
    bool next_quantized = false;
    const Weight* next_router = nullptr;
    std::array<const Weight*, 3> next_readers{};
    bool part_only = false;
    const float* pending = nullptr;
    const FusedSum* sum_output = nullptr;
};

// x += Wdown · (silu(Wgate·n(x)) * Wup·n(x)), or with routed experts (router set):
// x += sum over the n_used experts e chosen for the row of w_e · down_e(silu(gate_e ·
// n(x)) * up_e · n(x)), the ids and weights chosen from router · n(x) by `routing`,
// on the device, inside the block (no host round trip).
struct FfnBlock {
    Weight norm, gate, up, down;   // dense FFN (unset with experts)
    Weight router;                 // [n_expert][n_embd]
    Weight gate_exps, up_exps;     // n_expert x [n_ff_exp][n_embd]
    Weight down_exps;              // n_expert x [n_embd][n_ff_exp]
    ExpertRouting routing;
    // Routes decided elsewhere (vega eval --routes-in): after routing, the reference
    // composition hands this block's router logits, ids and weights to it. Backends
    // that override the routed block refuse it. Null in every normal run.
    RouteOverride* route_override = nullptr;
    int layer = -1;  // the block's layer, for route_override
    float eps = 1e-5f;
    bool experts() const { return bool(router); }
    int64_t n_embd() const { return experts() ? router.n_in : gate.n_in; }
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;        // e.g. "cpu (2 threads, avx2)"

    // ---- memory ----
    // Throws vega::Error naming `what`, bytes needed and bytes available when out of memory.
    virtual void* alloc(size_t bytes, const char* what) = 0;
    virtual void release(void* p) = 0;
    virtual void upload(void* dst, const void* src, size_t bytes) = 0;
    virtual void download(void* dst, const void* src, size_t bytes) = 0;
    virtual void synchronize() = 0;
    // Copies `bytes` of this backend's memory at src to dst_ptr in dst's memory (the
    // layer split's hand-off of the residual stream from one device to the next):
    // after this backend's earlier ops, before dst's later ops, and before this
    // backend's later ops may overwrite src. Default: through host memory (waits for
    // this backend); GPU to GPU: a device-side copy ordered by events, no host wait.
    virtual void copy_to(Backend& dst, void* dst_ptr, const void* src, size_t bytes);
    // The GPU index this backend runs on; -1 for the CPU.
    virtual int device_index() const { return -1; }
    // Bytes the backend could still allocate (GPU: the device's free memory; CPU: the
    // system's available memory), 0 when unknown. For fit checks before large allocations.
    virtual size_t free_memory() const { return 0; }
    // Whether this backend computes with weights of type t (the CPU: every type the
    // type table supports). Checked for every tensor at load, before any allocation.
    virtual bool supports_type(GgmlType t) const { return type_traits(t).supported; }
    // Makes a GGUF tensor available to ops. The CPU keeps pointing into the mapping.
    virtual Weight upload_weight(const gguf::TensorInfo& t) = 0;
    // Whether upload_weight keeps pointing at t.data (its memory must then outlive the weight).
    virtual bool computes_from_host_memory() const { return false; }
    // Sizes internal scratch (activation quantization etc.) for matmuls of up to
    // max_rows rows of at most max_n_in inputs. Called once at context creation.
    virtual void reserve(int max_rows, int64_t max_n_in) = 0;
    virtual std::unique_ptr<KvCache> create_kv_cache(const KvCacheDesc& d) = 0;

    // ---- ops ----
    // out[i][:] = dequantized row tokens[i] of the embedding table.
    virtual void embed(const Weight& table, const int32_t* tokens, int n_tokens, float* out) = 0;
    // y = x / rms(x) * w, per row.
    virtual void rms_norm(const float* x, const Weight& w, float* y, int rows, int n, float eps) = 0;

    // Sets the input of the following matmuls to x [rows][n] (quantized once here
    // for the integer-dot paths, then reused by every matmul until the next call).
    virtual void matmul_input(const float* x, int rows, int64_t n) = 0;
    // Same, with x replaced by rms_norm(x) * w first (fused on the GPU).
    virtual void matmul_input_rms_norm(const float* x, const Weight& w, float eps, int rows, int64_t n) = 0;
    // y [rows][W.n_out] = input [rows][W.n_in] @ W^T.
    virtual void matmul(const Weight& w, float* y) = 0;
    // h = silu(input @ Wg^T) * (input @ Wu^T); g_tmp/u_tmp are [rows][n_out] scratch a backend may use.
    virtual void matmul_swiglu(const Weight& gate, const Weight& up, float* g_tmp, float* u_tmp, float* h,
                               int rows);
    // q, k, v = input @ Wq^T, Wk^T, Wv^T (one launch on the GPU). Default: three matmuls.
    virtual void matmul_qkv(const Weight& wq, const Weight& wk, const Weight& wv, float* q, float* k, float* v);

    virtual void add_bias(float* y, const Weight& b, int rows, int n) = 0;
    virtual void add(float* x, const float* y, int64_t n) = 0;                  // x += y
    virtual void swiglu(const float* g, const float* u, float* h, int64_t n) = 0;  // h = silu(g) * u
    // Per-head RMS norm (qwen3 q/k norm): x [rows][n_head][head_dim] *= w [head_dim] / rms.
    virtual void head_rms_norm(float* x, const Weight& w, int rows, int n_head, int head_dim, float eps) = 0;
    // Rotary embedding in place on x [rows][n_head][head_dim] at positions batch.pos.
    virtual void rope(float* x, int n_head, int head_dim, const RopeParams& p, const BatchView& b) = 0;

    // rope(q), rope(k), then kv_store(k, v): the attention inputs of one layer (one
    // launch on the GPU). Default: those three calls.
    virtual void rope_kv_store(KvCache& c, int layer, float* q, float* k, const float* v, int n_head, int n_kv_head,
                               int head_dim, const RopeParams& p, const BatchView& b);
    // Writes k, v [rows][n_kv_head*head_dim] into the cache at (seq[i], pos[i]).
    virtual void kv_store(KvCache& c, int layer, const float* k, const float* v, const BatchView& b) = 0;
    // out [rows][n_head*head_dim] = softmax(q k^T * scale) v over positions 0..pos[i]
    // of seq[i]; GQA: query head h reads kv head h / (n_head / n_kv_head).
    virtual void attention(KvCache& c, int layer, const float* q, float* out, int n_head, float scale,
                           const BatchView& b) = 0;

    // ---- mixture of experts ----
    // ids, w [rows][r.n_used] = the experts chosen from logits [rows][r.n_expert] and
    // their weights, by the rule of ExpertRouting (chosen best first).
    virtual void route_experts(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w) = 0;
    // y [rows][n_used][W.n_out] = input @ W[ids[r][j]]^T for every row r and slot j, W
    // stacked (n_mat experts). The input is [rows][W.n_in] (every slot of row r reads
    // row r) or, with per_slot, [rows * n_used][W.n_in] (slot j of row r reads row
    // r * n_used + j). Each chosen expert's rows are read once for all its rows.
    virtual void matmul_experts(const Weight& w, const int32_t* ids, int rows, int n_used, bool per_slot,
                                float* y) = 0;
    // h [rows][n_used][G.n_out] = silu(input @ G[e]^T) * (input @ U[e]^T), e = ids[r][j],
    // input [rows][n_in] as matmul_experts without per_slot. Default: two
    // matmul_experts and swiglu; g_tmp, u_tmp are scratch of h's size.
    virtual void matmul_experts_swiglu(const Weight& gate, const Weight& up, const int32_t* ids, int rows, int n_used,
                                       float* g_tmp, float* u_tmp, float* h);
    // out [rows][n] = sum_j w[r][j] * y[r][j][:], y [rows][n_used][n] (slots summed in order).
    virtual void combine_experts(const float* y, const float* w, int rows, int n_used, int64_t n, float* out) = 0;

    // y[j][:] = x[idx[j]][:] (selects the rows that need logits).
    virtual void gather_rows(const float* x, const int32_t* idx, int n_idx, int64_t n, float* y) = 0;
    // out[r] = argmax_j logits[r][j] (lowest index wins ties); with max_out, also
    // max_out[r] = that logit (a vocabulary split merges its slices' maxima on the host).
    virtual void argmax(const float* logits, int rows, int64_t n, int32_t* out, float* max_out = nullptr) = 0;
    // The k best entries of each row, best first (ties: lowest index first; NaN never
    // chosen): ids [rows][k] and vals [rows][k]. 1 <= k <= kTopKMax, k <= n. Lets
    // top-k sampling move only k candidates off the device. The default goes through
    // host memory; backends override it.
    static constexpr int kTopKMax = 64;
    virtual void top_k(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals);

    // ---- block ops (defaults: the reference compositions in blocks.cpp) ----
    // x [b.n_tokens][n_embd] in place. `link`: see BlockLink.
    virtual void attention_block(const AttentionBlock& a, KvCache& c, int layer, const BatchView& b, float* x,
                                 const BlockBuffers& buf, const BlockLink& link = {});
    // x [rows][n_embd] in place.
    virtual void ffn_block(const FfnBlock& f, float* x, int rows, const BlockBuffers& buf, const BlockLink& link = {});

    // ---- graph capture (optional; the GPU backend records CUDA/HIP graphs) ----
    // Ops issued between capture_begin() and capture_end() are recorded, not run;
    // replay(id) runs the recorded sequence. What the ops read from backend memory
    // (batch tokens/pos/seq, the KV cache, activations) may change between replays;
    // host-side arguments (row counts, pointers) are frozen. Attention recorded in
    // a graph covers the cache's whole n_ctx (empty splits exit at once), so one
    // graph serves every position. No upload/download/synchronize while capturing.
    virtual bool supports_capture() const { return false; }
    virtual void capture_begin() {}
    virtual int capture_end() { return -1; }  // graph id
    virtual void replay(int graph) {}
    virtual void release_graph(int graph) {}
    // Host work in this backend's op order (the host all-reduce's part of a rank): run
    // now, or, on a backend that records host work into its graphs (records_host_calls(),
    // such as the tests' recording backend), recorded while capturing and run at each
    // replay. So the host collective is capturable where every rank's backend records it.
    virtual bool records_host_calls() const { return false; }
    virtual void host_call(const std::function<void()>& fn) { fn(); }

    // ---- which kernels served attention (tests check the path a batch took) ----
    struct AttentionStats {
        int64_t tiled = 0;  // attention() / attention_block calls served by a tiled (flash) kernel
        int64_t other = 0;  // served otherwise (the split decode kernel, the CPU's loop)
    };
    virtual AttentionStats attention_stats() const { return {}; }

    // ---- notes ----
    // A backend that cannot take its fast path for a shape (a fused kernel's limit)
    // says so in one line, once per distinct line, on stderr when notes are on
    // (vega's commands: unless -q). Never silently.
    void set_notes(bool on) { notes_on_ = on; }

protected:
    void note(const std::string& line);
    // An attention block's q, k, v [rows][...] in buf from the current matmul input:
    // the projections, then the optional biases and q/k norms (what lies between the
    // input norm and the rope). Shared by the reference composition and backends'
    // unfused paths; head_norms = false leaves the q/k norms to the caller (a backend
    // whose rope kernel applies them).
    void qkv_projections(const AttentionBlock& a, const BlockBuffers& buf, int rows, bool head_norms = true);

private:
    bool notes_on_ = false;
    std::vector<std::string> noted_;
};

// Default fused op in terms of the unfused ones.
inline void Backend::matmul_swiglu(const Weight& gate, const Weight& up, float* g_tmp, float* u_tmp, float* h,
                                   int rows) {
    matmul(gate, g_tmp);
    matmul(up, u_tmp);
    swiglu(g_tmp, u_tmp, h, int64_t(rows) * gate.n_out);
}

inline void Backend::matmul_experts_swiglu(const Weight& gate, const Weight& up, const int32_t* ids, int rows,
                                           int n_used, float* g_tmp, float* u_tmp, float* h) {
    matmul_experts(gate, ids, rows, n_used, false, g_tmp);
    matmul_experts(up, ids, rows, n_used, false, u_tmp);
    swiglu(g_tmp, u_tmp, h, int64_t(rows) * n_used * gate.n_out);
}

// Host-side reference of route_experts: logits [rows][r.n_expert] -> ids, w [rows][r.n_used].
void route_experts_host(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w);
// One row's weights wt [r.n_used] for the chosen experts id from its logits [r.n_expert]
// (the second half of route_experts_host, for routes chosen elsewhere).
void weigh_experts_host(const float* logits, const ExpertRouting& r, const int32_t* id, float* wt);

// Host-side reference: sorts each row's indices by (value desc, index asc);
// `scratch` is resized to n (reuse it to avoid allocating per call).
void top_k_host(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals,
                std::vector<int32_t>& scratch);

inline void Backend::matmul_qkv(const Weight& wq, const Weight& wk, const Weight& wv, float* q, float* k, float* v) {
    matmul(wq, q);
    matmul(wk, k);
    matmul(wv, v);
}

inline void Backend::rope_kv_store(KvCache& c, int layer, float* q, float* k, const float* v, int n_head,
                                   int n_kv_head, int head_dim, const RopeParams& p, const BatchView& b) {
    rope(q, n_head, head_dim, p, b);
    rope(k, n_kv_head, head_dim, p, b);
    kv_store(c, layer, k, v, b);
}

}  // namespace vega
