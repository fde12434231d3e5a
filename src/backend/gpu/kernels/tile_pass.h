// The passes of a tiled (flash) prompt-attention block, shared by attention_mma.cu and
// attention_dot2.cu. A block's query rows are kBm rows of bt = kBm / G consecutive
// tokens (row r: token t0 + r / G, head r % G of the kv head's group). Its tokens may
// belong to several sequences; each pass takes the sequence of the first pending token
// and masks the rest, so a prompt's tile runs one pass.
#pragma once
#include <cstdint>

namespace vega::gpu {

// The tile's tokens not yet attended (bit i: token t0 + i; up to kMaxTileTokens).
constexpr int kMaxTileTokens = 128;
// (Two named words, selected, not indexed: an indexed pair goes to scratch on gfx906.)
struct PendingTokens {
    uint64_t lo, hi;  // tokens 0..63, 64..127
    __device__ __forceinline__ bool has(int i) const { return ((i < 64 ? lo : hi) >> (i & 63)) & 1; }
    __device__ __forceinline__ void clear(int i) {
        const uint64_t b = uint64_t(1) << (i & 63);
        if (i < 64) lo &= ~b;
        else hi &= ~b;
    }
    __device__ __forceinline__ int first() const {  // -1: none
        return lo ? __ffsll(static_cast<long long>(lo)) - 1 : hi ? 63 + __ffsll(static_cast<long long>(hi)) : -1;
    }
};

// The tile's tokens as pending bits, those below rows.
__device__ __forceinline__ PendingTokens tile_tokens(int t0, int bt, int rows) {
    PendingTokens p{0, 0};
    for (int i = 0; i < bt && t0 + i < rows; ++i) {
        if (i < 64) p.lo |= uint64_t(1) << i;
        else p.hi |= uint64_t(1) << (i - 64);
    }
    return p;
}

// Thread 0: the next pass. s_pos[r] (r < bm) = the position of row r's token in this pass,
// -1 where the row is masked (another sequence, done, or past the tile); *s_seq = the
// pass's sequence (-1: every token attended) and *s_len = its K/V length (max pos + 1).
// Clears the pass's tokens from pending.
__device__ __forceinline__ void next_tile_pass(PendingTokens& pending, const int32_t* __restrict__ pos,
                                               const int32_t* __restrict__ seq, int t0, int bt, int G, int bm,
                                               int* s_pos, int* s_seq, int* s_len) {
    int cur = -1, len = 0;
    const int f = pending.first();
    if (f >= 0) cur = seq[t0 + f];
    for (int i = 0; i < bt; ++i) {
        const bool on = pending.has(i) && seq[t0 + i] == cur;
        const int p = on ? pos[t0 + i] : -1;
        if (on) pending.clear(i), len = max(len, p + 1);
        for (int h = 0; h < G; ++h) s_pos[i * G + h] = p;
    }
    for (int r = bt * G; r < bm; ++r) s_pos[r] = -1;
    *s_seq = cur, *s_len = len;
}

}  // namespace vega::gpu
