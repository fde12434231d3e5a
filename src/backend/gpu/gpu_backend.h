// The GPU backend (HIP on AMD gfx906, CUDA on NVIDIA), behind the Backend interface.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace vega {

// Throws vega::Error when the device cannot be used.
std::unique_ptr<Backend> make_gpu_backend(int device);
// Number of usable GPUs; 0 when there is no device or no driver.
int gpu_device_count_impl();
// Device-to-device copy bandwidth of GPU `device` in GB/s (read + written bytes).
double gpu_copy_bandwidth_gbs(int device);

}  // namespace vega
