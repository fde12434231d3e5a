// vega probe's device studies (probe.h): the seed studies of gfx906 as kernels any
// target of this build runs. Each kernel loops over one instruction pattern and keeps
// its result alive through an opaque guard (the store happens only if the result
// equals a value the host never passes), so the compiler cannot drop the loop. Timing:
// device events around one launch, best of a few.
//   dot4/dot8/dot2   chains of 1 or 4 independent accumulators (16 instructions a trip)
//   LDS              4- and 16-byte reads of a resident tile; 16-byte reads down the
//                    columns of a 64-row tile at a row stride of 32 and 33 vec4
//   global           a 1 GiB buffer read once with 4- and 16-byte loads
//   exchange         DPP row_shr:1 (NVIDIA: shuffle up) and ds_bpermute xor 1 (NVIDIA:
//                    shuffle xor) against the same moves through LDS and barriers
//   launch gap       back-to-back launches of an empty kernel
//   phases           a chain of dependent phases (each reads its own 16 bytes x 4 a
//                    thread, then hands a value on to another block), one kernel a
//                    phase in a graph (PDL: the reads before the wait, as the decode
//                    matvecs issue their weights) against one persistent kernel with a
//                    grid-wide barrier between phases (the next phase's reads issued
//                    before the barrier); and both with no reads: what a kernel boundary
//                    costs against a barrier, the question a persistent decode step asks;
//                    and the kernel chain again with each block holding over a fifth of
//                    its SM's shared memory (4 blocks an SM fit, a fifth does not), so no
//                    block of the next phase is resident beside the running phase (as
//                    after a decode o / down kernel, which holds its SM's whole register
//                    file): what the next kernel's reads before its wait are worth when
//                    they cannot start early
#include "backend/gpu/launch.h"
#include "backend/gpu/probe.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"

#include <algorithm>
#include <functional>

namespace vega::gpu::probe {
namespace {

constexpr int kThreads = 256;
constexpr int kGuard = 0x5eed1e55;  // never the guard the host passes

// Integer dots: dot4 (int8) or, DOT8, dot8 (int4); ACC independent accumulator chains.
template <int ACC, bool DOT8>
__global__ void __launch_bounds__(kThreads) idot_k(int iters, int guard, int* out) {
    int acc[ACC];
    const int a = int(threadIdx.x) * 0x01030507 + guard, b = int(blockIdx.x) * 0x07050301 - guard;
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = i;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 16 / ACC; ++u)
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] = DOT8 ? dot8_i4(a, b ^ i, acc[i]) : dot4_i8(a, b ^ i, acc[i]);
    }
    int s = 0;
#pragma unroll
    for (int i = 0; i < ACC; ++i) s += acc[i];
    if (s == guard) out[0] = s;
}

template <int ACC>
__global__ void __launch_bounds__(kThreads) dot2_k(int iters, int guard, int* out) {
    float acc[ACC];
    const uint32_t a = pack_h2(float(threadIdx.x & 7) * 0.125f, 0.5f), b = pack_h2(0.25f, float(guard & 3));
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = float(i);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 16 / ACC; ++u)
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] = dot2_f16(a, b ^ uint32_t(i), acc[i]);
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ACC; ++i) s += acc[i];
    if (__float_as_int(s) == guard) out[0] = 1;
}

// LDS reads of width V (int: 4 bytes, int4: 16): each lane reads its own consecutive
// elements of a 32 KiB tile, 8 reads a trip.
__device__ __forceinline__ int fold(int v) { return v; }
__device__ __forceinline__ int fold(int4 v) { return v.x ^ v.y ^ v.z ^ v.w; }
template <typename V>
__global__ void __launch_bounds__(kThreads) lds_read_k(int iters, int guard, int* out) {
    constexpr int kN = 32768 / int(sizeof(V));
    __shared__ V tile[kN];
    for (int i = int(threadIdx.x); i < kN; i += kThreads) reinterpret_cast<int*>(&tile[i])[0] = i ^ guard;
    __syncthreads();
    int x = 0;
    int i = int(threadIdx.x);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) x ^= fold(tile[(i + u * kThreads) & (kN - 1)]);
        i = (i + 8 * kThreads + (x & 1)) & (kN - 1);
    }
    if (x == guard) out[0] = x;
}

