#include "engine/probe_report.h"

#include <fmt/format.h>

#include "core/error.h"

namespace vega::probe {

// The MI50 numbers are the seeds' own measurements (60 CUs at 1725 MHz): the dot4/dot8
// study's ranges across four cards, the latency-hiding study's LDS, global and exchange
// rates, the LDS layout standard's column reads, the reuse study's dot2.
const std::vector<Study>& studies() {
    static const std::vector<Study> k = {
        {"dot4_acc1", "int8 dot4 (v_dot4_i32_i8), 1 accumulator", "dp4a", "TOPS", 21.7, 22.3, "dot4/dot8 study"},
        {"dot4_acc4", "int8 dot4, 4 independent accumulators", "dp4a", "TOPS", 43.0, 44.4, "dot4/dot8 study"},
        {"dot8_acc1", "int4 dot8 (v_dot8_i32_i4), 1 accumulator", "(none)", "TOPS", 43.5, 44.4, "dot4/dot8 study"},
        {"dot8_acc4", "int4 dot8, 4 independent accumulators", "(none)", "TOPS", 85.3, 86.2, "dot4/dot8 study"},
        {"dot2_f16_acc1", "f16 dot2 into f32 (v_dot2_f32_f16), 1 accumulator", "2 f32 FMAs of f16 values", "TFLOPS",
         21.9, 21.9, "QDQ reuse study (dot2_reuse)"},
        {"dot2_f16_acc4", "f16 dot2 into f32, 4 independent accumulators", "2 f32 FMAs of f16 values", "TFLOPS", 0, 0,
         ""},
        {"lds_read_b32", "LDS reads, 4 bytes a lane (ds_read_b32)", "shared memory, 4-byte loads", "TB/s", 1.9, 3.9,
         "latency-hiding study"},
        {"lds_read_b128", "LDS reads, 16 bytes a lane (ds_read_b128)", "shared memory, 16-byte loads", "TB/s", 9.5, 11.2,
         "latency-hiding study"},
        {"lds_row_b128", "LDS 16-byte reads along rows (contiguous)", "shared memory", "GB/s", 4257, 4257,
         "LDS layout standard"},
        {"lds_col_stride32", "LDS 16-byte reads down columns, row stride 32 vec4", "shared memory", "GB/s", 1865, 1865,
         "LDS layout standard"},
        {"lds_col_stride33", "LDS 16-byte reads down columns, row stride 33 vec4 (+1 pad)", "shared memory", "GB/s", 3974,
         3974, "LDS layout standard"},
        {"global_read_dword", "global reads, 4-byte loads (global_load_dword)", "4-byte loads", "GB/s", 814, 814,
         "latency-hiding study"},
        {"global_read_dwordx4", "global reads, 16-byte loads (global_load_dwordx4)", "16-byte loads", "GB/s", 867, 873,
         "latency-hiding study"},
        {"xchg_dpp_row_shr", "lane exchange, DPP row_shr:1", "__shfl_up_sync in 16 lanes", "Gxchg/s", 1778, 1784,
         "latency-hiding study"},
        {"xchg_lds_row_shr", "the same row shift through LDS and barriers", "shared memory + __syncthreads", "Gxchg/s",
         906, 906, "latency-hiding study"},
        {"xchg_bpermute_xor", "lane exchange, ds_bpermute_b32 xor 1", "__shfl_xor_sync", "Gxchg/s", 962, 970,
         "latency-hiding study"},
        {"xchg_lds_xor", "the same xor exchange through LDS and barriers", "shared memory + __syncthreads", "Gxchg/s",
         905, 907, "latency-hiding study"},
        {"launch_gap", "back-to-back launches of an empty kernel", "the same", "us", 0, 0, ""},
        {"phase_kernel", "a phase as its own kernel in a graph: 64 B a thread read, one value handed to the next block",
         "the same, the reads before the PDL wait", "us", 0, 0, ""},
        {"phase_barrier", "the same phase in one persistent kernel, a grid-wide barrier between phases",
         "the same", "us", 0, 0, ""},
        {"phase_kernel_empty", "a phase as its own kernel in a graph, no reads", "the same, with PDL", "us", 0, 0, ""},
        {"phase_barrier_empty", "a grid-wide barrier in one persistent kernel, no reads", "the same", "us", 0, 0, ""},
        {"phase_kernel_alone",
         "phase_kernel with no room beside it: no block of the next phase is resident until one of the running "
         "phase leaves",
         "the same (over a fifth of an SM's shared memory a block)", "us", 0, 0, ""},
        {"phase_kernel_alone_empty", "phase_kernel_alone with no reads", "the same", "us", 0, 0, ""},
    };
    return k;
}

const Study* find_study(const std::string& id) {
    for (const Study& s : studies())
        if (id == s.id) return &s;
    return nullptr;
}

double value_of(const Report& r, const std::string& id) {
    for (const Result& x : r.results)
        if (x.id == id && x.measured) return x.value;
    return 0;
}

namespace {
std::string number(double v) {
    if (v == 0) return "0";
    const double a = v < 0 ? -v : v;
    return a >= 100 ? fmt::format("{:.0f}", v) : a >= 10 ? fmt::format("{:.1f}", v) : fmt::format("{:.2f}", v);
}
std::string published(const Study& s) {
    if (s.gfx906_lo == 0 && s.gfx906_hi == 0) return "-";
    return s.gfx906_lo == s.gfx906_hi ? number(s.gfx906_lo) : number(s.gfx906_lo) + " - " + number(s.gfx906_hi);
}
}  // namespace

std::string to_markdown(const Report& r) {
    std::string md = fmt::format("# vega probe: {} ({}, {} compute units, {:.0f} GiB; kernels built for {})\n\n", r.device,
                                 r.arch, r.compute_units, r.memory_gib, r.target);
    const bool gfx906 = r.target == "gfx906";
    md += "| study | what this device ran | unit | measured | MI50 (seeds) | measured / MI50 |\n";
    md += "| --- | --- | --- | ---: | ---: | ---: |\n";
    for (const Study& s : studies()) {
        const Result* x = nullptr;
        for (const Result& y : r.results)
            if (y.id == s.id) x = &y;
        const std::string ran = gfx906 ? s.what : fmt::format("{} ({})", s.nvidia, s.what);
        std::string val = "not run", ratio = "-";
        if (x && x->measured) {
            val = number(x->value);
            const double mid = (s.gfx906_lo + s.gfx906_hi) / 2;
            if (mid > 0) ratio = fmt::format("{:.2f}x", x->value / mid);
        } else if (x) {
            val = "n/a: " + x->why;
        }
        md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", s.id, ran, s.unit, val, published(s), ratio);
    }
    if (!r.kernels.empty()) {
        md += "\n| kernel | unit | measured | note |\n| --- | --- | ---: | --- |\n";
        for (const KernelRow& k : r.kernels) md += fmt::format("| {} | {} | {} | {} |\n", k.name, k.unit, number(k.value), k.note);
    }
    md += "\nMI50 numbers: the seed studies' own measurements (60 CUs at 1725 MHz); on another device the ratio column "
          "compares unlike hardware.\n";
    return md;
}

nlohmann::json to_json(const Report& r) {
    nlohmann::json j;
    j["device"] = r.device;
    j["arch"] = r.arch;
    j["target"] = r.target;
    j["compute_units"] = r.compute_units;
    j["memory_gib"] = r.memory_gib;
    j["studies"] = nlohmann::json::array();
    for (const Study& s : studies()) {
        nlohmann::json e;
        e["id"] = s.id;
        e["what"] = s.what;
        e["nvidia"] = s.nvidia;
        e["unit"] = s.unit;
        if (s.gfx906_lo > 0 || s.gfx906_hi > 0) e["mi50"] = {{"low", s.gfx906_lo}, {"high", s.gfx906_hi}, {"source", s.source}};
        else e["mi50"] = nullptr;
        e["measured"] = false;
        for (const Result& x : r.results) {
            if (x.id != s.id) continue;
            e["measured"] = x.measured;
            if (x.measured) e["value"] = x.value;
            else e["why"] = x.why;
        }
        j["studies"].push_back(e);
    }
    j["kernels"] = nlohmann::json::array();
    for (const KernelRow& k : r.kernels) j["kernels"].push_back({{"name", k.name}, {"unit", k.unit}, {"value", k.value}, {"note", k.note}});
    return j;
}

Report from_json(const nlohmann::json& j) {
    auto field = [](const nlohmann::json& o, const char* key, const std::string& where) -> const nlohmann::json& {
        if (!o.is_object() || !o.contains(key)) fail("probe report: {} has no '{}'", where, key);
        return o.at(key);
    };
    Report r;
    try {
        r.device = field(j, "device", "the report").get<std::string>();
        r.arch = field(j, "arch", "the report").get<std::string>();
        r.target = field(j, "target", "the report").get<std::string>();
        r.compute_units = field(j, "compute_units", "the report").get<int>();
        r.memory_gib = field(j, "memory_gib", "the report").get<double>();
        const auto& st = field(j, "studies", "the report");
        if (!st.is_array()) fail("probe report: 'studies' is not an array");
        for (size_t i = 0; i < st.size(); ++i) {
            const std::string where = fmt::format("studies[{}]", i);
            Result x;
            x.id = field(st[i], "id", where).get<std::string>();
            if (!find_study(x.id)) fail("probe report: {} has an unknown id '{}'", where, x.id);
            x.measured = field(st[i], "measured", where).get<bool>();
            if (x.measured) x.value = field(st[i], "value", where).get<double>();
            else if (st[i].contains("why")) x.why = st[i]["why"].get<std::string>();
            r.results.push_back(x);
        }
        if (j.contains("kernels")) {
            for (const auto& k : j.at("kernels"))
                r.kernels.push_back({k.at("name").get<std::string>(), k.at("unit").get<std::string>(),
                                     k.at("value").get<double>(), k.value("note", std::string())});
        }
    } catch (const nlohmann::json::exception& e) {
        fail("probe report: {}", e.what());
    }
    return r;
}

}  // namespace vega::probe
