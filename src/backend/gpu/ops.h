// Kernel launchers (implemented in kernels/*.cu). Plain C++ declarations: all
// pointers are device memory, `s` is the stream. Shapes are in the comments.
#pragma once
#include <cstdint>

#include "backend/expert_routing.h"
#include "backend/gpu/gpu_mat.h"
#include "backend/kv_layout.h"

namespace vega::gpu::ops {

// The matmul input: x [rows][n] f32 and, when n % 32 == 0, its q8 form:
// q [rows][n/32][32] int8 and ds [rows][n/32][2] (d, d*sum(q)) floats; for the
// tensor-core matmul also h [rows][n], the same q8 values as f16 bits (f16(q * d)).
struct Act {
    const float* x = nullptr;
    const int8_t* q = nullptr;
    const float* ds = nullptr;
    const uint16_t* h = nullptr;
    int rows = 0;
    int64_t n = 0;
    // Deferred RMS norm (decode, rows == 1): q/ds hold q8(x * w) without the 1/rms
    // factor and ss [n/32] the per-chunk sums of x^2; quantized matvecs multiply
    // each result by rsqrt(sum(ss) / n + eps) (the q8 dot is linear in d;
    // kernels/deferred_norm.h). x, when set, is x * w in f32, read only by the expert
    // router (router_route), which applies the same factor; other float-weight
    // readers never see this form.
    const float* ss = nullptr;
    float eps = 0.f;
};

struct RopeArgs {
    int n_rot = 0;
    float freq_base = 10000.f, freq_scale = 1.f;
    double ln_base = 9.210340371976184;  // log(double(freq_base)), set with it
    bool neox = false;
    const float* freq_factors = nullptr;  // device [n_rot/2] or null
};

// The cache of one layer: K and V laid out as kv_layout.h says, f16, f32 or q8_0
// (values in k / v; the layer's scale plane of (K, V) pairs seen from K's side,
// k_scale, and V's, v_scale = k_scale + 1: element o's at layout().scale_index(o)).
struct KvLayer {
    void* k = nullptr;
    void* v = nullptr;
    uint16_t* k_scale = nullptr;
    uint16_t* v_scale = nullptr;
    KvElem elem = KvElem::F16;
    int n_seq = 1, n_ctx = 0, n_kv_head = 0, hd = 0;
    VEGA_HOST_DEVICE KvLayout layout() const { return {n_seq, n_ctx, n_kv_head, hd, elem}; }
    // Element offset of (seq, kv head, pos), dimension 0, in k or v.
    VEGA_HOST_DEVICE int64_t row(int seq, int head, int pos) const { return layout().row(seq, head, pos); }
};

// The rope epilogue of the decode q+k+v matvec (ops::matvec_qkv_rope): the layer's
// cache, the rotation, and the token's position and sequence.
struct QkvRope {
    KvLayer c;
    RopeArgs r;
    const int32_t* pos = nullptr;  // [1] on the device
    const int32_t* seq = nullptr;  // [1] on the device
    // q/k head norms (qwen3; either may be null), applied before the rope: then count
    // (kQkvHeadCounters ints, zero, left zero) and n_head are needed.
    const float* qn = nullptr;
    const float* kn = nullptr;
    float eps = 0.f;
    int* count = nullptr;
    int n_head = 0;
};
constexpr int kQkvHeadCounters = 1024;
// Tensor parallel's decode sum inside the residual epilogue (Epi::peer, below): the
// o / down matvec's block for 32-row chunk c pushes this rank's 32 outputs into every
// peer's receive slot, raises flag [c][rank] in that peer's memory, waits for its own
// flags [c][q] from every peer, and adds the ranks' parts in rank order (the same bits
// on every rank) before x += and the norm. One launch between a block's matmuls and the
// next block's, as on one device; the all-reduce kernel and the input kernel go.
// A receive slot (round e: slot e & 1) is written again two rounds later, after the
// reader raised its own flag for the round between, i.e. finished reading it.
constexpr int kPeerMaxRanks = 8;   // ranks of a peer-memory sum (PeerChunks, PeerSum)
constexpr int kPeerChunks = 256;  // 32-row chunks one exchange serves (outputs of up to 8192 rows)
struct PeerChunks {
    // Rank q's receive words [2][n_ranks][kPeerChunks * 32] in q's memory: [e & 1][p] =
    // rank p's part in round e with e itself in one 8-byte word (peer_memory.h's
    // round_word: a reader that sees the round sees the part, so no fence and no flag).
    uint64_t* recv[kPeerMaxRanks] = {};
    uint64_t* own = nullptr;     // recv[rank] (the kernel indexes recv by constants only: see peer_chunk_sum.h)
    uint32_t* rounds = nullptr;  // this rank's [kPeerChunks]: the last round of each chunk (counting up from 1; zeroed at start)
    int rank = 0, n_ranks = 0;
    // The most chunks (blocks) one exchange may have: the fewest SMs of the ranks' devices
    // (at most kPeerChunks), so that every rank makes the same choice of kernels.
    int max_chunks = 0;
};
// Residual + norm epilogue of a decode matvec (ops::matvec_residual_norm): for
// row r of y = W·act, x[r] += y[r] (y itself is not written); per 32-row chunk c,
// q/ds get q8(x * w) without the 1/rms factor and ss[c] = sum of x^2: the
// deferred-norm input of the next matmul (Act::ss). With peer, y is this rank's part
// and x[r] += the sum of the ranks' parts (PeerChunks above). The q8 epilogue of the
// gate/up kernel uses q/ds; the q+k+v kernel's rope epilogue uses `rope`.
struct Epi {
    float* x = nullptr;
    const float* w = nullptr;
    int8_t* q = nullptr;
    float* ds = nullptr;
    float* ss = nullptr;
    float* xw = nullptr;  // residual epilogue: also x * w in f32 (the deferred form's Act::x), when set
    QkvRope rope;
    const PeerChunks* peer = nullptr;  // (host memory) residual epilogue under tensor parallel, when set
};

// out [n][table.n_in] = dequantized rows tokens[i] of the table.
void embed(const GpuMat& table, const int32_t* tokens, int n, float* out, void* s);
// y [rows][n] = x / rms(x) * w.
void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps, void* s);
// Writes the matmul input: xo = (w ? rms_norm(x) * w : x), and its q8 form when n % 32 == 0
// (with h, also as f16: Act::h). With res (fused residual add): x += res first, written back to x.
// With n % 32 == 0 and h, xo and q (with ds) may be null: an input that only the tensor-core
// matmul reads (reads_h_only) is written as h alone.
void prepare_act(float* x, const float* res, const float* w, float eps, int rows, int64_t n, float* xo, int8_t* q,
                 float* ds, uint16_t* h, void* s);
