// Per-target constants for NVIDIA (sm_80..sm_90): warp32; the H200 has 132 SMs
// and ~4.3 TB/s device copy bandwidth, so matvecs need many 16-byte loads in flight.
#pragma once

namespace vega::gpu::arch {

constexpr int kWave = 32;             // lanes per warp
constexpr int kMatvecWaves = 4;       // warps (= output rows) per matvec block
constexpr int kMatvecUnroll = 4;      // 16-byte weight loads in flight per lane before first use
constexpr int matvec_waves(int, bool, GgmlType = GgmlType::Q4_0) { return 1; }
constexpr int matvec_waves_max(int, bool, GgmlType = GgmlType::Q4_0) { return 1; }  // (register budget hint: gfx906 only)
constexpr int epi_waves(int rows_per_wave) { return 32 / rows_per_wave; }  // a block epilogue: its 32-row chunk in one pass
constexpr int kRowThreads = 256;
// The greedy argmax over a vocabulary row, one block: 128256 floats of llama3-8b took
// 18.8 us a token with 256 threads (ncu, H100, 2026-11-27: 0.8% of a decode token),
// latency-bound; 1024 threads keep 4x the loads in flight.
constexpr int kArgmaxThreads = 1024;
constexpr int kPrepThreads = 1024;    // prep_fast_k: 4096 elements with one float4 a thread
constexpr int kEltThreads = 256;
constexpr int kAttnThreads = 128;
constexpr int kAttnGroup = 16;
constexpr int kAttnSplit = 64;        // KV positions per split (a block walks its splits): 8 steps per group (A/B: +1.2-1.9% tg128 over 32)
constexpr int kAttnAhead = 8;         // steps whose K, V are loaded before use: all 8, one memory wait per block
// Parts of a split head merged per L2 round trip (attention.cu, combine_head): their
// (max, sum) and a thread's dims, 2 + 2 floats each (head dims up to 256 over 128 threads).
constexpr int kAttnMergeAhead = 16;
// From this many (token, head) pairs per SM on, attention does not split a pair's
// positions: one block per pair writes its output directly (no partials, no
// merge). A/B 2026-11-24, B=16 (512 pairs): one block per pair +3% over 3 splits.
constexpr int kAttnWholePairsPerSm = 2;
// Prompt (flash) attention, attention_mma.cu: 2 m-tiles per warp (128-row blocks, half the
// shared-memory reads per mma) when that grid has at least this many blocks per 100 SMs,
// else 1. A/B (H100, 2026-11-27, VEGA_GPU_ATTN_MT): pp2048 @ d8192 +2.5% (llama2-7b) and
// +3.1% (llama3-8b) with 2 (512 blocks); pp512 @ d8192 -11% and -1.4% (128 blocks, one an SM).
constexpr int kAttnMmaPairedMinFill = 200;
constexpr bool kPdl = true;             // programmatic dependent launch (sm_90; checked at run time)
// Tensor parallel's small sums read the peers' parts directly (kernels/peer_sum.cu)
// where every pair of devices has peer access: device memory is coherent for peers at
// system scope (NVLink, PCIe P2P), so a system fence and a flag publish a part.
constexpr bool kPeerSums = true;
constexpr bool kMultiMatLaunch = true;  // q, k, v (three GpuMat parameters) in one matvec launch
constexpr const char* kName = "nvidia";
constexpr const char* kDeviceArch = "sm_";  // any NVIDIA device (sm_61+: dp4a; mma needs sm_80, checked at run time)
// Tensor-core matmul (kernels/matmul_mma.cu): used from this many activation rows
// on (batched decode, prompts; VEGA_GPU_MMA_ROWS overrides, 0 = never), with
// mma_warps(cols) warps per block splitting each stage's K for a column group of
// cols activation rows, mma_stage_chunks(cols) chunks of K per ring stage and at
// most kMmaMaxStages stages. A/B on the H200 (2026-11-24, the f16 kernel): 8 warps
// beat 16 at 16 columns by 1%; 16-chunk stages at 16 columns lose 7% (4 or 6
// stages alike), so 16 columns keep 32 (3 stages fit); the f16 activations take
// 64 bytes per chunk and row, so 32 and 64 columns take 16 and 8 (4 stages; 32
// and 16 with 2 stages lose 7% and 12%; 5 stages in 224 KB gain nothing).
constexpr int kMmaMinRows = 8;
// The dot4 (dp4a) GEMM of gfx906 (kernels/gemm_dot4.cu) runs here for parity and
// measurement only: never by default (the tensor cores serve), from VEGA_GPU_GEMM_ROWS
// rows on when set. Same tile as gfx906's (256 threads: 8 warps).
constexpr int kGemmMinRows = 0;
constexpr GemmTile kGemmTile = {64, 64, 2, 4, 4};
constexpr int kGemmWaves = 1;         // (gfx906 register budget hint only)
// Grouped expert matmuls (kernels/matmul_mma.cu, grouped): from this many (row, slot)
// pairs per active expert on average (a 16-column group a third full at worst); fewer
// (batched decode) stay on the expert matvec. Not tuned.
constexpr int kMmaExpertPairs = 8;
constexpr int mma_warps(int /*cols*/) { return 8; }
// (row_groups 2 or 4: 64 or 128 weight rows a block, so fewer chunks fill a slot.)
constexpr int mma_stage_chunks(int cols, int row_groups) {
    return cols >= 64 ? 8 : cols >= 32 ? (row_groups >= 2 ? 8 : 16) : (row_groups >= 2 ? 16 : 32);
}
constexpr int kMmaMaxStages = 4;
// The most row groups (of 32 weight rows) a block takes: 4 (128 rows, each group worked
// by 2 warps), for 64-column groups only, where a launch has a 128-row tile per SM:
// every row of activations read from L2 feeds twice the weight rows of 2 groups.
constexpr int kMmaMaxRowGroups = 4;
// The time of a 128-row tile (4 row groups) in percent of a 64-row tile's (2): from the
// prompts of 512 and 2048 rows, where 4 groups halve the persistent grid's rounds
// exactly and the matmuls ran ~20% faster (docs/PERFORMANCE.md thirty-second session).
// A launch takes 4 groups where its rounds times this cost do not exceed its rounds at 2:
// the tail of a last, part-filled round weighed against the L2 saving (thirty-third
// session). VEGA_GPU_MMA_WIDE_COST overrides (0: no tail check).
constexpr int kMmaWideTileCostPct = 160;
// Shared memory one tensor-core matmul block may take for its ring of stages: 200 KB
// at 1 and 2 row groups (as tuned), sm_90's whole 227 KB at 4, whose 58-69 KB stages
// (8 chunks of 128 weight rows and 64 activation rows) would fit only 2 in 200 KB. A
// device that lends less than a kernel's ring keeps a smaller tile, or the matvec path.
constexpr int mma_smem_bytes(int row_groups) { return row_groups >= 4 ? 227 * 1024 : 200 * 1024; }

// Matvec shapes (rows per wave, loads in flight per row and matrix) for decode,
// by role and type, from tg128 A/B runs on the H200 (2026-11-21, docs/PERFORMANCE.md):
//  - plain (q/k/v in one launch, output): 2 rows x 2 loads: +1-2.3% over 1 x 4
//    (the activation chunk is loaded once for both rows);
//  - gate/up + SwiGLU with the q8 epilogue (344 blocks of 32 rows for n_ff 11008):
//    4 rows x 1 load per matrix, 8 waves per block; 2 x 2 loses 2-4%, 1 row per
//    wave means 1024-thread blocks (64 registers: the K-quants spill);
//  - o / down with the residual + norm epilogue: one 32-row block per chunk, only
//    128 blocks for 4096 rows, so the loads in flight per SM are waves x rows x
//    unroll: 2 x 4 for Q8_0 and the K-quants (+0.5-0.8%) and IQ4_XS (+0.7% on an
//    H100, 2026-11-27; IQ4_NL and MXFP4 lost 0.9% and 1.1% with it), 1 x 4 for the rest;
//  - q+k+v with the rope + cache-store epilogue: the plain shape.
constexpr MatvecShape decode_shape(GgmlType t, Role role) {
    const bool wide = t == GgmlType::Q8_0 || t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K ||
                      t == GgmlType::IQ4_XS;
    switch (role) {
        case Role::kPlain: return {2, 2};
        case Role::kSwiglu: return {4, 1};
        case Role::kResidualNorm: return wide ? MatvecShape{2, 4} : MatvecShape{1, 4};
        case Role::kQkvRope: return {2, 2};  // as kPlain; the two rows of a wave are a rotated pair
    }
    return {1, kMatvecUnroll};
}
// Expert matvec with about one pair per expert (decode; kernels/moe.cu): rows per wave
// and chunks in flight per row and matrix. Gate/up (2048-long rows of Qwen3-30B-A3B:
// 2 chunks a lane) 1 row x 2 chunks; down (768-long rows: under one chunk a lane) 4 rows
// per wave, so a wave's loads are in flight together and 4x fewer blocks. Not A/B-tuned.
constexpr MatvecShape expert_shape(bool swiglu) { return swiglu ? MatvecShape{1, 2} : MatvecShape{4, 1}; }
// Batch kernels (2..8 activation rows per block): one row per wave.
constexpr MatvecShape batch_shape(GgmlType, bool swiglu) { return {1, swiglu ? 2 : kMatvecUnroll}; }
}  // namespace vega::gpu::arch
