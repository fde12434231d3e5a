// Expert routing of a run, recorded on one backend and replayed on the CPU.
//
// A mixture of experts turns tiny differences into large ones: where two experts'
// router logits nearly tie, another device's rounding picks the other one, and with
// sharp routers (logits of standard deviation ~10, as vega synth's) the weights of the
// chosen experts move by about the logits' error itself. Logits of two devices then
// differ by more than any rounding bound without a bug on either side. So the check is
// taken apart:
//   - the recording side writes, per (forward call, routed layer, row), its router
//     logits, the experts it chose and their weights;
//   - the replaying side (the CPU reference) computes its own router logits and
//     compares them (NMSE: the router matmul to rounding), applies its routing rule to
//     the recorded logits and compares the result with the recorded experts and weights
//     (the other device's routing kernel, exactly), and then runs on with the recorded
//     experts and the weights its rule gives for the recorded logits;
//   - the two runs then follow one path, and their model logits must agree to rounding.
// It also reports where the recorded experts differ from its own top k and by how much
// (the gap below its k-th best logit, in logits and in standard deviations of the row).
//
// File (text): the line "vega-routes 2"; per entry a line "layer rows n_used n_expert",
// then one line per row: n_used ids, n_used weights, n_expert router logits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace vega {

class RouteTrace : public RouteOverride {
public:
    // An empty trace that records; write it with save().
    static RouteTrace recorder();
    // A trace read from `path` to replay. Throws vega::Error naming the file and line.
    static RouteTrace load(const std::string& path);

    bool recording() const { return recording_; }
    // Record: one routed layer's rows: ids, w [rows][n_used], logits [rows][n_expert] (host).
    void add(int layer, int rows, int n_used, int n_expert, const int32_t* ids, const float* w, const float* logits);
    void save(const std::string& path) const;

    // Replay (RouteOverride): the next recorded entry replaces this block's routes.
    void override_routes(Backend& be, int layer, const ExpertRouting& r, int rows, const float* logits, int32_t* ids,
                         float* w) override;
    // Replay: throws when recorded entries were left unused (the runs differed).
    void check_all_replayed() const;

    struct Stats {
        long entries = 0;             // (call, layer) entries recorded or replayed
        long row_layers = 0;          // rows x layers
        double worst_logits_nmse = 0;  // own router logits against the recorded ones, worst entry
        long rule_mismatches = 0;     // rows whose recorded experts are not this rule's top k of the recorded logits
        float worst_weight_error = 0;  // max |recorded weight - this rule's weight from the recorded logits|
        long differing = 0;           // rows whose recorded experts differ from this side's own top k
        float widest_gap = 0;         // largest (own k-th best logit - a recorded expert's own logit)
        float widest_rel_gap = 0;     // the same, over the standard deviation of that row's own logits
    };
    const Stats& stats() const { return stats_; }
    // One line with the stats (scripts/gpu_sweep.sh reads it).
    std::string summary() const;

private:
    struct Entry {
        int layer = 0, rows = 0, n_used = 0, n_expert = 0;
        std::vector<int32_t> ids;  // [rows][n_used]
        std::vector<float> w;      // [rows][n_used]
        std::vector<float> logits;  // [rows][n_expert]
    };
    bool recording_ = true;
    std::string path_;
    std::vector<Entry> entries_;
    size_t next_ = 0;
    Stats stats_;
    std::vector<float> own_logits_, w_, rule_w_;
    std::vector<int32_t> own_ids_, rule_ids_;
};

}  // namespace vega
