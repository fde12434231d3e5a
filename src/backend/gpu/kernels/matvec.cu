// Matrix-vector products for decode (1..8 activation rows per launch) and the
// same kernel over groups of 8 rows for prompts. One wave per output row; each
// lane walks the row's 32-element chunks with 16-byte weight loads
// (kMatvecUnroll of them in flight), integer dots against the q8 activations
// through dot4_i8, and one wave reduction per activation row at the end.
//
// Audit specs (glob over the demangled kernel name, '?' for its spaces; the longest matching
// one applies; keys: tests/gpu/gfx906_audit.cpp). Decode (one activation row, the
// `(vega::GgmlType)N, 1, ` globs): the loop body is branch-free and every weight and
// activation load of an iteration is issued before its first wait: 1 round trip (Q8_0 and
// Q6_K: 2, the compiler waits on the first chunk's 32 / 24 weight bytes before issuing the
// second's, within the 64-VGPR budget of 4 waves). Batches (2..8 rows, one activation chunk
// at a time): about one round trip per activation chunk, at most 32 per iteration (8 rows x
// 2 chunks, K-quants) as of 2026-11-23; no dynamic indexing (was 30 v_cndmask for 8 rows).
// @audit kernel=*matvec_q<* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=32 loop_cndmask=1 loop_x4 no_flat no_glc
// 8 rows, and the 4-row gate/up kernels, hold 3 waves/SIMD (arch::matvec_waves: at 64 VGPRs they spill).
// @audit kernel=*matvec_q<*,?8,?* min_waves=3 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=32 loop_cndmask=1 loop_x4 no_flat no_glc
// @audit kernel=*matvec_q<*,?4,?true,* min_waves=3 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=32 loop_cndmask=1 loop_x4 no_flat no_glc
// Q2_K's 8-row gate/up: 2 waves (its per-half activation sums spilled at 3).
// @audit kernel=*matvec_q<(vega::GgmlType)10,?8,?true,* min_waves=2 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_trips=32 loop_cndmask=1 loop_x4 no_flat no_glc
// @audit kernel=*matvec_q<(vega::GgmlType)?,?1,?* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_inflight=6 loop_trips=2 loop_vmcnt0=1 loop_cndmask=1 loop_x4 no_flat no_glc
// @audit kernel=*matvec_q<(vega::GgmlType)??,?1,?* min_waves=4 expect=v_dot4_i32_i8,global_load_dwordx4,dpp loop_inflight=6 loop_trips=2 loop_vmcnt0=1 loop_cndmask=1 loop_x4 no_flat no_glc
// Float weights (F32/F16/BF16, not tuned for gfx906 yet): today's levels. The 2..8-row
// kernels index their accumulators dynamically (17-120 v_cndmask per iteration, seen since
// the audit finds nested hot loops, 2026-11-23); the 8-row loops are not their dwordx4
// stream, so loop_x4 is not declared for matvec_f.
// @audit kernel=*matvec_f<* min_waves=4 expect=global_load_dwordx4,dpp loop_inflight=0 loop_waits=4 loop_vmcnt0=3 loop_cndmask=43 no_flat no_glc
// @audit kernel=*matvec_f<*,?8,?* min_waves=4 expect=global_load_dwordx4,dpp loop_inflight=0 loop_waits=4 loop_vmcnt0=3 loop_cndmask=120 no_flat no_glc
#include "core/env.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"
#include "backend/gpu/kernels/float_row.h"
#include "backend/gpu/kernels/deferred_norm.h"
#include "backend/gpu/kernels/head_rope.h"
#include "backend/gpu/kernels/last_block.h"
#include "backend/gpu/kernels/peer_chunk_sum.h"
#include "backend/gpu/kernels/quant_chunk.h"
#include "backend/gpu/kernels/silu.h"
#include "backend/gpu/kernels/rope.h"

#include <cstdlib>
#include <string>
#include <type_traits>

