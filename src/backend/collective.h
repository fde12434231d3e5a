// Collectives over the devices of a tensor-parallel model: one buffer per backend, the
// same size on each. The reference sums through host memory (any backends; the CPU
// tests' two in-process ranks); the GPU one is NCCL on NVIDIA, RCCL on ROCm, loaded at
// run time (backend/gpu/collective_nccl.cpp) so that a build without it still runs.
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
    // bufs[r] [n] floats in backends[r]'s memory: afterwards every one holds the sum over
    // r (the same bits on every device), in op order on each backend.
    virtual void all_reduce_sum(const std::vector<float*>& bufs, int64_t n) = 0;
    // Whether all_reduce_sum may be recorded in the backends' graphs (capture_begin on
    // every one first): the host reference cannot.
    virtual bool capturable() const { return false; }
};

// Sums in rank order through host memory: waits for every backend, then uploads the sum.
// `why`: what its name says it stands in for ("NCCL not found"); empty for none.
std::unique_ptr<Collective> make_host_collective(const std::vector<Backend*>& backends, const std::string& why = "");

}  // namespace vega
