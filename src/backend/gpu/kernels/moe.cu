// Mixture-of-experts kernels: routing (router logits -> expert ids and weights),
// grouping the (row, slot) pairs by expert (the plan), the grouped expert matvec
// (each chosen expert's weight rows are read once for all the pairs that chose it:
// gate/up with SwiGLU, or one matrix), and the weighted sum of the experts' outputs.
// Expert ids live in device memory from the router on: no host round trip, so a
// decode step stays one captured graph.
//
// Audit specs (keys: tests/gpu/gfx906_audit.cpp). Routing: a wave per row over as
// many blocks of arch::kRowThreads as the rows need; grouping (the plan) in one block
// (the routing launch's last block, or a launch of its own).
// @audit kernel=*route_k<* min_waves=4
// @audit kernel=*group_k* min_waves=4
// @audit kernel=*plan_items_k* min_waves=4
// Router logits + routing (decode batches): the router row's 16 float4 a lane and the
// activation row's in registers (kV float4 a lane each), so 2 waves (one block per 4 experts on NVIDIA, 2 on gfx906).
// @audit kernel=*router_route_k* min_waves=2
// @audit kernel=*expert_combine_k* min_waves=8
// Grouped expert matvec, NB pairs at a time, R rows per wave, U chunks a lane in flight
// (gfx906: R = U = 1, arch::expert_shape): the matvec kernels' chunk loads (16-byte
// weight loads, dot4 against the q8 activations), branch-free (one v_cndmask: the
// zeroed scales of chunks past the row). Floors as compiled (2026-11-25): 4 waves; 4
// pairs at a time with gate/up 2 (the K-quants' 3). Round trips per iteration: one
// pair 4 (gate/up 8: the two matrices' planes come in separately, Q6_K 7); 4 pairs
// 16 (an activation chunk per pair, one at a time: the prompt path on gfx906 until its
// GEMM issue lands).
// @audit kernel=*expert_matvec_q<* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=4 loop_cndmask=1 loop_x4 no_flat no_glc
// @audit kernel=*expert_matvec_q<*,?1,?true,* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=8 loop_cndmask=1 loop_x4 no_flat no_glc
// @audit kernel=*expert_matvec_q<*,?4,?false,* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=16 loop_cndmask=1 loop_x4 no_flat no_glc
// @audit kernel=*expert_matvec_q<*,?4,?true,* min_waves=2 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=16 loop_cndmask=1 loop_x4 no_flat no_glc
// Down with h quantized into LDS by the block (QX, one decode row): the activation chunk
// comes from LDS; 2 selects per iteration (the chunk index clamp and the live scale).
// @audit kernel=*expert_matvec_q<*,?true>(* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=4 loop_cndmask=2 loop_x4 no_flat no_glc
// Q2_K and Q3_K: 8-byte code loads (2-bit codes), the activation chunk from LDS: no
// 16-byte load in the loop.
// @audit kernel=*expert_matvec_q<(vega::GgmlType)1[01],?1,?false,?1,?1,?true>(* min_waves=4 expect=v_dot4_i32_i8,dpp loop_trips=4 loop_cndmask=2 no_flat no_glc
// Float experts (F32/F16/BF16, tests and F32 models; not tuned).
// @audit kernel=*expert_matvec_f<* min_waves=4 expect=dpp loop_waits=8 no_flat no_glc
#include <algorithm>

