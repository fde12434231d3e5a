// The passes of a tiled (flash) prompt-attention block, shared by attention_mma.cu and
// attention_dot2.cu. A block's query rows are kBm rows of bt = kBm / G consecutive
// tokens (row r: token t0 + r / G, head r % G of the kv head's group). Its tokens may
// belong to several sequences; each pass takes the sequence of the first pending token
// and masks the rest, so a prompt's tile runs one pass.
#pragma once
#include <cstdint>

namespace vega::gpu {

// The tile's tokens as pending bits (bit i: token t0 + i), those below rows.
__device__ __forceinline__ uint64_t tile_tokens(int t0, int bt, int rows) {
    uint64_t pending = 0;
    for (int i = 0; i < bt && t0 + i < rows; ++i) pending |= uint64_t(1) << i;
    return pending;
}

// Thread 0: the next pass. s_pos[r] (r < bm) = the position of row r's token in this pass,
// -1 where the row is masked (another sequence, done, or past the tile); *s_seq = the
// pass's sequence (-1: every token attended) and *s_len = its K/V length (max pos + 1).
// Clears the pass's tokens from pending.
__device__ __forceinline__ void next_tile_pass(uint64_t& pending, const int32_t* __restrict__ pos,
                                               const int32_t* __restrict__ seq, int t0, int bt, int G, int bm,
                                               int* s_pos, int* s_seq, int* s_len) {
    int cur = -1, len = 0;
    if (pending) cur = seq[t0 + __ffsll(static_cast<long long>(pending)) - 1];
    for (int i = 0; i < bt; ++i) {
        const bool on = (pending >> i & 1) && seq[t0 + i] == cur;
        const int p = on ? pos[t0 + i] : -1;
        if (on) pending &= ~(uint64_t(1) << i), len = max(len, p + 1);
        for (int h = 0; h < G; ++h) s_pos[i * G + h] = p;
    }
    for (int r = bt * G; r < bm; ++r) s_pos[r] = -1;
    *s_seq = cur, *s_len = len;
}

}  // namespace vega::gpu
