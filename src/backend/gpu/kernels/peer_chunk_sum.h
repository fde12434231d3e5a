// Tensor parallel's decode sum of one 32-row chunk, inside the o / down matvec's residual
// epilogue (matvec.cu, kEpiPeerResidualNorm; the state: ops::PeerChunks). Wave 0 of the
// chunk's block calls it, lane l holding row l's part (lanes from kEpiRows on: none):
//   1. push: lane l stores its part and the round e as one 8-byte word (round_word) into
//      every peer's receive slot [e & 1][rank] (remote stores);
//   2. lane l waits, peer by peer in rank order, until its word in its own memory holds
//      round e, and adds the ranks' parts in rank order.
// The round e is rounds[c] + 1, written back by lane 0. A word carries its own round, so
// there is no fence and no flag: a part is usable one link latency after its store. (The
// first form stored the parts, fenced at system scope and raised a flag: the fence waited
// for the remote stores' acknowledgement, a round trip, before the flag could travel.
// The words made tensor parallel's 8B decode 9.5% faster on 2 x H200, docs/PERFORMANCE.md,
// thirty-eighth session.) Two slots by round parity: a rank can be at most one round
// ahead of a peer on a chunk (round e + 1's wait needs the peer's round e + 1 push, which
// the peer makes after it has read round e), so round e + 2 never lands on an unread
// round e. Pushing, not pulling: the only traffic over the link is posted stores; the
// polls are local. A peer that never arrives traps the kernel after kPeerWaitSeconds
// (peer_memory.h) instead of hanging the device. Only targets with peer sums
// (arch::kPeerSums) instantiate it.
#pragma once
#include <cstdint>

#include "backend/gpu/ops.h"
#include "backend/gpu/peer_memory.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

// Returns the sum over the ranks of the parts of row c * 32 + lane (this rank's is part).
// p is read in place (a kernel parameter, never through a reference that escapes).
// last_round: p.rounds[c] as the caller read it after its pdl_wait (early, so that no
// memory round trip sits between the block's sums and its stores to the peers).
template <int kRows>
__device__ __forceinline__ float peer_chunk_sum(const ops::PeerChunks& p, int64_t c, int lane, float part,
                                                uint32_t last_round) {
    constexpr int64_t kPer = int64_t(ops::kPeerChunks) * kRows;  // words of one rank's part in a slot
    const uint32_t e = last_round + 1;
    const int64_t slot = int64_t(e & 1u) * p.n_ranks * kPer, at = c * kRows + lane;
    // Every index into p.recv is a constant (the loop unrolled to kPeerMaxRanks, ranks
    // past n_ranks predicated off; this rank's own words are p.own): a runtime index made
    // the compiler copy the whole parameter to the stack, 88 bytes stored by every thread
    // at the start of every o / down kernel (sm_90): 0.06-0.10 ms of a tensor-parallel 8B
    // step on 2 H200s (docs/PERFORMANCE.md, forty-first session).
    float sum = part;
    if (lane < kRows) {
        const uint64_t w = round_word(part, e);
#pragma unroll
        for (int q = 0; q < ops::kPeerMaxRanks; ++q)
            if (q < p.n_ranks && q != p.rank) store_word(p.recv[q] + slot + p.rank * kPer + at, w);
        const uint64_t* mine = p.own + slot + at;
#pragma unroll
        for (int q = 0; q < ops::kPeerMaxRanks; ++q) {
            if (q >= p.n_ranks) break;
            const float v = q == p.rank ? part : wait_word(mine + q * kPer, e);
            sum = q == 0 ? v : sum + v;
        }
    }
    if (lane == 0) p.rounds[c] = e;
    return sum;
}

}  // namespace vega::gpu