#include "backend/expert_routing.h"
#include "backend/gpu/kernels/deferred_norm.h"
#include "backend/gpu/kernels/float_row.h"
#include "backend/gpu/kernels/last_block.h"
#include "backend/gpu/kernels/order_key.h"
#include "backend/gpu/kernels/q8_chunk.h"
#include "backend/gpu/kernels/quant_chunk.h"
#include "backend/gpu/kernels/silu.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {
namespace {

constexpr int kRouteThreads = arch::kRowThreads;
constexpr int kRouteWaves = kRouteThreads / kWave;
constexpr int kPerLane = kMaxExperts / kWave;  // router logits per lane
constexpr int kEmWaves = arch::kMatvecWaves;    // expert matvec: output rows (waves) per block
constexpr bool kPdlPrefetch = arch::kPdl;        // expert matvec: plan_early reads before the dependency wait
// Packing of the grouping scan: pair counts in the low 20 bits, active experts above.
constexpr int kCountBits = 20;

__device__ __forceinline__ unsigned long long wave_max_key(unsigned long long k) {
#pragma unroll
    for (int m = kWave / 2; m >= 1; m /= 2) {
        const unsigned hi = unsigned(wave_shuffle_xor(int(k >> 32), m));
        const unsigned lo = unsigned(wave_shuffle_xor(int(k & 0xffffffffu), m));
        const unsigned long long o = (static_cast<unsigned long long>(hi) << 32) | lo;
        k = o > k ? o : k;
    }
    return k;
}

// One wave routes row r: softmax over the n_expert logits, the n_used best keys
// (K passes of a wave max), their probabilities renormalised and scaled. The logits
// are read once (a key holds its value: key_value), so the passes wait on no memory.
__device__ void route_row(const float* __restrict__ logits, const ExpertRouting r, int row, int32_t* __restrict__ ids,
                          float* __restrict__ w) {
    const int lane = lane_id(), X = r.n_expert, K = r.n_used;
    const float* l = logits + int64_t(row) * X;
    unsigned long long key[kPerLane];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + i * kWave;
        const float v = e < X ? load_l2(l + e) : -INFINITY;
        key[i] = e < X ? order_key(v, e) : 0ull;
        if (e < X && v == v) mx = fmaxf(mx, v);
    }
    mx = wave_reduce_max(mx);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
        if (lane + i * kWave < X) sum += expf(key_value(key[i]) - mx);  // NaN: -inf, adds 0
    sum = wave_reduce_sum(sum);
    // Pass j: the wave's best remaining key; lane j keeps its id and probability.
    float mine_w = 0.f, total = 0.f;
    int mine_id = 0;
#pragma unroll 1
    for (int j = 0; j < K; ++j) {
        unsigned long long best = 0;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) best = key[i] > best ? key[i] : best;
        best = wave_max_key(best);
        const int e = int(key_index(best));  // 0 marks no candidate: never the best of a row
#pragma unroll
        for (int i = 0; i < kPerLane; ++i)
            if (key[i] == best) key[i] = 0;  // taken (on its own lane only: keys are unique)
        const float p = expf(key_value(best) - mx) / sum;
        total += p;
        if (lane == j) mine_w = p, mine_id = e;
    }
    if (lane < K) {
        const float norm = r.norm_weights ? 1.f / fmaxf(total, 6.103515625e-5f) : 1.f;
        const int id = held_expert_id(r, mine_id);  // -1: another device's expert, weight 0
        ids[int64_t(row) * K + lane] = id;
        w[int64_t(row) * K + lane] = id < 0 ? 0.f : mine_w * norm * r.scale;
    }
}

// Inclusive prefix sum of one int per thread over a block of NT threads (Hillis-Steele
// in LDS; the plans' few hundred experts per block, once per layer): scan[t] = v_0 + ..
// + v_t for every thread, visible to all on return.
template <int NT>
__device__ void block_inclusive_scan(int v, int* scan) {
    const int tid = int(threadIdx.x);
    scan[tid] = v;
    __syncthreads();
    for (int off = 1; off < NT; off *= 2) {
        const int add = tid >= off ? scan[tid - off] : 0;
        __syncthreads();
        scan[tid] += add;
        __syncthreads();
    }
}