// prepare_act with the residual a weighted sum of k slices (a mixture of experts' outputs):
// x += sum_j yw[r][j] * y[r][j][:] (y [rows][k][n], slices in order from zero, as
// combine_experts), then the norm by w and the q8 (and f16) form. Returns false, having
// launched nothing, unless n % 32 == 0, w and q (or, for h alone, h) are given and a row
// fits one block.
bool prepare_act_experts(float* x, const float* y, const float* yw, int k, const float* w, float eps, int rows,
                         int64_t n, float* xo, int8_t* q, float* ds, uint16_t* h, void* s);
// Launches of prepare_act and prepare_act_experts that wrote h alone (a test's proof that
// the h_only path ran).
int64_t& h_only_launch_count();
// y [rows][W.n_out] = act @ W^T.
void matvec(const GpuMat& W, const Act& a, float* y, void* s);
// y[m] [rows][W[m].n_out] = act @ W[m]^T for n_mat (<= 3) matrices of one type and width,
// in one launch (the Q, K and V projections).
void matvec3(const GpuMat* W, float* const* y, int n_mat, const Act& a, void* s);
// h [rows][G.n_out] = silu(act @ G^T) * (act @ U^T); G, U of one type and shape.
// With hq/hds (decode, wave32 targets, quantized, G.n_out % 32 == 0) also h's q8
// form there (Act::q / Act::ds layout), from the same kernel; returns whether it did.
bool matvec_swiglu(const GpuMat& G, const GpuMat& U, const Act& a, float* h, int8_t* hq, float* hds, void* s);
// x += act @ W^T, then q8(x * w) and ss for the next (deferred-norm) input, per the
// epilogue above. Needs matvec_epi_ok(W, a.rows).
void matvec_residual_norm(const GpuMat& W, const Act& a, const Epi& e, void* s);
// Whether the epilogue kernel (and a deferred-norm Act) can serve W with this input
// (wave32 targets, one row, quantized, n_out % 128 == 0, n_out <= 128 * wave).
bool matvec_epi_ok(const GpuMat& W, int rows);
// Whether the epilogue with Epi::peer = p can serve W: matvec_epi_ok, and no more blocks
// (one a chunk) than p.max_chunks, the fewest SMs of the ranks' devices, so that every
// block of the launch is resident at once on every rank (a block waits for its
// counterparts on the peers, never for a block of its own launch; one block an SM
// always fits: its launch bounds) and every rank gives the same answer; a target with
// peer sums (peer_sums_allowed).
bool matvec_peer_epi_ok(const GpuMat& W, int rows, const PeerChunks& p);
// Decode (one row): y = {q, k, v} = act @ {Wq, Wk, Wv}^T in one launch, then, in the
// same kernel, rope(q) and rope(k) in place and k, v into the cache at (seq[0],
// pos[0]): what matvec3 + rope_store do, without the second kernel (each wave owns
// the two rows of a rotated pair). Returns false, having launched nothing, when it
// cannot serve these shapes (quantized weights, q and k of one type and v of the same
// or a pair of VEGA_GPU_QKV_MIXED_TYPES, Wq [n_head * hd], Wk, Wv [n_kv_head * hd],
// even hd and n_rot <= hd). One launch where the target has the 3-matrix launch
// (NVIDIA), else one per matrix.
bool matvec_qkv_rope(const GpuMat* W, float* const* y, const Act& a, const QkvRope& e, int n_head, void* s);
// Whether matvec_qkv_rope may serve these weights and input at all (the rest is
// checked by the call).
bool matvec_qkv_rope_ok(const GpuMat* W, int rows);
// Tensor-core matmul (NVIDIA sm_80+, quantized weights, q8 input with its f16 form
// (Act::h) and without a deferred norm, a.rows >= mma_min_rows()): y = act @ W^T, or with U (same type and shape)
// y = silu(act @ W^T) * (act @ U^T). Returns false, having launched nothing, when
// it cannot serve the call (the matvec kernels do). matvec, matvec3 and
// matvec_swiglu call it first.
bool matmul_mma(const GpuMat& W, const GpuMat* U, const Act& a, float* y, void* s);
// The same for n_mat (1..3) matrices of one type and width in one launch (q, k, v:
// one walk over all their row tiles); false, having launched nothing, when it cannot
// serve every one of them.
bool matmul_mma3(const GpuMat* W, float* const* y, int n_mat, const Act& a, void* s);
// Activation rows from which matmul_mma serves (0: never): the target's table
// (arch::kMmaMinRows) or VEGA_GPU_MMA_ROWS, read once; 0 on devices without it.
int mma_min_rows();
// Whether matmul_mma can serve W at all: quantized, rows of a multiple of
// mma_row_multiple(type) elements (its vector loads take 4 or 8 chunks at once; 8-byte
// copies of a row's scale bytes: 128, or 256 for a 1-byte scale plane).
bool mma_serves(const GpuMat& W);
int mma_row_multiple(GgmlType t);
// The most groups of 32 weight rows a tensor-core matmul block may take: the target's
// table (arch::kMmaMaxRowGroups) capped by VEGA_GPU_MMA_GROUPS (1, 2 or 4), read once; 1
// where there is no tensor-core path.
int mma_max_row_groups();
// Tensor-core matmul launches with 4 row groups per block (128 weight rows; a test's proof
// that the path ran).
int64_t& mma_wide_launch_count();
// The tensor-core matmul's decode of chunk scales (kernels/scale_f16.h), for a test: for
// i < n, the scale word word[i] with the chunk's entry at byte b0 and the super-block
// entry sb[i] -> out[4i..4i+3] = s0, s1, m0, m1 (f16x2 splats); all device pointers.
// False, having launched nothing, without the tensor-core path or for Q2_K and float types.
bool mma_chunk_scales(GgmlType t, const uint32_t* word, const uint32_t* sb, int n, int b0, uint32_t* out, void* s);
// Whether matvec, matvec3 and matvec_swiglu (with U paired) read nothing but Act::h of an
// input of `rows` rows without a deferred norm: matmul_mma serves W, and the integer GEMM,
// which comes first in their dispatch, declines an input without its q8 form.
bool reads_h_only(const GpuMat& W, int rows);
// Quantized GEMM through the integer dot4 (kernels/gemm_dot4.cu: gfx906's prompt and
// batch matmul; on NVIDIA only when asked): y = act @ W^T, or with U (same type and
// shape) y = silu(act @ W^T) * (act @ U^T), for quantized W and the q8 input without a
// deferred norm, from gemm_min_rows() activation rows on. Returns false, having
// launched nothing, when it does not serve the call. matvec, matvec3 and
// matvec_swiglu call it first.
bool gemm_dot4(const GpuMat& W, const GpuMat* U, const Act& a, float* y, void* s);
// Activation rows from which gemm_dot4 serves (0: never): the target's table
// (arch::kGemmMinRows) or VEGA_GPU_GEMM_ROWS, read once; set_gemm_min_rows replaces it
// (tests: the dp4a path forced on NVIDIA).
int gemm_min_rows();
void set_gemm_min_rows(int rows);
// The float-weight form (kernels/gemm_float.cu: F32, F16, BF16 weights, the f32 input
// rounded to the weight's type as the CPU does, f32 FMA); gemm_dot4 calls it for float W.
bool gemm_float(const GpuMat& W, const GpuMat* U, const Act& a, float* y, void* s);
// gemm_dot4 launches so far in this process (tests check that the GEMM ran).
int64_t& gemm_launch_count();
// Tuning runs: decode matvec shapes other than the per-target table's (rows per
// wave, loads in flight; 0 = the table's). Initially from VEGA_GPU_MV,
// VEGA_GPU_SWIGLU, VEGA_GPU_EPI and VEGA_GPU_QKV ("R,U"); only builds with VEGA_GPU_TUNING=ON
// (NVIDIA) compile the variants.
struct MatvecTuning {
    struct Shape {
        int rows = 0, unroll = 0;
    };
    // q/k/v, output; gate/up; o/down with the residual + norm epilogue; q+k+v with rope (VEGA_GPU_QKV)
    Shape plain, swiglu, epi, qkv_rope;
};
void set_matvec_tuning(const MatvecTuning& t);