namespace vega::gpu {
namespace {

using arch::kMatvecUnroll;
using arch::kMatvecWaves;
constexpr int kMatvecThreads = kWave * kMatvecWaves;
// The target table's choices (gfx906, and its emulation build: no PDL, so no
// peeled first load, and one matrix per launch; NVIDIA: both).
constexpr bool kPdlPrefetch = arch::kPdl;
constexpr bool kMultiMat = arch::kMultiMatLaunch;
// Decode shape variants besides the table's, for tuning runs (CMake VEGA_GPU_TUNING=ON).
#if defined(VEGA_GPU_TUNING)
constexpr bool kTuneVariants = true;
#else
constexpr bool kTuneVariants = false;
#endif

// Up to three matrices in one launch (Q, K, V): blocks [0, end0) belong to W0/y0,
// [end0, end1) to W1/y1, the rest to W2/y2. SWIGLU: W0 = gate, W1 = up, out y0.
struct Job {
    GpuMat W0, W1, W2;
    float *y0, *y1, *y2;
    int64_t end0 = 0, end1 = 0;  // blocks of matrix 0, of 0 and 1 (launch_nb sets both on every path)
    int m0 = 0;  // one matrix per launch (!kMultiMat): which of q, k, v W0 is (the rope epilogue)
};
// The selected matrix by value, field by field: taking the address of a kernel
// parameter would copy the whole Job to local memory (2x slower matvecs).
__device__ __forceinline__ GpuMat pick(int m, const GpuMat& a, const GpuMat& b, const GpuMat& c) {
    GpuMat r;
    r.type = a.type;
    r.n_in = a.n_in;
    r.n_out = m == 0 ? a.n_out : m == 1 ? b.n_out : c.n_out;
    r.n_chunk = a.n_chunk;
    r.qs = m == 0 ? a.qs : m == 1 ? b.qs : c.qs;
    r.qh = m == 0 ? a.qh : m == 1 ? b.qh : c.qh;
    r.sc = m == 0 ? a.sc : m == 1 ? b.sc : c.sc;
    r.sb = m == 0 ? a.sb : m == 1 ? b.sb : c.sb;
    return r;
}
struct Sel {
    GpuMat W;
    float* y;
    int64_t block;  // block index inside the selected matrix
    int m;          // which matrix: 0, 1, 2
};
__device__ __forceinline__ Sel select(const Job& j) {
    const int64_t b = blockIdx.x;
    if constexpr (!kMultiMat) return {j.W0, j.y0, b, j.m0};  // gfx906: one matrix per launch (see kMultiMat)
    const int m = b < j.end0 ? 0 : b < j.end1 ? 1 : 2;
    Sel s;
    s.W = pick(m, j.W0, j.W1, j.W2);
    s.y = m == 0 ? j.y0 : m == 1 ? j.y1 : j.y2;
    s.block = m == 0 ? b : m == 1 ? b - j.end0 : b - j.end1;
    s.m = m;
    return s;
}

// Decode epilogues (NB == 1): one block owns a 32-row chunk (kEpiRows) of the
// output, so the q8 blocks of the result are made inside the block (LDS, one
// wave), without cross-block sync:
//   kEpiResidualNorm (o / down): x[row] += v, then q8(x * w) and the chunk's sum
//     of x^2 (ops::Epi: the deferred-norm input of the next matmul);
//   kEpiQ8 (gate/up + SwiGLU): y[row] = v, and q8(y) (the down matmul's input).
//   kEpiPeerResidualNorm (o / down under tensor parallel): v is this rank's part;
//     x[row] += the ranks' parts summed (peer_chunk_sum.h), then as kEpiResidualNorm.
// And one per wave (plain blocks, the 3-matrix q+k+v launch):
//   kEpiRope: the wave's R rows are R/2 dimension pairs of one head (rope_pair):
//     q, k rotated at pos[0], written to y (q, k, v as matvec3 would, rotated),
//     and k, v also into the cache at (seq[0], pos[0]) (ops::rope_store's work).
//   kEpiNormRope (q/k head norms, qwen3): v as kEpiRope; q and k written as they
//     are, then the last block of each head (a counter per head) norms, rotates
//     and stores it (norm_rope_head, rope_store's arithmetic): the rope launch saved.
constexpr int kEpiRows = 32;
constexpr int kEpiNone = 0, kEpiResidualNorm = 1, kEpiQ8 = 2, kEpiRope = 3, kEpiNormRope = 4, kEpiPeerResidualNorm = 5;
constexpr bool rope_epi(int epi) { return epi == kEpiRope || epi == kEpiNormRope; }
constexpr bool residual_epi(int epi) { return epi == kEpiResidualNorm || epi == kEpiPeerResidualNorm; }
constexpr bool block_epi(int epi) { return residual_epi(epi) || epi == kEpiQ8; }
// The peer exchange's state, a kernel parameter of the kEpiPeerResidualNorm kernels alone.
struct NoPeer {};
template <int EPI>
using PeerArg = std::conditional_t<EPI == kEpiPeerResidualNorm, ops::PeerChunks, NoPeer>;
// Waves per block of matvec_q: the target's for a block epilogue's 32-row chunk
// (arch::epi_waves: each wave then takes kEpiRows / (waves * R) row sets in turn),
// else the table's.
constexpr int block_waves(int epi, int r) { return block_epi(epi) ? arch::epi_waves(r) : kMatvecWaves; }
// Whether a block epilogue can serve W: one activation row, quantized weights,
// whole chunks (the block's size is the table's: arch::epi_waves).
bool block_epi_ok(const GpuMat& W, int rows) {
    return rows == 1 && !is_float_type(W.type) && W.n_out % kEpiRows == 0 && W.n_chunk > 0;
}

// Block b covers output rows [b / n_groups * waves * R, +waves * R) (R consecutive
// rows per wave) for the activation rows [b % n_groups * NB, +NB): blocks sharing
// weight rows run together. R > 1 (decode only) shares each activation load
// between R rows and keeps R * U weight loads in flight per lane.
// Writes y [a.rows][W.n_out] (or h = silu(W·x) * (U·x) when SWIGLU). The first
// weight loads are issued before pdl_wait(): they overlap the previous kernel.
// A deferred-norm input (a.ss, NB == 1) scales each result by 1/rms.
// EPI: kEpi* above (block epilogues: block = the 32-row chunk, arch::epi_waves(R) waves).
// U: 16-byte-load chunks in flight per lane, row and matrix.
// The rows of one block of the selected matrix (sel), weights of type T.
template <GgmlType T, int NB, bool SWIGLU, int EPI, int R, int U>
__device__ __forceinline__ void matvec_q_rows(const Sel& sel, const Job& job, const ops::Act& a, const ops::Epi& e,
                                              const PeerArg<EPI>& peer) {
    constexpr int kWaves = block_waves(EPI, R);
    // Row sets a wave computes one after another: a block epilogue's block owns a
    // 32-row chunk with fewer than 32 / R waves where the target says so (gfx906:
    // 8 waves of 1 row x 4 passes, the registers of its plain decode shape).
    constexpr int kPasses = block_epi(EPI) ? kEpiRows / (kWaves * R) : 1;
    static_assert(R == 1 || NB == 1, "several rows per wave: decode only");
    static_assert(!EPI || NB == 1, "epilogues: decode");
    static_assert(!block_epi(EPI) || (kWaves * kWave <= 1024 && kWaves * R * kPasses == kEpiRows),
                  "block epilogue: a 32-row chunk per block");
    static_assert(!residual_epi(EPI) || !SWIGLU, "residual epilogue: one matrix");
    static_assert(!rope_epi(EPI) || (R % 2 == 0 && !SWIGLU), "rope epilogue: whole pairs per wave");
    const GpuMat W = sel.W;
    const GpuMat& V = job.W1;  // the up matrix (SWIGLU)
    float* __restrict__ y = sel.y;
    const int n_groups = (a.rows + NB - 1) / NB;
    const int wi = int(threadIdx.x) / kWave;
    const int64_t row0 = int64_t(sel.block / n_groups) * (kWaves * R * kPasses) + int64_t(wi) * R * kPasses;
    const int t0 = int(sel.block % n_groups) * NB;
    if (row0 >= W.n_out) {  // whole waves leave together (never with EPI: n_out % 32 == 0)
        pdl_wait();
        pdl_trigger();
        return;
    }
    const int nt = min(NB, a.rows - t0);
    const int nc = int(W.n_chunk);  // chunks per row (32-bit: v_min_i32 clamps, not 64-bit selects)
    const int lane = lane_id();
    constexpr int kU = U;
    int64_t rows[R];  // this pass's rows; rows past the end (last wave only) re-read the last row; not written
    // kEpiRope: row0 / 2 + k is the wave's pair k (n_out is even); its head and its
    // two rows, j and whether it is rotated (never for v, matrix 2).
    [[maybe_unused]] int pair_j[rope_epi(EPI) ? R / 2 : 1];
    [[maybe_unused]] bool pair_rot[rope_epi(EPI) ? R / 2 : 1];
    auto set_rows = [&](int64_t rbase) {
#pragma unroll
        for (int r = 0; r < R; ++r) rows[r] = min(rbase + r, W.n_out - 1);
        if constexpr (rope_epi(EPI)) {
            const int hd = e.rope.c.hd, half_hd = hd / 2;
#pragma unroll
            for (int k = 0; k < R / 2; ++k) {
                const int p = int(min(rbase / 2 + k, W.n_out / 2 - 1));
                const int h = p / half_hd, j = p % half_hd;
                RopePair d = rope_pair(e.rope.r, j);
                if (sel.m == 2) d = {2 * j, 2 * j + 1, false};
                rows[2 * k] = int64_t(h) * hd + d.a, rows[2 * k + 1] = int64_t(h) * hd + d.b;
                pair_j[k] = j, pair_rot[k] = d.rotated;
            }
        }
    };
    set_rows(row0);
    // Flat arrays: gfx906's compiler keeps 1-D private arrays in registers, but a
    // 2-D one went to LDS + scratch (audit).
    float acc[R * NB], accu[R * NB];  // [r * NB + t]

    // Branch-free iterations: a chunk past the row's end (the last iteration's
    // lanes) re-reads chunk nc - 1 and its activation scales are zeroed, so every
    // weight and activation load of an iteration is unconditional and can be in
    // flight before the first wait (a per-chunk `if` / `break` made the compiler
    // wait on each chunk in turn: 3 round trips per iteration on gfx906, audit).
    // Activation rows past a.rows (a group's last rows) likewise re-read row
    // a.rows - 1 into accumulators that are never written.
    Chunk w[kU * R], u[kU * R];  // [k * R + r]
#define VEGA_MATVEC_LOAD(C0)                                                    \
    _Pragma("unroll") for (int k = 0; k < kU; ++k) {                            \
        const int c = min((C0) + k * kWave, nc - 1);                            \
        _Pragma("unroll") for (int r = 0; r < R; ++r) {                         \
            w[k * R + r] = load_chunk<T>(W, rows[r], c);                        \
            if constexpr (SWIGLU) u[k * R + r] = load_chunk<T>(V, rows[r], c);  \
        }                                                                       \
    }
    // Weights only: safe before the dependency wait. Without PDL (HIP) the peeled
    // first load buys nothing and costs registers (gfx906 occupancy), so it is skipped.
    if constexpr (kPdlPrefetch) {
        VEGA_MATVEC_LOAD(lane)
    }
    // Residual epilogues: wave 0's lane i < 32 takes row i of the block's chunk: its norm
    // weight now (a weight), its residual right after the wait, into LDS (no registers
    // held over the main loop), so neither is a memory round trip after the block's sums
    // (A/B on the H200: +2.6% tg128 on llama3-8b Q4_K_M, +4.8% on a tensor-parallel
    // rank's share). Wave 0 alone writes and reads them.
    [[maybe_unused]] __shared__ float early_w[residual_epi(EPI) ? kEpiRows : 1], early_x[residual_epi(EPI) ? kEpiRows : 1];
    [[maybe_unused]] const bool epi_early = residual_epi(EPI) && wi == 0 && lane < kEpiRows;
    if constexpr (residual_epi(EPI)) {
        if (epi_early) early_w[lane] = e.w[row0 + lane];  // (wave 0: row0 is the chunk's first row)
    }
    pdl_wait();
    pdl_trigger();
    if constexpr (residual_epi(EPI)) {
        if (epi_early) early_x[lane] = e.x[row0 + lane];
    }
    // The peer epilogue's round counter of this chunk, likewise (written by an earlier
    // kernel's epilogue, so read after the wait): read after the block's sums it was one
    // more dependent round trip before the stores to the peers (A/B on 2 H200s, 3 rounds:
    // +2% tensor-parallel tg128 on llama3-8b Q4_K_M, the 70B shape unchanged).
    [[maybe_unused]] __shared__ uint32_t early_round;
    if constexpr (EPI == kEpiPeerResidualNorm) {
        if (wi == 0 && lane == 0) early_round = peer.rounds[row0 / kEpiRows];
    }
    // Deferred norm: the per-chunk sums of x^2, one float4 per lane (nc <= 4 * kWave,
    // checked by the host); loaded now, summed after the first pass's main loop.
    float4 ss4 = make_float4(0.f, 0.f, 0.f, 0.f);
    if constexpr (NB == 1) ss4 = deferred_ss(a.ss, nc);
    float sc = 1.f;  // 1/rms of a deferred-norm input (CPU formula: 1 / sqrt(mean + eps))
    // Block epilogues: the chunk's 32 results, for wave 0's q8 of them.
    [[maybe_unused]] __shared__ float xs[block_epi(EPI) ? kEpiRows : 1];
#pragma unroll 1
    for (int pass = 0; pass < kPasses; ++pass) {
        const int64_t rbase = row0 + int64_t(pass) * R;
        if (pass > 0) set_rows(rbase);
        // kEpiRope: the rotations now (double-precision latency under the weight loads).
        [[maybe_unused]] float rope_cs_[EPI == kEpiRope ? R / 2 : 1], rope_sn_[EPI == kEpiRope ? R / 2 : 1];
        if constexpr (EPI == kEpiRope) {
#pragma unroll
            for (int k = 0; k < R / 2; ++k) {
                rope_cs_[k] = 1.f, rope_sn_[k] = 0.f;
                if (pair_rot[k]) rope_cs(e.rope.r, e.rope.pos[0], pair_j[k], &rope_sn_[k], &rope_cs_[k]);
            }
        }
#pragma unroll
        for (int i = 0; i < R * NB; ++i) acc[i] = 0.f, accu[i] = 0.f;
        for (int c0 = lane; c0 < nc; c0 += kWave * kU) {
            if (!kPdlPrefetch || c0 != lane || pass > 0) {
                VEGA_MATVEC_LOAD(c0)
            }
            // Activation row t's chunk k: q8 values and scales; a chunk past the row's
            // end reads chunk nc - 1 with zeroed scales (it adds +0).
            auto load_act = [&](int t, int k, int4& a0, int4& a1, float2& ds) {
                const int ck = c0 + k * kWave;
                const int64_t ai = int64_t(min(t, nt - 1) + t0) * nc + min(ck, nc - 1);
                const int4* aq = reinterpret_cast<const int4*>(a.q) + ai * 2;
                a0 = aq[0], a1 = aq[1];
                ds = reinterpret_cast<const float2*>(a.ds)[ai];
                const float live = ck < nc ? 1.f : 0.f;
                ds.x *= live, ds.y *= live;
            };
            auto accumulate = [&](int t, int k, const int4& a0, const int4& a1, float2 ds) {
                const ActChunk<T> x = act_chunk<T>(a0, a1, ds);  // (once for the R rows and both matrices)
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    acc[r * NB + t] += dot_chunk<T>(w[k * R + r], x);
                    if constexpr (SWIGLU) accu[r * NB + t] += dot_chunk<T>(u[k * R + r], x);
                }
            };
            if constexpr (NB == 1) {
                // Decode: every chunk's activations loaded before the first dot, so
                // with the weights above the iteration waits on memory once.
                int4 a0[kU], a1[kU];
                float2 ds[kU];
#pragma unroll
                for (int k = 0; k < kU; ++k) load_act(0, k, a0[k], a1[k], ds[k]);
#pragma unroll
                for (int k = 0; k < kU; ++k) accumulate(0, k, a0[k], a1[k], ds[k]);
            } else {
                // Batches: one activation chunk at a time (NB rows' worth of all kU
                // chunks would not fit in registers; same summation order per row).
#pragma unroll
                for (int k = 0; k < kU; ++k)
#pragma unroll
                    for (int t = 0; t < NB; ++t) {
                        int4 a0, a1;
                        float2 ds;
                        load_act(t, k, a0, a1, ds);
                        accumulate(t, k, a0, a1, ds);
                    }
            }
        }
        if constexpr (NB == 1) {
            if (pass == 0 && a.ss) sc = deferred_scale(ss4, a.n, a.eps);
        }
        if constexpr (rope_epi(EPI)) {
            const ops::KvLayer& c = e.rope.c;
            const int hd = c.hd;
            void* cache = sel.m == 1 ? c.k : c.v;
            // kEpiNormRope: q and k as they are (the head's last block norms and rotates them).
            const bool store = EPI == kEpiRope ? sel.m != 0 : sel.m == 2;
#pragma unroll
            for (int k = 0; k < R / 2; ++k) {
                float y0 = wave_reduce_sum(acc[2 * k]) * sc, y1 = wave_reduce_sum(acc[2 * k + 1]) * sc;
                if constexpr (EPI == kEpiRope) {
                    if (pair_rot[k]) rotate(y0, y1, rope_cs_[k], rope_sn_[k], &y0, &y1);
                }
                if (lane < 2 && rbase / 2 + k < W.n_out / 2) {
                    const int64_t rr = lane == 0 ? rows[2 * k] : rows[2 * k + 1];  // head * hd + dim
                    const float v = lane == 0 ? y0 : y1;
                    y[rr] = v;
                    if (store) {  // k, v: the head's cache row at (seq[0], pos[0])
                        const int64_t head = rr / hd;
                        const int64_t dst = c.row(e.rope.seq[0], int(head), e.rope.pos[0]) + (rr - head * hd);
                        if (c.elem == KvElem::F16) static_cast<uint16_t*>(cache)[dst] = f2h(v);
                        else static_cast<float*>(cache)[dst] = v;
                    }
                }
            }
        } else if constexpr (EPI != kEpiNone) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const float s = wave_reduce_sum(acc[r]) * sc;
                float v = s;
                if constexpr (SWIGLU) v = silu(s) * (wave_reduce_sum(accu[r]) * sc);
                if (lane == 0) {
                    // Residual epilogues: v (a rank's part under tensor parallel) goes to
                    // wave 0's tail, which adds the residual; kEpiQ8 writes it too.
                    if constexpr (!residual_epi(EPI)) y[rbase + r] = v;
                    xs[wi * R * kPasses + pass * R + r] = v;
                }
            }
        } else {
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int t = 0; t < NB; ++t) {
                    const float s = wave_reduce_sum(acc[r * NB + t]) * sc;
                    float v = s;
                    if constexpr (SWIGLU) v = silu(s) * (wave_reduce_sum(accu[r * NB + t]) * sc);
                    if (lane == 0 && t < nt && rbase + r < W.n_out) y[int64_t(t0 + t) * W.n_out + rbase + r] = v;
                }
        }
    }
