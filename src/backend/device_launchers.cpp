#include "backend/device_launchers.h"

namespace vega {

DeviceLaunchers::DeviceLaunchers(int n, int spin) : n_(n < 1 ? 1 : n), spin_(spin) {
    for (int s = 1; s < n_; ++s) threads_.emplace_back([this, s] { worker(s); });
}

DeviceLaunchers::~DeviceLaunchers() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
}

void DeviceLaunchers::run(const std::function<void(int)>& fn) {
    error_ = nullptr;
    if (n_ > 1) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            fn_ = &fn;
            pending_.store(n_ - 1, std::memory_order_relaxed);
            generation_.fetch_add(1, std::memory_order_release);
        }
        cv_.notify_all();
    }
    try {
        fn(0);
    } catch (...) {
        keep_error();
    }
    while (pending_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    if (error_) std::rethrow_exception(error_);
}

void DeviceLaunchers::keep_error() {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
}

void DeviceLaunchers::worker(int s) {
    uint64_t seen = 0;  // (not the current generation: a run may come before this thread starts)
    for (;;) {
        // Spin (yielding) for the next generation, then sleep until it comes.
        uint64_t g = seen;
        for (int i = 0; i < spin_ && (g = generation_.load(std::memory_order_acquire)) == seen; ++i)
            std::this_thread::yield();
        if (g == seen) {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
            g = generation_.load(std::memory_order_acquire);
        }
        seen = g;
        const std::function<void(int)>* fn;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (stop_) return;
            fn = fn_;
        }
        try {
            (*fn)(s);
        } catch (...) {
            keep_error();
        }
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace vega
