// Creates the backend a user asked for: "cpu", "gpu" (first GPU) or a GPU index
// ("0", "1", ...), or "auto" (the first GPU when this build has a GPU backend and
// a device is present, else the CPU).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collective.h"

namespace vega {

std::unique_ptr<Backend> make_cpu_backend(int n_threads);  // n_threads <= 0: all cores
std::unique_ptr<Backend> create_backend(const std::string& device, int n_threads);
// The all-reduce of a tensor-parallel model over these backends: NCCL (RCCL on ROCm)
// when every one is a GPU backend on its own device and the library loads, else the
// host-memory reference (its name says why).
std::unique_ptr<Collective> make_collective(const std::vector<Backend*>& backends);
bool gpu_backend_compiled();  // this build has a GPU backend
int gpu_device_count();       // 0 when none (or not compiled)

}  // namespace vega
