// Collectives over the devices of a tensor-parallel model: one buffer per backend, the
// same size on each, each rank calling from its own host thread (DeviceLaunchers: one
// thread per device, which is also what lets NCCL's sums be recorded into each device's
// graph). The reference sums through host memory (any backends; the CPU tests'
// in-process ranks); the GPU one is NCCL on NVIDIA, RCCL on ROCm, loaded at run time
// (backend/gpu/collective_nccl.cpp) so that a build without it still runs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace vega {

class Collective {
public:
    virtual ~Collective() = default;
    virtual std::string name() const = 0;
    // Rank r's part of one all-reduce, called by rank r's thread while every other rank
    // calls it with its own buffer: buf [n] floats in backends[r]'s memory then holds the
    // sum over the ranks (the same bits on every device), in op order on its backend.
    virtual void all_reduce_sum(int r, float* buf, int64_t n) = 0;
    // Rank r failed before its next all_reduce_sum: the ranks waiting for it in one give
    // up with an error instead of waiting forever. Cleared by reset().
    virtual void abort(int r) { (void)r; }
    virtual void reset() {}
    // Whether all_reduce_sum may be recorded in the backends' graphs (each rank's thread
    // capturing its own device): the host reference cannot.
    virtual bool capturable() const { return false; }
    // Rank r's state for a sum of [rows][n] that a block's output takes itself
    // (BlockLink::sum_output: no all-reduce launch, no separate input kernel after it),
    // or null where this collective offers none for that size (the caller all-reduces
    // first). The same answer on every rank; only for backends of the collective's kind.
    virtual const FusedSum* fused_sum(int r, int rows, int64_t n) const {
        (void)r, (void)rows, (void)n;
        return nullptr;
    }
};

// Sums in rank order through host memory: waits for every backend, then uploads the sum.
// `why`: what its name says it stands in for ("NCCL not found"); empty for none.
std::unique_ptr<Collective> make_host_collective(const std::vector<Backend*>& backends, const std::string& why = "");

}  // namespace vega