// The plan of ids [rows][r.n_used] (ops::ExpertPlan), by one block of NT threads:
// pair counts per expert (LDS atomics), an exclusive scan of (count | active <<
// kCountBits) over the experts (thread t owns experts [t * kPer, +kPer);
// Hillis-Steele over the threads' totals), then each pair placed at its expert's
// cursor (the order inside an expert varies; every pair's result does not depend
// on it).
// routed: the ids are route_row's, so one row's experts are distinct, and a single
// row's plan is its ids as they are (slot j = pair j): no counting, no scan (when
// the device holds every expert). Id -1 (an expert another device holds) joins no
// group: the plan's pairs are the rest.
template <int NT>
__device__ void build_plan(const int32_t* __restrict__ ids, const ExpertRouting r, int rows, ops::ExpertPlan plan,
                           bool routed) {
    if (routed && rows == 1 && r.holds_all()) {
        const int K = r.n_used, tid = int(threadIdx.x);
        if (tid < K) plan.slot_expert[tid] = load_l2(ids + tid), plan.slot_begin[tid] = tid, plan.pairs[tid] = tid;
        if (tid == 0) plan.n_active[0] = K, plan.slot_begin[K] = K;
        return;
    }
    constexpr int kPer = (kMaxExperts + NT - 1) / NT;
    __shared__ int cnt[kMaxExperts];
    __shared__ int scan[NT];
    const int tid = int(threadIdx.x), X = r.n_expert, P = rows * r.n_used;
    for (int e = tid; e < kMaxExperts; e += NT) cnt[e] = 0;
    __syncthreads();
    // The ids may come from other blocks of this launch (route_k): read through L2.
    for (int p = tid; p < P; p += NT) {
        const int e = load_l2(ids + p);
        if (e >= 0) atomicAdd(&cnt[min(e, X - 1)], 1);
    }
    __syncthreads();
    int local[kPer], mine = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int e = tid * kPer + i;
        const int c = e < X ? cnt[e] : 0;
        local[i] = c | ((c > 0 ? 1 : 0) << kCountBits);
        mine += local[i];
    }
    block_inclusive_scan<NT>(mine, scan);
    int run = scan[tid] - mine;  // exclusive prefix of this thread's first expert
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int e = tid * kPer + i;
        if (e < X && local[i] != 0) {
            const int slot = run >> kCountBits, start = run & ((1 << kCountBits) - 1);
            plan.slot_expert[slot] = e;
            plan.slot_begin[slot] = start;
            cnt[e] = start;  // now the fill cursor
        }
        run += local[i];
    }
    if (tid == NT - 1) {
        const int n_active = scan[tid] >> kCountBits;
        plan.n_active[0] = n_active;
        plan.slot_begin[n_active] = scan[tid] & ((1 << kCountBits) - 1);  // the pairs placed
    }
    __syncthreads();
    for (int p = tid; p < P; p += NT) {
        const int e = load_l2(ids + p);
        if (e >= 0) plan.pairs[atomicAdd(&cnt[min(e, X - 1)], 1)] = p;
    }
}

// ids, w [rows][n_used] from the logits, a wave per row (kRouteWaves rows a block).
// GROUP: the last block builds the plan of all rows' ids (counter: last_block).
template <bool GROUP>
__global__ void __launch_bounds__(kRouteThreads) route_k(const float* __restrict__ logits, ExpertRouting r, int rows,
                                                         int32_t* __restrict__ ids, float* __restrict__ w,
                                                         ops::ExpertPlan plan, int* __restrict__ counter) {
    pdl_wait();
    pdl_trigger();
    const int row = int(blockIdx.x) * kRouteWaves + int(threadIdx.x) / kWave;
    if (row < rows) route_row(logits, r, row, ids, w);
    if constexpr (GROUP) {
        if (last_block(counter, int(gridDim.x))) build_plan<kRouteThreads>(ids, r, rows, plan, true);
    }
}

// The plan of ids [rows][n_used] alone (one block).
__global__ void __launch_bounds__(kRouteThreads) group_k(const int32_t* __restrict__ ids, ExpertRouting r, int rows,
                                                         ops::ExpertPlan plan) {
    pdl_wait();
    pdl_trigger();
    build_plan<kRouteThreads>(ids, r, rows, plan, false);
}

// The plan's work items for the grouped tensor-core matmul: slot s's pairs in groups
// of `cols`, items slot << 16 | g in slot order; n_items their count. One block.
__global__ void __launch_bounds__(kRouteThreads) plan_items_k(ops::ExpertPlan plan, int cols) {
    pdl_wait();
    pdl_trigger();
    constexpr int NT = kRouteThreads, kPer = (kMaxExperts + NT - 1) / NT;
    __shared__ int scan[NT];
    const int tid = int(threadIdx.x), n = plan.n_active[0];
    int groups[kPer], mine = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int sl = tid * kPer + i;
        groups[i] = sl < n ? (plan.slot_begin[sl + 1] - plan.slot_begin[sl] + cols - 1) / cols : 0;
        mine += groups[i];
    }
    block_inclusive_scan<NT>(mine, scan);
    int run = scan[tid] - mine;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int sl = tid * kPer + i;
        for (int g = 0; g < groups[i]; ++g) plan.items[run + g] = (sl << 16) | g;
        run += groups[i];
    }
    if (tid == NT - 1) plan.n_items[0] = scan[tid];
}

