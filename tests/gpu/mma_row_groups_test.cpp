// The tensor-core matmul's row groups per block (mma_row_groups.h) on the shapes and
// row counts it was measured on (H200, 132 SMs; docs/PERFORMANCE.md thirty-second and
// thirty-third sessions). CPU only: the rule is plain host code.
#include <gtest/gtest.h>

#include <string>

#include "backend/gpu/mma_row_groups.h"

namespace vega::gpu {
namespace {

constexpr MmaGroupLimits kH200 = {132, 4, 1, 160};

// A 7-8B model's launches: q+k+v in one, o, gate/up (SwiGLU), down, the output.
struct Model {
    const char* name;
    int64_t q, kv, ff, vocab;
};
constexpr Model kLlama2 = {"llama2-7b", 4096, 4096, 11008, 32000};
constexpr Model kLlama3 = {"llama3-8b", 4096, 1024, 14336, 128256};
constexpr Model kQwen2 = {"qwen2-7b", 3584, 512, 18944, 152064};

MmaLaunchShape qkv(const Model& m, int rows) {
    MmaLaunchShape s;
    s.n_out[0] = m.q, s.n_out[1] = m.kv, s.n_out[2] = m.kv, s.n_mat = 3, s.rows = rows;
    return s;
}
MmaLaunchShape one(int64_t n_out, int rows, bool swiglu = false) {
    MmaLaunchShape s;
    s.n_out[0] = n_out, s.rows = rows, s.swiglu = swiglu;
    return s;
}

TEST(MmaRowGroups, LongPromptsTakeFourGroupsForEveryMatrix) {
    // 512 and 2048 rows: 4 groups measured +17-25% on both shapes (thirty-second session).
    for (const Model& m : {kLlama2, kLlama3, kQwen2})
        for (int rows : {512, 2048, 8192}) {
            SCOPED_TRACE(std::string(m.name) + " rows " + std::to_string(rows));
            EXPECT_EQ(mma_row_groups(qkv(m, rows), kH200), 4);
            EXPECT_EQ(mma_row_groups(one(m.q, rows), kH200), 4);  // o and down (n_embd rows)
            EXPECT_EQ(mma_row_groups(one(m.ff, rows, true), kH200), 4);
            EXPECT_EQ(mma_row_groups(one(m.vocab, rows), kH200), 4);
        }
}

TEST(MmaRowGroups, TheLastRoundsTailDecidesAtOneColumnGroup) {
    // 64 rows (B=64 decode, a 64-token prompt): one column group of 132 blocks.
    // llama2-7b gate/up: 172 tiles of 64 rows in 2 rounds against 344 of 32 in 3
    // (2 x 1.6 > 3): 2 groups; 4 measured -1.4% at B=64.
    EXPECT_EQ(mma_tiles(one(kLlama2.ff, 64, true), 4), 172);
    EXPECT_EQ(mma_row_groups(one(kLlama2.ff, 64, true), kH200), 2);
    // llama3-8b: 224 tiles in 2 rounds against 448 in 4: 4 groups (+9.7% at B=64).
    EXPECT_EQ(mma_row_groups(one(kLlama3.ff, 64, true), kH200), 4);
    // Without the tail check both take 4.
    MmaGroupLimits any = kH200;
    any.wide_cost_pct = 0;
    EXPECT_EQ(mma_row_groups(one(kLlama2.ff, 64, true), any), 4);
    // o and down (32 tiles of 128 rows): too few to give each SM a tile at 4, or at 2.
    EXPECT_EQ(mma_row_groups(one(4096, 64), kH200), 1);
}

TEST(MmaRowGroups, ShortPromptsTakeFourGroupsForGateUp) {
    // 128-448 rows (2-7 column groups): measured +4-24% over 2 groups on both shapes.
    for (int rows : {128, 192, 256, 320, 384, 448}) {
        SCOPED_TRACE(rows);
        EXPECT_EQ(mma_row_groups(one(kLlama2.ff, rows, true), kH200), 4);
        EXPECT_EQ(mma_row_groups(one(kLlama3.ff, rows, true), kH200), 4);
    }
}

TEST(MmaRowGroups, KnobsAndLimits) {
    // VEGA_GPU_MMA_WIDE_COLS=8: the thirty-second session's rule (449+ rows).
    MmaGroupLimits from8 = kH200;
    from8.wide_min_cols = 8;
    EXPECT_EQ(mma_row_groups(one(kLlama3.ff, 448, true), from8), 2);
    EXPECT_EQ(mma_row_groups(one(kLlama3.ff, 449, true), from8), 4);
    // VEGA_GPU_MMA_GROUPS=2 (or a device table of 2): never 4.
    MmaGroupLimits two = kH200;
    two.max_groups = 2;
    EXPECT_EQ(mma_row_groups(qkv(kLlama3, 2048), two), 2);
    // Grouped experts and column tiles under 64 rows keep at most 2.
    MmaLaunchShape experts = one(768, 2048, true);
    experts.grouped = true;
    EXPECT_EQ(mma_row_groups(experts, kH200), 2);
    MmaLaunchShape narrow = one(kLlama3.ff, 32, true);
    narrow.nt = 4;
    EXPECT_EQ(mma_row_groups(narrow, kH200), 2);
    // Too few tiles for the SMs even at 1 group: 1.
    EXPECT_EQ(mma_row_groups(one(1024, 16), kH200), 1);
    // A smaller device: the same launch has rounds enough for 4.
    EXPECT_EQ(mma_row_groups(one(kLlama2.ff, 64, true), MmaGroupLimits{108, 4, 1, 160}), 4);
}

}  // namespace
}  // namespace vega::gpu
