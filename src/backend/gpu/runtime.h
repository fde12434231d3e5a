// Thin host-side C++ interface to the GPU runtime (implemented in runtime.cu
// with HIP or CUDA), so the backend class compiles with the ordinary C++
// compiler. Streams, graphs and events are opaque pointers. Errors raise
// vega::Error through gpu_fail().
#pragma once
#include <cstddef>
#include <string>

namespace vega::gpu {

[[noreturn]] void gpu_fail(const std::string& msg);  // defined in gpu_backend.cpp

namespace rt {

int device_count();  // 0 when the runtime finds no device or no driver
struct DeviceInfo {
    std::string name, arch;
    size_t total_mem = 0;
    int n_sm = 0, wave = 0;
    size_t smem_block = 0;  // shared memory one block may take (NVIDIA: with opt-in)
    size_t smem_sm = 0;     // shared memory of one SM / CU, all its resident blocks together
};
DeviceInfo device_info(int dev);
// Makes dev the calling thread's current device (a no-op when it already is).
void set_device(int dev);
int current_device();
// Lets dev read and write peer's memory directly (NVLink, PCIe P2P, xGMI); false
// where the pair cannot (peer_copy then goes through host memory, in the runtime).
bool enable_peer_access(int dev, int peer);
// Whether the runtime loaded every kernel at its start (runtime.cu says why peer sums
// need that); false only where the user asked for lazy loading.
bool kernels_load_eagerly();
// The environment variable that chooses it, and its value that asks for eager loading.
struct LoadingSwitch {
    const char* var;
    const char* eager;
};
LoadingSwitch kernel_loading_switch();
// n bytes from src (on src_dev) to dst (on dst_dev), on stream s (async).
void peer_copy(void* dst, int dst_dev, const void* src, int src_dev, size_t n, void* s);
// Throws unless this build's kernels (their target table: arch/arch.h) serve the
// device: its architecture and its wave size, e.g. a gfx906 build on a wave32 RDNA card.
void check_device_target(const DeviceInfo& d, int dev);

void* stream_create();
void stream_destroy(void* s);
void stream_sync(void* s);

void* malloc(size_t bytes);  // nullptr when out of memory
void free(void* p);
void mem_info(size_t* free_bytes, size_t* total_bytes);
void h2d(void* dst, const void* src, size_t n, void* s);  // async w.r.t. the device; src reusable on return
void d2h(void* dst, const void* src, size_t n, void* s);  // synchronous
void memset(void* dst, int v, size_t n, void* s);
void check(const char* what);  // raises the last launch error, if any
// Programmatic dependent launch (launch.h): NVIDIA sm_90+ unless VEGA_GPU_PDL=0.
bool pdl_enabled();

// Graph capture of all work issued to stream s between begin and end.
void capture_begin(void* s);
void* capture_end(void* s);  // returns an executable graph
void graph_launch(void* g, void* s);
void graph_destroy(void* g);

// Cross-stream ordering: an event without timing, recorded by event_record; stream
// s waits (on the device) for the work before the event's last record.
void* sync_event_create();
void stream_wait(void* s, void* e);

// Seconds between two events recorded on s around fn()'s work (after a sync).
void* event_create();
void event_record(void* e, void* s);
float event_ms(void* start, void* end);  // waits for end
void event_destroy(void* e);

}  // namespace rt
}  // namespace vega::gpu