#undef VEGA_MATVEC_LOAD
    if constexpr (block_epi(EPI)) {
        __syncthreads();
        if (wi != 0) return;
        const int64_t c = row0 / kEpiRows;  // wave 0: row0 == the chunk's first row
        // Lanes kEpiRows.. of a wave64 hold 0: neutral for the max of |g| and the sums.
        const bool in = lane < kEpiRows;
        float xv = in ? xs[lane] : 0.f;
        if constexpr (EPI == kEpiPeerResidualNorm) {  // x += the ranks' parts, summed in rank order
            const float sum = peer_chunk_sum<kEpiRows>(peer, c, lane, xv, early_round);
            if (in) xv = early_x[lane] + sum, e.x[c * kEpiRows + lane] = xv;
        } else if constexpr (EPI == kEpiResidualNorm) {  // x += v
            if (in) xv = early_x[lane] + xv, e.x[c * kEpiRows + lane] = xv;
        }
        const float g = residual_epi(EPI) && in ? xv * early_w[lane] : xv;
        const float amax = wave_reduce_max(fabsf(g));
        const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
        const int q = int(roundf(g * id));
        const float qs = wave_reduce_sum(float(q));
        if (in) e.q[c * kEpiRows + lane] = int8_t(q);
        if (in && e.xw) e.xw[c * kEpiRows + lane] = g;  // x * w in f32 (an f32 reader: the expert router)
        if (lane == 0) reinterpret_cast<float2*>(e.ds)[c] = make_float2(d, d * qs);
        if constexpr (residual_epi(EPI)) {
            const float ss = wave_reduce_sum(xv * xv);
            if (lane == 0) e.ss[c] = ss;
        }
    }
    if constexpr (EPI == kEpiNormRope) {
        // q or k: the block's pairs lie in one head (the host checks that a head's
        // pairs fill whole blocks); its last block finishes the head.
        if (sel.m == 2) return;  // (block-uniform)
        const ops::KvLayer& c = e.rope.c;
        const int hd = c.hd, pairs = kWaves * R / 2;
        const int head = int(sel.block * pairs / (hd / 2));
        int* count = e.rope.count + (sel.m == 0 ? head : e.rope.n_head + head);
        if (!last_block(count, hd / 2 / pairs)) return;
        __shared__ float lds_f[kHeadRopeMaxDim];
        __shared__ double lds_d[kWaves];
        const int p = e.rope.pos[0];
        const int64_t dst = c.row(e.rope.seq[0], head, p);
        float* const x = y + int64_t(head) * hd;
        const float* const nw = sel.m == 0 ? e.rope.qn : e.rope.kn;
        const int64_t k_dst = sel.m == 1 ? dst : -1;
        if (c.elem == KvElem::F16)
            norm_rope_head<kWaves * kWave, KvElem::F16>(x, hd, nw, e.rope.eps, e.rope.r, p, c, k_dst, lds_f, lds_d);
        else
            norm_rope_head<kWaves * kWave, KvElem::F32>(x, hd, nw, e.rope.eps, e.rope.r, p, c, k_dst, lds_f, lds_d);
    }
}

