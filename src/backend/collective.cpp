#include "backend/collective.h"

namespace vega {

namespace {

class HostCollective final : public Collective {
public:
    HostCollective(std::vector<Backend*> b, std::string why) : be_(std::move(b)), why_(std::move(why)) {}
    std::string name() const override { return why_.empty() ? "host memory" : "host memory (" + why_ + ")"; }
    void all_reduce_sum(const std::vector<float*>& bufs, int64_t n) override {
        const size_t count = size_t(n), bytes = count * sizeof(float);
        sum_.assign(count, 0.f);
        part_.resize(count);
        for (size_t r = 0; r < be_.size(); ++r) {
            be_[r]->synchronize();
            be_[r]->download(part_.data(), bufs[r], bytes);
            for (size_t i = 0; i < count; ++i) sum_[i] += part_[i];
        }
        for (size_t r = 0; r < be_.size(); ++r) be_[r]->upload(bufs[r], sum_.data(), bytes);
    }

private:
    std::vector<Backend*> be_;
    std::string why_;
    std::vector<float> sum_, part_;
};

}  // namespace

std::unique_ptr<Collective> make_host_collective(const std::vector<Backend*>& backends, const std::string& why) {
    return std::make_unique<HostCollective>(backends, why);
}

}  // namespace vega
