#include "model/route_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace vega {

namespace {

constexpr const char* kMagic = "vega-routes 2";

// The standard deviation of a row of n values.
float row_sd(const float* l, int n) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i) mean += l[i];
    mean /= n;
    for (int i = 0; i < n; ++i) var += (l[i] - mean) * (l[i] - mean);
    return float(std::sqrt(var / n));
}

}  // namespace

RouteTrace RouteTrace::recorder() { return RouteTrace(); }

RouteTrace RouteTrace::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("cannot read routes file '{}'", path);
    RouteTrace t;
    t.recording_ = false;
    t.path_ = path;
    std::string line;
    if (!std::getline(in, line) || line != kMagic)
        fail("{}:1: not a routes file (expected the line '{}', as vega eval --routes-out writes)", path, kMagic);
    int line_no = 1;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        std::istringstream head(line);
        Entry e;
        std::string extra;
        if (!(head >> e.layer >> e.rows >> e.n_used >> e.n_expert) || (head >> extra) || e.layer < 0 || e.rows < 1 ||
            e.n_used < 1 || e.n_used > kMaxExpertsUsed || e.n_expert < e.n_used || e.n_expert > kMaxExperts)
            fail("{}:{}: expected an entry's line 'layer rows n_used n_expert' (n_used 1..{}, n_expert n_used..{})",
                 path, line_no, kMaxExpertsUsed, kMaxExperts);
        const size_t K = size_t(e.n_used), E = size_t(e.n_expert);
        e.ids.resize(size_t(e.rows) * K);
        e.w.resize(size_t(e.rows) * K);
        e.logits.resize(size_t(e.rows) * E);
        for (int r = 0; r < e.rows; ++r) {
            ++line_no;
            if (!std::getline(in, line)) fail("{}:{}: the entry has {} rows, the file ends at row {}", path, line_no,
                                             e.rows, r);
            std::istringstream ss(line);
            for (size_t j = 0; j < K; ++j) {
                int32_t& id = e.ids[size_t(r) * K + j];
                if (!(ss >> id) || id < 0 || id >= e.n_expert)
                    fail("{}:{}: expert id {} of {} is missing or outside [0, {})", path, line_no, j, K, e.n_expert);
                for (size_t i = 0; i < j; ++i)
                    if (e.ids[size_t(r) * K + i] == id) fail("{}:{}: expert {} chosen twice", path, line_no, id);
            }
            for (size_t j = 0; j < K; ++j)
                if (!(ss >> e.w[size_t(r) * K + j])) fail("{}:{}: weight {} of {} is missing", path, line_no, j, K);
            for (size_t x = 0; x < E; ++x)
                if (!(ss >> e.logits[size_t(r) * E + x]))
                    fail("{}:{}: router logit {} of {} is missing", path, line_no, x, E);
            if (ss >> extra) fail("{}:{}: more than {} ids, {} weights and {} logits", path, line_no, K, K, E);
        }
        t.entries_.push_back(std::move(e));
    }
    return t;
}

void RouteTrace::add(int layer, int rows, int n_used, int n_expert, const int32_t* ids, const float* w,
                     const float* logits) {
    Entry e;
    e.layer = layer, e.rows = rows, e.n_used = n_used, e.n_expert = n_expert;
    e.ids.assign(ids, ids + size_t(rows) * size_t(n_used));
    e.w.assign(w, w + size_t(rows) * size_t(n_used));
    e.logits.assign(logits, logits + size_t(rows) * size_t(n_expert));
    entries_.push_back(std::move(e));
    ++stats_.entries;
    stats_.row_layers += rows;
}

void RouteTrace::save(const std::string& path) const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) fail("cannot write routes file '{}'", path);
    std::fprintf(f, "%s\n", kMagic);
    for (const Entry& e : entries_) {
        std::fprintf(f, "%d %d %d %d\n", e.layer, e.rows, e.n_used, e.n_expert);
        const size_t K = size_t(e.n_used), E = size_t(e.n_expert);
        for (size_t r = 0; r < size_t(e.rows); ++r) {
            for (size_t j = 0; j < K; ++j) std::fprintf(f, "%d ", e.ids[r * K + j]);
            for (size_t j = 0; j < K; ++j) std::fprintf(f, "%.9g ", double(e.w[r * K + j]));
            for (size_t x = 0; x < E; ++x) std::fprintf(f, x + 1 < E ? "%.9g " : "%.9g\n", double(e.logits[r * E + x]));
        }
    }
    const bool bad = std::ferror(f) != 0;
    if (std::fclose(f) != 0 || bad) fail("error writing routes file '{}'", path);
}