// The kernel: T for every matrix, except TV for matrix 2 (v of a q+k+v launch whose v has
// a type of its own, as Q4_K_M's Q6_K attn_v in half of the layers): a block runs one
// matrix's rows, so it takes that matrix's code; the launch is one kernel either way.
template <GgmlType T, int NB, bool SWIGLU, int EPI, int R, int U, GgmlType TV = T>
__global__ void __launch_bounds__(block_waves(EPI, R) * kWave) VEGA_WAVES(arch::matvec_waves(NB, SWIGLU, T), arch::matvec_waves_max(NB, SWIGLU, T)) matvec_q(Job job, ops::Act a, ops::Epi e, PeerArg<EPI> peer) {
    const Sel sel = select(job);
    if constexpr (TV != T) {
        if (sel.m == 2) return matvec_q_rows<TV, NB, SWIGLU, EPI, R, U>(sel, job, a, e, peer);
    }
    matvec_q_rows<T, NB, SWIGLU, EPI, R, U>(sel, job, a, e, peer);
}

// Float weights against the f32 activations; 16-byte loads when n_in % 8 == 0.
template <GgmlType T, int NB, bool SWIGLU>
__global__ void __launch_bounds__(kMatvecThreads) matvec_f(Job job, ops::Act a) {
    const Sel sel = select(job);
    const GpuMat W = sel.W;
    const GpuMat& U = job.W1;
    float* __restrict__ y = sel.y;
    constexpr int esz = T == GgmlType::F32 ? 4 : 2;
    const int n_groups = (a.rows + NB - 1) / NB;
    const int64_t row = int64_t(sel.block / n_groups) * kMatvecWaves + threadIdx.x / kWave;
    const int t0 = int(sel.block % n_groups) * NB;
    pdl_wait();
    pdl_trigger();
    if (row >= W.n_out) return;
    const int nt = min(NB, a.rows - t0);
    const int64_t n = W.n_in;
    const uint8_t* wr = W.qs + row * n * esz;
    const uint8_t* ur = SWIGLU ? U.qs + row * n * esz : nullptr;
    const int lane = lane_id();
    float acc[NB], accu[NB];
#pragma unroll
    for (int t = 0; t < NB; ++t) acc[t] = 0.f, accu[t] = 0.f;
    if (n % 8 == 0) {
        for (int64_t i = int64_t(lane) * 8; i < n; i += int64_t(kWave) * 8) {
            float w[8], u[8];
            load8<T>(wr, i, w);
            if constexpr (SWIGLU) load8<T>(ur, i, u);
#pragma unroll
            for (int t = 0; t < NB; ++t) {
                if (t >= nt) break;
                const float4* xp = reinterpret_cast<const float4*>(a.x + int64_t(t0 + t) * n + i);
                const float4 x0 = xp[0], x1 = xp[1];
                const float x[8] = {round_to<T>(x0.x), round_to<T>(x0.y), round_to<T>(x0.z), round_to<T>(x0.w),
                                    round_to<T>(x1.x), round_to<T>(x1.y), round_to<T>(x1.z), round_to<T>(x1.w)};
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    acc[t] += w[k] * x[k];
                    if constexpr (SWIGLU) accu[t] += u[k] * x[k];
                }
            }
        }
    } else {
        for (int64_t i = lane; i < n; i += kWave) {
            const float w = load1<T>(wr, i);
            const float u = SWIGLU ? load1<T>(ur, i) : 0.f;
#pragma unroll
            for (int t = 0; t < NB; ++t) {
                if (t >= nt) break;
                const float x = round_to<T>(a.x[int64_t(t0 + t) * n + i]);
                acc[t] += w * x;
                if constexpr (SWIGLU) accu[t] += u * x;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NB; ++t) {
        const float s = wave_reduce_sum(acc[t]);
        float v = s;
        if constexpr (SWIGLU) v = silu(s) * wave_reduce_sum(accu[t]);
        if (lane == 0 && t < nt) y[int64_t(t0 + t) * W.n_out + row] = v;
    }
}

// Blocks one matrix needs for a.rows activation rows, R rows per wave.
int64_t blocks_for(const GpuMat& W, int rows, int nb, int r) {
    const int64_t per = int64_t(kMatvecWaves) * r;
    return (W.n_out + per - 1) / per * ((rows + nb - 1) / nb);
}

// One launch of matvec_q / matvec_f with R rows per wave and U loads in flight.
// Every path sets j.end0 / j.end1: select() picks each block's matrix by them.
template <GgmlType T, int NB, bool SW, int EPI, int R, int U, GgmlType TV = T>
void launch_nb(const GpuMat* Ws, float* const* ys, int n_mat, const ops::Act& a, const ops::Epi& e, void* s) {
    Job j;
    j.W0 = Ws[0], j.W1 = n_mat > 1 ? Ws[1] : Ws[0], j.W2 = n_mat > 2 ? Ws[2] : Ws[0];
    j.y0 = ys[0], j.y1 = n_mat > 1 ? ys[1] : ys[0], j.y2 = n_mat > 2 ? ys[2] : ys[0];
    const dim3 threads(unsigned(block_waves(EPI, R) * kWave));
    PeerArg<EPI> peer_arg{};
    if constexpr (EPI == kEpiPeerResidualNorm) peer_arg = *e.peer;
    if constexpr (EPI == kEpiNormRope) {
        if ((e.rope.c.hd / 2) % (kMatvecWaves * R / 2) != 0) gpu_fail("q+k+v norm + rope: a head's pairs must fill whole blocks");
    }
    // A v of its own type (TV): one kernel with both types' code where the three matrices
    // share a launch; one matrix per launch launches v's own kernel (below).
    constexpr GgmlType TK = kMultiMat ? TV : T;
    auto run = [&](const Job& jb, int64_t blocks) {
        if constexpr (is_float_type(T)) launch(matvec_f<T, NB, SW>, dim3(unsigned(blocks)), threads, s, jb, a);
        else launch(matvec_q<T, NB, SW, EPI, R, U, TK>, dim3(unsigned(blocks)), threads, s, jb, a, e, peer_arg);
    };
    if constexpr (block_epi(EPI)) {  // one block per 32-row chunk of the first matrix (SWIGLU: the up rows ride along)
        j.end0 = j.end1 = Ws[0].n_out / kEpiRows;
        return run(j, j.end0);
    }
    if (!kMultiMat && !SW && n_mat > 1) {  // one launch per matrix, each told which it is (m0)
        for (int m = 0; m < n_mat; ++m) {
            Job jm = j;
            jm.W0 = Ws[m], jm.y0 = ys[m], jm.m0 = m;
            jm.end0 = jm.end1 = blocks_for(Ws[m], a.rows, NB, R);
            if constexpr (TV != T && !is_float_type(TV)) {
                if (m == 2) {
                    launch(matvec_q<TV, NB, SW, EPI, R, U>, dim3(unsigned(jm.end0)), threads, s, jm, a, e, peer_arg);
                    continue;
                }
            }
            run(jm, jm.end0);
        }
        return;
    }
    // SWIGLU: one set of blocks over the gate rows (the up rows ride along).
    const int nm = SW ? 1 : n_mat;
    int64_t blocks = 0, ends[3] = {0, 0, 0};
    for (int m = 0; m < nm; ++m) blocks += blocks_for(Ws[m], a.rows, NB, R), ends[m] = blocks;
    j.end0 = ends[0], j.end1 = nm > 1 ? ends[1] : blocks;
    run(j, blocks);
}

// Decode shapes (rows per wave, loads in flight) per role: the per-target table's
// choice per type, or, in builds with VEGA_GPU_TUNING (kTuneVariants), one of the
// variants below picked by VEGA_GPU_MV / VEGA_GPU_SWIGLU / VEGA_GPU_EPI = "R,U"
// or ops::set_matvec_tuning (tuning runs: scripts/gpu_check.sh tune).
ops::MatvecTuning& tuning() {
    static ops::MatvecTuning t = [] {
        ops::MatvecTuning r;
        auto parse = [](const char* name, ops::MatvecTuning::Shape& sh) {
            env::int_pair(name, sh.rows, sh.unroll);
        };
        parse("VEGA_GPU_MV", r.plain);
        parse("VEGA_GPU_SWIGLU", r.swiglu);
        parse("VEGA_GPU_EPI", r.epi);
        parse("VEGA_GPU_QKV", r.qkv_rope);
        return r;
    }();
    return t;
}

template <GgmlType T, int NB, bool SW, int EPI, GgmlType TV = T>
void launch_shaped(const GpuMat* Ws, float* const* ys, int n_mat, const ops::Act& a, const ops::Epi& e, void* s) {
    constexpr arch::Role role = residual_epi(EPI) ? arch::Role::kResidualNorm
                                : rope_epi(EPI)         ? arch::Role::kQkvRope
                                : SW                    ? arch::Role::kSwiglu
                                                        : arch::Role::kPlain;
    // Float weights (matvec_f): one row per wave always.
    constexpr arch::MatvecShape d = is_float_type(T) ? arch::MatvecShape{1, 1}
                                    : NB == 1        ? arch::decode_shape(T, role)
                                                     : arch::batch_shape(T, SW);
    if constexpr (NB == 1 && kTuneVariants && !is_float_type(T)) {
        const ops::MatvecTuning& tu = tuning();
        const ops::MatvecTuning::Shape sh = role == arch::Role::kResidualNorm ? tu.epi
                                            : role == arch::Role::kSwiglu     ? tu.swiglu
                                            : role == arch::Role::kQkvRope    ? tu.qkv_rope
                                                                              : tu.plain;
        const int r = sh.rows, u = sh.unroll;
        if (r > 0 && (r != d.rows || u != d.unroll)) {
            // (the rope epilogue: even row counts only)
#define VEGA_MV_VARIANT(RR, UU)                                                              \
    if constexpr ((!rope_epi(EPI) || RR % 2 == 0) && block_waves(EPI, RR) * kWave <= 1024) { \
        if (r == RR && u == UU) return launch_nb<T, NB, SW, EPI, RR, UU, TV>(Ws, ys, n_mat, a, e, s); \
    }
            VEGA_MV_VARIANT(1, 1) VEGA_MV_VARIANT(1, 2) VEGA_MV_VARIANT(1, 4) VEGA_MV_VARIANT(2, 1)
            VEGA_MV_VARIANT(2, 2) VEGA_MV_VARIANT(2, 4) VEGA_MV_VARIANT(4, 1) VEGA_MV_VARIANT(4, 2)
#undef VEGA_MV_VARIANT
            gpu_fail("matvec tuning: no compiled variant " + std::to_string(r) + "," + std::to_string(u));
        }
    }
    launch_nb<T, NB, SW, EPI, d.rows, d.unroll, TV>(Ws, ys, n_mat, a, e, s);
}

template <GgmlType T, bool SW>
void launch_t(const GpuMat* Ws, float* const* ys, int n_mat, const ops::Act& a, void* s) {
    // Activation rows per block: 1, 2, 4, or 8 (prompts: 8 per block, many blocks).
    const ops::Epi e;
    if (a.rows == 1) launch_shaped<T, 1, SW, kEpiNone>(Ws, ys, n_mat, a, e, s);
    else if (a.rows == 2) launch_shaped<T, 2, SW, kEpiNone>(Ws, ys, n_mat, a, e, s);
    else if (a.rows <= 4) launch_shaped<T, 4, SW, kEpiNone>(Ws, ys, n_mat, a, e, s);
    else launch_shaped<T, 8, SW, kEpiNone>(Ws, ys, n_mat, a, e, s);
}

template <bool SW>
void dispatch(const GpuMat* Ws, float* const* ys, int n_mat, const ops::Act& a, void* s) {
    // (An input written as Act::h alone serves only the tensor-core matmul: ops::reads_h_only.)
    if (is_float_type(Ws[0].type) ? !a.x : !a.q)
        gpu_fail(std::string("matvec: the input has no ") + (is_float_type(Ws[0].type) ? "f32" : "q8") +
                 " form for these weights");
    switch (Ws[0].type) {
        case GgmlType::F32: return launch_t<GgmlType::F32, SW>(Ws, ys, n_mat, a, s);
        case GgmlType::F16: return launch_t<GgmlType::F16, SW>(Ws, ys, n_mat, a, s);
        case GgmlType::BF16: return launch_t<GgmlType::BF16, SW>(Ws, ys, n_mat, a, s);
#define VEGA_MV_CASE(TT) \
    case GgmlType::TT: return launch_t<GgmlType::TT, SW>(Ws, ys, n_mat, a, s);
        VEGA_GPU_QUANT_TYPES(VEGA_MV_CASE)
#undef VEGA_MV_CASE
        default: gpu_fail(std::string("matvec: unsupported weight type ") + type_traits(Ws[0].type).name);
    }
}

// Decode with an epilogue (one activation row).
template <bool SW, int EPI>
void dispatch_epi(const GpuMat* Ws, float* const* ys, int n_mat, const ops::Act& a, const ops::Epi& e, void* s) {
    switch (Ws[0].type) {
#define VEGA_EPI_CASE(TT) \
    case GgmlType::TT: return launch_shaped<GgmlType::TT, 1, SW, EPI>(Ws, ys, n_mat, a, e, s);
        VEGA_GPU_QUANT_TYPES(VEGA_EPI_CASE)
#undef VEGA_EPI_CASE
        default: gpu_fail(std::string("matvec epilogue: unsupported weight type ") + type_traits(Ws[0].type).name);
    }
}

// q+k+v with the rope epilogue (one activation row): one launch for the three
// matrices (kMultiMat), else one per matrix (launch_nb). v of its own type: the pairs
// of VEGA_GPU_QKV_MIXED_TYPES only (q and k's shape; the others take three kernels).
template <int EPI>
bool dispatch_qkv_rope(const GpuMat* W, float* const* y, const ops::Act& a, const ops::Epi& e, void* s) {
    if (W[2].type != W[0].type) {
#define VEGA_ROPE_MIXED_CASE(TQK, TV)                                                 \
    if (W[0].type == GgmlType::TQK && W[2].type == GgmlType::TV) {                   \
        launch_shaped<GgmlType::TQK, 1, false, EPI, GgmlType::TV>(W, y, 3, a, e, s); \
        return true;                                                                 \
    }
        VEGA_GPU_QKV_MIXED_TYPES(VEGA_ROPE_MIXED_CASE)
#undef VEGA_ROPE_MIXED_CASE
        return false;
    }
    switch (W[0].type) {
#define VEGA_ROPE_CASE(TT) \
    case GgmlType::TT: launch_shaped<GgmlType::TT, 1, false, EPI>(W, y, 3, a, e, s); return true;
        VEGA_GPU_QUANT_TYPES(VEGA_ROPE_CASE)
#undef VEGA_ROPE_CASE
        default: return false;
    }
}

}  // namespace

