// The activation rows of a GEMM block (the columns of its output tile), shared by the
// dot4 GEMM (gemm_dot4.cu) and the float GEMM (gemm_float.cu):
//   plain    block x takes rows x*BN .. x*BN+BN-1 of the input and of y [rows][n_out];
//   grouped  block x takes work item x of an ops::ExpertPlan (plan_items with BN
//            columns): BN pairs of one active expert's slot; column j reads input row
//            pair (per_slot) or pair / n_used and writes y row pair [pairs][n_out]; the
//            weights are expert e's rows e * n_out .. of the stacked matrix. Blocks past
//            the plan's item count have no work.
// Both GEMMs' weight checks and their tile epilogue live here too.
#pragma once
#include "backend/gpu/ops.h"
#include "backend/gpu/vendor.h"
#include "backend/gpu/kernels/silu.h"

namespace vega::gpu {

struct GemmCols {
    int rows = 0;  // plain: input rows
    bool grouped = false;
    ops::ExpertPlan plan;
    int n_used = 1;
    bool per_slot = false;
};

// One block's columns, read after pdl_wait (a plan is written by the previous kernel).
struct TileCols {
    bool none = false;  // no work for this block (grouped: past the item count)
    int64_t wbase = 0;  // the weight rows' first row (grouped: expert * n_out)
    int begin = 0;      // plain: first row; grouped: the tile's first pair index
    int end = 0;        // one past the last valid row / pair index
};

template <int BN>
__device__ __forceinline__ TileCols tile_cols(const GemmCols& g, int64_t n_out) {
    TileCols t;
    if (!g.grouped) {
        t.begin = int(blockIdx.x) * BN, t.end = g.rows;
        return t;
    }
    if (int(blockIdx.x) >= g.plan.n_items[0]) {
        t.none = true;
        return t;
    }
    const int item = g.plan.items[blockIdx.x], slot = item >> 16, grp = item & 0xFFFF;
    t.begin = g.plan.slot_begin[slot] + grp * BN;
    t.end = g.plan.slot_begin[slot + 1];
    t.wbase = int64_t(g.plan.slot_expert[slot]) * n_out;
    return t;
}

// The input row of tile column j (a valid row also past the end: its outputs are not stored).
__device__ __forceinline__ int64_t act_row(const GemmCols& g, const TileCols& t, int j) {
    if (!g.grouped) return min(t.begin + j, t.end - 1);
    const int p = g.plan.pairs[t.begin + j < t.end ? t.begin + j : t.begin];
    return g.per_slot ? p : p / g.n_used;
}

// The output row of tile column j, or -1 past the end.
__device__ __forceinline__ int64_t out_row(const GemmCols& g, const TileCols& t, int j) {
    if (t.begin + j >= t.end) return -1;
    return g.grouped ? int64_t(g.plan.pairs[t.begin + j]) : int64_t(t.begin + j);
}

// The block's outputs (thread (tr, tc) of tiles of BM weight rows, SWIGLU: BM/2 G rows and
// the same U rows): acc[i][j] is weight row o0 + tr + RG i against tile column tc + CG j;
// with SWIGLU, y = silu(acc[i][j]) * acc[i + TM/2][j] for i < TM/2. Rows past n_out and
// columns past the end are not written.
template <int TM, int TN, int RG, int CG, bool SWIGLU>
__device__ __forceinline__ void store_gemm_tile(const float (&acc)[TM][TN], const GemmCols& g, const TileCols& t,
                                           int64_t o0, int tr, int tc, int64_t n_out, float* __restrict__ y) {
    constexpr int kOutTm = SWIGLU ? TM / 2 : TM;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int64_t r = out_row(g, t, tc + CG * j);
        if (r < 0) continue;
#pragma unroll
        for (int i = 0; i < kOutTm; ++i) {
            const int64_t o = o0 + tr + RG * i;
            if (o >= n_out) continue;
            float v = acc[i][j];
            if constexpr (SWIGLU) v = silu(v) * acc[i + kOutTm][j];
            y[r * n_out + o] = v;
        }
    }
}

// Host: whether a GEMM of BM-row tiles takes W (and U, SwiGLU's second matrix): a
// pair of one type and shape, and W's row tiles (BM / 2 outputs each with SwiGLU) within
// grid y's 65535.
template <int BM>
inline bool gemm_weights_fit(const GpuMat& W, const GpuMat* U) {
    return pairs_with(W, U) && (W.n_out + BM / 2 - 1) / (BM / 2) <= 65535;
}

}  // namespace vega::gpu
