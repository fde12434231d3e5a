// RoPE, KV-cache writes and decode attention split over the sequence.
//
// attention: grid (n_part, n_head, rows). Block b of a (token, head) takes the
// splits b, b + n_part, ... of kAttnSplit positions (n_part from
// attention_parts: as many blocks as the device holds at once, whatever the context,
// so a graph captured for the whole context launches one wave of blocks that all have
// work); groups of kAttnGroup lanes own one position at a time (q.k reduced inside the group with DPP; K and V of kAttnAhead positions
// loaded before the first is used), keep an online softmax and a partial V sum,
// merge through LDS and write (max, sum, acc[hd]) per split. A
// second kernel merges the splits, or (with a counter buffer) the last split
// block of each head does. The token's KV length is pos[t] + 1, read
// on the device, so a captured graph stays valid as positions advance.
//
// Audit (2026-11-23, fifth session): each lane loads 8 consecutive dims of K and V
// (one dwordx4 each in f16) where head_dim % 8 == 0; the wave's groups merge in
// registers (across_groups_*), so LDS holds one row per wave, sized to the dims
// the variant serves (2-6 KB; was s_acc[16][256], 16.5-18.6 KB: 3 waves/SIMD); the
// softmax update is branch-free, so K and V of a step are in flight together:
// 1 round trip per step up to 128 dims. 256 dims (8, 2) load V after the score
// (registers): 2-3. The MERGE variants' hottest loop is the merge's (kAttnMergeAhead
// parts a round trip, 3 loads each at one dim a thread, no selects).
// @audit kernel=*attn_split<* min_waves=4 expect=dpp loop_inflight=2 loop_trips=1 loop_vmcnt0=0 loop_cndmask=6 no_flat no_glc
// @audit kernel=*attn_split<*,?false,?8,?1>* min_waves=4 expect=dpp loop_inflight=2 loop_trips=1 loop_vmcnt0=0 loop_cndmask=6 loop_x4 no_flat no_glc
// @audit kernel=*attn_split<*,?false,?8,?2>* min_waves=4 expect=dpp loop_inflight=2 loop_trips=3 loop_vmcnt0=2 loop_cndmask=6 loop_x4 no_flat no_glc
// q8_0 caches: 8-byte value chunks (dwordx2; no x4), K's and V's scales in one 4-byte load.
// @audit kernel=*attn_split<(*KvElem)2,?false,?8,?1>* min_waves=4 expect=dpp loop_inflight=2 loop_trips=1 loop_vmcnt0=0 loop_cndmask=6 no_flat no_glc
// @audit kernel=*attn_split<(*KvElem)2,?false,?8,?2>* min_waves=4 expect=dpp loop_inflight=2 loop_trips=3 loop_vmcnt0=2 loop_cndmask=6 no_flat no_glc
// @audit kernel=*attn_combine* min_waves=4 loop_inflight=8 loop_trips=1 loop_vmcnt0=0 loop_cndmask=0 no_flat no_glc
// @audit kernel=* min_waves=4
#include "core/env.h"
#include "backend/gpu/kernels/norm.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"
#include "backend/gpu/kernels/head_rope.h"
#include "backend/gpu/kernels/kv_elem.h"
#include "backend/gpu/kernels/rope.h"
#include "backend/gpu/kernels/vector_load.h"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstdlib>
#include <type_traits>

