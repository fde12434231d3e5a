#include "model/route_trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace vega {

namespace {
constexpr const char* kMagic = "vega-routes 1";
}

RouteTrace RouteTrace::recorder() { return RouteTrace(); }

RouteTrace RouteTrace::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("cannot read routes file '{}'", path);
    RouteTrace t;
    t.recording_ = false;
    t.path_ = path;
    std::string line;
    if (!std::getline(in, line) || line != kMagic)
        fail("{}:1: not a routes file (expected the line '{}')", path, kMagic);
    int line_no = 1;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        std::istringstream ss(line);
        Entry e;
        if (!(ss >> e.layer >> e.rows >> e.n_used) || e.layer < 0 || e.rows < 1 || e.n_used < 1 ||
            e.n_used > kMaxExpertsUsed)
            fail("{}:{}: expected 'layer rows n_used' (n_used 1..{}) then the ids", path, line_no, kMaxExpertsUsed);
        const size_t n = size_t(e.rows) * size_t(e.n_used);
        e.ids.resize(n);
        for (size_t i = 0; i < n; ++i)
            if (!(ss >> e.ids[i]) || e.ids[i] < 0 || e.ids[i] >= kMaxExperts)
                fail("{}:{}: expert id {} of {} is missing or outside [0, {})", path, line_no, i, n, kMaxExperts);
        std::string extra;
        if (ss >> extra) fail("{}:{}: more than {} ids", path, line_no, n);
        t.entries_.push_back(std::move(e));
    }
    return t;
}

void RouteTrace::add(int layer, int rows, int n_used, const int32_t* ids) {
    Entry e;
    e.layer = layer, e.rows = rows, e.n_used = n_used;
    e.ids.assign(ids, ids + size_t(rows) * size_t(n_used));
    entries_.push_back(std::move(e));
    ++stats_.entries;
    stats_.row_layers += rows;
}

void RouteTrace::save(const std::string& path) const {
    std::ofstream out(path);
    if (!out) fail("cannot write routes file '{}'", path);
    out << kMagic << '\n';
    for (const Entry& e : entries_) {
        out << e.layer << ' ' << e.rows << ' ' << e.n_used;
        for (int32_t id : e.ids) out << ' ' << id;
        out << '\n';
    }
    if (!out) fail("error writing routes file '{}'", path);
}

void RouteTrace::override_routes(Backend& be, int layer, const ExpertRouting& r, int rows, const float* logits,
                                 int32_t* ids, float* w) {
    if (recording_) fail("route trace: a recording trace cannot replay");
    const size_t index = next_;
    if (index >= entries_.size())
        fail("{}: all {} recorded entries are used, but this run routes again (layer {}, {} rows): the runs differ",
             path_, entries_.size(), layer, rows);
    const Entry& e = entries_[next_++];
    if (e.layer != layer || e.rows != rows || e.n_used != r.n_used)
        fail("{}: entry {} is layer {}, {} rows of {} experts, but this run routes layer {}, {} rows of {}: the runs "
             "differ (same model, prompt and batch size?)",
             path_, index + 1, e.layer, e.rows, e.n_used, layer, rows, r.n_used);
    const int E = r.n_expert, K = r.n_used;
    const size_t RK = size_t(rows) * size_t(K);
    logits_.resize(size_t(rows) * size_t(E));
    own_ids_.resize(RK);
    w_.resize(RK);
    be.synchronize();
    be.download(logits_.data(), logits, logits_.size() * sizeof(float));
    be.download(own_ids_.data(), ids, RK * sizeof(int32_t));
    for (int t = 0; t < rows; ++t) {
        const float* l = logits_.data() + size_t(t) * E;
        const int32_t* rec = e.ids.data() + size_t(t) * K;
        const int32_t* own = own_ids_.data() + size_t(t) * K;
        for (int j = 0; j < K; ++j) {
            if (rec[j] >= E) fail("{}: entry {} row {}: expert {} of a layer of {}", path_, index + 1, t, rec[j], E);
            for (int i = 0; i < j; ++i)
                if (rec[i] == rec[j]) fail("{}: entry {} row {}: expert {} chosen twice", path_, index + 1, t, rec[j]);
        }
        float cut = INFINITY;  // this side's k-th best logit
        for (int j = 0; j < K; ++j) cut = std::min(cut, l[own[j]]);
        bool differs = false;
        float gap = 0.f;
        for (int j = 0; j < K; ++j) {
            if (std::find(own, own + K, rec[j]) != own + K) continue;
            differs = true;
            gap = std::max(gap, std::isnan(l[rec[j]]) ? INFINITY : cut - l[rec[j]]);
        }
        if (!differs) continue;
        ++stats_.differing;
        double mean = 0, var = 0;
        for (int x = 0; x < E; ++x) mean += l[x];
        mean /= E;
        for (int x = 0; x < E; ++x) var += (l[x] - mean) * (l[x] - mean);
        const float sd = float(std::sqrt(var / E));
        stats_.widest_gap = std::max(stats_.widest_gap, gap);
        stats_.widest_rel_gap = std::max(stats_.widest_rel_gap, sd > 0 ? gap / sd : INFINITY);
    }
    for (int t = 0; t < rows; ++t)
        weigh_experts_host(logits_.data() + size_t(t) * E, r, e.ids.data() + size_t(t) * K, w_.data() + size_t(t) * K);
    be.upload(ids, e.ids.data(), RK * sizeof(int32_t));
    be.upload(w, w_.data(), RK * sizeof(float));
    ++stats_.entries;
    stats_.row_layers += rows;
}

void RouteTrace::check_all_replayed() const {
    if (!recording_ && next_ != entries_.size())
        fail("{}: {} of {} recorded entries were not replayed: the runs differ", path_, entries_.size() - next_,
             entries_.size());
}

std::string RouteTrace::summary() const {
    if (recording_)
        return fmt::format("recorded the experts of {} rows x layers ({} forward entries)", stats_.row_layers,
                           stats_.entries);
    return fmt::format("replayed the experts of {} rows x layers; {} differ from this device's own top k, widest gap "
                       "{:.4g} logits ({:.4g} standard deviations of the row's router logits)",
                       stats_.row_layers, stats_.differing, stats_.widest_gap, stats_.widest_rel_gap);
}

}  // namespace vega
