// Quantized GEMM through the integer dot4 (gfx906's v_dot4_i32_i8, NVIDIA's dp4a):
// prompts and large batches on targets without tensor cores, where the matvec
// kernels would re-read every weight once per 8 activation rows.
//
//   y [rows][n_out] = x [rows][n_in] @ W^T       W quantized (gpu_mat.h), x as q8 (Act::q, ds)
//   SWIGLU: y = silu(x @ G^T) * (x @ U^T)         G, U of one type and shape
//   grouped experts: the columns of a block are one expert's pairs (gemm_cols.h)
//
// Block: the target's tile (arch::kGemmTile: bm x bn, K steps of kc chunks, tm x tn
// outputs per thread). Thread (tr, tc) = (tid % (bm/tm), tid / (bm/tm)) owns weight
// rows tr + (bm/tm) i and activation rows tc + (bn/tn) j of the tile; with SWIGLU the
// tile's rows 0..bm/2-1 are G's and bm/2.. U's for the same outputs, so a thread holds
// both factors of its outputs (i < tm/2: gate, i >= tm/2: up).
//
// Per K step each thread stages one 16-element half of a weight chunk and one of an
// activation chunk (tiles with bm * kc * 2 = bn * kc * 2 = threads) into one of two
// LDS stages: the weight half is decoded once (codes - offset or codebook entries, as
// signed int8: quant_chunk.h), with the chunk's scale record (Rec below); the
// activation half is copied, with its (d, d*sum) (Q2_K: its half's sum too). No
// thread has two roles, so the loads take no branch. The next step's halves are loaded
// into registers (global_load_dwordx4) before this step's dot4s and written to the
// other stage after them: one barrier per step, the loads' latency hidden behind the
// compute.
//
// LDS rows hold kc x 32 int8 plus one vec4 of padding (kc = 2: 80 bytes, an odd number
// of vec4s, so the 8 rows of one ds_read_b128 pass fall in distinct banks: the seed
// study's stride-33 rule); scale records are chunk-major ([kc][rows]: consecutive rows
// consecutive). The inner product per chunk and half: tm x tn independent dot4 chains
// of 4 (16 accumulators), from tm + tn ds_read_b128.
//
// Audit: the K loop (hot loop) issues every global load of a step before its one wait
// on them; dwordx4 weight and activation loads; ds_read_b128 / ds_write_b128.
// @audit kernel=*gemm_dot4_k<* min_waves=2 expect=v_dot4_i32_i8,global_load_dwordx4,ds_read_b128,ds_write_b128 loop_inflight=4 loop_trips=1 loop_waits=1 loop_x4 no_flat no_glc
#include "core/env.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"
#include "backend/gpu/kernels/gemm_cols.h"
#include "backend/gpu/kernels/quant_chunk.h"

#include <algorithm>
#include <string>

