// Attention of a batch's prompt rows on the CPU, tile by tile: the rows of one
// sequence are taken kPromptTileRows at a time with every head of one kv head's GQA
// group, and the K/V of their sequence stream past them in tiles of kPromptTileKv
// positions, each tile decoded to f32 once for all of those (row, head) pairs, with an
// online softmax per pair. Scratch is per thread and independent of the depth (a
// 32k-token prompt needs no rows x depth score buffer), and each K/V row is read once
// per tile of rows instead of once per row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/kv_rows.h"
#include "backend/cpu/thread_pool.h"

namespace vega::cpu {

constexpr int kPromptTileRows = 16;  // query tokens per task
constexpr int kPromptTileKv = 64;    // K/V positions per tile

// A task: rows [r0, r1) of one sequence (at most kPromptTileRows), one kv head.
struct PromptTask {
    int r0, r1, kvh;
};
// Scratch kept between calls (grown, never shrunk, outside the parallel loop): the
// call's tasks, and per thread its tiles and running softmax state.
struct PromptAttentionScratch {
    std::vector<PromptTask> tasks;
    std::vector<float> per_thread;
    size_t stride = 0;
};

// out[t] for the rows t in [row_begin, row_end) (q, out [rows][n_head][head_dim]; pos and
// seq host arrays of the whole batch), as CpuBackend::attention computes them, tile by tile.
void prompt_attention(ThreadPool& pool, const KvView& c, const float* q, float* out, int n_head, float scale,
                      const int32_t* pos, const int32_t* seq, int row_begin, int row_end,
                      PromptAttentionScratch& scratch);

}  // namespace vega::cpu