void ops::matvec(const GpuMat& W, const Act& a, float* y, void* s) {
    if (a.rows <= 0 || gemm_dot4(W, nullptr, a, y, s) || matmul_mma(W, nullptr, a, y, s)) return;
    dispatch<false>(&W, &y, 1, a, s);
}

void ops::matvec3(const GpuMat* W, float* const* y, int n_mat, const Act& a, void* s) {
    if (a.rows <= 0 || n_mat <= 0) return;
    for (int m = 1; m < n_mat; ++m)
        if (W[m].type != W[0].type || W[m].n_in != W[0].n_in) gpu_fail("matvec3: matrices differ in type or width");
    if (gemm_dot4(W[0], nullptr, a, y[0], s)) {  // one launch per matrix
        for (int m = 1; m < n_mat; ++m)
            if (!gemm_dot4(W[m], nullptr, a, y[m], s)) dispatch<false>(&W[m], &y[m], 1, a, s);
        return;
    }
    if (matmul_mma3(W, y, n_mat, a, s)) return;  // all in one launch
    if (matmul_mma(W[0], nullptr, a, y[0], s)) {  // else one launch per matrix; a matrix it declines takes the matvec
        for (int m = 1; m < n_mat; ++m)
            if (!matmul_mma(W[m], nullptr, a, y[m], s)) dispatch<false>(&W[m], &y[m], 1, a, s);
        return;
    }
    dispatch<false>(W, y, n_mat, a, s);  // one launch, or one per matrix (!kMultiMat: launch_nb)
}