void RouteTrace::override_routes(Backend& be, int layer, const ExpertRouting& r, int rows, const float* logits,
                                 int32_t* ids, float* w) {
    if (recording_) fail("route trace: a recording trace cannot replay");
    const size_t index = next_;
    if (index >= entries_.size())
        fail("{}: all {} recorded entries are used, but this run routes again (layer {}, {} rows): the runs differ",
             path_, entries_.size(), layer, rows);
    const Entry& e = entries_[next_++];
    if (e.layer != layer || e.rows != rows || e.n_used != r.n_used || e.n_expert != r.n_expert)
        fail("{}: entry {} is layer {}, {} rows, {} of {} experts, but this run routes layer {}, {} rows, {} of {}: the "
             "runs differ (same model, tokens and batch size?)",
             path_, index + 1, e.layer, e.rows, e.n_used, e.n_expert, layer, rows, r.n_used, r.n_expert);
    const int E = r.n_expert, K = r.n_used;
    const size_t RK = size_t(rows) * size_t(K);
    own_logits_.resize(size_t(rows) * size_t(E));
    own_ids_.resize(RK), rule_ids_.resize(RK), w_.resize(RK), rule_w_.resize(RK);
    be.synchronize();
    be.download(own_logits_.data(), logits, own_logits_.size() * sizeof(float));
    be.download(own_ids_.data(), ids, RK * sizeof(int32_t));

    // The router: own logits against the recorded ones.
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < own_logits_.size(); ++i) {
        const double d = double(own_logits_[i]) - e.logits[i];
        d2 += d * d, r2 += double(e.logits[i]) * e.logits[i];
    }
    const double logits_nmse = r2 > 0 ? d2 / r2 : (d2 > 0 ? INFINITY : 0.0);
    if (!(logits_nmse <= stats_.worst_logits_nmse)) stats_.worst_logits_nmse = logits_nmse;  // NaN sticks
    // The other side's routing kernel: this rule on its logits must give its ids and weights.
    route_experts_host(e.logits.data(), rows, r, rule_ids_.data(), rule_w_.data());
    for (int t = 0; t < rows; ++t) {
        const size_t o = size_t(t) * size_t(K);
        if (!std::equal(rule_ids_.begin() + std::ptrdiff_t(o), rule_ids_.begin() + std::ptrdiff_t(o + K),
                        e.ids.begin() + std::ptrdiff_t(o)))
            ++stats_.rule_mismatches;
        weigh_experts_host(e.logits.data() + size_t(t) * size_t(E), r, e.ids.data() + o, w_.data() + o);
        for (int j = 0; j < K; ++j) {
            const float err = std::fabs(w_[o + size_t(j)] - e.w[o + size_t(j)]);
            if (!(err <= stats_.worst_weight_error)) stats_.worst_weight_error = err;
        }
    }
    // Where the recorded experts differ from this side's own top k, and how far.
    for (int t = 0; t < rows; ++t) {
        const float* l = own_logits_.data() + size_t(t) * size_t(E);
        const int32_t* rec = e.ids.data() + size_t(t) * size_t(K);
        const int32_t* own = own_ids_.data() + size_t(t) * size_t(K);
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
        const float sd = row_sd(l, E);
        stats_.widest_gap = std::max(stats_.widest_gap, gap);
        stats_.widest_rel_gap = std::max(stats_.widest_rel_gap, sd > 0 ? gap / sd : INFINITY);
    }
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
    const Stats& s = stats_;
    if (recording_)
        return fmt::format("recorded the experts of {} rows x layers ({} entries)", s.row_layers, s.entries);
    return fmt::format("replayed the experts of {} rows x layers; router logits nmse {:.3e} (worst entry); "
                       "{} rows not this rule's top k of the recorded logits; weights off by {:.3e} at most; "
                       "{} differ from this device's own top k, widest gap {:.4g} logits ({:.4g} standard deviations "
                       "of the row's router logits)",
                       s.row_layers, s.worst_logits_nmse, s.rule_mismatches, double(s.worst_weight_error), s.differing,
                       double(s.widest_gap), double(s.widest_rel_gap));
}

}  // namespace vega