namespace vega::gpu {
namespace {

using arch::kAttnAhead;
using arch::kAttnGroup;
using arch::kAttnMergeAhead;
using arch::kAttnSplit;
using arch::kAttnThreads;
using arch::kEltThreads;
constexpr int kMaxHd = 256;
static_assert(kAttnMergeAhead >= 1 && kAttnMergeAhead <= 32 && (kAttnMergeAhead & (kAttnMergeAhead - 1)) == 0,
              "combine_head's rest covers power-of-two chunks up to 32");
static_assert(kAttnSplit % (kAttnThreads / kAttnGroup * kAttnAhead) == 0, "whole load batches per split");
constexpr int kGroups = kAttnThreads / kAttnGroup;
constexpr int kAttnWaves = kAttnThreads / kWave;
static_assert(kAttnGroup < kWave && kWave % kAttnGroup == 0, "groups inside a wave");
constexpr int kRopeThreads = 64;

unsigned grid_for(int64_t n, int per) { return unsigned((n + per - 1) / per); }

// One thread per rotated pair: x [rows][n_head][hd].
__global__ void rope_k(float* __restrict__ x, int n_head, int hd, ops::RopeArgs r, const int32_t* __restrict__ pos,
                       int64_t total) {
    pdl_wait();
    pdl_trigger();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int half = r.n_rot / 2;
    const int j = int(i % half);
    const int64_t vec = i / half;  // row * n_head + head
    const int64_t row = vec / n_head;
    float sn, cs;
    rope_cs(r, pos[row], j, &sn, &cs);
    float* p = x + vec * hd;
    const RopePair d = rope_pair(r, j);
    rotate(p[d.a], p[d.b], cs, sn, &p[d.a], &p[d.b]);
}

// k, v [rows][n_kv_head * hd] into the cache: grid (n_kv_head, rows), one head row
// of K and of V per block (q8_0: one thread per block of the row).
template <KvElem E, int QB>
__global__ void __launch_bounds__(kRopeThreads) kv_store_k(ops::KvLayer c, const float* __restrict__ k,
                                                           const float* __restrict__ v,
                                                           const int32_t* __restrict__ pos,
                                                           const int32_t* __restrict__ seq) {
    pdl_wait();
    pdl_trigger();
    const int h = blockIdx.x, t = blockIdx.y;
    const int64_t dst = c.row(seq[t], h, pos[t]), src = (int64_t(t) * c.n_kv_head + h) * c.hd;
    store_kv_row<kRopeThreads, E, QB>(k + src, c.hd, c.k, c.k_scale, dst);
    store_kv_row<kRopeThreads, E, QB>(v + src, c.hd, c.v, c.v_scale, dst);
}

// rope(q), rope(k) and the K/V cache write of one layer in one launch.
// grid (n_head + n_kv_head, rows): block y = token, block x < n_head a q head,
// else kv head x - n_head (rotated k, and v, into the cache). qn / kn (qwen3, may be
// null): the per-head RMS norm of q / k, applied first (head_rms_norm's arithmetic).
template <KvElem E, int QB>
__global__ void __launch_bounds__(kRopeThreads) rope_store_k(ops::KvLayer c, float* __restrict__ q, float* __restrict__ k,
                                                             const float* __restrict__ v, int n_head, ops::RopeArgs r,
                                                             const int32_t* __restrict__ pos,
                                                             const int32_t* __restrict__ seq,
                                                             const float* __restrict__ qn,
                                                             const float* __restrict__ kn, float eps) {
    pdl_wait();
    pdl_trigger();
    const int t = blockIdx.y, hd = c.hd;
    const bool is_k = int(blockIdx.x) >= n_head;
    const int h = is_k ? int(blockIdx.x) - n_head : int(blockIdx.x);
    const int p = pos[t];
    float* x = is_k ? k + (int64_t(t) * c.n_kv_head + h) * hd : q + (int64_t(t) * n_head + h) * hd;
    __shared__ float lds_f[kHeadRopeMaxDim];
    __shared__ double lds_d[kRopeThreads / kWave];
    const int64_t dst = c.row(seq[t], h, p);
    const float* vr = v + (int64_t(t) * c.n_kv_head + h) * hd;
    if constexpr (E != KvElem::Q8_0) {
        norm_rope_head<kRopeThreads, E>(x, hd, is_k ? kn : qn, eps, r, p, c, is_k ? dst : -1, lds_f, lds_d);
        if (is_k) store_kv_row<kRopeThreads, E, QB>(vr, hd, c.v, c.v_scale, dst);
    } else {
        // q8_0: the head rotated into x first (no store), then K's and V's blocks by one
        // loop (one copy of the quantizer: gfx906's SGPR budget).
        norm_rope_head<kRopeThreads, KvElem::F32>(x, hd, is_k ? kn : qn, eps, r, p, c, -1, lds_f, lds_d);
        if (!is_k) return;
        __syncthreads();  // x, the rotated head, written by every thread of the block
#pragma unroll 1
        for (int w = 0; w < 2; ++w)
            store_kv_row<kRopeThreads, E, QB>(w ? vr : x, hd, w ? c.v : c.k, w ? c.v_scale : c.k_scale, dst);
    }
}

// need [n_seq] (zero): per sequence, 1 + the largest position of the rows in it.
__global__ void kv_need_k(int* __restrict__ need, const int32_t* __restrict__ pos, const int32_t* __restrict__ seq,
                          int rows) {
    pdl_wait();
    pdl_trigger();
    const int t = int(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t < rows) atomicMax(need + seq[t], pos[t] + 1);
}

// The q8_0 layer c -> f16 layer dst for positions < need[s]: grid (position tiles of
// kDequantPos, n_kv_head, n_seq); a thread takes 8 elements (one 8-byte load of
// values, their scale; one 16-byte store).
constexpr int kDequantPos = 32;
__global__ void __launch_bounds__(kRopeThreads) kv_dequant_k(ops::KvLayer c, ops::KvLayer dst,
                                                             const int* __restrict__ need) {
    pdl_wait();
    pdl_trigger();
    const int p0 = int(blockIdx.x) * kDequantPos, h = blockIdx.y, sq = blockIdx.z;
    const int n = min(need[sq] - p0, kDequantPos);
    if (n <= 0) return;
    const int hd = c.hd, chunks = n * hd / 8, sh = 31 - __clz(c.layout().q8_block());
    const int64_t src0 = c.row(sq, h, p0), dst0 = dst.row(sq, h, p0);
    for (int i = threadIdx.x; i < 2 * chunks; i += kRopeThreads) {
        const bool is_v = i >= chunks;
        const int64_t e = int64_t(is_v ? i - chunks : i) * 8;  // element within the tile (rows contiguous)
        const int8_t* vals = static_cast<const int8_t*>(is_v ? c.v : c.k);
        const uint2 w = *reinterpret_cast<const uint2*>(vals + src0 + e);
        const uint32_t s2 = kv_scales(c.k_scale, sh, src0 + e);
        const float d = h2f(uint16_t(is_v ? s2 >> 16 : s2));
        auto f = [&](uint32_t word, int b) { return float(int8_t(word >> (8 * b))) * d; };
        uint4 o;
        o.x = pack_h2(f(w.x, 0), f(w.x, 1)), o.y = pack_h2(f(w.x, 2), f(w.x, 3));
        o.z = pack_h2(f(w.y, 0), f(w.y, 1)), o.w = pack_h2(f(w.y, 2), f(w.y, 3));
        reinterpret_cast<uint4*>(static_cast<uint16_t*>(is_v ? dst.v : dst.k) + dst0 + e)[0] = o;
    }
}

// D consecutive elements of a K or V row, kept as loaded: f16 (D = 8: one 16-byte
// load), f32 (two), or q8_0 (one 8-byte load and the block's scale); D = 2 (head
// dims that are not a multiple of 8, f16 and f32 only): one 4- or 8-byte load.
// Decoded element by element at use: raw(e), before q8_0's scale (applied once per
// chunk by the caller).
template <KvElem E, int D>
struct KvChunk {
    static constexpr bool kQ8 = E == KvElem::Q8_0;
    static_assert(!kQ8 || D == 8, "q8_0 chunks are 8 elements");
    static constexpr int kWords = E == KvElem::F16 ? D / 2 : E == KvElem::F32 ? D : D / 4;
    uint32_t w[kWords];
    float scale;  // q8_0 only
    __device__ __forceinline__ float raw(int e) const {
        if constexpr (E == KvElem::F16) return h2f(uint16_t(w[e / 2] >> (16 * (e & 1))));
        else if constexpr (E == KvElem::F32) return __uint_as_float(w[e]);
        else return float(int8_t(w[e / 4] >> (8 * (e & 3))));
    }
};
// The chunk's values at element i (a multiple of D; rows of a multiple of D elements
// keep the vector loads aligned) of a plane (q8_0: the scale is set from kv_scales).
template <KvElem E, int D>
__device__ __forceinline__ KvChunk<E, D> load_kv(const void* base, int64_t i) {
    KvChunk<E, D> r;
    load_words(reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(base) + i * kv_value_bytes(E)), r.w);
    return r;
}

// Part j's (max, sum) from the partials p [n_part][stride]: both loads issued together.
__device__ __forceinline__ float2 part_ml(const float* p, int j, int stride) {
    return make_float2(load_l2(p + j * stride), load_l2(p + j * stride + 1));
}
// One head's output out[d] = acc[k] * inv for d = k * NT + threadIdx.x < hd, and
// with oq its q8 blocks (ods: (d, d * sum q) per 32 dims; oh: f16(q * d)) at
// element e0 + d of the q8 row.
template <int NT, int ND>
__device__ __forceinline__ void store_head(const float (&acc)[ND], float inv, float* __restrict__ out,
                                           int hd, int8_t* __restrict__ oq, float* __restrict__ ods,
                                           uint16_t* __restrict__ oh, int64_t e0) {
    static_assert(NT % kWave == 0 && NT >= 32, "whole waves, 32-lane groups for the q8 blocks");
    const int tid = int(threadIdx.x);
#pragma unroll
    for (int k = 0; k < ND; ++k) {  // uniform trip count: every lane reaches the reductions
        if (k * NT >= hd) break;        // block-uniform
        const int d = k * NT + tid;
        const float val = acc[k] * inv;
        if (d < hd) out[d] = val;
        if (!oq) continue;  // uniform
        // q8 of the 32-dim block holding d (groups of 32 lanes are aligned to blocks of 32 dims).
        const float amax = group_reduce_max<32>(fabsf(d < hd ? val : 0.f));
        const float dq = amax / 127.f, id = dq != 0.f ? 1.f / dq : 0.f;
        const int qi = d < hd ? int(roundf(val * id)) : 0;
        const float sum = group_reduce_sum<32>(float(qi));
        if (d < hd) {
            const int64_t e = e0 + d;
            oq[e] = int8_t(qi);
            if (oh) oh[e] = f2h(float(qi) * dq);
            if (d % 32 == 0) reinterpret_cast<float2*>(ods)[e / 32] = make_float2(dq, dq * sum);
        }
    }
}
// The head's merge over its n_used parts p [n_used][hd + 2] ((max, sum, acc[hd]) each),
// in one pass with an online maximum, for any n_used: kAttnMergeAhead parts at a time,
// their (max, sum) and this thread's dims loaded together, one L2 round trip per
// kAttnMergeAhead parts. (The two-pass form, the (max, sum) staged in LDS first, took
// 1 + n_used / 8 round trips and two barriers: H200 decode +3% with this one where
// tokens have 2-3 parts, +0.4% at depth 8192 with 50; docs/PERFORMANCE.md, 2026-11-28.)
// MAXD: the most head dims the caller serves (its registers: MAXD / NT dims a thread).
template <int NT, int MAXD>
__device__ __forceinline__ void combine_head(const float* p, float* __restrict__ out, int hd, int n_used,
                                             int8_t* __restrict__ oq, float* __restrict__ ods, uint16_t* __restrict__ oh,
                                             int64_t e0) {
    static_assert(NT % kWave == 0 && NT >= 32, "whole waves, 32-lane groups for the q8 blocks");
    const int tid = int(threadIdx.x), stride = hd + 2;
    constexpr int kDims = (MAXD + NT - 1) / NT;  // dims per thread at most
    float acc[kDims];
#pragma unroll
    for (int k = 0; k < kDims; ++k) acc[k] = 0.f;
    // M starts finite (-FLT_MAX): every weight is then expf(finite or -inf), never
    // NaN, and a part that saw no position (max -inf, sum 0) weighs 0, with no select.
    float M = -FLT_MAX, L = 0.f;
    // Parts j0 .. j0 + A - 1, all of them in the head's used parts.
    auto merge_parts = [&](auto count, int j0) {
        constexpr int A = decltype(count)::value;
        float m[A], l[A], v[A][kDims];
#pragma unroll
        for (int u = 0; u < A; ++u) {
            const float2 ml = part_ml(p, j0 + u, stride);
            m[u] = ml.x, l[u] = ml.y;
#pragma unroll
            for (int k = 0; k < kDims; ++k)  // (dims past hd: the last dim again, never stored)
                v[u][k] = load_l2(p + (j0 + u) * stride + 2 + min(k * NT + tid, hd - 1));
        }
        float Mn = M;
#pragma unroll
        for (int u = 0; u < A; ++u) Mn = fmaxf(Mn, m[u]);
        // __expf: one exp instruction (expf's range checks are selects on gfx906);
        // the weights are at most 1, where its error is a few ulp.
        const float corr = __expf(M - Mn);  // 1 when the maximum stays
        L *= corr;
#pragma unroll
        for (int k = 0; k < kDims; ++k) acc[k] *= corr;
#pragma unroll
        for (int u = 0; u < A; ++u) {
            const float w = __expf(m[u] - Mn);
            L += w * l[u];
#pragma unroll
            for (int k = 0; k < kDims; ++k) acc[k] += w * v[u][k];
        }
        M = Mn;
    };
    int j0 = 0;
    for (; j0 + kAttnMergeAhead <= n_used; j0 += kAttnMergeAhead)
        merge_parts(std::integral_constant<int, kAttnMergeAhead>{}, j0);
    // The rest (fewer than kAttnMergeAhead parts) in halving chunks, a round trip each.
    auto rest = [&](auto count) {
        constexpr int A = decltype(count)::value;
        if constexpr (A < kAttnMergeAhead)
            if (n_used - j0 >= A) merge_parts(count, j0), j0 += A;
    };
    rest(std::integral_constant<int, 16>{});
    rest(std::integral_constant<int, 8>{});
    rest(std::integral_constant<int, 4>{});
    rest(std::integral_constant<int, 2>{});
    rest(std::integral_constant<int, 1>{});
    store_head<NT, kDims>(acc, L > 0.f ? 1.f / L : 0.f, out, hd, oq, ods, oh, e0);
}

// part [rows][n_head][n_part][hd + 2]: (max, sum, acc[hd]) of one block's splits, unnormalized.
// MERGE: the last block of each (token, head) to finish (per-head counter, reset by
// it for the next launch) merges the splits itself (combine_head): no combine kernel.
struct Merge {
    int* count = nullptr;  // [rows][n_head], zero between launches
    float* out = nullptr;  // [rows][n_head][hd]
    int8_t* oq = nullptr;
    float* ods = nullptr;
    uint16_t* oh = nullptr;
};
// D, CH: each lane of a group owns CH chunks of D dims, chunk sub + j * kAttnGroup
// at dims D * (sub + j * kAttnGroup) .. + D - 1 (D = 8 when head_dim % 8 == 0:
// 16-byte K/V loads; CH = 1 up to 128 dims, 2 up to 256; else D = 2, CH = 4).
//
// Before pdl_wait the block reads pos / seq / fresh (uploaded by the host before
// the step; no kernel writes them) and, given fresh, issues its first batch of K/V
// loads: the cache rows below fresh[t] were written by earlier steps. Rows from
// fresh[t] on are written by this step's rope + cache store, so the lanes holding
// them load again after the wait. The first batch's memory latency thus overlaps
// the previous kernel's tail (decode steps: fresh[t] = pos[t], one row reloaded).
template <KvElem E, bool MERGE, int D, int CH>
__global__ void __launch_bounds__(kAttnThreads) attn_split(ops::KvLayer c, const float* __restrict__ q,
                                                           float* __restrict__ part, int n_head, float scale,
                                                           const int32_t* __restrict__ pos,
                                                           const int32_t* __restrict__ seq,
                                                           const int32_t* __restrict__ fresh, Merge mg) {
    constexpr int kDims = D * CH * kAttnGroup;  // head dims this variant serves at most
    // One row per wave (its groups merged in registers first): LDS for the dims
    // the variant serves, not kGroups x 256 (gfx906: 3 -> 4+ waves per SIMD).
    __shared__ float s_ml[kAttnWaves][2];
    __shared__ float s_acc[kAttnWaves][kDims];
    const int h = blockIdx.y, t = blockIdx.z, n_part = int(gridDim.x);
    const int hd = c.hd;
    const int kv_len = pos[t] + 1;  // (host data: before pdl_wait, see above)
    const int n_need = (kv_len + kAttnSplit - 1) / kAttnSplit;  // splits holding positions
    // Beyond this token's context: the merge reads parts < n_need only. (No wait:
    // block 0 of the grid always has work and waits, which keeps launches ordered.)
    if (int(blockIdx.x) >= n_need) return;
    const int g = threadIdx.x / kAttnGroup, sub = threadIdx.x % kAttnGroup;
    const int kvh = h / (n_head / c.n_kv_head);
    const int64_t base = c.row(seq[t], kvh, 0);
    // Chunk j's first dim, clamped into the row (a lane past the head's dims
    // re-reads the last chunk, with q = 0: loads without branches).
    int d0[CH];
#pragma unroll
    for (int j = 0; j < CH; ++j) d0[j] = min(D * (sub + j * kAttnGroup), hd - D);
    // Each group takes the positions p0 + g, + kGroups, ... (steps). K and V of a
    // step are loaded together, and those of kAhead steps before any is used: the
    // kernel is a chain of memory latencies at decode lengths, so one wait serves
    // kAhead steps (K and V in registers: up to 8 dims per lane, and kAttnAhead
    // from the target's table, 1 on gfx906 for its occupancy floor). More dims per
    // lane: V after the score, as registers allow.
    constexpr bool kVEarly = CH * D <= 8;
    constexpr int kAhead = kVEarly ? kAttnAhead : 1;
    constexpr int kBatch = kGroups * kAhead;  // positions per batch
    using Chunk = KvChunk<E, D>;
    constexpr bool kQ8 = Chunk::kQ8;
    const int q8_shift = kQ8 ? 31 - __clz(c.layout().q8_block()) : 0;
    Chunk kk[kAhead * CH], vv[kAhead * CH];  // [i * CH + j]
    float v_scale[kQ8 ? kAhead * CH : 1];    // q8_0: V's scales, loaded with K's
    // The batch at pb0 of a split [p0, p1): step i's row (past p1: p0's, unused).
    auto step_row = [&](int pb0, int i, int p0, int p1) {
        const int p = pb0 + i * kGroups + g;
        return base + int64_t(p < p1 ? p : p0) * hd;
    };
    float sp[kAhead];  // this lane's part of q.k per step
    // q.k of step i from its K chunks (qv: the scaled q, set after pdl_wait).
    float qv[CH * D];  // [j * D + e] (flat: gfx906 registers)
    auto dot_chunk = [&](int i, int j, float a) {
        if constexpr (kQ8) {  // the block's scale once per chunk
            float t = 0.f;
#pragma unroll
            for (int e = 0; e < D; ++e) t += qv[j * D + e] * kk[i * CH + j].raw(e);
            return fmaf(kk[i * CH + j].scale, t, a);
        } else {
#pragma unroll
            for (int e = 0; e < D; ++e) a += qv[j * D + e] * kk[i * CH + j].raw(e);
            return a;
        }
    };
    // K (and V) of step i from the cache row `row`; without PDL q is known by then
    // and q.k is taken as the chunks arrive (the K registers die at once: gfx906's
    // VGPR budget).
    auto load_step = [&](int i, int64_t row) {
        sp[i] = 0.f;
#pragma unroll
        for (int j = 0; j < CH; ++j) {
            kk[i * CH + j] = load_kv<E, D>(c.k, row + d0[j]);
            if constexpr (kQ8) {
                const uint32_t s2 = kv_scales(c.k_scale, q8_shift, row + d0[j]);
                kk[i * CH + j].scale = h2f(uint16_t(s2));
                v_scale[i * CH + j] = h2f(uint16_t(s2 >> 16));
            }
            if constexpr (kVEarly) vv[i * CH + j] = load_kv<E, D>(c.v, row + d0[j]);
            if constexpr (!arch::kPdl) sp[i] = dot_chunk(i, j, sp[i]);
        }
    };
    auto load_batch = [&](int pb0, int p0, int p1) {
#pragma unroll
        for (int i = 0; i < kAhead; ++i) load_step(i, step_row(pb0, i, p0, p1));
    };
    // With PDL the block's first batch goes out before the wait (see above); the
    // loop loads every other batch at its top (one wait per batch).
    bool loaded = false;
    if constexpr (arch::kPdl) {  // (without PDL nothing runs before the wait: no preload code at all)
        const int p0 = int(blockIdx.x) * kAttnSplit, p1 = min(p0 + kAttnSplit, kv_len);
        const int fr = fresh ? fresh[t] : 0;  // rows below: written by earlier steps
        if (fr > p0) {                        // (block-uniform)
            load_batch(p0, p0, p1);
            loaded = true;
        }
        pdl_wait();
        if (loaded && fr < p0 + kBatch) {  // this batch holds rows from fresh[t] on: those again, now written
#pragma unroll
            for (int i = 0; i < kAhead; ++i)
                if (p0 + i * kGroups + g >= fr) load_step(i, step_row(p0, i, p0, p1));
        }
    } else {
        pdl_wait();
        (void)fresh;
    }
    pdl_trigger();
    const float* qr = q + (int64_t(t) * n_head + h) * hd;
    float acc[CH * D];
#pragma unroll
    for (int j = 0; j < CH; ++j) {
        const float qs = D * (sub + j * kAttnGroup) < hd ? scale : 0.f;
#pragma unroll
        for (int e = 0; e < D; ++e) {
            qv[j * D + e] = qr[d0[j] + e] * qs;
            acc[j * D + e] = 0.f;
        }
    }
    float m = -INFINITY, l = 0.f;
    // This block's splits: blockIdx.x, + n_part, ... (one online softmax over all).
    for (int split = blockIdx.x; split < n_need; split += n_part) {
        const int p0 = split * kAttnSplit, p1 = min(p0 + kAttnSplit, kv_len);
        for (int pb0 = p0; pb0 < p1; pb0 += kBatch) {  // uniform trip counts: all lanes reach the reductions
            if (!loaded) load_batch(pb0, p0, p1);
            loaded = false;
#pragma unroll
            for (int i = 0; i < kAhead; ++i) {
                const int pb = pb0 + i * kGroups;
                if (pb >= p1) break;  // block-uniform
                const int p = pb + g;
                const bool valid = p < p1;
                if constexpr (arch::kPdl) {
#pragma unroll
                    for (int j = 0; j < CH; ++j) sp[i] = dot_chunk(i, j, sp[i]);
                }
                const float s = group_reduce_sum<kAttnGroup>(sp[i]);
                // Online softmax without a branch (a branch would let the compiler
                // sink the V loads behind it: a second round trip per step). A step
                // past p1 leaves m, l and acc as they are (corr 1, e 0).
                const float mn = valid ? fmaxf(m, s) : m;
                const float corr = mn == m ? 1.f : expf(m - mn), e = valid ? expf(s - mn) : 0.f;
                l = l * corr + e;
                const int64_t row = step_row(pb0, i, p0, p1);
#pragma unroll
                for (int j = 0; j < CH; ++j) {
                    if constexpr (!kVEarly) vv[i * CH + j] = load_kv<E, D>(c.v, row + d0[j]);
                    float es = e;
                    if constexpr (kQ8) es = e * v_scale[i * CH + j];  // (the scale once per chunk)
#pragma unroll
                    for (int x = 0; x < D; ++x) acc[j * D + x] = acc[j * D + x] * corr + es * vv[i * CH + j].raw(x);
                }
                m = mn;
            }
        }
    }
    // The wave's groups hold the same dims for different positions: merge their
    // softmax states in registers (a group that saw no position has l = 0, weight 0).
    const float Mw = across_groups_max<kAttnGroup>(m);
    const float wg = l > 0.f ? expf(m - Mw) : 0.f;
    const float Lw = across_groups_sum<kAttnGroup>(l * wg);
#pragma unroll
    for (int i = 0; i < CH * D; ++i) acc[i] = across_groups_sum<kAttnGroup>(acc[i] * wg);
    const int wv = int(threadIdx.x) / kWave;
    if (lane_id() < kAttnGroup) {  // the wave's first group writes its merged row
        if (sub == 0) s_ml[wv][0] = Mw, s_ml[wv][1] = Lw;
#pragma unroll
        for (int j = 0; j < CH; ++j) {
            const int d = D * (sub + j * kAttnGroup);
            if (d < hd) {
#pragma unroll
                for (int e = 0; e < D; ++e) s_acc[wv][d + e] = acc[j * D + e];
            }
        }
    }
    __syncthreads();
    float M = -INFINITY;
    for (int i = 0; i < kAttnWaves; ++i) M = fmaxf(M, s_ml[i][0]);
    // The block's waves merged: dim d's unnormalized sum, or at d = hd the softmax sum.
    auto merged = [&](int d) {
        float a = 0.f;
        for (int i = 0; i < kAttnWaves; ++i) {
            if (s_ml[i][1] == 0.f) continue;  // wave saw no position
            a += expf(s_ml[i][0] - M) * (d < hd ? s_acc[i][d] : s_ml[i][1]);
        }
        return a;
    };
    const int64_t th = int64_t(t) * n_head + h;
    const int n_used = min(n_part, n_need);
    if (MERGE && n_used == 1) {  // block-uniform: this block saw every position; out directly
        constexpr int kOut = (kMaxHd + kAttnThreads - 1) / kAttnThreads;
        float o[kOut];
#pragma unroll
        for (int k = 0; k < kOut; ++k) {
            const int d = k * kAttnThreads + int(threadIdx.x);
            o[k] = d < hd ? merged(d) : 0.f;
        }
        const float L = merged(hd);
        store_head<kAttnThreads, kOut>(o, L > 0.f ? 1.f / L : 0.f, mg.out + th * hd, hd, mg.oq, mg.ods, mg.oh, th * hd);
        return;
    }
    float* out = part + (th * n_part + blockIdx.x) * (hd + 2);
    for (int d = threadIdx.x; d < hd + 1; d += kAttnThreads) {
        const float a = merged(d);
        if (d < hd) out[2 + d] = a;
        else out[0] = M, out[1] = a;
    }
    if constexpr (MERGE) {
        __shared__ int s_last;
        __threadfence();  // this block's partial, visible before the count says so
        __syncthreads();
        if (threadIdx.x == 0) {
            const int done = atomicAdd(mg.count + th, 1);
            s_last = done == n_used - 1;
            if (s_last) mg.count[th] = 0;  // every other block of this head has counted
        }
        __syncthreads();
        if (!s_last) return;
        acquire_fence();
        combine_head<kAttnThreads, kDims>(part + th * n_part * (hd + 2), mg.out + th * hd, hd, n_used, mg.oq, mg.ods, mg.oh,
                                   th * hd);
    }
}

// out [rows][n_head][hd] from the splits that hold positions (pos[t] + 1 read on
// the device); grid (n_head, rows). With oq/ods also out's q8 blocks.
__global__ void __launch_bounds__(kEltThreads) attn_combine(const float* __restrict__ part, float* __restrict__ out,
                                                            int n_head, int hd, int n_part,
                                                            const int32_t* __restrict__ pos, int8_t* __restrict__ oq,
                                                            float* __restrict__ ods, uint16_t* __restrict__ oh) {
    pdl_wait();
    pdl_trigger();
    const int h = blockIdx.x, t = blockIdx.y;
    const int n_used = min(n_part, (pos[t] + 1 + kAttnSplit - 1) / kAttnSplit);
    const int64_t th = int64_t(t) * n_head + h;
    combine_head<kEltThreads, kMaxHd>(part + th * n_part * (hd + 2), out + th * hd, hd, n_used, oq, ods, oh, th * hd);
}

}  // namespace

