#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace vega {

ThreadPool::ThreadPool(int n_threads, int spin) : spin_(std::max(0, spin)) {
    if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
        generation_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void ThreadPool::run_chunks(int index) {
    for (;;) {
        const int64_t b = next_.fetch_add(chunk_);
        if (b >= n_) break;
        (*fn_)(b, std::min(n_, b + chunk_), index);
    }
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        // Spin a little for the next job, then sleep.
        uint64_t g = generation_.load(std::memory_order_acquire);
        for (int spin = 0; g == seen && spin < spin_; ++spin) {
            std::this_thread::yield();
            g = generation_.load(std::memory_order_acquire);
        }
        if (g == seen) {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return generation_.load() != seen; });
            g = generation_.load();
        }
        seen = g;
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (stop_) return;
        }
        run_chunks(index);
        active_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, ChunkFn fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n, 0);
        return;
    }
    // About 4 chunks per thread balances uneven rows without much counter traffic.
    const int64_t chunk = std::max(grain, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
    {
        std::lock_guard<std::mutex> lk(mu_);
        n_ = n;
        chunk_ = chunk;
        fn_ = &fn;
        next_.store(0);
        active_.store(n_threads_ - 1);
        generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    run_chunks(0);
    while (active_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

}  // namespace vega
