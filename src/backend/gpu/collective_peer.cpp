// Tensor parallel's all-reduce with the small sums read directly from the peers' memory
// (kernels/peer_sum.cu, one launch) and the large ones (prompt chunks) through NCCL/RCCL
// where it is available: a decode step's sums are 16-32 KB, where a ring's latency,
// not bandwidth, is the cost; a prompt's are megabytes, where the ring's halved traffic
// wins on 4 and more devices. Without NCCL every sum takes the peer path, in rounds of
// its staging size. A device named twice (tensor parallel's checks on one GPU) keeps the
// host collective (collective_peer.h says why).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/gpu/collective_peer.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "core/env.h"
#include "core/error.h"

namespace vega::gpu {

namespace {

class PeerCollective final : public Collective {
public:
    PeerCollective(std::vector<int> devs, std::vector<void*> streams, std::string list, std::unique_ptr<Collective> large,
                   int64_t n_stage, int fuse)
        : devs_(std::move(devs)), streams_(std::move(streams)), list_(std::move(list)), large_(std::move(large)) {
        try {
            ranks_ = make_states(n_stage);
            if (fuse >= 1) {
                const std::vector<ops::PeerSum> rows = make_states(n_stage);
                // (n_ranks 0: no epilogue sums, FusedSum::chunks unused)
                const std::vector<ops::PeerChunks> chunks =
                    fuse >= 2 ? make_chunk_states() : std::vector<ops::PeerChunks>(rows.size());
                for (size_t r = 0; r < rows.size(); ++r) fused_.push_back(FusedSum{rows[r], chunks[r]});
            }
        } catch (...) {
            release();
            throw;
        }
    }
    ~PeerCollective() override { release(); }
    std::string name() const override {
        const std::string kb = std::to_string(ranks_.front().n_stage * 4 / 1024);
        return "peer memory over devices " + list_ +
               (large_ ? " (sums of up to " + kb + " KiB; larger ones through " + large_->name() + ")"
                       : " (every sum; rounds of " + kb + " KiB)") +
               (fused_.empty()                       ? ""
                : fused_.front().chunks.n_ranks > 0 ? ", decode sums in the o / down kernel's epilogue"
                                                     : ", decode sums fused with the next norm");
    }
    void all_reduce_sum(int r, float* buf, int64_t n) override {
        const bool fits = n % 4 == 0 && reinterpret_cast<uintptr_t>(buf) % 16 == 0;  // (float4 loads)
        if (large_ && (n > ranks_.front().n_stage || !fits)) return large_->all_reduce_sum(r, buf, n);
        if (!fits)
            fail("peer sum: {} floats at {} (needs a multiple of 4 at a 16-byte boundary)", n, static_cast<void*>(buf));
        rt::set_device(devs_[size_t(r)]);
        ops::peer_sum(ranks_[size_t(r)], buf, n, streams_[size_t(r)]);
    }
    void abort(int r) override {
        if (large_) large_->abort(r);
    }
    void reset() override {
        if (large_) large_->reset();
    }
    bool capturable() const override { return !large_ || large_->capturable(); }
    const FusedSum* fused_sum(int r, int rows, int64_t n) const override {
        if (fused_.empty() || !ops::peer_sum_norm_ok(fused_[size_t(r)].peer, rows, n)) return nullptr;
        return &fused_[size_t(r)];
    }

private:
    // Each rank's exchange buffers on its device: data (slots), flags and round counters,
    // the last two zeroed. Both states below are made of them.
    struct Exchange {
        std::vector<void*> data;
        std::vector<uint32_t*> flags, rounds;
    };
    // (flag_bytes 0: no flags; zero_data: the data zeroed too, for round words.)
    Exchange alloc_exchange(size_t data_bytes, size_t flag_bytes, size_t round_bytes, bool zero_data = false) {
        Exchange x;
        for (size_t r = 0; r < devs_.size(); ++r) {
            rt::set_device(devs_[r]);
            x.data.push_back(alloc(data_bytes, r));
            x.flags.push_back(flag_bytes ? static_cast<uint32_t*>(alloc(flag_bytes, r)) : nullptr);
            x.rounds.push_back(static_cast<uint32_t*>(alloc(round_bytes, r)));
            if (zero_data) rt::memset(x.data[r], 0, data_bytes, streams_[r]);
            if (flag_bytes) rt::memset(x.flags[r], 0, flag_bytes, streams_[r]);
            rt::memset(x.rounds[r], 0, round_bytes, streams_[r]);
            rt::stream_sync(streams_[r]);
        }
        return x;
    }
    // Rank r's copy of a state every rank shares: its rank and its own round counters.
    template <class State>
    static std::vector<State> per_rank(const State& shared, const std::vector<uint32_t*>& rounds) {
        std::vector<State> out;
        for (size_t r = 0; r < rounds.size(); ++r) {
            State p = shared;
            p.rank = int(r);
            p.rounds = rounds[r];
            out.push_back(p);
        }
        return out;
    }
    // One state per rank (staging slots, flags, rounds on each device, zeroed), every
    // rank seeing every rank's slots and flags.
    std::vector<ops::PeerSum> make_states(int64_t n_stage) {
        const Exchange x = alloc_exchange(size_t(2 * n_stage) * sizeof(float), kFlagBytes, kRoundBytes);
        ops::PeerSum shared;
        shared.n_ranks = int(devs_.size());
        shared.n_stage = n_stage;
        for (size_t r = 0; r < devs_.size(); ++r)
            shared.stage[r] = static_cast<float*>(x.data[r]), shared.flags[r] = x.flags[r];
        return per_rank(shared, x.rounds);
    }
    // The residual epilogue's exchange (ops::PeerChunks): per rank its receive words (a part
    // and its round in one word, so no flags) and rounds on its device (zeroed), every rank
    // seeing every rank's.
    std::vector<ops::PeerChunks> make_chunk_states() {
        const size_t n = devs_.size();
        const Exchange x = alloc_exchange(2 * n * size_t(ops::kPeerChunks) * 32 * sizeof(uint64_t), 0,
                                          size_t(ops::kPeerChunks) * sizeof(uint32_t), true);
        ops::PeerChunks shared;
        shared.n_ranks = int(n);
        shared.max_chunks = ops::kPeerChunks;
        for (int d : devs_) shared.max_chunks = std::min(shared.max_chunks, rt::device_info(d).n_sm);
        for (size_t r = 0; r < n; ++r) shared.recv[r] = static_cast<uint64_t*>(x.data[r]);
        std::vector<ops::PeerChunks> states = per_rank(shared, x.rounds);
        for (ops::PeerChunks& s : states) s.own = s.recv[s.rank];
        return states;
    }
    static constexpr size_t kFlagBytes = size_t(ops::kPeerBlocks) * ops::kPeerMaxRanks * sizeof(uint32_t);
    static constexpr size_t kRoundBytes = size_t(ops::kPeerBlocks) * sizeof(uint32_t);
    void release() {
        for (auto& [dev, ptr] : owned_) {
            rt::set_device(dev);
            rt::free(ptr);
        }
        owned_.clear();
    }
    void* alloc(size_t bytes, size_t r) {
        void* p = rt::malloc(bytes);
        if (!p) fail("peer sum: out of device memory on device {} ({} bytes)", devs_[r], bytes);
        owned_.push_back({devs_[r], p});
        return p;
    }