// 16-byte reads down the columns of a [64][LD] vec4 tile: lane l of a 64-lane group
// reads row l, column (trip + group) % 32: LD = 32 puts every row's column in the same
// banks, LD = 33 spreads them. LD = 0: the contiguous baseline (row-major reads).
template <int LD>
__global__ void __launch_bounds__(kThreads) lds_column_k(int iters, int guard, int* out) {
    constexpr int kLd = LD == 0 ? 32 : LD;
    __shared__ int4 tile[64 * kLd];
    for (int i = int(threadIdx.x); i < 64 * kLd; i += kThreads) tile[i] = make_int4(i, guard, i ^ guard, 1);
    __syncthreads();
    const int l = int(threadIdx.x) & 63, g = int(threadIdx.x) >> 6;
    int x = 0;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int col = (it * 8 + u + g + (x & 1)) & 31;
            const int4 v = LD == 0 ? tile[col * 64 + l] : tile[l * kLd + col];
            x ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (x == guard) out[0] = x;
}

// One pass over n elements of V with a grid-stride loop, 4 loads in flight a trip.
template <typename V>
__global__ void __launch_bounds__(kThreads) global_read_k(const V* __restrict__ p, int64_t n, int guard, int* out) {
    int x = 0;
    const int64_t stride = int64_t(gridDim.x) * kThreads;
    int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const V a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        x ^= fold(a) ^ fold(b) ^ fold(c) ^ fold(d);
    }
    for (; i < n; i += stride) x ^= fold(p[i]);
    if (x == guard) out[0] = x;
}

// Lane exchanges: MODE 0 DPP row shift (shuffle up inside 16 lanes), 1 the same through
// LDS and barriers, 2 xor-1 exchange (ds_bpermute / shuffle xor), 3 the same through
// LDS and barriers. One exchange per lane and trip, 8 a trip.
template <int MODE>
__global__ void __launch_bounds__(kThreads) exchange_k(int iters, int guard, int* out) {
    __shared__ int buf[kThreads];
    const int t = int(threadIdx.x);
    int v = t ^ guard;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            if constexpr (MODE == 0) {
                v = row_shift1(v) + u;
            } else if constexpr (MODE == 2) {
                v = wave_shuffle_xor(v, 1) + u;
            } else {
                buf[t] = v;
                __syncthreads();
                v = (MODE == 1 ? ((t & 15) == 0 ? 0 : buf[t - 1]) : buf[t ^ 1]) + u;
                __syncthreads();
            }
        }
    }
    if (v == guard) out[0] = v;
}

__global__ void noop_k(int guard, int* out) {
    if (int(threadIdx.x) == guard) out[0] = guard;
}

