// Per-target constants for AMD gfx906 (MI50/MI60, Radeon VII): wave64, 60 CUs,
// 64 KiB LDS per CU, 10 waves per SIMD at most. Kernels read these instead of
// #ifdefs; the audit checks the occupancy floors declared here.
#pragma once

namespace vega::gpu::arch {

constexpr int kWave = 64;             // lanes per wave (hardware)
constexpr int kMatvecWaves = 2;       // waves (= output rows) per matvec block
constexpr int kMatvecUnroll = 2;      // 16-byte weight loads in flight per lane before first use
// Waves per SIMD the compiler is asked to keep a matvec at (amdgpu_waves_per_eu;
// min = max for decode: without the cap it trades the loads in flight for 5-6
// waves, 6 round trips per iteration instead of 1). Batch kernels of 8 rows and
// the 4-row gate/up kernels spill at 64 VGPRs: 3.
constexpr int matvec_waves(int act_rows, bool swiglu, GgmlType t = GgmlType::Q4_0) {
    // Q2_K's 8-row gate/up also holds the activations' per-half sums: at 3 waves (84
    // VGPRs) it spilled 16 B a lane (audit), so 2 (and matvec_waves_max 2).
    if (t == GgmlType::Q2_K && act_rows == 8 && swiglu) return 2;
    return act_rows == 1 ? 4 : act_rows == 8 || (act_rows == 4 && swiglu) ? 3 : 4;
}
// The most waves per SIMD the compiler may aim for (more: fewer VGPRs each): decode keeps
// its floor; batches up to 10, except Q2_K's 8-row gate/up, which spilled when the
// compiler aimed higher than its floor of 2.
constexpr int matvec_waves_max(int act_rows, bool swiglu, GgmlType t = GgmlType::Q4_0) {
    const bool pinned = act_rows == 1 || (t == GgmlType::Q2_K && act_rows == 8 && swiglu);
    return pinned ? matvec_waves(act_rows, swiglu, t) : 10;
}
// Waves of a block-epilogue block (one 32-row chunk of the output): 8, each taking
// 32 / (8 x rows per wave) row sets in turn (4 for 1 row per wave). 32 / R waves
// would be 2048 threads at 1 row per wave; more rows per wave spill (audit).
constexpr int epi_waves(int) { return 8; }
constexpr int kRowThreads = 256;      // one block per row: norms, activation quantization, argmax
constexpr int kArgmaxThreads = kRowThreads;  // (the audit counts its waves at 256)
constexpr int kPrepThreads = 512;     // residual + norm + q8 of a row held in registers (prep_fast_k): 8 waves,
                                      // 2 float4 a lane for n = 4096. 1024 would be legal on the card, but
                                      // the emulation build has named barriers for 15 waves per block only
constexpr int kEltThreads = 256;      // element-wise kernels
constexpr int kAttnThreads = 256;     // attention block (4 waves)
constexpr int kAttnGroup = 16;        // lanes cooperating on one KV position (reduce via DPP)
constexpr int kAttnSplit = 64;        // KV positions per split (a block walks its splits): 4 per group of 16 lanes
constexpr int kAttnAhead = 1;         // steps (positions per group) whose K, V are loaded before use;
                                      // more would cost the 4-wave floor
constexpr int kAttnMergeAhead = 8;    // split parts merged per round trip (3 VGPRs each at 256 threads: the 4-wave floor)
constexpr int kAttnWholePairsPerSm = 2;  // from this many (token, head) pairs per CU on: one block per pair (as NVIDIA)
// Prompt attention (kernels/attention_dot2.cu): blocks of kTiledAttnWaves waves over
// one K/V tile of a wave's width in positions (lane = position for q.k, lane = dims
// for p.v), each wave kTiledAttnWaveRows query rows (2 from head dim 256 on, for the
// LDS). 8 waves: the 48 KB of LDS of a 128-dim tile leave one block per CU, 2 waves
// per SIMD. Not measured on a card.
constexpr int kTiledAttnWaves = 8;
constexpr int kTiledAttnWaveRows = 4;
constexpr bool kPdl = false;             // no programmatic dependent launch on HIP
// No peer-memory sums (kernels/peer_sum.cu): a peer reading plain (coarse-grained)
// device memory over PCIe or xGMI may miss lines still in the owner's L2; RCCL's own
// buffers are fine-grained. Every sum goes through RCCL. Not tried on a card.
constexpr bool kPeerSums = false;
constexpr uint64_t kWallClockHz = 100000000;  // wall_clock64() (s_memrealtime): 100 MHz on gfx9 (HIP builds)
constexpr bool kMultiMatLaunch = false;  // one matrix per launch: selecting among three GpuMat
                                         // parameters puts a per-lane copy in LDS (audit)
constexpr const char* kName = "gfx906";
constexpr const char* kDeviceArch = "gfx906";  // device arch names this table serves (prefix of gcnArchName)
constexpr int kMmaMinRows = 0;        // no tensor-core matmul
constexpr int kMmaExpertPairs = 0;    // (nor the grouped expert matmul)
// The quantized dot4 GEMM (kernels/gemm_dot4.cu) serves steps of this many activation
// rows on (prompts, batches; VEGA_GPU_GEMM_ROWS overrides, 0 = never); fewer take the
// 8-row matvec. Tile: 64 weight rows x 64 activation rows, K steps of 2 chunks, 4 x 4
// outputs a thread (256 threads, 4 waves). LDS per block: two stages of 64 + 64 rows of
// 2 x 32 int8 padded by one vec4 (80-byte rows: 8 consecutive rows' ds_read_b128 fall in
// 32 distinct banks) plus their chunk scales, 22-28 KB: two blocks per CU, 2 waves per
// SIMD. The threshold is the MI50 model's crossover (scripts/mi50_model.py, llama2-7b
// Q4_0): a 64-row tile costs the same at 17 rows as at 64 (38-63 ms of matmuls a step),
// the 8-row matvec's audited latency costs 16-32 ms per pass of 8 rows, so from the third
// pass (17 rows) on the GEMM is at least as fast in 5 of the model's 6 (latency, overlap)
// cases. Not measured on a card.
constexpr int kGemmMinRows = 17;
constexpr GemmTile kGemmTile = {64, 64, 2, 4, 4};
constexpr int kGemmWaves = 2;         // waves per SIMD the GEMM is compiled for (the LDS allows 2)

// Matvec shapes (rows per wave, loads in flight per row and matrix): decode by
// role, and the batch kernels. Not measured on a gfx906 card yet: the unrolls that
// keep the audit's occupancy floors (the fused gate/up kernel streams two matrices,
// so it keeps one load per matrix in flight). The block epilogues (residual + norm
// + q8 for o / down, q8 of h for gate/up) run these shapes in 8-wave blocks
// (epi_waves). One matrix per launch, so the rope epilogue runs q, k and v as three
// launches (2 rows per wave: whole rotated pairs; 2 x 2 spills at 64 VGPRs).
constexpr MatvecShape decode_shape(GgmlType, Role role) {
    switch (role) {
        case Role::kPlain: return {1, kMatvecUnroll};
        case Role::kSwiglu: return {1, 1};
        case Role::kResidualNorm: return {1, kMatvecUnroll};
        case Role::kQkvRope: return {2, 1};
    }
    return {1, kMatvecUnroll};
}
constexpr MatvecShape batch_shape(GgmlType, bool swiglu) { return {1, swiglu ? 1 : kMatvecUnroll}; }
// Expert matvec, about one pair per expert (decode): one row per wave and chunk per lane
// (the audited shape; not measured on a card).
constexpr MatvecShape expert_shape(bool) { return {1, 1}; }
}  // namespace vega::gpu::arch