bool ops::matvec_swiglu(const GpuMat& G, const GpuMat& U, const Act& a, float* h, int8_t* hq, float* hds, void* s) {
    if (a.rows <= 0) return false;
    if (gemm_dot4(G, &U, a, h, s) || matmul_mma(G, &U, a, h, s)) return false;
    const GpuMat W[2] = {G, U};
    float* const y[2] = {h, h};
    if (hq && hds && block_epi_ok(G, a.rows)) {
        Epi e;
        e.q = hq, e.ds = hds;
        dispatch_epi<true, kEpiQ8>(W, y, 2, a, e, s);
        return true;
    }
    dispatch<true>(W, y, 2, a, s);
    return false;
}

bool ops::matvec_qkv_rope_ok(const GpuMat* W, int rows) {
    return rows == 1 && !is_float_type(W[0].type) && W[1].type == W[0].type && qkv_v_type_ok(W[0].type, W[2].type) &&
           W[1].n_in == W[0].n_in && W[2].n_in == W[0].n_in && W[0].n_chunk > 0;
}

bool ops::matvec_qkv_rope(const GpuMat* W, float* const* y, const Act& a, const QkvRope& q, int n_head, void* s) {
    const KvLayer& c = q.c;
    // (A q8_0 cache quantizes whole blocks of a head: rope_store's work, not this epilogue's.)
    if (!matvec_qkv_rope_ok(W, a.rows) || c.elem == KvElem::Q8_0 || c.hd <= 0 || c.hd % 2 || q.r.n_rot % 2 || q.r.n_rot > c.hd ||
        q.r.n_rot < 0 || W[0].n_out != int64_t(n_head) * c.hd || W[1].n_out != int64_t(c.n_kv_head) * c.hd ||
        W[2].n_out != W[1].n_out || !q.pos || !q.seq)
        return false;
    Epi e;
    e.rope = q;
    if (!q.qn && !q.kn) return dispatch_qkv_rope<kEpiRope>(W, y, a, e, s);
    // Head norms: a counter per q and k head; a head's pairs in whole blocks (at most
    // 8 pairs a block: 4 waves x 4 rows); the head in the tail's shared row.
    if (!q.count || n_head + c.n_kv_head > kQkvHeadCounters || (c.hd / 2) % 8 != 0 || c.hd > kHeadRopeMaxDim ||
        q.n_head != n_head)
        return false;
    return dispatch_qkv_rope<kEpiNormRope>(W, y, a, e, s);
}

