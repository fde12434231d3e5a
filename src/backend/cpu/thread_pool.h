// A fixed pool of worker threads for data-parallel loops. parallel_for splits
// [0, n) into chunks handed out through an atomic counter; the calling thread
// works too. Workers spin briefly before sleeping, since per-token ops come in
// quick succession during decode (a pool used once per GPU step should not: its
// workers would hold their cores between steps).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace vega {

// A non-owning reference to a callable (no heap allocation, unlike std::function):
// parallel_for runs inside the per-token loop, which must not allocate.
class ChunkFn {
public:
    template <typename F>
    ChunkFn(const F& f) : obj_(&f), call_([](const void* o, int64_t b, int64_t e, int t) { (*static_cast<const F*>(o))(b, e, t); }) {}
    void operator()(int64_t b, int64_t e, int t) const { call_(obj_, b, e, t); }

private:
    const void* obj_;
    void (*call_)(const void*, int64_t, int64_t, int);
};

class ThreadPool {
public:
    // n_threads: total threads including the caller; <= 0: hardware. spin: how many times
    // an idle worker yields, looking for the next job, before it sleeps (0: at once).
    explicit ThreadPool(int n_threads, int spin = 20000);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    // Calls fn(begin, end, thread_index) over [0, n) in chunks of at least `grain`.
    void parallel_for(int64_t n, int64_t grain, ChunkFn fn);

private:
    void worker(int index);
    void run_chunks(int index);

    int n_threads_;
    int spin_;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> active_{0};
    std::atomic<int64_t> next_{0};
    bool stop_ = false;
    int64_t n_ = 0, chunk_ = 1;
    const ChunkFn* fn_ = nullptr;
};

}  // namespace vega
