// One host thread per device, for the work of a tensor-parallel model that must not wait
// on one another: each device's pass, whose all-reduce calls meet those of the other
// devices (NCCL's multi-thread mode), and each device's decode graph, recorded and
// launched on its own thread (from one thread, NCCL's documentation warns that
// "cudaGraphLaunch may block"; captured from one thread, the capture never ended on
// 2 x H100, 2026-11-27). Device s's call runs on thread s (the caller is thread 0).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vega {

class DeviceLaunchers {
public:
    // n: the devices (n - 1 worker threads). An idle worker yields, looking for the next
    // launch, before it sleeps (decode steps come back to back): spin times, or with
    // spin_us > 0 for that many microseconds. A worker asleep is woken through the
    // condition variable, tens of microseconds on a virtual machine's idle core, and device
    // s's launch waits for that.
    static constexpr int kSpinYields = 4000;
    explicit DeviceLaunchers(int n, int spin = kSpinYields, int64_t spin_us = 0);
    // VEGA_LAUNCHER_SPIN_US (0..10000000; unset: 0, the yield count), for the constructor's
    // spin_us. Throws std::invalid_argument naming the variable and the range for any other value.
    static int64_t spin_us_from_env();
    ~DeviceLaunchers();
    DeviceLaunchers(const DeviceLaunchers&) = delete;
    DeviceLaunchers& operator=(const DeviceLaunchers&) = delete;

    int size() const { return n_; }
    // Calls fn(s) for every device s in [0, size()), each on its own thread, and returns
    // once every call has returned; the exception thrown first (in time) is rethrown here.
    void run(const std::function<void(int)>& fn);
    // In a catch block inside fn: keeps the current exception as run()'s error if none is
    // kept yet. A call that will make the others fail (Collective::abort) keeps its own
    // cause first, so that run() rethrows the cause and not a peer's "another failed".
    void keep_error();

private:
    void worker(int s);

    int n_;
    int spin_;
    int64_t spin_us_;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    bool stop_ = false;
    const std::function<void(int)>* fn_ = nullptr;
    std::mutex error_mu_;
    std::exception_ptr error_;  // the first thrown
};

}  // namespace vega