void ops::set_matvec_tuning(const MatvecTuning& t) { tuning() = t; }

// The residual epilogue: a block epilogue whose result, the next deferred-norm input,
// has whole float4s of chunk sums of squares, at most one per lane (n_out <= 128 * kWave).
bool ops::matvec_epi_ok(const GpuMat& W, int rows) {
    return block_epi_ok(W, rows) && W.n_out % 128 == 0 && W.n_out <= 128 * kWave;
}

// The peer epilogue's kernels exist only where the target has peer sums (gfx906 compiles none).
template <bool kOn>
void dispatch_peer_epi(const GpuMat& W, float* const* y, const ops::Act& a, const ops::Epi& e, void* s) {
    if constexpr (kOn) dispatch_epi<false, kEpiPeerResidualNorm>(&W, y, 1, a, e, s);
    else gpu_fail("matvec_residual_norm: this target has no peer sums");
}

bool ops::matvec_peer_epi_ok(const GpuMat& W, int rows, const PeerChunks& p) {
    const int64_t chunks = W.n_out / kEpiRows;
    return arch::kPeerSums && p.n_ranks >= 2 && matvec_epi_ok(W, rows) && chunks <= kPeerChunks &&
           chunks <= p.max_chunks;
}

void ops::matvec_residual_norm(const GpuMat& W, const Act& a, const Epi& e, void* s) {
    if (!matvec_epi_ok(W, a.rows) || !e.x || !e.w)
        gpu_fail("matvec_residual_norm: needs one row, quantized, n_out % 128 == 0, residual and norm weight");
    float* const y[1] = {nullptr};
    if (!e.peer) return dispatch_epi<false, kEpiResidualNorm>(&W, y, 1, a, e, s);
    const PeerChunks& p = *e.peer;
    if (!matvec_peer_epi_ok(W, a.rows, p) || p.n_ranks > kPeerMaxRanks || p.rank < 0 || p.rank >= p.n_ranks ||
        !p.rounds || !p.own || p.own != p.recv[p.rank])
        gpu_fail("matvec_residual_norm: a peer exchange of " + std::to_string(p.n_ranks) + " ranks (rank " +
                 std::to_string(p.rank) + ") over " + std::to_string(W.n_out) + " rows (at most " +
                 std::to_string(std::min(p.max_chunks, kPeerChunks) * kEpiRows) + ")");
    dispatch_peer_epi<arch::kPeerSums>(W, y, a, e, s);
}

}  // namespace vega::gpu
