// The peer-memory all-reduce (collective_peer.cpp): tensor parallel's small sums read
// from the peers' memory in one launch, the large ones handed to `large` (NCCL/RCCL).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/collective.h"
#include "backend/gpu/ops.h"

namespace vega {
// One rank's state for the sums a block's output takes itself (BlockLink::sum_output):
// in the o / down matvec's residual epilogue (ops::matvec_residual_norm with Epi::peer,
// chunks), else in one kernel after the part's matvec (ops::peer_sum_norm, peer). Each
// with staging or receive slots, flags and rounds of its own.
struct FusedSum {
    gpu::ops::PeerSum peer;
    gpu::ops::PeerChunks chunks;
};
}  // namespace vega

namespace vega::gpu {

// devs[r], streams[r]: rank r's device and stream. large: the collective for sums over
// the staging size, or null (every sum takes the peer path); moved from only when one
// is returned. Null, with the reason in why, where the target table, VEGA_PEER_SUMS=0
// or a pair of devices without peer access rules the peer path out, and where a device
// is named twice unless shared_device_ok. Ranks sharing a device can deadlock: stories260K
// over --devices 0,0 on an H200 (2026-11-27) ended in the sum's poll-limit trap. The
// likely cause: one rank's thread makes a call that waits for the whole device (cudaFree
// does) while the other rank's sum spins on that device, waiting for the first rank's
// next launch. The GPU tests, whose threads make no such call, pass true to run the
// kernel on one GPU. With VEGA_PEER_SUM_FUSE unset, 1 or 2 it also offers fused sums
// (Collective::fused_sum) for the sizes ops::peer_sum_norm serves; with 2 (the default)
// their state for the residual epilogue too (FusedSum::chunks, n_ranks 0 otherwise).
std::unique_ptr<Collective> make_peer_collective(const std::vector<int>& devs, const std::vector<void*>& streams,
                                                 const std::string& list, std::unique_ptr<Collective>& large,
                                                 std::string& why, bool shared_device_ok = false);

}  // namespace vega::gpu