// Router logits and routing in one launch (decode batches, F32 router): wave e %
// waves of block e / waves computes router row e for every activation row (the
// row's loads in flight, then one reduction per activation row), writes the
// logits; the last block to finish (a device-scope counter, as split attention)
// routes every row and builds the plan. x [rows][n] f32, W [X][n] f32.
constexpr int kRouterWaves = kEmWaves;
constexpr int kRouterRows = 8;  // activation rows up to which the fused kernel serves (ops::router_route_ok)
__global__ void __launch_bounds__(kRouterWaves * kWave) router_route_k(const float* __restrict__ W,
                                                                         const float* __restrict__ x, const float* a_ss,
                                                                         float a_eps, int64_t n, int rows,
                                                                         float* __restrict__ logits, ExpertRouting r,
                                                                         int32_t* __restrict__ ids,
                                                                         float* __restrict__ w, ops::ExpertPlan plan,
                                                                         int* __restrict__ counter) {
    constexpr int NT = kRouterWaves * kWave;
    const int e = int(blockIdx.x) * kRouterWaves + int(threadIdx.x) / kWave, lane = lane_id();
    const int X = r.n_expert;
    // The weight row first (it depends on no earlier kernel), kV float4 a lane.
    constexpr int kV = 512 / kWave;  // n_embd 2048 in registers (NVIDIA 16, gfx906 8 float4 a lane)
    const int64_t n4 = n / 4;
    float4 wv[kV];
    const float4* wr = reinterpret_cast<const float4*>(W + int64_t(min(e, X - 1)) * n);
#pragma unroll
    for (int k = 0; k < kV; ++k) {
        const int64_t i = lane + int64_t(k) * kWave;
        wv[k] = i < n4 ? wr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    pdl_wait();
    pdl_trigger();
    // A deferred-norm input (one row): x is x * w, each logit scaled by 1/rms.
    const float4 ss4 = deferred_ss(a_ss, n / 32);
    for (int t = 0; t < rows; ++t) {
        const float4* xr = reinterpret_cast<const float4*>(x + int64_t(t) * n);
        float acc = 0.f;
        float4 xv[kV];  // every load issued before the first use (past the row: re-read, weight 0)
#pragma unroll
        for (int k = 0; k < kV; ++k) xv[k] = xr[min(lane + int64_t(k) * kWave, n4 - 1)];
#pragma unroll
        for (int k = 0; k < kV; ++k) acc += wv[k].x * xv[k].x + wv[k].y * xv[k].y + wv[k].z * xv[k].z + wv[k].w * xv[k].w;
        for (int64_t i = lane + int64_t(kV) * kWave; i < n4; i += kWave) {  // rows longer than 16 float4 a lane
            const float4 a = wr[i], xv = xr[i];
            acc += a.x * xv.x + a.y * xv.y + a.z * xv.z + a.w * xv.w;
        }
        acc = wave_reduce_sum(acc);
        if (a_ss) acc *= deferred_scale(ss4, n, a_eps);
        if (lane == 0 && e < X) logits[int64_t(t) * X + e] = acc;
    }
    if (!last_block(counter, int(gridDim.x))) return;
    for (int row = int(threadIdx.x) / kWave; row < rows; row += kRouterWaves) route_row(logits, r, row, ids, w);
    __syncthreads();
    build_plan<NT>(ids, r, rows, plan, true);
}

// The expert matvec's arguments: W (and U) the stacked matrices (all n_mat *
// n_out rows), expert e's row o at e * n_out + o; y [pairs][n_out]. plan_early: the
// plan was written before the previous launch (the down projections after gate/up),
// so it and the first weight chunks are read before the dependency wait (PDL: they
// overlap the previous kernel, as the dense matvec's first weight loads do).
struct ExpertJob {
    GpuMat W, U;
    int64_t n_out = 0;
    int n_used = 0;
    bool per_slot = false;
    bool plan_early = false;
    ops::ExpertPlan plan;
    float* y = nullptr;
};

// Block (x, slot): output rows [x * kEmWaves * R, +kEmWaves * R) (R consecutive per
// wave) of the slot's expert, for all of the expert's pairs, NB at a time (the weight
// chunks are loaded once per NB pairs). Pair p reads input row p (per_slot) or
// p / n_used; writes y[p][o] (SWIGLU: silu(W·x) * (U·x)). Each iteration loads U
// chunks of each of the R rows (and of V) before the first dot, branch-free: a chunk
// past the row's end re-reads the last one with its activation scales zeroed (as the
// matvec kernels); rows past n_out re-read the last row and are not written.
// QX (NB == 1, n_in <= kQxMaxIn): the input is the f32 one (Act::x); the block
// quantizes each pair's row into shared memory (q8_quad: the values prepare_act
// would write) before the dots, which saves the quantizing launch between gate/up
// and down (one decode row: one pair per chosen expert).
constexpr int kQxMaxIn = 4096;
template <GgmlType T, int NB, bool SWIGLU, int R, int U, bool QX>
__global__ void __launch_bounds__(kEmWaves * kWave) expert_matvec_q(ExpertJob j, ops::Act a) {
    static_assert(!QX || NB == 1, "quantize on load: one pair at a time");
    constexpr int kThreads = kEmWaves * kWave;
    const bool peel = kPdlPrefetch && j.plan_early;
    if (!peel) pdl_wait(), pdl_trigger();
    const int slot = int(blockIdx.y);
    if (slot >= load_l2(j.plan.n_active)) return;
    const int64_t o0 = (int64_t(blockIdx.x) * kEmWaves + int(threadIdx.x) / kWave) * R;
    // Whole waves past the rows leave (QX: they stay for the block's barriers; their
    // rows re-read the last one and are not written).
    if (!QX && o0 >= j.n_out) return;
    const int e = load_l2(j.plan.slot_expert + slot);
    const int p0 = load_l2(j.plan.slot_begin + slot), p1 = load_l2(j.plan.slot_begin + slot + 1);
    int64_t row[R];
#pragma unroll
    for (int r = 0; r < R; ++r) row[r] = int64_t(e) * j.n_out + min(o0 + r, j.n_out - 1);
    const int nc = int(j.W.n_chunk), lane = lane_id();
    Chunk w[U * R], v[U * R];
    auto load_weights = [&](int base) {
#pragma unroll
        for (int k = 0; k < U; ++k)
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int c = min(base + lane + k * kWave, nc - 1);
                w[k * R + r] = load_chunk<T>(j.W, row[r], c);
                if constexpr (SWIGLU) v[k * R + r] = load_chunk<T>(j.U, row[r], c);
            }
    };
    if (peel) {
        load_weights(0);
        pdl_wait();
        pdl_trigger();
    }
    // A deferred-norm input (one row, gate/up): each result scaled by 1/rms.
    const float4 ss4 = deferred_ss(a.ss, nc);
    float sc = 1.f;
    // QX: the current pair's input row in q8 (chunk c: words 8c..8c+7, scales sds[c]).
    // (16-byte aligned: read as int4)
    [[maybe_unused]] __shared__ __align__(16) uint32_t sq[QX ? kQxMaxIn / 4 : 4];
    [[maybe_unused]] __shared__ __align__(16) float2 sds[QX ? kQxMaxIn / 32 : 1];
    for (int g0 = p0; g0 < p1; g0 += NB) {
        int pair[NB];
        int64_t in_row[NB];
#pragma unroll
        for (int t = 0; t < NB; ++t) {
            pair[t] = load_l2(j.plan.pairs + min(g0 + t, p1 - 1));  // past the end: re-reads the last, never written
            in_row[t] = j.per_slot ? pair[t] : pair[t] / j.n_used;
        }
        if constexpr (QX) {
            __syncthreads();  // the previous pair's dots are done with sq
            const float4* xr = reinterpret_cast<const float4*>(a.x + in_row[0] * a.n);
            const int n4 = nc * 8;
            // The same trips on every thread (group reductions); past the row, whole groups
            // of 8 re-read the last chunk (n4 % 8 == 0) and write nothing.
            for (int i0 = 0; i0 < n4; i0 += kThreads) {
                const int i = i0 + int(threadIdx.x);
                const Q8Quad qq = q8_quad(xr[min(i, n4 - 1)]);
                if (i < n4) {
                    sq[i] = qq.packed;
                    if (i % 8 == 0) sds[i / 8] = make_float2(qq.d, qq.dsum);
                }
            }
            __syncthreads();
        }
        float acc[R * NB], accu[R * NB];
#pragma unroll
        for (int i = 0; i < R * NB; ++i) acc[i] = 0.f, accu[i] = 0.f;
        for (int base = 0; base < nc; base += kWave * U) {  // the same trips on every lane
            const int c0 = base + lane;
            if (!peel || g0 != p0 || base != 0) load_weights(base);
#pragma unroll
            for (int t = 0; t < NB; ++t)
#pragma unroll
                for (int k = 0; k < U; ++k) {
                    const int ck = c0 + k * kWave, c = min(ck, nc - 1);
                    const int64_t ai = in_row[t] * nc + c;
                    int4 a0, a1;
                    float2 ds;
                    if constexpr (QX) {
                        a0 = reinterpret_cast<const int4*>(sq)[c * 2], a1 = reinterpret_cast<const int4*>(sq)[c * 2 + 1];
                        ds = sds[c];
                    } else {
                        const int4* aq = reinterpret_cast<const int4*>(a.q) + ai * 2;
                        a0 = aq[0], a1 = aq[1];
                        ds = reinterpret_cast<const float2*>(a.ds)[ai];
                    }
                    const float live = ck < nc ? 1.f : 0.f;
                    ds.x *= live, ds.y *= live;
                    const ActChunk<T> x = act_chunk<T>(a0, a1, ds);  // (once for the R rows and both matrices)
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        acc[r * NB + t] += dot_chunk<T>(w[k * R + r], x);
                        if constexpr (SWIGLU) accu[r * NB + t] += dot_chunk<T>(v[k * R + r], x);
                    }
                }
        }
        if (a.ss && g0 == p0) sc = deferred_scale(ss4, a.n, a.eps);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int t = 0; t < NB; ++t) {
                const float sv = wave_reduce_sum(acc[r * NB + t]) * sc;
                float val = sv;
                if constexpr (SWIGLU) val = silu(sv) * (wave_reduce_sum(accu[r * NB + t]) * sc);
                if (lane == 0 && g0 + t < p1 && o0 + r < j.n_out) j.y[int64_t(pair[t]) * j.n_out + o0 + r] = val;
            }
    }
}

