// One host thread per device for launches that must not wait on one another: the
// decode graphs of a tensor-parallel model, each holding NCCL sums that finish only
// when every device's graph runs. A single thread that launches them in turn can
// block in the first launch (NCCL's documentation: "cudaGraphLaunch may block" with
// several GPUs per thread), which hung 2 x H100 on 2026-11-26; here device s's
// launch runs on thread s (the caller is thread 0), all at once.
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
    // n: the devices (n - 1 worker threads). spin: how many times an idle worker yields,
    // looking for the next launch, before it sleeps (decode steps come back to back).
    explicit DeviceLaunchers(int n, int spin = 4000);
    ~DeviceLaunchers();
    DeviceLaunchers(const DeviceLaunchers&) = delete;
    DeviceLaunchers& operator=(const DeviceLaunchers&) = delete;

    int size() const { return n_; }
    // Calls fn(s) for every device s in [0, size()), each on its own thread, and returns
    // once every call has returned; the first exception thrown is rethrown here.
    void run(const std::function<void(int)>& fn);

private:
    void worker(int s);

    int n_;
    int spin_;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    bool stop_ = false;
    const std::function<void(int)>* fn_ = nullptr;
    std::vector<std::exception_ptr> errors_;
};

}  // namespace vega