void ops::rope(float* x, int rows, int n_head, int hd, const RopeArgs& r, const int32_t* pos, void* s) {
    const int64_t total = int64_t(rows) * n_head * (r.n_rot / 2);
    if (total > 0) launch(rope_k, dim3(grid_for(total, kEltThreads)), dim3(kEltThreads), s, x, n_head, hd, r, pos, total);
}

void ops::kv_store(const KvLayer& c, const float* k, const float* v, int rows, const int32_t* pos, const int32_t* seq,
                   void* s) {
    if (rows <= 0) return;
    const dim3 grid{unsigned(c.n_kv_head), unsigned(rows)};
#define VEGA_KV_STORE(E, QB) launch(kv_store_k<E, QB>, grid, dim3(kRopeThreads), s, c, k, v, pos, seq)
    VEGA_KV_DISPATCH(c, VEGA_KV_STORE);
#undef VEGA_KV_STORE
}

void ops::rope_store(const KvLayer& c, float* q, float* k, const float* v, int rows, int n_head, const RopeArgs& r,
                     const int32_t* pos, const int32_t* seq, void* s, const float* q_norm, const float* k_norm,
                     float eps) {
    if (rows <= 0) return;
    if (c.hd > kHeadRopeMaxDim) gpu_fail("rope_store: head dim over kHeadRopeMaxDim");
    const dim3 grid{unsigned(n_head + c.n_kv_head), unsigned(rows)};
#define VEGA_ROPE_STORE(E, QB) \
    launch(rope_store_k<E, QB>, grid, dim3(kRopeThreads), s, c, q, k, v, n_head, r, pos, seq, q_norm, k_norm, eps)
    VEGA_KV_DISPATCH(c, VEGA_ROPE_STORE);
#undef VEGA_ROPE_STORE
}