// Float experts: one pair at a time, the f32 input rounded to the weight's type.
template <GgmlType T, bool SWIGLU>
__global__ void __launch_bounds__(kEmWaves * kWave) expert_matvec_f(ExpertJob j, ops::Act a) {
    pdl_wait();
    pdl_trigger();
    const int slot = int(blockIdx.y);
    if (slot >= j.plan.n_active[0]) return;
    const int64_t o = int64_t(blockIdx.x) * kEmWaves + int(threadIdx.x) / kWave;
    if (o >= j.n_out) return;
    constexpr int esz = T == GgmlType::F32 ? 4 : 2;
    const int e = j.plan.slot_expert[slot];
    const int p0 = j.plan.slot_begin[slot], p1 = j.plan.slot_begin[slot + 1];
    const int64_t n = j.W.n_in, row = int64_t(e) * j.n_out + o;
    const uint8_t* wr = j.W.qs + row * n * esz;
    const uint8_t* ur = SWIGLU ? j.U.qs + row * n * esz : nullptr;
    const int lane = lane_id();
    for (int p = p0; p < p1; ++p) {
        const int pair = j.plan.pairs[p];
        const float* x = a.x + (j.per_slot ? int64_t(pair) : int64_t(pair / j.n_used)) * n;
        float acc = 0.f, accu = 0.f;
        for (int64_t i = lane; i < n; i += kWave) {
            const float xi = round_to<T>(x[i]);
            acc += load1<T>(wr, i) * xi;
            if constexpr (SWIGLU) accu += load1<T>(ur, i) * xi;
        }
        const float s = wave_reduce_sum(acc);
        float v = s;
        if constexpr (SWIGLU) v = silu(s) * wave_reduce_sum(accu);
        if (lane == 0) j.y[int64_t(pair) * j.n_out + o] = v;
    }
}

