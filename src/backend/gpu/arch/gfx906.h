// Per-target constants for AMD gfx906 (MI50/MI60, Radeon VII): wave64, 60 CUs,
// 64 KiB LDS per CU, 10 waves per SIMD at most. Kernels read these instead of
// #ifdefs; the audit checks the occupancy floors declared here.
#pragma once

namespace vega::gpu::arch {

constexpr int kWave = 64;             // lanes per wave (hardware)
constexpr int kMatvecWaves = 2;       // waves (= output rows) per matvec block
constexpr int kMatvecUnroll = 2;      // 16-byte weight loads in flight per lane before first use
constexpr int kMatvecMinWaves = 4;    // occupancy floor (waves/SIMD) the audit enforces
constexpr int kRowThreads = 256;      // one block per row: norms, activation quantization, argmax
constexpr int kEltThreads = 256;      // element-wise kernels
constexpr int kAttnThreads = 256;     // attention block (4 waves)
constexpr int kAttnGroup = 16;        // lanes cooperating on one KV position (reduce via DPP)
constexpr int kAttnSplit = 64;        // KV positions per attention block (split-K): 4 per group of 16 lanes
constexpr const char* kName = "gfx906";

}  // namespace vega::gpu::arch
