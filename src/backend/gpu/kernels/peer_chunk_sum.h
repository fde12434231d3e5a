// Tensor parallel's decode sum of one 32-row chunk, inside the o / down matvec's residual
// epilogue (matvec.cu, kEpiPeerResidualNorm; the protocol: ops::PeerChunks). Wave 0 of the
// chunk's block calls it, lane l holding row l's part (lanes from kEpiRows on: none):
//   1. push: store the part into every peer's receive slot [e & 1][rank] (remote stores);
//   2. a wave barrier, then lane q raises flag [c][rank] = e in peer q's memory behind a
//      system fence (cumulative: the other lanes' stores, ordered before it by the
//      barrier, are visible to a device that sees the flag);
//   3. lane q waits until peer q has raised flag [c][q] >= e in this rank's memory;
//   4. every lane reads the peers' parts from its own memory (past L1: the slot held
//      round e - 2's parts) and adds the ranks' parts in rank order.
// The round e is rounds[c] + 1, written back by lane 0. Pushing, not pulling: the only
// traffic over the link is posted stores; the reads are local (the pull form of
// peer_sum.cu waits one remote read round trip more). A peer that never arrives traps the
// kernel after kPeerWaitSeconds (peer_memory.h) instead of hanging the device. Only
// targets with peer sums (arch::kPeerSums) instantiate it.
#pragma once
#include <cstdint>

#include "backend/gpu/ops.h"
#include "backend/gpu/peer_memory.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

// Returns the sum over the ranks of the parts of row c * 32 + lane (this rank's is part).
// p is read in place (a kernel parameter, never through a reference that escapes).
template <int kRows>
__device__ __forceinline__ float peer_chunk_sum(const ops::PeerChunks& p, int64_t c, int lane, float part) {
    constexpr int64_t kPer = int64_t(ops::kPeerChunks) * kRows;  // floats of one rank's part in a slot
    const bool in = lane < kRows;
    const uint32_t e = p.rounds[c] + 1;
    const int64_t slot = int64_t(e & 1u) * p.n_ranks * kPer, at = c * kRows + lane;
    if (in)
        for (int q = 0; q < p.n_ranks; ++q)
            if (q != p.rank) p.recv[q][slot + p.rank * kPer + at] = part;
    wave_lds_sync();
    const bool peer = lane < p.n_ranks && lane != p.rank;
    if (peer) {
        publish_flag(p.flags[lane] + c * ops::kPeerMaxRanks + p.rank, e);
        const uint32_t* watch = p.flags[p.rank] + c * ops::kPeerMaxRanks + lane;
        wait_flag(watch, e);
        __threadfence_system();
    }
    wave_lds_sync();
    float sum = part;
    if (in) {
        const float* mine = p.recv[p.rank] + slot + at;
        if (p.rank != 0) sum = load_fresh(mine);
        for (int q = 1; q < p.n_ranks; ++q) sum += q == p.rank ? part : load_fresh(mine + q * kPer);
    }
    if (lane == 0) p.rounds[c] = e;
    return sum;
}

}  // namespace vega::gpu
