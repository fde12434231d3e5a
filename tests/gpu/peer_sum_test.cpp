// Tensor parallel's all-reduce on the GPU (make_gpu_collective): the peer-memory sums
// (kernels/peer_sum.cu) against the host's rank-order float sum, bit for bit, on every
// rank; op by op and replayed from each rank's recorded graph; sizes from one float4 to
// several staging rounds. Ranks on one device named several times (any machine with a
// GPU) and, where there are two or more, on distinct devices.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "backend/collective.h"
#include "backend/device_launchers.h"
#ifdef VEGA_HAVE_GPU
#include "backend/gpu/collective_peer.h"
#include "backend/gpu/gpu_backend.h"
#endif

namespace vega {
namespace {

#ifdef VEGA_HAVE_GPU
// Ranks on devs, their collective, and one buffer of `cap` floats per rank. Distinct
// devices: the engine's choice (make_gpu_collective); one device named several times:
// the peer sums themselves (the engine keeps the host collective there).
struct Ranks {
    std::vector<std::unique_ptr<Backend>> be;
    std::vector<Backend*> raw;
    std::unique_ptr<Collective> coll;
    std::vector<float*> buf;
    std::unique_ptr<DeviceLaunchers> threads;

    Ranks(const std::vector<int>& devs, size_t cap) {
        for (int d : devs) {
            be.push_back(make_gpu_backend(d));
            raw.push_back(be.back().get());
            buf.push_back(static_cast<float*>(be.back()->alloc(cap * 4, "peer sum test")));
        }
        std::string why;
        std::vector<void*> streams;
        for (Backend* b : raw) streams.push_back(gpu_stream_of(*b));
        std::unique_ptr<Collective> none;
        std::string list;
        for (int d : devs) list += (list.empty() ? "" : ",") + std::to_string(d);
        coll = devs.front() == devs.back() ? gpu::make_peer_collective(devs, streams, list, none, why, true)
                                           : make_gpu_collective(raw, why);
        threads = std::make_unique<DeviceLaunchers>(int(devs.size()));
    }
    ~Ranks() {
        for (size_t r = 0; r < be.size(); ++r) be[r]->release(buf[r]);
    }
};

// parts[r] [n]: random, different per rank; want: their sum in rank order.
std::vector<std::vector<float>> random_parts(int ranks, size_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<std::vector<float>> parts(static_cast<size_t>(ranks), std::vector<float>(n));
    for (auto& p : parts)
        for (auto& x : p) x = d(rng) * (1.f + float(rng() % 1000));
    return parts;
}
std::vector<float> rank_order_sum(const std::vector<std::vector<float>>& parts) {
    std::vector<float> s = parts[0];
    for (size_t r = 1; r < parts.size(); ++r)
        for (size_t i = 0; i < s.size(); ++i) s[i] += parts[r][i];
    return s;
}
std::vector<float> magnitudes(const std::vector<std::vector<float>>& parts) {
    std::vector<float> m(parts[0].size(), 0.f);
    for (const auto& p : parts)
        for (size_t i = 0; i < m.size(); ++i) m[i] += std::abs(p[i]);
    return m;
}

// Every rank's buffer equals want bit for bit (exact) or, for a library's sum (its order
// is its own), within 1e-6 of scale[i] (the sum of the parts' magnitudes).
void expect_sums(Ranks& k, const std::vector<float>& want, bool exact, const std::string& what,
                 const std::vector<float>& scale = {}) {
    std::vector<float> got(want.size());
    for (size_t r = 0; r < k.be.size(); ++r) {
        k.be[r]->synchronize();
        k.be[r]->download(got.data(), k.buf[r], got.size() * 4);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            const bool ok = exact ? std::memcmp(&got[i], &want[i], 4) == 0
                                  : std::abs(got[i] - want[i]) <= 1e-6f * scale[i];
            if (!ok && bad++ == 0) first = i;
        }
        EXPECT_EQ(bad, 0u) << what << ": rank " << r << ", " << bad << " of " << want.size() << " differ, first at "
                           << first << " (" << got[first] << " vs " << want[first] << ")";
    }
}

void upload_parts(Ranks& k, const std::vector<std::vector<float>>& parts) {
    for (size_t r = 0; r < k.be.size(); ++r) k.be[r]->upload(k.buf[r], parts[r].data(), parts[r].size() * 4);
}

class PeerSum : public ::testing::Test {
protected:
    void SetUp() override {
        if (gpu_device_count_impl() == 0) GTEST_SKIP() << "no GPU device found";
    }
    // The device lists to try with `ranks` ranks: one device named `ranks` times and,
    // where the machine has as many, distinct devices.
    static std::vector<std::vector<int>> layouts(int ranks) {
        std::vector<std::vector<int>> out{std::vector<int>(size_t(ranks), 0)};
        if (gpu_device_count_impl() >= ranks) {
            std::vector<int> d;
            for (int r = 0; r < ranks; ++r) d.push_back(r);
            out.push_back(d);
        }
        return out;
    }
};

TEST_F(PeerSum, SumsInRankOrderOnEveryRankOpByOp) {
    // 16 KiB read from the peers a sum: on 2 ranks a staging slot of 4096 floats, so 4100
    // floats go in two rounds and 12300 in four (more on 3 and 4 ranks).
    setenv("VEGA_PEER_SUM_KB", "16", 1);
    std::mt19937 rng(7);
    for (int ranks : {2, 3, 4}) {
        for (const auto& devs : layouts(ranks)) {
            const bool one_device = devs.front() == devs.back();
            Ranks k(devs, 1 << 16);
            ASSERT_TRUE(k.coll) << "no GPU collective";
            if (!k.coll->name().starts_with("peer memory")) {
                unsetenv("VEGA_PEER_SUM_KB");
                GTEST_SKIP() << "peer sums not used here: " << k.coll->name();
            }
            for (size_t n : {size_t(4), size_t(64), size_t(4096), size_t(4100), size_t(12300), size_t(1 << 16)}) {
                // Over the staging size on distinct devices the library sums (if loaded).
                const size_t stage = size_t(16 * 1024 / 4 / (ranks - 1) / 4 * 4);
                const bool exact = one_device || n <= stage || k.coll->name().find("every sum") != std::string::npos;
                for (int rep = 0; rep < 3; ++rep) {
                    const auto parts = random_parts(ranks, n, rng);
                    upload_parts(k, parts);
                    k.threads->run([&](int r) { k.coll->all_reduce_sum(r, k.buf[size_t(r)], int64_t(n)); });
                    expect_sums(k, rank_order_sum(parts), exact,
                                std::to_string(ranks) + " ranks on " + (one_device ? "one device" : "distinct devices") +
                                    ", n " + std::to_string(n) + ", rep " + std::to_string(rep),
                                magnitudes(parts));
                }
            }
        }
    }
    unsetenv("VEGA_PEER_SUM_KB");
}

// Sums of two sizes (one block's slice and 32 blocks' worth) enqueued back to back with
// no wait between them, as decode steps and batches alternate in a server: every launch
// must keep all its blocks in step (kernels/peer_sum.cu), or a slot is rewritten while a
// slower peer still reads it. Each sum adds the ranks' equal buffers: the host repeats
// the same float additions.
TEST_F(PeerSum, SumsOfAlternatingSizesBackToBack) {
    std::mt19937 rng(5);
    for (int ranks : {2, 4}) {
        for (const auto& devs : layouts(ranks)) {
            const size_t small = 4096, large = 40000;  // (under the staging slot on 4 ranks: no library)
            Ranks k(devs, small + large);
            ASSERT_TRUE(k.coll);
            if (!k.coll->name().starts_with("peer memory")) GTEST_SKIP() << "peer sums not used here: " << k.coll->name();
            std::uniform_real_distribution<float> d(-1.f, 1.f);
            std::vector<float> init(small + large);
            for (auto& x : init) x = d(rng);
            std::vector<std::vector<float>> parts(size_t(ranks), init);  // every rank the same: the sums stay equal
            upload_parts(k, parts);
            constexpr int kPairs = 12;
            k.threads->run([&](int r) {
                float* b = k.buf[size_t(r)];
                for (int i = 0; i < kPairs; ++i) {
                    k.coll->all_reduce_sum(r, b, int64_t(small));
                    k.coll->all_reduce_sum(r, b + small, int64_t(large));
                }
            });
            std::vector<float> want = init;
            for (int i = 0; i < kPairs; ++i)
                for (float& x : want) {
                    const float v = x;
                    float acc = v;
                    for (int q = 1; q < ranks; ++q) acc += v;
                    x = acc;
                }
            expect_sums(k, want, true, std::to_string(ranks) + " ranks, " + k.coll->name());
        }
    }
}

TEST_F(PeerSum, SumsReplayedFromEachRanksGraph) {
    std::mt19937 rng(11);
    for (const auto& devs : layouts(2)) {
        const size_t n = 4096;
        Ranks k(devs, n);
        ASSERT_TRUE(k.coll);
        if (!k.coll->capturable() || !k.be[0]->supports_capture()) GTEST_SKIP() << k.coll->name() << ": no graphs";
        // Each rank records three sums on its own thread (as Session does), then the
        // graphs are launched, each by its rank's thread, with new parts each time.
        std::vector<int> graph(devs.size(), -1);
        k.threads->run([&](int r) {
            Backend& be = *k.be[size_t(r)];
            be.capture_begin();
            for (int i = 0; i < 3; ++i) k.coll->all_reduce_sum(r, k.buf[size_t(r)], int64_t(n));
            graph[size_t(r)] = be.capture_end();
        });
        for (int rep = 0; rep < 5; ++rep) {
            auto parts = random_parts(2, n, rng);
            upload_parts(k, parts);
            k.threads->run([&](int r) { k.be[size_t(r)]->replay(graph[size_t(r)]); });
            // Three sums of the same parts: s, then 2s (s + s), then 4s: exact in floats.
            std::vector<float> want = rank_order_sum(parts);
            for (float& x : want) x *= 4.f;
            expect_sums(k, want, true, k.coll->name() + ", replay " + std::to_string(rep));
        }
        for (size_t r = 0; r < devs.size(); ++r) k.be[r]->release_graph(graph[r]);
    }
}
#endif

}  // namespace
}  // namespace vega
