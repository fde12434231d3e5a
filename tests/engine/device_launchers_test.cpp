// DeviceLaunchers runs every device's call on its own thread, all at once: a call that
// waits for every other one to start (as a device's graph waits for its peers' NCCL
// sums) must return, and does so on distinct threads; exceptions reach the caller.
#include "backend/device_launchers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace vega::test {
namespace {

TEST(DeviceLaunchers, EveryCallRunsAtOnceOnItsOwnThread) {
    for (int n : {1, 2, 4}) {
        DeviceLaunchers L(n, /*spin=*/50);
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
            ASSERT_FALSE(timed_out) << n << " devices, round " << round;
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

}  // namespace
}  // namespace vega::test