// The phase studies: kPhaseBlocksPerSm blocks of kThreads an SM (all resident at
// once, as the persistent kernel needs), kPhaseLoads 16-byte reads a thread a phase
// (H200: 528 blocks, 8.65 MB a phase, about a decode o-projection's bytes).
constexpr int kPhaseBlocksPerSm = 4;
constexpr int kPhaseLoads = 4;
constexpr size_t kPhaseDefaultSmem = 48 * 1024;  // dynamic shared memory a block may take without an opt-in
struct PhaseBarrier {
    unsigned count, gen;
    int stuck;  // set when a block waited too long: the grid was not resident at once
};
// Phase `phase` of the chain (the int4 reads, or none with empty), then block b hands
// the sum of its reads to block b + 1 of the next phase through hand [2][blocks].
__device__ __forceinline__ int phase_sum(const int4 (&v)[kPhaseLoads]) {
    int s = 0;
#pragma unroll
    for (int k = 0; k < kPhaseLoads; ++k) s += v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    return s;
}
__device__ __forceinline__ void phase_reads(const int4* __restrict__ p, bool empty, int phase, int4 (&v)[kPhaseLoads]) {
    const int64_t threads = int64_t(gridDim.x) * blockDim.x, i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kPhaseLoads; ++k)
        v[k] = empty ? make_int4(k, 0, 0, 0) : p[(int64_t(phase) * kPhaseLoads + k) * threads + i];
}
__device__ __forceinline__ void phase_hand_on(int* hand, int phase, int s) {
    __shared__ float s_red[kThreads / kWave];
    const int nb = int(gridDim.x), b = int(blockIdx.x);
    s = int(block_reduce_sum<kThreads>(float(s), s_red));
    if (threadIdx.x == 0) {
        const int prev = phase > 0 ? *reinterpret_cast<volatile int*>(hand + ((phase - 1) & 1) * nb + (b + nb - 1) % nb) : 0;
        hand[(phase & 1) * nb + b] = prev + s;
    }
}
// One phase as its own kernel: the reads before pdl_wait (they depend on nothing earlier).
__global__ void __launch_bounds__(kThreads) phase_kernel_k(const int4* __restrict__ p, int empty, int phase, int* hand) {
    int4 v[kPhaseLoads];
    phase_reads(p, empty != 0, phase, v);
    pdl_wait();
    pdl_trigger();
    phase_hand_on(hand, phase, phase_sum(v));
}
// Every phase in one kernel: the next phase's reads go out, then a grid-wide barrier
// (a counter and a generation flag in L2; spins bounded, so a grid that is not
// resident at once reports instead of hanging).
__global__ void __launch_bounds__(kThreads) phase_persistent_k(const int4* __restrict__ p, int empty, int n_phase, int* hand,
                                                               PhaseBarrier* bar) {
    __shared__ int s_stuck;
    int4 v[kPhaseLoads];
    phase_reads(p, empty != 0, 0, v);
    for (int ph = 0; ph < n_phase; ++ph) {
        const int s = phase_sum(v);
        if (ph + 1 < n_phase) phase_reads(p, empty != 0, ph + 1, v);
        phase_hand_on(hand, ph, s);
        __syncthreads();
        if (threadIdx.x == 0) {
            volatile unsigned* gen = &bar->gen;
            const unsigned g = *gen;
            __threadfence();  // this block's hand-on, visible before it arrives
            if (atomicAdd(&bar->count, 1u) == gridDim.x - 1) {
                atomicExch(&bar->count, 0u);
                __threadfence();
                atomicAdd(&bar->gen, 1u);
            } else {
                for (long spin = 0; *gen == g; ++spin)
                    if (spin > (1l << 26)) {
                        bar->stuck = 1;
                        break;
                    }
            }
            __threadfence();
            s_stuck = *reinterpret_cast<volatile int*>(&bar->stuck);
        }
        __syncthreads();
        if (s_stuck) return;
    }
}

// Best of `reps` timed launches (after one warm-up), in seconds.
double best_seconds(void* s, const std::function<void()>& launch, int reps) {
    void* e0 = rt::event_create();
    void* e1 = rt::event_create();
    launch();
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        rt::event_record(e0, s);
        launch();
        rt::event_record(e1, s);
        const double ms = rt::event_ms(e0, e1);
        if (ms > 0) best = std::min(best, ms * 1e-3);
    }
    rt::check("probe kernel");
    rt::event_destroy(e0), rt::event_destroy(e1);
    return best;
}

struct Device {
    int dev;
    int n_sm;
    size_t smem_sm;  // shared memory of one SM (rt::DeviceInfo::smem_sm)
    void* s;
    int* out;
};

Device open(int device) {
    rt::set_device(device);
    const rt::DeviceInfo info = rt::device_info(device);
    Device d{device, info.n_sm, info.smem_sm, rt::stream_create(), nullptr};
    d.out = static_cast<int*>(rt::malloc(64));
    if (!d.out) gpu_fail("vega probe: cannot allocate 64 bytes on the device");
    return d;
}
void close(Device& d) {
    rt::free(d.out);
    rt::stream_destroy(d.s);
}

// Global reads of `bytes` with loads of V: GB/s.
template <typename V>
double global_read(Device& d, size_t bytes, int reps) {
    void* buf = rt::malloc(bytes);
    if (!buf) gpu_fail("vega probe: cannot allocate " + std::to_string(bytes >> 20) + " MiB for the read study");
    rt::memset(buf, 1, bytes, d.s);
    const int64_t n = int64_t(bytes / sizeof(V));
    const dim3 grid(unsigned(d.n_sm * 8));
    const double t = best_seconds(
        d.s, [&] { launch(global_read_k<V>, grid, dim3(kThreads), d.s, static_cast<const V*>(buf), n, kGuard, d.out); },
        reps);
    rt::free(buf);
    return double(bytes) / t / 1e9;
}