// out [rows][n] = sum_j w[r][j] * y[r][j][:], slots in order.
__global__ void __launch_bounds__(arch::kEltThreads) expert_combine_k(const float* __restrict__ y,
                                                                      const float* __restrict__ w, int rows, int K,
                                                                      int64_t n, float* __restrict__ out) {
    pdl_wait();
    pdl_trigger();
    const int64_t i = int64_t(blockIdx.x) * arch::kEltThreads + threadIdx.x;
    if (i >= int64_t(rows) * n) return;
    const int64_t r = i / n, c = i % n;
    float s = 0.f;
    for (int k = 0; k < K; ++k) {
        const float wk = w[r * K + k];
        if (wk != 0.f) s += wk * y[(r * K + k) * n + c];  // (0: also another device's expert, y unwritten)
    }
    out[i] = s;
}

// Average pairs per chosen expert from which the NB = 4 kernel serves.
constexpr int kGroupFrom = 2;

template <GgmlType T, bool SW>
void launch_expert(const ExpertJob& j, const ops::Act& a, int pairs, int max_slots, void* s) {
    const dim3 block(kEmWaves * kWave);
    auto grid = [&](int rows_per_wave) {
        return dim3(unsigned((j.n_out + kEmWaves * rows_per_wave - 1) / (kEmWaves * rows_per_wave)), unsigned(max_slots));
    };
    constexpr arch::MatvecShape sh = arch::expert_shape(SW);
    if constexpr (is_float_type(T)) {
        launch(expert_matvec_f<T, SW>, grid(1), block, s, j, a);
    } else if (!a.q) {  // the f32 input, quantized on load (ops::experts_quantize_on_load)
        if constexpr (SW) gpu_fail("expert gate/up: the q8 input is missing");
        else launch(expert_matvec_q<T, 1, SW, sh.rows, sh.unroll, true>, grid(sh.rows), block, s, j, a);
    } else if (pairs >= kGroupFrom * max_slots) {  // several pairs per expert: 4 at a time, a row per wave
        launch(expert_matvec_q<T, 4, SW, 1, 1, false>, grid(1), block, s, j, a);
    } else {  // about one pair per expert (decode): the target's shape (rows per wave, chunks in flight)
        launch(expert_matvec_q<T, 1, SW, sh.rows, sh.unroll, false>, grid(sh.rows), block, s, j, a);
    }
}