namespace vega::gpu {
namespace {

constexpr arch::GemmTile kTile = arch::kGemmTile;
constexpr int kBm = kTile.bm, kBn = kTile.bn, kKc = kTile.kc, kTm = kTile.tm, kTn = kTile.tn;
constexpr int kRg = kBm / kTm;  // thread rows: tr in [0, kRg)
constexpr int kCg = kBn / kTn;  // thread columns: tc in [0, kCg)
constexpr int kThreads = kTile.threads();
constexpr int kRowWords = kKc * 8 + 4;  // an LDS row: kc chunks + 1 vec4
static_assert(kBm % kTm == 0 && kBn % kTn == 0 && kTm % 2 == 0, "whole thread tiles; SWIGLU halves of tm");
static_assert(kBm * kKc * 2 == kThreads && kBn * kKc * 2 == kThreads,
              "one weight half-chunk and one activation half-chunk per thread and step");
static_assert((kBm / 2) * kKc * 2 % kWave == 0, "SWIGLU: G's and U's rows staged by whole waves (a uniform select)");

// What a chunk's product needs besides its integer dots, per format:
//   weight record (kW floats): one scale f            (kD, kI8, kE8M0)
//                              f, g                   (kDM: + g * dsum; kK4: g = -dmin * min)
//                              f0, f1                 (per-half scales: Q3_K, Q6_K)
//                              f0, f1, -g0, -g1       (Q2_K: per-half mins)
//   activation record (kX):    d | d, d * sum(q) | d, -, d * sum(q of half 0), d * sum(q of half 1)
// value = d * (f0 s0 + f1 s1) [+ g dsum] [- g0 d x0 - g1 d x1], s_h the halves' int dots.
template <GgmlType T>
struct Rec {
    static constexpr GpuFormat F = kFmt<T>;
    static constexpr bool kSplit = F.split_halves(), kMin = F.has_min();
    static constexpr bool kHalfSums = F.scales == GpuScales::kQ2K;
    static constexpr int kW = kSplit && kMin ? 4 : (kSplit || kMin) ? 2 : 1;
    static constexpr int kX = kHalfSums ? 4 : kMin ? 2 : 1;
};
template <int N>
struct alignas(N == 1 ? 4 : N == 2 ? 8 : 16) Floats {
    float v[N];
};

// One staged half-chunk in registers between its loads and its LDS store: weight
// (q: its qs bytes, Q8_0 its half's 16; the high-bit planes; the scale bits) and
// activation (its 16 int8 and the chunk's d, d*sum).
struct Stage {
    uint4 wq;
    uint32_t h0, h1, sc, sb;
    uint4 xq;
    float2 ds;
};

template <GgmlType T, bool SW>
struct Lds {
    using R = Rec<T>;
    uint32_t w[2][kBm][kRowWords];
    uint32_t x[2][kBn][kRowWords];
    Floats<R::kW> ws[2][kKc][kBm];
    Floats<R::kX> xs[2][kKc][kBn];
};

// The signed int8 values of half h of a weight chunk (word k: elements 16h + 4k ..
// 16h + 4k + 3) and the chunk's scale record. r.wq: the chunk's qs (Q8_0: half h's 16
// bytes).
template <GgmlType T>
__device__ __forceinline__ void decode_weight_half(const Stage& r, int h, uint32_t (&v)[4], Floats<Rec<T>::kW>& rec) {
    constexpr GpuFormat F = kFmt<T>;
    const uint32_t q[4] = {r.wq.x, r.wq.y, r.wq.z, r.wq.w};
    if constexpr (F.codes == GpuCodes::kBytes) {
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = q[k];
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const uint32_t qa = F.codes == GpuCodes::kPairs ? q[0] : q[k];  // (kPairs: words 0 and 1)
            v[k] = signed_values<T>(codes_half<T>(qa, q[1], r.h0, r.h1, k, h));
        }
    }
    float f0, f1, g0, g1;
    decode_scales<T>(r.sc, r.sb, &f0, &f1, &g0, &g1);
    using R = Rec<T>;
    if constexpr (R::kSplit && R::kMin) rec.v[0] = f0, rec.v[1] = f1, rec.v[2] = -g0, rec.v[3] = -g1;
    else if constexpr (R::kSplit) rec.v[0] = f0, rec.v[1] = f1;
    else if constexpr (R::kMin) rec.v[0] = f0, rec.v[1] = F.scales == GpuScales::kK4 ? -g0 : g0;
    else rec.v[0] = f0;
}

template <GgmlType T, bool SW>
__global__ void __launch_bounds__(kThreads) VEGA_WAVES(arch::kGemmWaves, arch::kGemmWaves)
    gemm_dot4_k(GpuMat W, GpuMat U, const int8_t* __restrict__ xq, const float* __restrict__ xds, GemmCols cols,
                float* __restrict__ y) {
    using R = Rec<T>;
    __shared__ Lds<T, SW> s;
    constexpr int kOutRows = SW ? kBm / 2 : kBm;  // output rows per tile
    const int64_t n_out = W.n_out, nc = W.n_chunk;
    const int64_t o0 = int64_t(blockIdx.y) * kOutRows;
    const int tid = int(threadIdx.x), tr = tid % kRg, tc = tid / kRg;
    const int steps = int((nc + kKc - 1) / kKc);

    // This thread's halves (the same rows every step): half-item tid = (row lr, chunk
    // c, half h), h fastest, so a wave's loads cover whole rows' chunks of the step.
    const int h = tid & 1, c_in = (tid >> 1) % kKc, lr = tid / (2 * kKc);
    // SWIGLU: tile rows kBm/2.. are U's (whole waves: a scalar select of the planes).
    const bool up = SW && wave_in_block_uniform() * kWave >= (kBm / 2) * kKc * 2;
    GpuMat M = W;
    if (up) M.qs = U.qs, M.qh = U.qh, M.sc = U.sc, M.sb = U.sb;

    pdl_wait();  // the activations (and an expert plan) come from the previous kernels
    pdl_trigger();
    const TileCols tcols = tile_cols<kBn>(cols, n_out);
    if (tcols.none) return;  // (the whole block: before any barrier)
    const int64_t wrow = tcols.wbase + min(o0 + (up ? lr - kBm / 2 : lr), n_out - 1);
    const int64_t xrow = act_row(cols, tcols, lr);

    // A step's loads; a chunk past the row's end (a short last step) loads the last
    // chunk again and is zeroed at the store (no branch around the loads).
    auto load = [&](int step) {
        Stage r;
        const int64_t c = min(int64_t(step) * kKc + c_in, nc - 1);
        const Chunk ch = load_chunk_half<T>(M, wrow, c, h);
        r.wq = ch.q0, r.h0 = ch.h0, r.h1 = ch.h1, r.sc = ch.sc, r.sb = ch.sb;
        const int64_t i = xrow * nc + c;
        r.xq = reinterpret_cast<const uint4*>(xq + i * 32)[h];
        // (d alone where the record needs no d*sum: a dwordx2 whose unused half the
        // compiler re-allocated inside the step waited on the load, gfx906 audit)
        if constexpr (R::kX >= 2 && !R::kHalfSums) r.ds = reinterpret_cast<const float2*>(xds)[i];
        else r.ds = make_float2(xds[2 * i], 0.f);
        return r;
    };
    auto store = [&](int step, int st, const Stage& r) {
        const bool valid = int64_t(step) * kKc + c_in < nc;
        uint32_t v[4];
        Floats<R::kW> wrec;
        decode_weight_half<T>(r, h, v, wrec);
        *reinterpret_cast<uint4*>(&s.w[st][lr][c_in * 8 + 4 * h]) = make_uint4(v[0], v[1], v[2], v[3]);
        *reinterpret_cast<uint4*>(&s.x[st][lr][c_in * 8 + 4 * h]) = r.xq;
        float* xrec = s.xs[st][c_in][lr].v;
        if constexpr (R::kHalfSums) {  // this half's d * sum(q)
            int x = 0;
            x = dot4_i8(0x01010101, int(r.xq.x), x), x = dot4_i8(0x01010101, int(r.xq.y), x);
            x = dot4_i8(0x01010101, int(r.xq.z), x), x = dot4_i8(0x01010101, int(r.xq.w), x);
            xrec[2 + h] = valid ? r.ds.x * float(x) : 0.f;
        }
        if (h == 0) {
            if (!valid) {
#pragma unroll
                for (int k = 0; k < R::kW; ++k) wrec.v[k] = 0.f;
            }
            s.ws[st][c_in][lr] = wrec;
            xrec[0] = valid ? r.ds.x : 0.f;
            if constexpr (R::kX >= 2 && !R::kHalfSums) xrec[1] = valid ? r.ds.y : 0.f;
        }
    };

    float acc[kTm][kTn];
#pragma unroll
    for (int i = 0; i < kTm; ++i)
#pragma unroll
        for (int j = 0; j < kTn; ++j) acc[i][j] = 0.f;

    store(0, 0, load(0));
    __syncthreads();
    for (int k = 0; k < steps; ++k) {
        const int st = k & 1;
        const bool more = k + 1 < steps;
        const Stage next = load(min(k + 1, steps - 1));  // (the last step loads itself again, unused)
        // One chunk at a time, one half at a time (a compiler barrier between the halves):
        // unrolled, the compiler hoisted every LDS read of the step ahead of the dot4s
        // and spilled 300-500 bytes a lane at gfx906's 128 VGPRs (audit, 2026-11-27).
#pragma unroll 1
        for (int c = 0; c < kKc; ++c) {
            Floats<R::kW> wr[kTm];
            Floats<R::kX> xr[kTn];
#pragma unroll
            for (int i = 0; i < kTm; ++i) wr[i] = s.ws[st][c][tr + kRg * i];
#pragma unroll
            for (int j = 0; j < kTn; ++j) xr[j] = s.xs[st][c][tc + kCg * j];
            int sum[kTm][kTn];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if (h) asm volatile("" ::: "memory");
                uint4 wv[kTm], xv[kTn];
#pragma unroll
                for (int i = 0; i < kTm; ++i) wv[i] = *reinterpret_cast<const uint4*>(&s.w[st][tr + kRg * i][c * 8 + 4 * h]);
#pragma unroll
                for (int j = 0; j < kTn; ++j) xv[j] = *reinterpret_cast<const uint4*>(&s.x[st][tc + kCg * j][c * 8 + 4 * h]);
#pragma unroll
                for (int i = 0; i < kTm; ++i)
#pragma unroll
                    for (int j = 0; j < kTn; ++j) {
                        int a = (R::kSplit || h == 0) ? 0 : sum[i][j];
                        a = dot4_i8(int(wv[i].x), int(xv[j].x), a);
                        a = dot4_i8(int(wv[i].y), int(xv[j].y), a);
                        a = dot4_i8(int(wv[i].z), int(xv[j].z), a);
                        a = dot4_i8(int(wv[i].w), int(xv[j].w), a);
                        sum[i][j] = a;
                    }
                if constexpr (R::kSplit) {  // per-half scales: d * f_h * s_h
#pragma unroll
                    for (int i = 0; i < kTm; ++i)
#pragma unroll
                        for (int j = 0; j < kTn; ++j) acc[i][j] = fmaf(xr[j].v[0] * wr[i].v[h], float(sum[i][j]), acc[i][j]);
                }
            }
#pragma unroll
            for (int i = 0; i < kTm; ++i)
#pragma unroll
                for (int j = 0; j < kTn; ++j) {
                    if constexpr (!R::kSplit) acc[i][j] = fmaf(wr[i].v[0] * xr[j].v[0], float(sum[i][j]), acc[i][j]);
                    if constexpr (R::kMin && !R::kSplit) acc[i][j] = fmaf(wr[i].v[1], xr[j].v[1], acc[i][j]);
                    if constexpr (R::kHalfSums)
                        acc[i][j] = fmaf(wr[i].v[2], xr[j].v[2], fmaf(wr[i].v[3], xr[j].v[3], acc[i][j]));
                }
        }
        if (more) store(k + 1, st ^ 1, next);
        __syncthreads();
    }