void ops::kv_dequant_f16(const KvLayer& c, const KvLayer& dst, int rows, const int32_t* pos, const int32_t* seq,
                         int n_kv_max, int* need, void* s) {
    if (rows <= 0 || n_kv_max <= 0) return;
    if (c.elem != KvElem::Q8_0 || dst.elem != KvElem::F16 || dst.hd != c.hd || dst.n_kv_head != c.n_kv_head ||
        dst.n_seq < c.n_seq || dst.n_ctx < n_kv_max)
        gpu_fail("kv_dequant_f16: the staging layer does not match the q8_0 cache");
    rt::memset(need, 0, size_t(c.n_seq) * sizeof(int), s);
    launch(kv_need_k, dim3(unsigned((rows + kEltThreads - 1) / kEltThreads)), dim3(kEltThreads), s, need, pos, seq,
           rows);
    launch(kv_dequant_k, dim3(unsigned((n_kv_max + kDequantPos - 1) / kDequantPos), unsigned(c.n_kv_head),
                              unsigned(c.n_seq)),
           dim3(kRopeThreads), s, c, dst, (const int*)need);
}

namespace {
// The head-dim variant of the split kernel: 8-dim chunks (16-byte loads) where head_dim
// % 8 == 0 (0: up to 8 * kAttnGroup dims, 1: up to 256), else dim pairs (2).
int attn_variant(int hd) { return hd % 8 == 0 ? (hd <= 8 * kAttnGroup ? 0 : 1) : 2; }

// Calls f with the split kernel (the merging one when MERGE) for the cache's element
// type and the head dims' variant.
template <bool MERGE, typename F>
void with_split_kernel(KvElem elem, int variant, F&& f) {
    auto split = [&](auto e) {
        constexpr KvElem E = decltype(e)::value;
        if (variant == 0) f(attn_split<E, MERGE, 8, 1>);
        else if (variant == 1) f(attn_split<E, MERGE, 8, 2>);
        else if constexpr (E != KvElem::Q8_0) f(attn_split<E, MERGE, 2, 4>);
    };
    switch (elem) {
        case KvElem::F16: split(std::integral_constant<KvElem, KvElem::F16>{}); break;
        case KvElem::F32: split(std::integral_constant<KvElem, KvElem::F32>{}); break;
        case KvElem::Q8_0: split(std::integral_constant<KvElem, KvElem::Q8_0>{}); break;
    }
}

// Blocks of the merging split kernel for (elem, variant) that one SM holds at once
// (registers, LDS), from the runtime's occupancy calculator; asked once per kernel.
int attn_resident_per_sm(KvElem elem, int variant) {
    static std::atomic<int> known[3][3] = {};
    std::atomic<int>& k = known[int(elem)][variant];
    int n = k.load(std::memory_order_relaxed);
    if (n > 0) return n;
    with_split_kernel<true>(elem, variant, [&](auto kernel) {
        if (gpuOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kAttnThreads, 0) != gpuSuccess) {
            n = 0;
            (void)gpuGetLastError();  // that call's error only: nothing else's is cleared
        }
    });
    n = std::max(n, 1);  // (no answer: one block an SM, still correct)
    k.store(n, std::memory_order_relaxed);
    return n;
}
}  // namespace

