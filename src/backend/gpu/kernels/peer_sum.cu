// Tensor parallel's small all-reduce over peer memory (ops::peer_sum): a decode step's
// sum is 4 x n_embd floats a row (16 KB for a 4096-wide model), a matter of latency, not
// bandwidth (against NCCL's sums: 2.5-3.7 us less a sum on 2 and 4 H200s,
// docs/PERFORMANCE.md, twenty-first session). Here each rank, in one launch:
//   1. copies its part of block b's slice into its staging slot (round e: slot e & 1);
//   2. raises flag [b][rank] = e in every peer's memory (peer_memory.h: fence, store);
//   3. waits for flag [b][q] >= e from every peer q in its own memory;
//   4. reads each rank's staged slice (its own part from buf) and adds them in rank
//      order into buf: every rank computes the same bits.
// A slot is written again two rounds later, after its peers raised their flags for the
// round between, which they do only once they have read this one. That holds for the
// whole slot only if every block takes part in every round: a block waits for its own
// counterparts' flags alone, and a sum's slices (and so which block reads where) depend
// on its size. So every launch has kPeerBlocks blocks (all in step: the same round
// numbers, the same slot), and within a launch a block keeps one slice in every round.
// A peer that never arrives traps the kernel after kPeerWaitSeconds (peer_memory.h)
// instead of hanging the device.
//
// peer_sum_norm_k is the same exchange fused with the next block's input (prep_row.h):
// tensor parallel's decode then spends one launch, not two, between a block's part and
// the next block's matmuls. There block b is row b: its own flags and round, read
// and written by that op alone (a state of its own, ops::PeerSum), so the row count may
// change from launch to launch (a block that has no row neither stages nor counts).
//
// @audit kernel=*peer_sum_k* min_waves=4
// @audit kernel=*peer_sum_norm_k* min_waves=1
#include "backend/gpu/arch/arch.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/kernels/prep_row.h"
#include "backend/gpu/peer_memory.h"