    store_gemm_tile<kTm, kTn, kRg, kCg, SW>(acc, cols, tcols, o0, tr, tc, n_out, y);
}

int& min_rows_setting() {
    // The target's table, or VEGA_GPU_GEMM_ROWS (0: never), read once; tests may set it.
    static int n = env::integer("VEGA_GPU_GEMM_ROWS", arch::kGemmMinRows);
    return n;
}

template <bool SW>
bool dispatch(const GpuMat& W, const GpuMat& U, const ops::Act& a, const GemmCols& cols, unsigned col_blocks, float* y,
              void* s) {
    constexpr int kOutRows = SW ? kBm / 2 : kBm;
    const dim3 grid(col_blocks, unsigned((W.n_out + kOutRows - 1) / kOutRows));
    switch (W.type) {
#define VEGA_GEMM_CASE(TT)                                                                                      \
    case GgmlType::TT:                                                                                          \
        launch(gemm_dot4_k<GgmlType::TT, SW>, grid, dim3(kThreads), s, W, U, a.q, a.ds, cols, y);           \
        return true;
        VEGA_GPU_QUANT_TYPES(VEGA_GEMM_CASE)
#undef VEGA_GEMM_CASE
        default: return false;
    }
}

// The checks every entry shares: the q8 input, a quantized W (U alike), the grid.
bool serves(const GpuMat& W, const GpuMat* U, const ops::Act& a) {
    return a.q && a.ds && !a.ss && W.n_chunk > 0 && !is_float_type(W.type) && gemm_weights_fit<kBm>(W, U);
}

}  // namespace