template <bool SW>
void dispatch_expert(const ExpertJob& j, const ops::Act& a, int pairs, int max_slots, void* s) {
    switch (j.W.type) {
#define VEGA_EXPERT_CASE(TT) \
    case GgmlType::TT: return launch_expert<GgmlType::TT, SW>(j, a, pairs, max_slots, s);
        VEGA_EXPERT_CASE(F32)
        VEGA_EXPERT_CASE(F16)
        VEGA_EXPERT_CASE(BF16)
        VEGA_GPU_QUANT_TYPES(VEGA_EXPERT_CASE)
#undef VEGA_EXPERT_CASE
        default: gpu_fail("expert matvec: unsupported weight type");
    }
}

}  // namespace

void ops::route_experts(const float* logits, int rows, const ExpertRouting& r, int32_t* ids, float* w,
                        const ExpertPlan* plan, int* counter, void* s) {
    if (rows <= 0) return;
    if (r.n_expert < 1 || r.n_expert > kMaxExperts || r.n_used < 1 || r.n_used > kMaxExpertsUsed ||
        r.n_used > r.n_expert || int64_t(rows) * r.n_used >= (int64_t(1) << kCountBits))
        gpu_fail("route_experts: unsupported expert counts");
    if (plan && !counter) gpu_fail("route_experts: the plan needs the grid counter");
    const dim3 grid(unsigned((rows + kRouteWaves - 1) / kRouteWaves)), block(kRouteThreads);
    if (plan) launch(route_k<true>, grid, block, s, logits, r, rows, ids, w, *plan, counter);
    else launch(route_k<false>, grid, block, s, logits, r, rows, ids, w, ExpertPlan{}, nullptr);
}

