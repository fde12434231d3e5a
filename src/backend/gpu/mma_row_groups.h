// The tensor-core matmul's rows per block (kernels/matmul_mma.cu, row_groups): how many
// groups of 32 weight rows (1, 2 or 4) one block takes for a launch. Plain C++, so the
// rule is tested on the CPU (tests/gpu/mma_row_groups_test.cpp) with the shapes it was
// measured on.
//
// Every group more halves the activation rows read from L2 per weight byte (L2 bounds
// the kernel), but makes the tiles fewer: a launch keeps a tile for every SM, and takes
// 4 groups only where the persistent grid's rounds still pay. Each column group's
// n_sm / cols blocks walk its row tiles in rounds; at 4 groups a round's 128-row tile
// costs wide_cost_pct percent of a 64-row tile's time (arch::kMmaWideTileCostPct: 160),
// and 4 groups must not take longer than 2:
//   llama2-7b gate/up at 64 rows: 172 tiles in 2 rounds of 132 blocks against 344 in 3:
//     2 x 1.6 = 3.2 > 3, 2 groups (4 measured -1.4% at B=64);
//   llama3-8b gate/up: 224 tiles in 2 rounds against 448 in 4: 4 groups (+9.7%).
#pragma once

#include <algorithm>
#include <cstdint>

namespace vega::gpu {

constexpr int kMmaTileRows = 16;  // weight rows of one mma tile (the mma's M)

// One launch: up to three matrices of one width, each n_out[m] rows.
struct MmaLaunchShape {
    int64_t n_out[3] = {0, 0, 0};
    int n_mat = 1;
    bool swiglu = false;   // a row group is 16 rows of W and the same 16 of V
    bool grouped = false;  // grouped experts: at most 2 groups (as measured)
    int rows = 0;          // activation rows
    int nt = 8;            // column tile: nt * 8 activation rows a column group (2, 4 or 8)
};

// The device and the tuning knobs, every field given by the caller (matmul_mma.cu: the
// device's SMs, the target table's values and their environment overrides).
struct MmaGroupLimits {
    int n_sm;
    int max_groups;     // arch::kMmaMaxRowGroups capped by VEGA_GPU_MMA_GROUPS
    int wide_min_cols;  // VEGA_GPU_MMA_WIDE_COLS: 4 groups from this many column groups on
    int wide_cost_pct;  // arch::kMmaWideTileCostPct or VEGA_GPU_MMA_WIDE_COST; 0: no tail check
};

// One column group's row tiles at wm groups.
constexpr int64_t mma_tiles(const MmaLaunchShape& s, int wm) {
    const int per_tile = s.swiglu ? wm * kMmaTileRows : 2 * wm * kMmaTileRows;
    int64_t n = 0;
    for (int m = 0; m < s.n_mat; ++m) n += (s.n_out[m] + per_tile - 1) / per_tile;
    return n;
}

constexpr int mma_row_groups(const MmaLaunchShape& s, const MmaGroupLimits& d) {
    const int64_t cols = (s.rows + s.nt * 8 - 1) / (s.nt * 8);
    const int64_t per_col = std::max<int64_t>(1, d.n_sm / std::max<int64_t>(1, cols));
    const auto rounds = [&](int wm) { return (mma_tiles(s, wm) + per_col - 1) / per_col; };
    if (s.nt == 8 && !s.grouped && d.max_groups >= 4 && cols >= d.wide_min_cols && mma_tiles(s, 4) * cols >= d.n_sm &&
        rounds(4) * d.wide_cost_pct <= rounds(2) * 100)
        return 4;
    if (d.max_groups >= 2 && mma_tiles(s, 2) * cols >= d.n_sm) return 2;
    return 1;
}

}  // namespace vega::gpu