int ops::gemm_min_rows() { return min_rows_setting(); }
int64_t& ops::gemm_launch_count() {
    static int64_t n = 0;
    return n;
}
void ops::set_gemm_min_rows(int rows) { min_rows_setting() = rows; }

bool ops::gemm_dot4(const GpuMat& W, const GpuMat* U, const Act& a, float* y, void* s) {
    const int min_rows = gemm_min_rows();
    if (min_rows <= 0 || a.rows < min_rows) return false;
    if (is_float_type(W.type)) return gemm_float(W, U, a, y, s);
    if (!serves(W, U, a)) return false;
    GemmCols cols;
    cols.rows = a.rows;
    const unsigned blocks = unsigned((a.rows + kBn - 1) / kBn);
    const bool ok = U ? dispatch<true>(W, *U, a, cols, blocks, y, s) : dispatch<false>(W, W, a, cols, blocks, y, s);
    gemm_launch_count() += ok;
    return ok;
}

bool ops::gemm_dot4_experts(const GpuMat& W, const GpuMat* U, int64_t n_out, int n_mat, const ExpertPlan& plan,
                            int rows, int n_used, bool per_slot, const Act& a, float* y, void* s) {
    const int min_rows = gemm_min_rows();
    const int pairs = rows * n_used, slots = std::min(n_mat, pairs);
    // As for one matrix: the GEMM where an active expert averages min_rows pairs or more.
    if (min_rows <= 0 || !plan.items || pairs < min_rows * slots) return false;
    GpuMat We = W, Ue = U ? *U : W;
    We.n_out = Ue.n_out = n_out;  // rows per expert (the planes hold all n_mat)
    if (is_float_type(W.type) || !serves(We, U ? &Ue : nullptr, a)) return false;
    GemmCols cols;
    cols.grouped = true, cols.plan = plan, cols.n_used = n_used, cols.per_slot = per_slot;
    plan_items(plan, kBn, s);
    const unsigned blocks = unsigned(pairs / kBn + slots + 1);  // the item list's capacity
    const bool ok = U ? dispatch<true>(We, Ue, a, cols, blocks, y, s) : dispatch<false>(We, We, a, cols, blocks, y, s);
    gemm_launch_count() += ok;
    return ok;
}

}  // namespace vega::gpu
