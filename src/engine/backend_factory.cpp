#include "backend/backend_factory.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#ifdef VEGA_HAVE_GPU
#include "backend/gpu/gpu_backend.h"
#endif

namespace vega {

bool gpu_backend_compiled() {
#ifdef VEGA_HAVE_GPU
    return true;
#else
    return false;
#endif
}

int gpu_device_count() {
#ifdef VEGA_HAVE_GPU
    return gpu_device_count_impl();
#else
    return 0;
#endif
}

std::unique_ptr<Collective> make_collective(const std::vector<Backend*>& backends) {
    std::string why;
#ifdef VEGA_HAVE_GPU
    if (auto c = make_gpu_collective(backends, why)) return c;
#else
    why = "this build has no GPU backend";
#endif
    return make_host_collective(backends, why);
}

std::unique_ptr<Backend> create_backend(const std::string& device, int n_threads) {
    if (device == "cpu") return make_cpu_backend(n_threads);
    if (device == "auto") {
        if (gpu_device_count() > 0) return create_backend("0", n_threads);
        return make_cpu_backend(n_threads);
    }
    int index = 0;
    if (device != "gpu") {
        char* end = nullptr;
        const long v = std::strtol(device.c_str(), &end, 10);
        if (device.empty() || *end != '\0' || v < 0) fail("unknown device '{}' (use cpu, gpu or a GPU index)", device);
        index = int(v);
    }
    if (!gpu_backend_compiled())
        fail("device '{}' asked for a GPU, but this vega was built without a GPU backend "
             "(configure with -DVEGA_CUDA=ON or -DVEGA_HIP=ON)", device);
    const int n = gpu_device_count();
    if (index >= n) fail("GPU {} requested but {} GPU device(s) found", index, n);
#ifdef VEGA_HAVE_GPU
    return make_gpu_backend(index);
#else
    return nullptr;
#endif
}

}  // namespace vega
