// HIP/CUDA runtime calls behind runtime.h (one source for both vendors).
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/env.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/arch/arch.h"
#include "backend/gpu/vendor.h"

namespace vega::gpu::rt {

namespace {
void ok(gpuError_t e, const char* what) {
    if (e != gpuSuccess) gpu_fail(std::string("GPU runtime error in ") + what + ": " + gpuGetErrorString(e));
}
gpuStream_t S(void* s) { return static_cast<gpuStream_t>(s); }

// Every kernel loads when the runtime starts, not at its first launch. A peer sum's kernel
// spins until its peer ranks' kernels arrive (peer_memory.h wait_flag); with lazy loading
// (CUDA's default since 12.2) a rank's first launch of some kernel may wait for its
// context to go idle, which the spinning kernel never lets it do: a deadlock, which the
// wait loop ends with a trap after 60 s. CUDA's programming guide names this hazard
// (Lazy Loading, "Potential Hazards"). Measured on 2 x H200 (thirty-sixth session):
// PeerSum.* beside a busy loop on every core trapped in 5 of 5 runs with lazy loading,
// 0 of 5 with eager loading. HIP's deferred code object loading is the same mechanism.
// Set before main, hence before the runtime's first call reads it; a value the user set
// wins (and kernels_load_eagerly() then says whether peer sums are safe).
#if defined(VEGA_GPU_HIP)
constexpr const char* kLoadingVar = "HIP_ENABLE_DEFERRED_LOADING";
constexpr const char* kEagerValue = "0";
#else
constexpr const char* kLoadingVar = "CUDA_MODULE_LOADING";
constexpr const char* kEagerValue = "EAGER";
#endif
const bool kEagerLoadingAsked = [] {
    setenv(kLoadingVar, kEagerValue, /*overwrite=*/0);
    const char* v = std::getenv(kLoadingVar);
    return v && std::strcmp(v, kEagerValue) == 0;
}();
}  // namespace

LoadingSwitch kernel_loading_switch() { return {kLoadingVar, kEagerValue}; }

bool kernels_load_eagerly() {
#if defined(VEGA_GPU_HIP)
    return kEagerLoadingAsked;
#else
    // The driver's own answer (cuModuleGetLoadingMode: 1 eager, 2 lazy), found through the
    // runtime so that the build links no driver library; the variable where it is missing.
    using GetMode = int (*)(int*);
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !fn) {
        (void)cudaGetLastError();
        return kEagerLoadingAsked;
    }
    int mode = 0;
    return reinterpret_cast<GetMode>(fn)(&mode) == 0 ? mode == 1 : kEagerLoadingAsked;
#endif
}

int device_count() {
    int n = 0;
    if (gpuGetDeviceCount(&n) != gpuSuccess) {
        (void)gpuGetLastError();
        return 0;
    }
    return n;
}

DeviceInfo device_info(int dev) {
    gpuDeviceProp p;
    ok(gpuGetDeviceProperties(&p, dev), "getting device properties");
    DeviceInfo d;
    d.name = p.name;
#if defined(VEGA_GPU_HIP)
    d.arch = p.gcnArchName;
#else
    d.arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
#endif
    d.total_mem = p.totalGlobalMem;
    d.n_sm = p.multiProcessorCount;
    d.wave = p.warpSize;
#if defined(VEGA_GPU_HIP)
    d.smem_block = p.sharedMemPerBlock;
    d.smem_sm = p.maxSharedMemoryPerMultiProcessor;
#else
    d.smem_block = p.sharedMemPerBlockOptin;
    d.smem_sm = p.sharedMemPerMultiprocessor;
#endif
    return d;
}

void check_device_target(const DeviceInfo& d, int dev) {
#if defined(VEGA_GPU_EMULATE_GFX906)
    // gfx906's table on an NVIDIA device: its waves of 64 are two warps of 32 (gfx906_emulation.h).
    const std::string want = "sm_", what = std::string("the ") + arch::kName + " emulation on NVIDIA";
    const int want_wave = 32;
#else
    const std::string want = arch::kDeviceArch, what = arch::kName;
    const int want_wave = arch::kWave;
#endif
    if (d.arch.rfind(want, 0) != 0 || d.wave != want_wave)
        gpu_fail("GPU " + std::to_string(dev) + " (" + d.name + ", " + d.arch + ", wave" + std::to_string(d.wave) +
                 ") is not a target of this build: its kernels are for " + what + " (" + want + "*, wave" +
                 std::to_string(want_wave) + "); rebuild with that architecture in VEGA_HIP_ARCHS / VEGA_CUDA_ARCHS");
}

// The thread's current device, as set through set_device (-1: not yet). Every
// backend call sets its device first; with one device that is one compare.
thread_local int tl_device = -1;

