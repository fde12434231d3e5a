// vega probe's report: the studies of the gfx906 seed documents (../shared/seeds:
// gfx906-dot4-dot8-study, the LDS layout standard, the latency-hiding ops), their units
// and the numbers published for an MI50, and a device's measured values next to them, as
// markdown or JSON. Host only: the measurements come from the GPU backend
// (backend/gpu/probe.h); a report can be built and checked without a card.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vega::probe {

struct Study {
    const char* id;
    const char* what;      // the pattern, as gfx906 runs it
    const char* nvidia;    // what an NVIDIA GPU runs instead
    const char* unit;
    double gfx906_lo, gfx906_hi;  // the seeds' measured range on MI50 (0, 0: none published)
    const char* source;    // which seed study
};
// Every study, in report order.
const std::vector<Study>& studies();
const Study* find_study(const std::string& id);

struct Result {
    std::string id;
    double value = 0;
    bool measured = false;
    std::string why;  // when not measured
};
// An extra kernel-level row (vega probe --kernels): a GEMM's or matvec's rate.
struct KernelRow {
    std::string name, unit;
    double value = 0;
    std::string note;  // e.g. "62% of dot4_acc4"
};
struct Report {
    std::string device, arch, target;  // target: the build's table (gfx906, nvidia)
    int compute_units = 0;
    double memory_gib = 0;
    std::vector<Result> results;
    std::vector<KernelRow> kernels;
};

// The measured value of a study, or 0 where it was not measured.
double value_of(const Report& r, const std::string& id);
std::string to_markdown(const Report& r);
nlohmann::json to_json(const Report& r);
// The inverse of to_json; throws vega::Error naming the field that is missing or wrong.
Report from_json(const nlohmann::json& j);

}  // namespace vega::probe