void add_bias(float* y, const float* b, int rows, int n, void* s);         // y[r][:] += b
void add(float* x, const float* y, int64_t n, void* s);                    // x += y
void swiglu(const float* g, const float* u, float* h, int64_t n, void* s);  // h = silu(g) * u
// x [rows][n_head][hd] *= w[hd] / rms (per head).
void head_rms_norm(float* x, const float* w, int rows, int n_head, int hd, float eps, void* s);

// In place on x [rows][n_head][hd] at positions pos[rows].
void rope(float* x, int rows, int n_head, int hd, const RopeArgs& r, const int32_t* pos, void* s);

// rope(q), rope(k) in place, then k, v into the cache at (seq[i], pos[i]): one launch.
// With q_norm / k_norm ([hd], qwen3): each head RMS-normed by them first (eps), as
// head_rms_norm would.
void rope_store(const KvLayer& c, float* q, float* k, const float* v, int rows, int n_head, const RopeArgs& r,
                const int32_t* pos, const int32_t* seq, void* s, const float* q_norm = nullptr,
                const float* k_norm = nullptr, float eps = 0.f);
// Writes k, v [rows][n_kv_head*hd] at (seq[i], pos[i]) (rounded or quantized to the cache's type).
void kv_store(const KvLayer& c, const float* k, const float* v, int rows, const int32_t* pos, const int32_t* seq,
              void* s);