void set_device(int dev) {
    if (dev == tl_device) return;
    ok(gpuSetDevice(dev), "selecting the device");
    tl_device = dev;
}
int current_device() {
    if (tl_device >= 0) return tl_device;
    int d = 0;
    ok(gpuGetDevice(&d), "querying the current device");
    return d;
}

bool enable_peer_access(int dev, int peer) {
    if (dev == peer) return true;
    int can = 0;
    if (gpuDeviceCanAccessPeer(&can, dev, peer) != gpuSuccess || !can) {
        (void)gpuGetLastError();
        return false;
    }
    set_device(dev);
    const gpuError_t e = gpuDeviceEnablePeerAccess(peer, 0);
    if (e == gpuErrorPeerAccessAlreadyEnabled) (void)gpuGetLastError();
    else if (e != gpuSuccess) {
        (void)gpuGetLastError();
        return false;
    }
    return true;
}
void peer_copy(void* dst, int dst_dev, const void* src, int src_dev, size_t n, void* s) {
    if (n) ok(gpuMemcpyPeerAsync(dst, dst_dev, src, src_dev, n, S(s)), "copying between devices");
}

void* stream_create() {
    gpuStream_t s;
    ok(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking), "creating a stream");
    return s;
}
void stream_destroy(void* s) { (void)gpuStreamDestroy(S(s)); }
void stream_sync(void* s) { ok(gpuStreamSynchronize(S(s)), "synchronizing"); }

void* malloc(size_t bytes) {
    void* p = nullptr;
    if (gpuMalloc(&p, bytes == 0 ? 1 : bytes) != gpuSuccess) {
        (void)gpuGetLastError();
        return nullptr;
    }
    return p;
}
void free(void* p) {
    if (p) (void)gpuFree(p);
}
void mem_info(size_t* f, size_t* t) { ok(gpuMemGetInfo(f, t), "querying device memory"); }
void h2d(void* dst, const void* src, size_t n, void* s) {
    if (n) ok(gpuMemcpyAsync(dst, src, n, gpuMemcpyHostToDevice, S(s)), "copying to the device");
}
void d2h(void* dst, const void* src, size_t n, void* s) {
    if (n) ok(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToHost, S(s)), "copying from the device");
    ok(gpuStreamSynchronize(S(s)), "copying from the device");
}
void memset(void* dst, int v, size_t n, void* s) {
    if (n) ok(gpuMemsetAsync(dst, v, n, S(s)), "clearing device memory");
}
void check(const char* what) { ok(gpuGetLastError(), what); }

bool pdl_enabled() {
#if defined(VEGA_GPU_CUDA)
    if (!arch::kPdl) return false;  // the target table (the gfx906 emulation build: none)
    static const bool on = [] {
        if (!env::flag("VEGA_GPU_PDL", true)) return false;
        int dev = 0, major = 0;
        if (cudaGetDevice(&dev) != cudaSuccess) return false;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
        return major >= 9;
    }();
    return on;
#else
    return false;
#endif
}

void capture_begin(void* s) { ok(gpuStreamBeginCapture(S(s), gpuStreamCaptureModeThreadLocal), "starting capture"); }
void* capture_end(void* s) {
    gpuGraph_t g;
    ok(gpuStreamEndCapture(S(s), &g), "ending capture");
    gpuGraphExec_t e;
    ok(gpuGraphInstantiate(&e, g), "instantiating the graph");
    (void)gpuGraphDestroy(g);
    return e;
}
void graph_launch(void* g, void* s) { ok(gpuGraphLaunch(static_cast<gpuGraphExec_t>(g), S(s)), "launching the graph"); }
void graph_destroy(void* g) {
    if (g) (void)gpuGraphExecDestroy(static_cast<gpuGraphExec_t>(g));
}

void* sync_event_create() {
    gpuEvent_t e;
    ok(gpuEventCreateWithFlags(&e, gpuEventDisableTiming), "creating an event");
    return e;
}
void stream_wait(void* s, void* e) { ok(gpuStreamWaitEvent(S(s), static_cast<gpuEvent_t>(e), 0), "ordering streams"); }

void* event_create() {
    gpuEvent_t e;
    ok(gpuEventCreate(&e), "creating an event");
    return e;
}
void event_record(void* e, void* s) { ok(gpuEventRecord(static_cast<gpuEvent_t>(e), S(s)), "recording an event"); }
float event_ms(void* a, void* b) {
    ok(gpuEventSynchronize(static_cast<gpuEvent_t>(b)), "waiting for an event");
    float ms = 0.f;
    ok(gpuEventElapsedTime(&ms, static_cast<gpuEvent_t>(a), static_cast<gpuEvent_t>(b)), "timing");
    return ms;
}
void event_destroy(void* e) {
    if (e) (void)gpuEventDestroy(static_cast<gpuEvent_t>(e));
}

}  // namespace vega::gpu::rt