int ops::attention_parts(const KvLayer& c, int n_kv_max, int rows, int n_head, int n_sm) {
    const int64_t splits = (int64_t(std::max(n_kv_max, 1)) + kAttnSplit - 1) / kAttnSplit;
    const int64_t pairs = std::max<int64_t>(1, int64_t(rows) * n_head), sms = std::max(n_sm, 1);
    // VEGA_GPU_ATTN_BLOCKS (tuning, read once): that many blocks per SM, rounded up to
    // whole parts a pair, and no whole-pair rule.
    static const int env_per_sm = std::max(0, env::integer("VEGA_GPU_ATTN_BLOCKS", 0));
    if (env_per_sm > 0) return int(std::max<int64_t>(1, std::min(splits, (sms * env_per_sm + pairs - 1) / pairs)));
    // Pairs enough to fill the device: whole pairs (the block writes out directly).
    if (pairs >= sms * arch::kAttnWholePairsPerSm) return 1;
    // Else as many parts a pair as keep every block of the launch resident at once: one
    // wave, each block walking its splits (b, b + n_part, ...) from start to end, no
    // block waiting for a slot. H200, tg128 @ d8192 against the three waves of 12 blocks
    // an SM before: llama2-7b f16 cache (4 blocks an SM: 16 parts) +5.7%, q8_0 (5: 20
    // parts) +5.2%, llama3-8b +7.6%; 32 parts (two waves) gained half as much, 64 and a
    // partial extra wave lost (docs/PERFORMANCE.md, twenty-ninth session).
    const int64_t resident = sms * attn_resident_per_sm(c.elem, attn_variant(c.hd));
    return int(std::max<int64_t>(1, std::min(splits, resident / pairs)));
}

