#include "backend/device_launchers.h"

#include <chrono>

#include "core/env.h"

namespace vega {

DeviceLaunchers::DeviceLaunchers(int n, int spin, int64_t spin_us)
    : n_(n < 1 ? 1 : n), spin_(spin), spin_us_(spin_us < 0 ? 0 : spin_us) {
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

int64_t DeviceLaunchers::spin_us_from_env() {
    return env::integer_in("VEGA_LAUNCHER_SPIN_US", 0, 0, 10000000, "microseconds an idle device thread spins");
}

void DeviceLaunchers::keep_error() {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
}

void DeviceLaunchers::worker(int s) {
    uint64_t seen = 0;  // (not the current generation: a run may come before this thread starts)
    for (;;) {
        // Spin (yielding) for the next generation, then sleep until it comes.
        // spin_ yields, or with spin_us_ until the clock (read every 64 yields) passes it.
        uint64_t g = seen;
        using Clock = std::chrono::steady_clock;
        const Clock::time_point until =
            spin_us_ > 0 ? Clock::now() + std::chrono::microseconds(spin_us_) : Clock::time_point{};
        for (int i = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++i) {
            if (spin_us_ > 0 ? i % 64 == 63 && Clock::now() >= until : i >= spin_) break;
            std::this_thread::yield();
        }
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
