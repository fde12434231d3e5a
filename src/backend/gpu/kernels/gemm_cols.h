// The activation rows of a GEMM block (the columns of its output tile), shared by the
// dot4 GEMM (gemm_dot4.cu) and the float GEMM (gemm_float.cu):
//   plain    block x takes rows x*BN .. x*BN+BN-1 of the input and of y [rows][n_out];
//   grouped  block x takes work item x of an ops::ExpertPlan (plan_items with BN
//            columns): BN pairs of one active expert's slot; column j reads input row
//            pair (per_slot) or pair / n_used and writes y row pair [pairs][n_out]; the
//            weights are expert e's rows e * n_out .. of the stacked matrix. Blocks past
//            the plan's item count have no work.
#pragma once
#include "backend/gpu/ops.h"
#include "backend/gpu/vendor.h"

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

}  // namespace vega::gpu