    std::vector<int> devs_;
    std::vector<void*> streams_;
    std::string list_;
    std::unique_ptr<Collective> large_;
    std::vector<ops::PeerSum> ranks_;
    std::vector<FusedSum> fused_;  // empty: no fused sums (VEGA_PEER_SUM_FUSE=0)
    std::vector<std::pair<int, void*>> owned_;
};

}  // namespace

std::unique_ptr<Collective> make_peer_collective(const std::vector<int>& devs, const std::vector<void*>& streams,
                                                 const std::string& list, std::unique_ptr<Collective>& large,
                                                 std::string& why, bool shared_device_ok) {
    if (!ops::peer_sums_allowed()) {
        why = "peer sums: not on this target";
        return nullptr;
    }
    if (!env::flag("VEGA_PEER_SUMS", true)) {
        why = "peer sums off (VEGA_PEER_SUMS=0)";
        return nullptr;
    }
    if (!rt::kernels_load_eagerly()) {
        why = "peer sums off: kernels load lazily (CUDA_MODULE_LOADING / HIP_ENABLE_DEFERRED_LOADING), and a "
              "rank's first launch could then wait on its peer's spinning sum";
        return nullptr;
    }
    if (devs.size() < 2 || devs.size() > size_t(ops::kPeerMaxRanks)) {
        why = "peer sums: 2 to " + std::to_string(ops::kPeerMaxRanks) + " devices";
        return nullptr;
    }
    for (size_t i = 0; i < devs.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (devs[i] == devs[j] && !shared_device_ok) {
                why = "peer sums: device " + std::to_string(devs[i]) + " is named twice";
                return nullptr;
            }
    for (size_t i = 0; i < devs.size(); ++i)
        for (size_t j = 0; j < devs.size(); ++j)
            if (devs[i] != devs[j] && !rt::enable_peer_access(devs[i], devs[j])) {
                why = "peer sums: device " + std::to_string(devs[i]) + " cannot reach device " +
                      std::to_string(devs[j]) + "'s memory";
                return nullptr;
            }
    // A sum takes the peer path when each rank reads at most VEGA_PEER_SUM_KB from its
    // peers (default 512: one row to 16 rows of an 8192-wide model over 2 devices, 5 rows
    // over 4); a library takes the larger ones. On 4 H200s (2026-11-27) 16 rows of 8192
    // (1.5 MB read a rank) were 5% slower than NCCL's sums, 16 rows of 2048 (384 KB) 4.6%
    // faster, a single row 2.5-3.7 us faster a sum.
    const int kb = env::integer_in("VEGA_PEER_SUM_KB", 512, 16, 1 << 20, "KiB a device reads from its peers in one sum");
    const int64_t n_stage = int64_t(kb) * 1024 / 4 / int64_t(devs.size() - 1) / 4 * 4;
    // VEGA_PEER_SUM_FUSE (the A/B of the decode sums): 0, every sum a launch of its own
    // before the next block's input kernel; 1, the sum and the next input one kernel
    // after the part's matvec (ops::peer_sum_norm); 2 (default), the sum inside the o /
    // down kernel's epilogue where it serves, else as 1 (2 x H200, llama3-8b Q4_K_M tg128:
    // 612.49 t/s against 572.97 with 1, docs/PERFORMANCE.md thirty-fourth session).
    const int fuse = env::integer_in("VEGA_PEER_SUM_FUSE", 2, 0, 2,
                                     "decode sums: 0 own launches, 1 with the next input, 2 in the o / down epilogue");
    return std::make_unique<PeerCollective>(devs, streams, list, std::move(large), n_stage, fuse);
}

}  // namespace vega::gpu
