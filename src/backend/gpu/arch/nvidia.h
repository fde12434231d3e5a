// Per-target constants for NVIDIA (sm_80..sm_90): warp32; the H200 has 132 SMs
// and ~4.3 TB/s device copy bandwidth, so matvecs need many 16-byte loads in flight.
#pragma once

namespace vega::gpu::arch {

constexpr int kWave = 32;             // lanes per warp
constexpr int kMatvecWaves = 4;       // warps (= output rows) per matvec block
constexpr int kMatvecUnroll = 4;      // 16-byte weight loads in flight per lane before first use
constexpr int kMatvecMinWaves = 4;    // (documentation only; the audit runs on gfx906)
constexpr int kRowThreads = 256;
constexpr int kEltThreads = 256;
constexpr int kAttnThreads = 128;
constexpr int kAttnGroup = 16;
constexpr int kAttnSplit = 32;        // KV positions per block: 4 dependent steps per group, many blocks
constexpr const char* kName = "nvidia";

}  // namespace vega::gpu::arch