bool ops::router_route_ok(int64_t n, int rows, int n_expert) {
    return rows >= 1 && rows <= kRouterRows && n % 4 == 0 && n_expert >= 1 && n_expert <= kMaxExperts;
}

void ops::router_route(const float* W, const Act& a, const ExpertRouting& r, float* logits, int32_t* ids, float* w,
                       const ExpertPlan& plan, int* counter, void* s) {
    if (!router_route_ok(a.n, a.rows, r.n_expert) || !a.x || r.n_used < 1 || r.n_used > kMaxExpertsUsed ||
        r.n_used > r.n_expert)
        gpu_fail("router_route: unsupported shape");
    if (a.ss && (a.rows != 1 || a.n % 128 != 0 || a.n > 128 * kWave))
        gpu_fail("router_route: a deferred-norm input is one row of whole float4s of chunk sums");
    launch(router_route_k, dim3(unsigned((r.n_expert + kRouterWaves - 1) / kRouterWaves)), dim3(kRouterWaves * kWave), s, W,
           a.x, a.ss, a.eps, a.n, a.rows, logits, r, ids, w, plan, counter);
}

void ops::group_experts(const int32_t* ids, int rows, const ExpertRouting& r, const ExpertPlan& plan, void* s) {
    if (rows <= 0) return;
    if (r.n_expert < 1 || r.n_expert > kMaxExperts || int64_t(rows) * r.n_used >= (int64_t(1) << kCountBits))
        gpu_fail("group_experts: unsupported expert counts");
    launch(group_k, dim3(1), dim3(kRouteThreads), s, ids, r, rows, plan);
}

void ops::plan_items(const ExpertPlan& plan, int cols, void* s) {
    if (cols < 16) gpu_fail("plan_items: column groups under 16 pairs overflow the item list");
    launch(plan_items_k, dim3(1), dim3(kRouteThreads), s, plan, cols);
}

bool ops::experts_quantize_on_load(const GpuMat& W, int rows, int n_used, int n_mat) {
    // One row (a pair per chosen expert). With more rows every block quantizes all of
    // its expert's pairs; a first form (each wave quantizing every chunk itself) made
    // B = 16 17% slower than the quantizing launch (H100, 2026-11-25), so more rows
    // keep that launch.
    (void)n_used, (void)n_mat;
    return !is_float_type(W.type) && rows == 1 && W.n_in <= kQxMaxIn && W.n_in % 32 == 0;
}

void ops::matvec_experts(const GpuMat& W, const GpuMat* U, int64_t n_out, int n_mat, const ExpertPlan& plan,
                         int rows, int n_used, bool per_slot, const Act& a, float* y, void* s, bool plan_early) {
    if (rows <= 0) return;
    if (!is_float_type(W.type) && !a.q && (!a.x || !experts_quantize_on_load(W, rows, n_used, n_mat)))
        gpu_fail("matvec_experts: quantized experts need the q8 input (or the f32 one, where quantized on load)");
    if (a.ss && (rows != 1 || is_float_type(W.type) || W.n_chunk > 4 * kWave))
        gpu_fail("matvec_experts: a deferred-norm input is one row for quantized experts");
    if (a.q && gemm_dot4_experts(W, U, n_out, n_mat, plan, rows, n_used, per_slot, a, y, s)) return;
    if (a.q && matmul_mma_experts(W, U, n_out, n_mat, plan, rows, n_used, per_slot, a, y, s)) return;
    ExpertJob j;
    j.W = W, j.U = U ? *U : W, j.n_out = n_out, j.n_used = n_used, j.per_slot = per_slot, j.plan = plan, j.y = y;
    j.plan_early = plan_early;
    const int pairs = rows * n_used, max_slots = std::min(n_mat, pairs);
    if (U) dispatch_expert<true>(j, a, pairs, max_slots, s);
    else dispatch_expert<false>(j, a, pairs, max_slots, s);
}

void ops::combine_experts(const float* y, const float* w, int rows, int n_used, int64_t n, float* out, void* s) {
    const int64_t total = int64_t(rows) * n;
    if (total <= 0) return;
    launch(expert_combine_k, dim3(unsigned((total + arch::kEltThreads - 1) / arch::kEltThreads)),
           dim3(arch::kEltThreads), s, y, w, rows, n_used, n, out);
}

}  // namespace vega::gpu