void ops::attention(const KvLayer& c, const float* q, float* out, int rows, int n_head, float scale, const int32_t* pos,
                    const int32_t* seq, const int32_t* fresh, int n_part, float* part, int8_t* oq, float* ods,
                    uint16_t* oh, int* count, void* s) {
    if (rows <= 0) return;
    if (c.hd > kMaxHd || c.hd % 2) gpu_fail("attention: head_dim " + std::to_string(c.hd) + " is not supported (even, <= 256)");
    static_assert(8 * 2 * kAttnGroup == kMaxHd, "the 8-dim variants cover head_dim <= kMaxHd");
    if (n_part <= 0) gpu_fail("attention: no split parts");
    static_assert(kEltThreads >= kMaxHd, "attn_combine: one thread per dim");
    if (c.hd % 32 || !oq) oq = nullptr, ods = nullptr, oh = nullptr;
    const dim3 grid{unsigned(n_part), unsigned(n_head), unsigned(rows)};
    Merge mg;
    if (count) mg.count = count, mg.out = out, mg.oq = oq, mg.ods = ods, mg.oh = oh;
    const int variant = attn_variant(c.hd);
    if (variant == 2 && c.hd > 2 * 4 * kAttnGroup)
        gpu_fail("attention: head_dim " + std::to_string(c.hd) + " is not supported (over " +
                 std::to_string(8 * kAttnGroup) + " dims it must be a multiple of 8)");
    if (c.elem == KvElem::Q8_0 && variant == 2)
        gpu_fail("attention: a q8_0 cache needs head_dim % 8 == 0, not " + std::to_string(c.hd));
    auto go = [&](auto kernel) {
        launch(kernel, grid, dim3(kAttnThreads), s, c, q, part, n_head, scale, pos, seq, fresh, mg);
    };
    if (count) {
        with_split_kernel<true>(c.elem, variant, go);
        return;
    }
    with_split_kernel<false>(c.elem, variant, go);
    launch(attn_combine, dim3(unsigned(n_head), unsigned(rows)), dim3(kEltThreads), s, (const float*)part, out, n_head,
           c.hd, n_part, pos, oq, ods, oh);
}

}  // namespace vega::gpu