// out [rows][n_head*hd] = softmax(q k^T * scale) v over positions 0..pos[i] of seq[i].
// Split over the sequence: n_part blocks per (token, head), block b taking the
// splits b, b + n_part, ... of arch::kAttnSplit positions; part [rows][n_head][n_part][hd+2]
// is scratch. Blocks beyond a token's pos+1 (read on the device) exit at once.
// With oq/ods (and hd % 32 == 0) the merge also writes out's q8 form there
// (layout of Act::q / Act::ds; with oh also Act::h), so it can be the next matmul input as is.
// With count ([rows][n_head] ints, zero, left zero) the last block of each head
// merges the parts (one launch instead of two). fresh (BatchView::fresh, may be
// null): cache rows below fresh[t] are read before the previous kernel finishes.
void attention(const KvLayer& c, const float* q, float* out, int rows, int n_head, float scale, const int32_t* pos,
               const int32_t* seq, const int32_t* fresh, int n_part, float* part, int8_t* oq, float* ods, uint16_t* oh,
               int* count, void* s);
// Prompt attention (flash attention): the same result as attention() for batches
// whose rows come in runs of one sequence (prompts, chunked prefill), computed tile
// by tile: a block takes the query rows of consecutive tokens and all heads of one
// GQA group and streams the K/V of their sequence once through shared memory
// (kernels/attention_mma.cu on NVIDIA, tensor cores; kernels/attention_dot2.cu on
// gfx906). A tile holding rows of several sequences runs one pass per sequence.
// attention_tiled_serves: whether the target has a kernel for this cache and head
// count (f16 cache; head dims 64, 80, 96, 112, 128, 256); attention_tiled returns
// false, launching nothing, where it does not. A q8_0 cache's prompt rows go through
// kv_dequant_f16 first (the tiled kernels read f16 tiles).
bool attention_tiled_serves(const KvLayer& c, int n_head);
bool attention_tiled(const KvLayer& c, const float* q, float* out, int rows, int n_head, float scale,
                     const int32_t* pos, const int32_t* seq, void* s);
