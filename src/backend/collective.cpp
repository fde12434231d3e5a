#include "backend/collective.h"

#include <condition_variable>
#include <mutex>

#include "core/error.h"

namespace vega {

namespace {

// The ranks meet at a barrier; the last to arrive sums every rank's buffer in rank
// order through host memory and uploads the sum to each, then releases the others.
class HostCollective final : public Collective {
public:
    HostCollective(std::vector<Backend*> b, std::string why)
        : be_(std::move(b)), why_(std::move(why)), bufs_(be_.size(), nullptr) {}
    std::string name() const override { return why_.empty() ? "host memory" : "host memory (" + why_ + ")"; }
    // Where every rank's backend records host work into its graphs (the tests' recording
    // backend), the sums replay with them.
    bool capturable() const override {
        for (const Backend* b : be_)
            if (!b->records_host_calls()) return false;
        return true;
    }
    void all_reduce_sum(int r, float* buf, int64_t n) override {
        be_[size_t(r)]->host_call([this, r, buf, n] { meet(r, buf, n); });
    }
    void abort(int) override {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = true;
        cv_.notify_all();
    }
    void reset() override {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = false;
        arrived_ = 0;
    }

private:
    // Rank r's buffer joins the sum; the last to arrive sums in rank order and uploads.
    void meet(int r, float* buf, int64_t n) {
        std::unique_lock<std::mutex> lock(mu_);
        if (broken_) fail("all-reduce: another device's pass failed");
        bufs_[size_t(r)] = buf;
        if (++arrived_ < be_.size()) {
            const uint64_t gen = gen_;
            cv_.wait(lock, [&] { return gen_ != gen || broken_; });
            if (gen_ == gen) fail("all-reduce: another device's pass failed");
            return;
        }
        const size_t count = size_t(n), bytes = count * sizeof(float);
        sum_.assign(count, 0.f);
        part_.resize(count);
        for (size_t q = 0; q < be_.size(); ++q) {
            be_[q]->synchronize();
            be_[q]->download(part_.data(), bufs_[q], bytes);
            for (size_t i = 0; i < count; ++i) sum_[i] += part_[i];
        }
        for (size_t q = 0; q < be_.size(); ++q) be_[q]->upload(bufs_[q], sum_.data(), bytes);
        arrived_ = 0;
        ++gen_;
        cv_.notify_all();
    }

    std::vector<Backend*> be_;
    std::string why_;
    std::vector<float*> bufs_;
    std::vector<float> sum_, part_;
    std::mutex mu_;
    std::condition_variable cv_;
    size_t arrived_ = 0;
    uint64_t gen_ = 0;
    bool broken_ = false;
};

}  // namespace

std::unique_ptr<Collective> make_host_collective(const std::vector<Backend*>& backends, const std::string& why) {
    return std::make_unique<HostCollective>(backends, why);
}

}  // namespace vega
