// DeviceLaunchers runs every device's call on its own thread, all at once: a call that
// waits for every other one to start (as a device's graph waits for its peers' NCCL
// sums) must return, and does so on distinct threads; exceptions reach the caller. The
// host collective's ranks, each on its own launcher thread, sum in rank order, and a
// rank that fails frees the others instead of leaving them waiting.
#include "backend/device_launchers.h"

#include "backend/backend_factory.h"
#include "backend/collective.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace vega::test {
namespace {

// Every call of 200 rounds at once, each on its own thread, then once more after a pause
// in which the workers went to sleep. spin_us: 0 = a yield count, else a time to spin.
void expect_calls_run_at_once(int64_t spin_us) {
    for (int n : {1, 2, 4}) {
        DeviceLaunchers L(n, /*spin=*/50, spin_us);
        for (int round = 0; round < 200; ++round) {
            std::atomic<int> arrived{0};
            std::atomic<bool> timed_out{false};
            std::vector<std::thread::id> ids(static_cast<size_t>(n), std::thread::id{});
            L.run([&](int s) {
                ids[size_t(s)] = std::this_thread::get_id();
                arrived.fetch_add(1);
                // A barrier: call s returns only once every call has started (2 s at most,
                // so that a launcher that ran the calls in turn fails instead of hanging).
                const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
                while (arrived.load() < n)
                    if (std::chrono::steady_clock::now() > until) {
                        timed_out = true;
                        break;
                    }
            });
            ASSERT_FALSE(timed_out) << n << " devices, round " << round << ", spin_us " << spin_us;
            EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), size_t(n));
            EXPECT_EQ(ids[0], std::this_thread::get_id()) << "device 0 runs on the caller";
        }
        // Workers that went to sleep between calls wake for the next one.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::atomic<int> calls{0};
        L.run([&](int) { calls.fetch_add(1); });
        EXPECT_EQ(calls.load(), n);
    }
}

TEST(DeviceLaunchers, EveryCallRunsAtOnceOnItsOwnThread) { expect_calls_run_at_once(0); }

TEST(DeviceLaunchers, EveryCallRunsAtOnceWithATimedSpin) { expect_calls_run_at_once(/*spin_us=*/300); }

// VEGA_LAUNCHER_SPIN_US: microseconds, 0..10000000; anything else is refused by name.
TEST(DeviceLaunchers, SpinTimeFromTheEnvironment) {
    constexpr const char* kVar = "VEGA_LAUNCHER_SPIN_US";
    unsetenv(kVar);
    EXPECT_EQ(DeviceLaunchers::spin_us_from_env(), 0);
    setenv(kVar, "2500", 1);
    EXPECT_EQ(DeviceLaunchers::spin_us_from_env(), 2500);
    for (const char* bad : {"-1", "10000001", "abc", "12us"}) {
        setenv(kVar, bad, 1);
        try {
            DeviceLaunchers::spin_us_from_env();
            ADD_FAILURE() << bad << " was taken";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(kVar), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("0..10000000"), std::string::npos) << e.what();
        }
    }
    unsetenv(kVar);
}

TEST(DeviceLaunchers, AnExceptionReachesTheCaller) {
    DeviceLaunchers L(3);
    EXPECT_THROW(L.run([](int s) {
        if (s == 2) throw std::runtime_error("device 2 failed");
    }),
                 std::runtime_error);
    std::atomic<int> calls{0};
    L.run([&](int) { calls.fetch_add(1); });  // and it still runs afterwards
    EXPECT_EQ(calls.load(), 3);
}

// n one-thread CPU backends, the host collective's ranks.
struct CpuRanks {
    explicit CpuRanks(int n) {
        for (int r = 0; r < n; ++r) owned.push_back(make_cpu_backend(1)), be.push_back(owned.back().get());
    }
    std::vector<std::unique_ptr<Backend>> owned;
    std::vector<Backend*> be;
};

TEST(HostCollective, RanksOnTheirThreadsSumInRankOrder) {
    CpuRanks ranks(3);
    auto c = make_host_collective(ranks.be);
    DeviceLaunchers L(3);
    std::vector<std::vector<float>> bufs(3);
    for (int round = 0; round < 50; ++round) {
        for (int r = 0; r < 3; ++r) bufs[size_t(r)] = {float(r + 1), 0.1f * float(r), 1e8f * float(r == 0) + float(round)};
        L.run([&](int r) { c->all_reduce_sum(r, bufs[size_t(r)].data(), 3); });
        for (int r = 0; r < 3; ++r) {
            EXPECT_EQ(bufs[size_t(r)], bufs[0]) << "the same bits on every rank";
            EXPECT_EQ(bufs[size_t(r)][0], 6.f);
            // Rank order: ((1e8 + round) + round) + round, each rounded to float.
            const float want = (1e8f + float(round) + float(round)) + float(round);
            EXPECT_EQ(bufs[size_t(r)][2], want);
        }
    }
}

TEST(HostCollective, ARankThatFailsFreesTheOthers) {
    CpuRanks ranks(3);
    auto c = make_host_collective(ranks.be);
    DeviceLaunchers L(3);
    std::vector<float> buf(3 * 4, 1.f);
    try {
        L.run([&](int r) {
            if (r == 2) {
                try {
                    throw Error("device 2: out of memory");
                } catch (...) {
                    L.keep_error();  // (as Forward::run does)
                    c->abort(r);
                    throw;
                }
            }
            c->all_reduce_sum(r, buf.data() + 4 * r, 4);
        });
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("device 2"), std::string::npos)
            << "the first error is the cause, not a waiting rank's: " << e.what();
    }
    c->reset();  // and the next pass sums again
    L.run([&](int r) { c->all_reduce_sum(r, buf.data() + 4 * r, 4); });
    EXPECT_EQ(buf[0], 3.f);
}

}  // namespace
}  // namespace vega::test
