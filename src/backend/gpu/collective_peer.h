// The peer-memory all-reduce (collective_peer.cpp): tensor parallel's small sums read
// from the peers' memory in one launch, the large ones handed to `large` (NCCL/RCCL).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/collective.h"

namespace vega::gpu {

// devs[r], streams[r]: rank r's device and stream (a device may be named twice: its
// ranks then share its memory). large: the collective for sums over the staging size,
// or null (every sum takes the peer path); moved from only when one is returned. Null,
// with the reason in why, where the target table, VEGA_PEER_SUMS=0 or a pair of
// devices without peer access rules the peer path out.
std::unique_ptr<Collective> make_peer_collective(const std::vector<int>& devs, const std::vector<void*>& streams,
                                                 const std::string& list, std::unique_ptr<Collective>& large,
                                                 std::string& why);

}  // namespace vega::gpu