// Blocks per (token, head) for a batch of `rows` tokens over at most n_kv_max
// positions of cache layer c on a device of n_sm SMs / CUs: 1 from
// arch::kAttnWholePairsPerSm pairs per SM on, else one per split, at most as many as
// keep the launch's blocks of c's split kernel resident at once (the occupancy
// calculator's blocks per SM x n_sm). VEGA_GPU_ATTN_BLOCKS=N (tuning): N blocks per
// SM instead, for both rules.
int attention_parts(const KvLayer& c, int n_kv_max, int rows, int n_head, int n_sm);
// The f16 copy of a q8_0 cache layer that prompt attention reads: for each sequence s
// of the rows (pos, seq [rows], device), positions 0..max pos of s into dst (an f16
// KvLayer of the same heads and head dim, n_seq at least c's, n_ctx >= n_kv_max).
// need [c.n_seq] ints of scratch.
void kv_dequant_f16(const KvLayer& c, const KvLayer& dst, int rows, const int32_t* pos, const int32_t* seq,
                    int n_kv_max, int* need, void* s);

// ---- mixture of experts (kernels/moe.cu) ----
// The (row, slot) pairs p = r * n_used + j of a batch grouped by expert, in device
// memory: pairs [rows * n_used] ordered by expert; for each active expert (slot s <
// n_active[0]) its id slot_expert[s] and its pairs pairs[slot_begin[s] ..
// slot_begin[s + 1]). Capacities: pairs, and kMaxExperts (+1) slots.
struct ExpertPlan {
    int32_t* pairs = nullptr;
    int32_t* slot_expert = nullptr;
    int32_t* slot_begin = nullptr;
    int32_t* n_active = nullptr;
    // Work items of the grouped tensor-core matmul (plan_items): slot << 16 | g for
    // each group g of `cols` pairs of each active slot; n_items [1]. Capacity: pairs / 16
    // + kMaxExperts.
    int32_t* items = nullptr;
    int32_t* n_items = nullptr;
};
// ids, w [rows][r.n_used] = the experts chosen from logits [rows][r.n_expert] and
// their weights (ExpertRouting); with plan, also the plan of those ids (one launch:
// the last block builds it; counter: one int, zero, left zero).
void route_experts(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w,
                   const ExpertPlan* plan, int* counter, void* s);
