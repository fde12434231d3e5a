// Expert routes of a run, recorded on one backend and replayed on another.
//
// A mixture of experts turns tiny differences into discrete ones: where two experts'
// router logits nearly tie, the GPU's rounding may pick the other one, and that row's
// output then differs by far more than any bound on rounding. To compare backends
// anyway, one side records the experts it chose (every forward call, every routed
// layer, every row) and the other replays them: it computes its own router logits and
// top k, takes the recorded experts instead, weighs them from its own logits, and
// reports how far each recorded choice lies from its own (the gap below its k-th best
// logit). The two runs then follow one discrete path, so their logits must agree to
// rounding, and a replayed choice far from a tie is a bug, not rounding.
//
// File format (text): the line "vega-routes 1", then one line per (call, routed layer):
// "layer rows n_used" followed by rows * n_used expert ids, row by row.
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
    // Record: appends the ids [rows][n_used] chosen in `layer`.
    void add(int layer, int rows, int n_used, const int32_t* ids);
    void save(const std::string& path) const;

    // Replay (RouteOverride): the next recorded entry replaces this block's routes.
    void override_routes(Backend& be, int layer, const ExpertRouting& r, int rows, const float* logits, int32_t* ids,
                         float* w) override;
    // Replay: throws when recorded entries were left unused (the runs differed).
    void check_all_replayed() const;

    struct Stats {
        long entries = 0;      // (call, layer) entries recorded or replayed
        long row_layers = 0;   // rows x layers
        long differing = 0;    // rows whose replayed set differs from this side's own top k
        float widest_gap = 0;  // largest (own k-th best logit - a replayed expert's logit)
        float widest_rel_gap = 0;  // the same, over the standard deviation of that row's logits
    };
    const Stats& stats() const { return stats_; }
    // One line: the counts and the widest gap.
    std::string summary() const;

private:
    struct Entry {
        int layer = 0, rows = 0, n_used = 0;
        std::vector<int32_t> ids;
    };
    bool recording_ = true;
    std::string path_;
    std::vector<Entry> entries_;
    size_t next_ = 0;
    Stats stats_;
    std::vector<float> logits_, w_;
    std::vector<int32_t> own_ids_;
};

}  // namespace vega
