// Tensor parallel's all-reduce on the GPU (make_gpu_collective): the peer-memory sums
// (kernels/peer_sum.cu) against the host's rank-order float sum, bit for bit, on every
// rank; op by op and replayed from each rank's recorded graph; sizes from one float4 to
// several staging rounds. The sum fused with the next block's input (ops::peer_sum_norm)
// against the sum and then prepare_act, byte for byte. The sum inside the o / down
// matvec's residual epilogue (Epi::peer) against the host's sums of each rank's part and
// the same epilogue's q8 form of that x. Ranks on one device named several times (any
// machine with a GPU) and, where there are two or more, on distinct devices.
#include <gtest/gtest.h>

#include <algorithm>
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
#include "backend/gpu/ops.h"
#include "backend/gpu/repack.h"
#include "backend/gpu/runtime.h"
#include "quant/quant.h"
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
        if (!gpu::ops::peer_sums_allowed()) GTEST_SKIP() << "this target's table has no peer sums (arch kPeerSums)";
        if (!gpu::rt::kernels_load_eagerly()) GTEST_SKIP() << "kernels load lazily here, so peer sums refuse to run";
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

// The runtime loads every kernel at its start (runtime.cu: a peer sum's spinning kernel
// and a lazily loaded one deadlock): the driver's own mode says eager, unless the user
// asked for lazy loading, and then the peer sums must know it.
TEST(GpuRuntime, LoadsEveryKernelAtItsStartUnlessAskedNotTo) {
    if (gpu_device_count_impl() == 0) GTEST_SKIP() << "no GPU device found";
    const auto [var, eager] = gpu::rt::kernel_loading_switch();
    const char* v = std::getenv(var);
    ASSERT_TRUE(v) << var << " unset: the runtime did not set it before main";
    if (std::strcmp(v, eager) == 0) {
        EXPECT_TRUE(gpu::rt::kernels_load_eagerly()) << var << "=" << v << " but the driver loads lazily";
    } else {
        EXPECT_FALSE(gpu::rt::kernels_load_eagerly()) << var << "=" << v << " but kernels_load_eagerly() says eager";
        if (!gpu::ops::peer_sums_allowed()) return;  // (this target has no peer sums to refuse)
        std::string why;
        std::unique_ptr<Collective> none;
        EXPECT_FALSE(gpu::make_peer_collective({0, 0}, {nullptr, nullptr}, "0,0", none, why, true))
            << "peer sums accepted lazy loading";
        EXPECT_NE(why.find("lazily"), std::string::npos) << why;
    }
}

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
// The fused sum (ops::peer_sum_norm: x += the parts' sum, then the norm and q8 of the next
// block's input) against the plain sum followed by prepare_act, byte for byte on every
// rank, and x against the host's float sums. Steps of different row counts run back to
// back in one go on each rank's thread (each row is a block with its own round counter:
// a row missing from a step must not put its block out of step with the peers').
TEST_F(PeerSum, FusedWithTheNextInputEqualsSumThenInput) {
    std::mt19937 rng(13);
    const float eps = 1e-5f;
    for (int ranks : {2, 3, 4}) {
        for (const auto& devs : layouts(ranks)) {
            for (int64_t n : {int64_t(2080), int64_t(4096), int64_t(8192)}) {
                const std::vector<int> steps{1, 5, 2, 1, 8, 3, 1};
                const int max_rows = 8, S = int(steps.size());
                const size_t rn = size_t(max_rows) * size_t(n);
                Ranks k(devs, rn * size_t(S));  // k.buf: the fused path's parts, [S][max_rows][n]
                ASSERT_TRUE(k.coll);
                if (!k.coll->name().starts_with("peer memory")) GTEST_SKIP() << "peer sums not used here: " << k.coll->name();
                ASSERT_NE(k.coll->fused_sum(0, 1, n), nullptr) << k.coll->name() << ": no fused sum of one row of " << n;
                EXPECT_EQ(k.coll->fused_sum(0, gpu::ops::kPeerBlocks + 1, 32), nullptr) << "more rows than blocks";
                EXPECT_EQ(k.coll->fused_sum(0, 1, 4016), nullptr) << "n % 32 != 0";
                bool all_fit = true;
                for (int R : steps) all_fit = all_fit && k.coll->fused_sum(0, R, n) != nullptr;
                if (!all_fit) continue;  // (8 rows of 8192 over the staging slot of 4 ranks)
                struct Bufs {
                    float *x, *part, *xo, *ds;
                    int8_t* q;
                    uint16_t* h;
                };
                auto alloc_bufs = [&](Backend& be, float* part) {
                    Bufs b;
                    b.x = static_cast<float*>(be.alloc(rn * 4, "x"));
                    b.part = part ? part : static_cast<float*>(be.alloc(rn * size_t(S) * 4, "parts"));
                    b.xo = static_cast<float*>(be.alloc(rn * 4, "xo"));
                    b.ds = static_cast<float*>(be.alloc(rn / 32 * 8, "ds"));
                    b.q = static_cast<int8_t*>(be.alloc(rn, "q"));
                    b.h = static_cast<uint16_t*>(be.alloc(rn * 2, "h"));
                    return b;
                };
                std::vector<Bufs> fused, plain;
                for (size_t r = 0; r < k.be.size(); ++r) {
                    fused.push_back(alloc_bufs(*k.be[r], k.buf[r]));
                    plain.push_back(alloc_bufs(*k.be[r], nullptr));
                }
                std::normal_distribution<float> d(0.f, 1.f);
                std::vector<float> x0(rn), w(static_cast<size_t>(n));
                for (auto& v : x0) v = d(rng);
                for (auto& v : w) v = 0.5f + std::abs(d(rng));
                std::vector<std::vector<float>> parts(size_t(ranks), std::vector<float>(rn * size_t(S)));
                for (auto& p : parts)
                    for (auto& v : p) v = d(rng) * 3.f;
                float* w_dev[8] = {};
                for (size_t r = 0; r < k.be.size(); ++r) {
                    w_dev[r] = static_cast<float*>(k.be[r]->alloc(size_t(n) * 4, "w"));
                    k.be[r]->upload(w_dev[r], w.data(), size_t(n) * 4);
                    for (Bufs* b : {&fused[r], &plain[r]}) {
                        k.be[r]->upload(b->x, x0.data(), rn * 4);
                        k.be[r]->upload(b->part, parts[r].data(), rn * size_t(S) * 4);
                    }
                }
                // The fused steps, then (a second run) the reference's: ranks sharing one device
                // must all be resident at once, and a rank's next kernel, launched early (PDL),
                // can hold the SM a 1024-thread fused block needs (4 ranks' peer_sum_k waiting
                // on 128 SMs deadlocked here, the wait limit's trap). The engine never puts
                // two ranks of the peer sums on one device (collective_peer.h).
                // On one device also a step at a time, each waited for: 7 steps back to back
                // there trapped once on 2 x H200 (2026-11-29, thought an early-launched next
                // step holding the SMs a peer's blocks needed); distinct devices keep them back
                // to back. The test trapped once more after this change, while a synth held
                // every host core: that, and likely the first trap too, was lazy kernel
                // loading, 5 of 5 runs beside a busy host, 0 of 5 eager (runtime.cu now
                // loads every kernel at the start; docs/PERFORMANCE.md, thirty-sixth session).
                const bool one_device = devs.front() == devs.back();
                auto fused_steps = [&](int r, int j0, int j1) {
                    gpu::rt::set_device(devs[size_t(r)]);
                    void* st = gpu_stream_of(*k.be[size_t(r)]);
                    const FusedSum* fs = k.coll->fused_sum(r, 1, n);
                    const Bufs& f = fused[size_t(r)];
                    for (int j = j0; j < j1; ++j)
                        gpu::ops::peer_sum_norm(fs->peer, f.x, f.part + size_t(j) * rn, w_dev[r], eps, steps[size_t(j)], n,
                                                f.xo, f.q, f.ds, f.h, st);
                    k.be[size_t(r)]->synchronize();
                };
                if (one_device)
                    for (int j = 0; j < S; ++j) k.threads->run([&](int r) { fused_steps(r, j, j + 1); });
                else
                    k.threads->run([&](int r) { fused_steps(r, 0, S); });
                for (int j = 0; j < S; ++j)  // (a step at a time, for the same reason)
                    k.threads->run([&](int r) {
                        void* st = gpu_stream_of(*k.be[size_t(r)]);
                        const Bufs& p = plain[size_t(r)];
                        const int R = steps[size_t(j)];
                        k.coll->all_reduce_sum(r, p.part + size_t(j) * rn, int64_t(R) * n);
                        gpu::rt::set_device(devs[size_t(r)]);
                        gpu::ops::prepare_act(p.x, p.part + size_t(j) * rn, w_dev[r], eps, R, n, p.xo, p.q, p.ds, p.h, st);
                        k.be[size_t(r)]->synchronize();
                    });
                // The host: x += the rank-order sum of each step's parts, row by row.
                std::vector<float> want = x0;
                for (int j = 0; j < S; ++j)
                    for (size_t i = 0; i < size_t(steps[size_t(j)]) * size_t(n); ++i) {
                        float sum = parts[0][size_t(j) * rn + i];
                        for (int q = 1; q < ranks; ++q) sum += parts[size_t(q)][size_t(j) * rn + i];
                        want[i] += sum;
                    }
                const std::string what = std::to_string(ranks) + " ranks on " +
                                         (devs.front() == devs.back() ? "one device" : "distinct devices") + ", n " +
                                         std::to_string(n);
                auto bytes = [&](Backend& be, const void* p, size_t nb) {
                    std::vector<uint8_t> out(nb);
                    be.download(out.data(), p, nb);
                    return out;
                };
                const size_t last = size_t(steps.back()) * size_t(n);  // the last step's rows
                for (size_t r = 0; r < k.be.size(); ++r) {
                    Backend& be = *k.be[r];
                    be.synchronize();
                    std::vector<float> got(rn);
                    be.download(got.data(), fused[r].x, rn * 4);
                    size_t bad = 0;
                    for (size_t i = 0; i < rn; ++i) bad += std::memcmp(&got[i], &want[i], 4) != 0;
                    EXPECT_EQ(bad, 0u) << what << ", rank " << r << ": x differs from the host's sums";
                    const Bufs &f = fused[r], &p = plain[r];
                    EXPECT_EQ(bytes(be, f.x, rn * 4), bytes(be, p.x, rn * 4)) << what << ", rank " << r << ": x";
                    EXPECT_EQ(bytes(be, f.xo, last * 4), bytes(be, p.xo, last * 4)) << what << ", rank " << r << ": xo";
                    EXPECT_EQ(bytes(be, f.q, last), bytes(be, p.q, last)) << what << ", rank " << r << ": q8";
                    EXPECT_EQ(bytes(be, f.ds, last / 32 * 8), bytes(be, p.ds, last / 32 * 8))
                        << what << ", rank " << r << ": q8 scales";
                    EXPECT_EQ(bytes(be, f.h, last * 2), bytes(be, p.h, last * 2)) << what << ", rank " << r << ": f16";
                }
                for (size_t r = 0; r < k.be.size(); ++r) {
                    Backend& be = *k.be[r];
                    for (Bufs* b : {&fused[r], &plain[r]}) {
                        be.release(b->x), be.release(b->xo), be.release(b->ds), be.release(b->q), be.release(b->h);
                    }
                    be.release(plain[r].part), be.release(w_dev[r]);
                }
            }
        }
    }
}
// The sum inside the residual epilogue (ops::matvec_residual_norm with Epi::peer, tensor
// parallel's decode): every rank multiplies its own matrix by its own input, and x (the
// same on every rank) gets the ranks' parts summed in rank order, step after step with no
// wait between (the receive slots alternate). Each rank's part comes from the same
// kernel without the exchange on x = 0 (0 + v = v); the host sums them. The q8 form, its
// scales and the sums of squares must equal, byte for byte, what the epilogue without the
// exchange makes of the final x (a zero matrix adds nothing to it).
TEST_F(PeerSum, ResidualEpilogueSumsThePartsInRankOrder) {
    std::mt19937 rng(17);
    const int n_sm = gpu::rt::device_info(0).n_sm;  // (the one-device layouts' device)
    for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_K}) {
        for (int ranks : {2, 3, 4}) {
            for (const auto& devs : layouts(ranks)) {
                const bool one_device = devs.front() == devs.back();
                // Every block of every rank resident at once on a shared device: ranks x chunks
                // <= SMs (one block an SM always fits); on distinct devices 4096 rows.
                const int chunks = std::min(128, (one_device ? n_sm / ranks : n_sm) / 4 * 4);
                const int64_t n_in = 4096, n_out = int64_t(chunks) * 32;
                setenv("VEGA_PEER_SUM_FUSE", "2", 1);  // (the epilogue's state, whatever the default)
                Ranks k(devs, size_t(n_out));
                unsetenv("VEGA_PEER_SUM_FUSE");
                ASSERT_TRUE(k.coll);
                if (!k.coll->name().starts_with("peer memory")) GTEST_SKIP() << "peer sums not used here: " << k.coll->name();
                const FusedSum* fs0 = k.coll->fused_sum(0, 1, n_out);
                ASSERT_NE(fs0, nullptr);
                ASSERT_EQ(fs0->chunks.n_ranks, ranks) << k.coll->name() << ": no epilogue exchange state";
                int fewest = gpu::ops::kPeerChunks;
                for (int dv : devs) fewest = std::min(fewest, gpu::rt::device_info(dv).n_sm);
                EXPECT_EQ(fs0->chunks.max_chunks, fewest) << "the fewest SMs of the ranks' devices";
                const std::string what = std::string(type_traits(type).name) + ", " + std::to_string(ranks) +
                                         " ranks on " + (one_device ? "one device" : "distinct devices") + ", " +
                                         std::to_string(n_out) + " rows";
                std::normal_distribution<float> d(0.f, 1.f);
                // Per rank: W_r [n_out][n_in] repacked, its input's q8 form, the part buffer.
                struct RankBufs {
                    uint8_t* w = nullptr;
                    float *in = nullptr, *xin = nullptr, *ds = nullptr, *eds = nullptr, *ss = nullptr, *norm = nullptr;
                    float* part = nullptr;  // x = 0 before the plain epilogue: then the part
                    int8_t *q = nullptr, *eq = nullptr;
                    gpu::GpuMat m;
                };
                std::vector<RankBufs> rb(devs.size());
                std::vector<float> x0(static_cast<size_t>(n_out)), norm(static_cast<size_t>(n_out));
                for (auto& v : x0) v = d(rng);
                for (auto& v : norm) v = 0.5f + std::abs(d(rng));
                const gpu::RepackLayout L = gpu::repack_layout(type, n_in, n_out);
                const size_t row_bytes = size_t(n_in / type_traits(type).block_size * type_traits(type).type_size);
                auto upload_matrix = [&](Backend& be, const std::vector<float>& wf) {
                    std::vector<uint8_t> gguf(row_bytes * size_t(n_out)), packed(L.total);
                    for (int64_t r = 0; r < n_out; ++r)
                        quant::quantize_row(type, wf.data() + r * n_in, gguf.data() + size_t(r) * row_bytes, n_in);
                    gpu::repack_matrix(type, gguf.data(), n_in, n_out, packed.data());
                    auto* dev = static_cast<uint8_t*>(be.alloc(L.total, "W"));
                    be.upload(dev, packed.data(), L.total);
                    return dev;
                };
                for (size_t r = 0; r < devs.size(); ++r) {
                    Backend& be = *k.be[r];
                    RankBufs& b = rb[r];
                    std::vector<float> wf(static_cast<size_t>(n_in * n_out)), in(static_cast<size_t>(n_in));
                    for (auto& v : wf) v = d(rng) * 0.05f;
                    for (auto& v : in) v = d(rng);
                    b.w = upload_matrix(be, wf);
                    b.m = gpu::gpu_mat_view(type, n_in, n_out, b.w);
                    b.in = static_cast<float*>(be.alloc(size_t(n_in) * 4, "in"));
                    b.xin = static_cast<float*>(be.alloc(size_t(n_in) * 4, "xin"));
                    b.q = static_cast<int8_t*>(be.alloc(size_t(n_in), "q"));
                    b.ds = static_cast<float*>(be.alloc(size_t(n_in) / 32 * 8, "ds"));
                    b.eq = static_cast<int8_t*>(be.alloc(size_t(n_out), "eq"));
                    b.eds = static_cast<float*>(be.alloc(size_t(n_out) / 32 * 8, "eds"));
                    b.ss = static_cast<float*>(be.alloc(size_t(n_out) / 32 * 4, "ss"));
                    b.norm = static_cast<float*>(be.alloc(size_t(n_out) * 4, "norm"));
                    b.part = static_cast<float*>(be.alloc(size_t(n_out) * 4, "part"));
                    be.upload(b.in, in.data(), size_t(n_in) * 4);
                    be.upload(b.norm, norm.data(), size_t(n_out) * 4);
                    be.upload(k.buf[r], x0.data(), size_t(n_out) * 4);  // x
                    const std::vector<float> zero(static_cast<size_t>(n_out), 0.f);
                    be.upload(b.part, zero.data(), size_t(n_out) * 4);
                    gpu::rt::set_device(devs[r]);
                    void* st = gpu_stream_of(be);
                    gpu::ops::prepare_act(b.in, nullptr, nullptr, 0.f, 1, n_in, b.xin, b.q, b.ds, nullptr, st);
                    gpu::ops::Act a;
                    a.q = b.q, a.ds = b.ds, a.x = b.xin, a.rows = 1, a.n = n_in;
                    gpu::ops::Epi e;
                    e.x = b.part, e.w = b.norm, e.q = b.eq, e.ds = b.eds, e.ss = b.ss;
                    ASSERT_TRUE(gpu::ops::matvec_peer_epi_ok(b.m, 1, k.coll->fused_sum(int(r), 1, n_out)->chunks)) << what;
                    gpu::ops::matvec_residual_norm(b.m, a, e, st);  // part = 0 + W_r . in
                    be.synchronize();
                }
                std::vector<std::vector<float>> parts(devs.size(), std::vector<float>(size_t(n_out)));
                for (size_t r = 0; r < devs.size(); ++r) k.be[r]->download(parts[r].data(), rb[r].part, size_t(n_out) * 4);
                // Distinct devices: the steps back to back with no wait between them (the
                // receive slots alternate under the peers' reads). One device: a step at a
                // time, each waited for: there a rank's next launch, started early (PDL),
                // holds the SMs its peer's blocks need (one block an SM), and the ranks wait
                // for each other forever (the wait limit's trap; the engine never puts two
                // ranks of the peer sums on one device, collective_peer.h).
                constexpr int kSteps = 5;
                auto steps = [&](int r, int n_steps) {
                    const RankBufs& b = rb[size_t(r)];
                    gpu::rt::set_device(devs[size_t(r)]);
                    void* st = gpu_stream_of(*k.be[size_t(r)]);
                    gpu::ops::Act a;
                    a.q = b.q, a.ds = b.ds, a.x = b.xin, a.rows = 1, a.n = n_in;
                    gpu::ops::Epi e;
                    e.x = k.buf[size_t(r)], e.w = b.norm, e.q = b.eq, e.ds = b.eds, e.ss = b.ss;
                    e.peer = &k.coll->fused_sum(r, 1, n_out)->chunks;
                    for (int j = 0; j < n_steps; ++j) gpu::ops::matvec_residual_norm(b.m, a, e, st);
                    k.be[size_t(r)]->synchronize();
                };
                if (one_device)
                    for (int j = 0; j < kSteps; ++j) k.threads->run([&](int r) { steps(r, 1); });
                else
                    k.threads->run([&](int r) { steps(r, kSteps); });
                std::vector<float> want = x0;
                for (int j = 0; j < kSteps; ++j)
                    for (size_t i = 0; i < want.size(); ++i) {
                        float sum = parts[0][i];
                        for (int q = 1; q < ranks; ++q) sum += parts[size_t(q)][i];
                        want[i] += sum;
                    }
                // The epilogue's q8 form of want: the plain epilogue on x = want with a zero matrix (rank 0).
                Backend& be0 = *k.be[0];
                RankBufs& b0 = rb[0];
                const std::vector<float> zeros(static_cast<size_t>(n_in * n_out), 0.f);
                uint8_t* wz = upload_matrix(be0, zeros);
                float* xr = static_cast<float*>(be0.alloc(size_t(n_out) * 4, "x ref"));
                int8_t* qr = static_cast<int8_t*>(be0.alloc(size_t(n_out), "q ref"));
                float* dsr = static_cast<float*>(be0.alloc(size_t(n_out) / 32 * 8, "ds ref"));
                float* ssr = static_cast<float*>(be0.alloc(size_t(n_out) / 32 * 4, "ss ref"));
                be0.synchronize();
                be0.upload(xr, want.data(), size_t(n_out) * 4);
                {
                    gpu::rt::set_device(devs[0]);
                    gpu::ops::Act a;
                    a.q = b0.q, a.ds = b0.ds, a.x = b0.xin, a.rows = 1, a.n = n_in;
                    gpu::ops::Epi e;
                    e.x = xr, e.w = b0.norm, e.q = qr, e.ds = dsr, e.ss = ssr;
                    gpu::ops::matvec_residual_norm(gpu::gpu_mat_view(type, n_in, n_out, wz), a, e, gpu_stream_of(be0));
                    be0.synchronize();
                }
                auto bytes = [&](Backend& be, const void* p, size_t nb) {
                    std::vector<uint8_t> out(nb);
                    be.download(out.data(), p, nb);
                    return out;
                };
                const auto want_x = bytes(be0, xr, size_t(n_out) * 4);
                EXPECT_EQ(std::memcmp(want_x.data(), want.data(), want_x.size()), 0) << what << ": x + 0 changed x";
                for (size_t r = 0; r < devs.size(); ++r) {
                    Backend& be = *k.be[r];
                    be.synchronize();
                    std::vector<float> got(static_cast<size_t>(n_out));
                    be.download(got.data(), k.buf[r], size_t(n_out) * 4);
                    size_t bad = 0, first = 0;
                    for (size_t i = 0; i < got.size(); ++i)
                        if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0) first = i;
                    EXPECT_EQ(bad, 0u) << what << ", rank " << r << ": x differs from the host's sums in " << bad
                                       << " rows, first " << first << " (" << got[first] << " vs " << want[first] << ")";
                    EXPECT_EQ(bytes(be, rb[r].eq, size_t(n_out)), bytes(be0, qr, size_t(n_out))) << what << ", rank " << r << ": q8";
                    EXPECT_EQ(bytes(be, rb[r].eds, size_t(n_out) / 32 * 8), bytes(be0, dsr, size_t(n_out) / 32 * 8))
                        << what << ", rank " << r << ": q8 scales";
                    EXPECT_EQ(bytes(be, rb[r].ss, size_t(n_out) / 32 * 4), bytes(be0, ssr, size_t(n_out) / 32 * 4))
                        << what << ", rank " << r << ": sums of squares";
                }
                be0.release(wz), be0.release(xr), be0.release(qr), be0.release(dsr), be0.release(ssr);
                for (size_t r = 0; r < devs.size(); ++r) {
                    Backend& be = *k.be[r];
                    RankBufs& b = rb[r];
                    for (void* p : {static_cast<void*>(b.w), static_cast<void*>(b.in), static_cast<void*>(b.xin),
                                    static_cast<void*>(b.q), static_cast<void*>(b.ds), static_cast<void*>(b.eq),
                                    static_cast<void*>(b.eds), static_cast<void*>(b.ss), static_cast<void*>(b.norm),
                                    static_cast<void*>(b.part)})
                        be.release(p);
                }
            }
        }
    }
}
#endif

}  // namespace
}  // namespace vega