namespace vega::gpu {
namespace {

using arch::kPrepThreads;
constexpr int kThreads = 256;

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// One block's step of the exchange, after its stores to its own staging slot: each
// thread that is a peer's (active) raises that peer's flag for this rank (raise = e)
// and waits until the peer has raised this rank's (watch >= e); then the whole block
// may read the peers' round-e slots.
__device__ __forceinline__ void exchange_flags(bool active, uint32_t* raise, const uint32_t* watch, uint32_t e) {
    __syncthreads();
    if (active) {
        publish_flag(raise, e);
        wait_flag(watch, e);
        __threadfence_system();
    }
    __syncthreads();
}

// buf4 [n4] float4; grid: the blocks, each one slice of every round.
__global__ void __launch_bounds__(kThreads) peer_sum_k(ops::PeerSum p, float4* buf4, int64_t n4) {
    pdl_wait();
    const int b = int(blockIdx.x), nb = int(gridDim.x), t = int(threadIdx.x);
    __shared__ uint32_t round;
    if (t == 0) round = p.rounds[b];
    __syncthreads();
    const int64_t stage4 = p.n_stage / 4;
    const int64_t widest = n4 < stage4 ? n4 : stage4;  // the first round's length
    const int64_t per = (widest + nb - 1) / nb;        // this block's slice, the same every round
    for (int64_t off = 0; off < n4; off += stage4) {
        const uint32_t e = round + 1;
        const int64_t len = n4 - off < stage4 ? n4 - off : stage4;
        const int64_t lo = b * per < len ? b * per : len;
        const int64_t hi = lo + per < len ? lo + per : len;
        const int64_t slot = int64_t(e & 1u) * stage4;
        float4* mine = reinterpret_cast<float4*>(p.stage[p.rank]) + slot;
        for (int64_t i = lo + t; i < hi; i += kThreads) mine[i] = buf4[off + i];
        const bool peer = t < p.n_ranks && t != p.rank;
        exchange_flags(peer, peer ? p.flags[t] + b * ops::kPeerMaxRanks + p.rank : nullptr,
                       p.flags[p.rank] + b * ops::kPeerMaxRanks + (peer ? t : 0), e);
        for (int64_t i = lo + t; i < hi; i += kThreads) {
            const float4 own = buf4[off + i];
            float4 sum = p.rank == 0 ? own : load_fresh4(reinterpret_cast<const float4*>(p.stage[0]) + slot + i);
            for (int q = 1; q < p.n_ranks; ++q)
                sum = add4(sum, q == p.rank ? own : load_fresh4(reinterpret_cast<const float4*>(p.stage[q]) + slot + i));
            buf4[off + i] = sum;
        }
        __syncthreads();
        if (t == 0) round = e;
        __syncthreads();
    }
    if (t == 0) p.rounds[b] = round;
}

// grid (1, rows), rows <= kPeerBlocks, rows * n <= n_stage; kPrepThreads * V * 4 >= n.
// part [rows][n]: this rank's part. Row b: staged at slot (e & 1) + b * n, summed over
// the ranks in rank order (this rank's own from part: the bits of peer_sum), added to
// x, normed and quantized (prep_row). p is read in place, never through a reference
// (gfx906: a kernel argument whose address escapes is copied to scratch).
template <int V>
__global__ void __launch_bounds__(kPrepThreads) peer_sum_norm_k(ops::PeerSum p, float* x, const float* __restrict__ part,
                                                              const float* __restrict__ w, float eps, int64_t n,
                                                              float* __restrict__ xo, int8_t* __restrict__ q,
                                                              float* __restrict__ ds, uint16_t* __restrict__ h) {
    __shared__ double lds[kPrepThreads / kWave];
    pdl_wait();
    pdl_trigger();
    const int b = int(blockIdx.y), t = int(threadIdx.x);
    const int64_t n4 = n / 4;
    const uint32_t e = p.rounds[b] + 1;  // (read by every thread before thread 0 writes it, below)
    const int64_t slot4 = (int64_t(e & 1u) * p.n_stage + int64_t(b) * n) / 4;
    const float4* own = reinterpret_cast<const float4*>(part + int64_t(b) * n);
    float4 mine[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int64_t i4 = t + int64_t(k) * kPrepThreads;
        mine[k] = i4 < n4 ? own[i4] : make_float4(0.f, 0.f, 0.f, 0.f);
        if (i4 < n4) reinterpret_cast<float4*>(p.stage[p.rank])[slot4 + i4] = mine[k];
    }
    const bool peer = t < p.n_ranks && t != p.rank;
    exchange_flags(peer, peer ? p.flags[t] + b * ops::kPeerMaxRanks + p.rank : nullptr,
                   p.flags[p.rank] + b * ops::kPeerMaxRanks + (peer ? t : 0), e);
    float4 sum[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int64_t i4 = t + int64_t(k) * kPrepThreads;
        sum[k] = mine[k];
        if (i4 >= n4) continue;
        if (p.rank != 0) sum[k] = load_fresh4(reinterpret_cast<const float4*>(p.stage[0]) + slot4 + i4);
        for (int r = 1; r < p.n_ranks; ++r)
            sum[k] = add4(sum[k], r == p.rank ? mine[k] : load_fresh4(reinterpret_cast<const float4*>(p.stage[r]) + slot4 + i4));
    }
    prep_row<kPrepThreads, V>(x, true, [&](int k, int64_t) { return sum[k]; }, w, eps, n, b, t, xo, q, ds, h, lds);
    __syncthreads();
    if (t == 0) p.rounds[b] = e;
}

}  // namespace

bool ops::peer_sums_allowed() { return arch::kPeerSums; }

bool ops::peer_sum_norm_ok(const PeerSum& p, int rows, int64_t n) {
    return rows >= 1 && rows <= kPeerBlocks && n % 32 == 0 && int64_t(rows) * n <= p.n_stage &&
           n <= int64_t(4) * kMaxPrepVectors * kPrepThreads;
}

void ops::peer_sum_norm(const PeerSum& p, float* x, const float* part, const float* w, float eps, int rows, int64_t n,
                        float* xo, int8_t* q, float* ds, uint16_t* h, void* s) {
    if (!peer_sum_norm_ok(p, rows, n) || !w || !q || !ds)
        gpu_fail("peer_sum_norm: [" + std::to_string(rows) + "][" + std::to_string(n) + "] with a staging slot of " +
                 std::to_string(p.n_stage) + " floats (needs n % 32 == 0, at most " + std::to_string(kPeerBlocks) +
                 " rows, " + std::to_string(4 * kMaxPrepVectors * kPrepThreads) + " columns, the norm and the q8 buffers)");
    const dim3 grid(1, unsigned(rows));
    with_prep_vectors<kPrepThreads>(n, [&](auto v) {
        launch(peer_sum_norm_k<decltype(v)::value>, grid, dim3(kPrepThreads), s, p, x, part, w, eps, n, xo, q, ds, h);
    });
}

void ops::peer_sum(const PeerSum& p, float* buf, int64_t n, void* s) {
    if (n <= 0) return;
    launch(peer_sum_k, dim3(unsigned(kPeerBlocks)), dim3(kThreads), s, p, reinterpret_cast<float4*>(buf), n / 4);
}

}  // namespace vega::gpu