// The phase studies (see the top): microseconds a phase, n_phase phases a run.
template <typename Add, typename Skip>
void phases(Device& d, int n_phase, int reps, Add&& add, Skip&& skip) {
    const dim3 grid(unsigned(d.n_sm * kPhaseBlocksPerSm)), block(kThreads);
    const size_t bytes = size_t(n_phase) * kPhaseLoads * grid.x * kThreads * sizeof(int4);
    void* buf = rt::malloc(bytes);
    int* hand = static_cast<int*>(rt::malloc(size_t(2) * grid.x * sizeof(int)));
    auto* bar = static_cast<PhaseBarrier*>(rt::malloc(sizeof(PhaseBarrier)));
    if (!buf || !hand || !bar) gpu_fail("vega probe: cannot allocate " + std::to_string(bytes >> 20) + " MiB for the phase study");
    rt::memset(buf, 1, bytes, d.s);
    rt::memset(hand, 0, size_t(2) * grid.x * sizeof(int), d.s);
    rt::memset(bar, 0, sizeof(PhaseBarrier), d.s);
    const auto* p = static_cast<const int4*>(buf);
    // One kernel a phase, replayed from a graph (as a decode step is), each block taking
    // smem bytes of dynamic shared memory: microseconds a phase.
    auto kernel_chain_us = [&](int empty, size_t smem) {
        rt::capture_begin(d.s);
        for (int ph = 0; ph < n_phase; ++ph) launch_smem(phase_kernel_k, grid, block, smem, d.s, p, empty, ph, hand);
        void* g = rt::capture_end(d.s);
        const double t = best_seconds(d.s, [&] { rt::graph_launch(g, d.s); }, reps);
        rt::graph_destroy(g);
        return t / n_phase * 1e6;
    };
    for (int empty : {0, 1}) {
        add(empty ? "phase_kernel_empty" : "phase_kernel", kernel_chain_us(empty, 0));
        const double tb = best_seconds(d.s, [&] { launch(phase_persistent_k, grid, block, d.s, p, empty, n_phase, hand, bar); },
                                       reps);
        PhaseBarrier hb{};
        rt::stream_sync(d.s);
        rt::d2h(&hb, bar, sizeof hb, d.s);
        const char* id = empty ? "phase_barrier_empty" : "phase_barrier";
        if (hb.stuck) skip(id, "the persistent grid was not resident at once");
        else add(id, tb / n_phase * 1e6);
    }
    // The kernel chain with no room beside it: each block takes `alone` bytes of dynamic
    // shared memory (unused), more than a fifth of its SM's, so kPhaseBlocksPerSm blocks
    // fit and one more does not, checked with the occupancy calculator. A phase's blocks
    // then start only as the previous phase's leave their SM; above, the next phase's
    // blocks are resident early and issue their reads before their wait.
    const size_t alone = (d.smem_sm / (kPhaseBlocksPerSm + 1) / 256 + 1) * 256;
    int fit = 0;
    const char* why = nullptr;
    if (d.smem_sm == 0) why = "the runtime gave no shared memory size for an SM";
    else if (alone > kPhaseDefaultSmem)
        why = "a fifth of an SM's shared memory is more than a block may take without opt-in";
    else if (gpuOccupancyMaxActiveBlocksPerMultiprocessor(&fit, phase_kernel_k, kThreads, alone) != gpuSuccess)
        why = "the occupancy calculator failed";
    else if (fit != kPhaseBlocksPerSm)
        why = "the shared memory does not leave exactly the chain's blocks an SM resident";
    for (int empty : {0, 1}) {
        const char* id = empty ? "phase_kernel_alone_empty" : "phase_kernel_alone";
        if (why) skip(id, why);
        else add(id, kernel_chain_us(empty, alone));
    }
    rt::free(buf), rt::free(hand), rt::free(bar);
}

}  // namespace

