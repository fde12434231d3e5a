// The GPU backend (HIP on AMD gfx906, CUDA on NVIDIA), behind the Backend interface.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collective.h"

namespace vega {

// Throws vega::Error when the device cannot be used.
std::unique_ptr<Backend> make_gpu_backend(int device);
// Number of usable GPUs; 0 when there is no device or no driver.
int gpu_device_count_impl();
// The stream a GPU backend issues its ops on; null for another backend.
void* gpu_stream_of(Backend& be);
// NCCL (RCCL on ROCm) over these GPU backends, each on its own device: the library is
// loaded at run time ($VEGA_NCCL, else libnccl.so.2 / librccl.so.1 on the loader's path).
// Null, with the reason in `why`, where it cannot be used.
std::unique_ptr<Collective> make_gpu_collective(const std::vector<Backend*>& backends, std::string& why);

}  // namespace vega