// Decode batches (ops::router_route_ok): logits [rows][r.n_expert] = act.x @ W^T (W the
// F32 router [n_expert][act.n]), then routing and the plan as route_experts, in one
// launch (the last block routes; counter: one int, zero, left zero).
bool router_route_ok(int64_t n, int rows, int n_expert);
void router_route(const float* W, const Act& a, const ExpertRouting& r, float* logits, int32_t* ids, float* w,
                  const ExpertPlan& plan, int* counter, void* s);
// The plan of ids [rows][r.n_used] alone.
void group_experts(const int32_t* ids, int rows, const ExpertRouting& r, const ExpertPlan& plan, void* s);
// y [rows * n_used][n_out] = per pair p (expert e of its slot): act row (per_slot ? p :
// p / n_used) @ W_e^T, or with U (same type and shape) silu(act @ W_e^T) * (act @ U_e^T).
// W, U: the n_mat stacked experts of n_out rows each (GpuMat of all n_mat * n_out rows).
// Quantized weights read the q8 input (no deferred norm), float weights the f32 input.
// plan_early: the plan was written before the previous launch (PDL: read before the
// dependency wait). Quantized W with only the f32 input (Act::x, no q): where
// experts_quantize_on_load says so, the kernel quantizes the input chunks itself.
void matvec_experts(const GpuMat& W, const GpuMat* U, int64_t n_out, int n_mat, const ExpertPlan& plan, int rows,
                    int n_used, bool per_slot, const Act& a, float* y, void* s, bool plan_early = false);
// Whether matvec_experts of W over rows x n_used pairs takes the f32 input and
// quantizes it on load (quantized W, about one pair per chosen expert: decode).
bool experts_quantize_on_load(const GpuMat& W, int rows, int n_used, int n_mat);
// The plan's work items for column groups of `cols` pairs (one block, after the plan).
void plan_items(const ExpertPlan& plan, int cols, void* s);
// matvec_experts through the tensor cores (NVIDIA; input with Act::h, at least
// arch::kMmaExpertPairs pairs per active expert on average): plan_items, then one
// grouped launch. False, having launched nothing, when it cannot serve the call
// (matvec_experts calls it first).
bool matmul_mma_experts(const GpuMat& W, const GpuMat* U, int64_t n_out, int n_mat, const ExpertPlan& plan, int rows,
                        int n_used, bool per_slot, const Act& a, float* y, void* s);
