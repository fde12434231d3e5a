// Tensor parallel's all-reduce through NCCL (NVIDIA) or RCCL (ROCm), one communicator per
// device of this process (ncclCommInitAll), each rank's sum issued by its own host thread
// on its device's backend stream (NCCL's multi-thread mode: no group call). The library
// is opened at run time with its C ABI declared here, so that vega builds and runs on
// one device without it.
#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <type_traits>
#include <set>
#include <string>
#include <vector>

#include "backend/gpu/collective_peer.h"
#include "backend/gpu/gpu_backend.h"
#include "core/env.h"
#include "core/error.h"

namespace vega {

namespace {

// The part of nccl.h (and rccl.h, the same ABI) used here.
using NcclComm = void*;
constexpr int kNcclSuccess = 0, kNcclFloat32 = 7, kNcclSum = 0;
struct NcclApi {
    void* lib = nullptr;
    int (*comm_init_all)(NcclComm*, int, const int*) = nullptr;
    int (*all_reduce)(const void*, void*, size_t, int, int, NcclComm, void*) = nullptr;
    int (*comm_destroy)(NcclComm) = nullptr;
    const char* (*error_string)(int) = nullptr;
};

#if defined(VEGA_GPU_TARGET_GFX906) && !defined(VEGA_GPU_EMULATE_GFX906)  // a HIP build
constexpr const char* kLibs[] = {"librccl.so.1", "librccl.so"};
constexpr const char* kLibName = "RCCL";
#else
constexpr const char* kLibs[] = {"libnccl.so.2", "libnccl.so"};
constexpr const char* kLibName = "NCCL";
#endif

// Loads the library and its symbols; false with the reason in why.
bool load_api(NcclApi& a, std::string& why) {
    std::vector<std::string> names;
    if (const char* p = env::get("VEGA_NCCL")) names.push_back(p);
    for (const char* n : kLibs) names.push_back(n);
    for (const std::string& n : names)
        if ((a.lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!a.lib) {
        why = std::string(kLibName) + " not found (tried " + names.front() + " first; set VEGA_NCCL to the "
              "library's path)";
        return false;
    }
    auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(a.lib, name));
        return fn != nullptr;
    };
    if (!sym(a.comm_init_all, "ncclCommInitAll") || !sym(a.all_reduce, "ncclAllReduce") ||
        !sym(a.comm_destroy, "ncclCommDestroy") || !sym(a.error_string, "ncclGetErrorString")) {
        why = std::string(kLibName) + " library lacks a symbol vega needs";
        dlclose(a.lib);
        a.lib = nullptr;
        return false;
    }
    return true;
}

class NcclCollective final : public Collective {
public:
    NcclCollective(NcclApi api, std::vector<NcclComm> comms, std::vector<void*> streams, std::string devs)
        : api_(api), comms_(std::move(comms)), streams_(std::move(streams)), devs_(std::move(devs)) {}
    ~NcclCollective() override {
        for (NcclComm c : comms_) api_.comm_destroy(c);
    }
    std::string name() const override { return std::string(kLibName) + " over devices " + devs_; }
    void all_reduce_sum(int r, float* buf, int64_t n) override {
        check(api_.all_reduce(buf, buf, size_t(n), kNcclFloat32, kNcclSum, comms_[size_t(r)], streams_[size_t(r)]),
              "ncclAllReduce");
    }
    // Recorded into each device's decode graphs, each captured and launched by its
    // device's own thread (captured from one thread in a group call, the capture never
    // ended on 2 x H100, 2026-11-27). VEGA_NCCL_GRAPHS=0: decode steps run op by op.
    bool capturable() const override { return env::flag("VEGA_NCCL_GRAPHS", true); }

private:
    void check(int rc, const char* what) const {
        if (rc != kNcclSuccess) fail("{} failed: {} ({})", what, api_.error_string(rc), rc);
    }
    NcclApi api_;
    std::vector<NcclComm> comms_;
    std::vector<void*> streams_;
    std::string devs_;
};

// One communicator per device (the devices distinct); null with the reason in why.
std::unique_ptr<Collective> make_nccl_collective(const std::vector<int>& devs, const std::vector<void*>& streams,
                                                 const std::string& list, std::string& why) {
    if (std::set<int>(devs.begin(), devs.end()).size() != devs.size()) {
        why = "a device is named twice; " + std::string(kLibName) + " needs distinct devices";
        return nullptr;
    }
    NcclApi api;
    if (!load_api(api, why)) return nullptr;
    std::vector<NcclComm> comms(devs.size(), nullptr);
    if (const int rc = api.comm_init_all(comms.data(), int(devs.size()), devs.data()); rc != kNcclSuccess) {
        why = std::string(kLibName) + " could not start (" + api.error_string(rc) + ")";
        return nullptr;
    }
    return std::make_unique<NcclCollective>(api, std::move(comms), streams, list);
}

}  // namespace

// Peer sums for the small sums with NCCL/RCCL for the large (collective_peer.h); either
// alone where the other is ruled out; null, with both reasons, where neither serves.
std::unique_ptr<Collective> make_gpu_collective(const std::vector<Backend*>& backends, std::string& why) {
    std::vector<int> devs;
    std::vector<void*> streams;
    std::string list;
    for (Backend* be : backends) {
        void* s = gpu_stream_of(*be);
        if (!s) {
            why = "not every device is a GPU";
            return nullptr;
        }
        devs.push_back(be->device_index());
        streams.push_back(s);
        list += (list.empty() ? "" : ",") + std::to_string(devs.back());
    }
    std::string lib_why, peer_why;
    std::unique_ptr<Collective> lib = make_nccl_collective(devs, streams, list, lib_why);
    if (auto peer = gpu::make_peer_collective(devs, streams, list, lib, peer_why)) return peer;
    if (lib) return lib;
    why = lib_why + "; " + peer_why;
    return nullptr;
}

}  // namespace vega