std::vector<Value> run(int device, bool quick) {
    Device d = open(device);
    const int reps = quick ? 2 : 5;
    const dim3 grid(unsigned(d.n_sm * 8)), block(kThreads);
    const double threads = double(grid.x) * kThreads;
    std::vector<Value> r;
    auto add = [&](const char* id, double v) { r.push_back({id, v, true, ""}); };
    auto skip = [&](const char* id, const char* why) { r.push_back({id, 0, false, why}); };
    auto timed = [&](auto kernel, int iters) {
        return best_seconds(d.s, [&] { launch(kernel, grid, block, d.s, iters, kGuard, d.out); }, reps);
    };
    // Arithmetic: 16 instructions a trip per thread; ops per instruction: dot4 8 (4 MACs),
    // dot8 16, dot2 4.
    const int it = quick ? 512 : 4096;
    const double instr = threads * it * 16;
    add("dot4_acc1", instr * 8 / timed(idot_k<1, false>, it) / 1e12);
    add("dot4_acc4", instr * 8 / timed(idot_k<4, false>, it) / 1e12);
    if (kNativeDot8) {
        add("dot8_acc1", instr * 16 / timed(idot_k<1, true>, it) / 1e12);
        add("dot8_acc4", instr * 16 / timed(idot_k<4, true>, it) / 1e12);
    } else {
        skip("dot8_acc1", "no int4 dot instruction on this target");
        skip("dot8_acc4", "no int4 dot instruction on this target");
    }
    add("dot2_f16_acc1", instr * 4 / timed(dot2_k<1>, it) / 1e12);
    add("dot2_f16_acc4", instr * 4 / timed(dot2_k<4>, it) / 1e12);
    // LDS: 8 reads a trip per thread.
    const int lit = quick ? 256 : 2048;
    const double reads = threads * lit * 8;
    add("lds_read_b32", reads * 4 / timed(lds_read_k<int>, lit) / 1e12);
    add("lds_read_b128", reads * 16 / timed(lds_read_k<int4>, lit) / 1e12);
    add("lds_row_b128", reads * 16 / timed(lds_column_k<0>, lit) / 1e9);
    add("lds_col_stride32", reads * 16 / timed(lds_column_k<32>, lit) / 1e9);
    add("lds_col_stride33", reads * 16 / timed(lds_column_k<33>, lit) / 1e9);
    // Global reads of 1 GiB (256 MiB quick).
    const size_t bytes = quick ? size_t(256) << 20 : size_t(1) << 30;
    add("global_read_dword", global_read<int>(d, bytes, reps));
    add("global_read_dwordx4", global_read<int4>(d, bytes, reps));
    // Exchanges: 8 a trip per lane.
    const int xit = quick ? 256 : 2048;
    const double xch = threads * xit * 8;
    add("xchg_dpp_row_shr", xch / timed(exchange_k<0>, xit) / 1e9);
    add("xchg_lds_row_shr", xch / timed(exchange_k<1>, xit) / 1e9);
    add("xchg_bpermute_xor", xch / timed(exchange_k<2>, xit) / 1e9);
    add("xchg_lds_xor", xch / timed(exchange_k<3>, xit) / 1e9);
    // Launch gap: back-to-back launches of an empty one-wave kernel.
    const int n = quick ? 200 : 2000;
    const double t = best_seconds(
        d.s,
        [&] {
            for (int i = 0; i < n; ++i) launch(noop_k, dim3(1), dim3(unsigned(kWave)), d.s, kGuard, d.out);
        },
        reps);
    add("launch_gap", t / n * 1e6);
    phases(d, quick ? 32 : 128, reps, add, skip);
    close(d);
    return r;
}

DeviceSummary describe(int device) {
    rt::set_device(device);
    const rt::DeviceInfo info = rt::device_info(device);
    return {info.name, info.arch, arch::kName, info.n_sm, double(info.total_mem) / double(size_t(1) << 30)};
}

double read_bandwidth_gbs(int device) {
    Device d = open(device);
    // 1 GiB where it fits beside a loaded model, else less (256 MiB still dwarfs every L2);
    // 0 (no roofline) where not even 64 MiB is free.
    double v = 0;
    for (size_t mib : {1024, 256, 64}) {
        size_t free_b = 0, total_b = 0;
        rt::mem_info(&free_b, &total_b);
        if (free_b < (mib << 20) + (size_t(256) << 20)) continue;
        v = global_read<int4>(d, mib << 20, 3);
        break;
    }
    close(d);
    return v;
}

}  // namespace vega::gpu::probe