// matvec_experts through the GEMM (the quantized form): each block one expert's group of
// 64 (row, slot) pairs (plan_items, then one launch), where an active expert averages
// gemm_min_rows() pairs or more. False, having launched nothing, otherwise; matvec_experts
// calls it first.
bool gemm_dot4_experts(const GpuMat& W, const GpuMat* U, int64_t n_out, int n_mat, const ExpertPlan& plan, int rows,
                       int n_used, bool per_slot, const Act& a, float* y, void* s);
// out [rows][n] = sum_j w[r][j] * y[r][j][:] (y [rows][n_used][n], slots in order).
void combine_experts(const float* y, const float* w, int rows, int n_used, int64_t n, float* out, void* s);

// Tensor parallel's all-reduce for small sums (kernels/peer_sum.cu): each rank copies its
// part into its own staging slot, raises a flag in every peer's memory, waits for the
// peers' flags, then reads every rank's part over peer memory and adds them in rank
// order (the same bits on every rank). One launch; no library, no host round trip.
constexpr int kPeerBlocks = 32;  // blocks of every sum (each has its own flags; peer_sum.cu says why all)
struct PeerSum {
    // Rank q's staging buffer [2][n_stage] floats in q's memory: round e's part in
    // slot e & 1 (a rank reuses a slot only after every peer has raised its flag for
    // the round between, i.e. finished reading the slot).
    float* stage[kPeerMaxRanks] = {};
    // Rank q's flags [kPeerBlocks][kPeerMaxRanks] in q's memory: [b][p] = the last
    // round rank p has staged for block b (rounds count up from 1; zeroed at start).
    uint32_t* flags[kPeerMaxRanks] = {};
    uint32_t* rounds = nullptr;  // this rank's [kPeerBlocks]: the last round of each block
    int rank = 0, n_ranks = 0;
    int64_t n_stage = 0;         // floats per staging slot (a multiple of 4)
};
// buf [n] floats (16-byte aligned, n % 4 == 0) on rank p.rank's device becomes the sum
// over the ranks' bufs; parts larger than n_stage go in rounds of n_stage. Every rank
// must make the same calls in the same order.
void peer_sum(const PeerSum& p, float* buf, int64_t n, void* s);
// Whether this build's target table allows peer sums (arch kPeerSums).
bool peer_sums_allowed();
// The peer sum fused with the next block's input (tensor parallel's decode, one launch):
// x [rows][n] += the sum over the ranks of part [rows][n] (rank order, the bits of
// peer_sum), then xo, q, ds (and h) as prepare_act with the norm w. Row b has block b's
// flags and round, so p must be a state this op alone uses (peer_sum's blocks slice
// rows differently). peer_sum_norm_ok: whether it serves [rows][n] (rows <= kPeerBlocks,
// rows * n within the staging slot, n % 32 == 0, a row within one block's registers);
// peer_sum_norm fails otherwise. Every rank must make the same calls in the same order.
bool peer_sum_norm_ok(const PeerSum& p, int rows, int64_t n);
void peer_sum_norm(const PeerSum& p, float* x, const float* part, const float* w, float eps, int rows, int64_t n,
                   float* xo, int8_t* q, float* ds, uint16_t* h, void* s);

// y[j][:] = x[idx[j]][:], n floats per row.
void gather_rows(const float* x, const int32_t* idx, int n_idx, int64_t n, float* y, void* s);
// out[r] = argmax_j logits[r][j], lowest index on ties; max_out[r] = that logit (max_out
// may be null).
void argmax(const float* logits, int rows, int64_t n, int32_t* out, float* max_out, void* s);
// ids/vals [rows][k] = the k largest of each row, best first, ties by lowest index,
// NaN as -inf (k <= 64).
void top_k(const float* logits, int rows, int64_t n, int k, int32_t* ids, float* vals, void* s);

}  // namespace vega::gpu::ops
