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
// A peer that never arrives traps the kernel after ~2^24 polls (seconds) instead of
// hanging the device.
//
// @audit kernel=*peer_sum_k* min_waves=4
#include "backend/gpu/arch/arch.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/peer_memory.h"

namespace vega::gpu {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kMaxPolls = 1u << 24;

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
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
        __syncthreads();
        if (t < p.n_ranks && t != p.rank) {
            publish_flag(p.flags[t] + b * ops::kPeerMaxRanks + p.rank, e);
            const uint32_t* seen = p.flags[p.rank] + b * ops::kPeerMaxRanks + t;
            for (uint32_t polls = 0; int32_t(poll_flag(seen) - e) < 0; ++polls)
                if (polls == kMaxPolls) trap_kernel();
            __threadfence_system();
        }
        __syncthreads();
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

}  // namespace

bool ops::peer_sums_allowed() { return arch::kPeerSums; }

void ops::peer_sum(const PeerSum& p, float* buf, int64_t n, void* s) {
    if (n <= 0) return;
    launch(peer_sum_k, dim3(unsigned(kPeerBlocks)), dim3(kThreads), s, p, reinterpret_cast<float4*>(buf), n / 4);
}

}  // namespace vega::gpu
