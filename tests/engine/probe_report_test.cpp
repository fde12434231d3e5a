// vega probe's report format, without a card: a gfx906 report built from values, its
// JSON parsed back (every study, its unit and the MI50 range from the seeds), the
// markdown's rows and ratios, refusals of malformed reports, and `vega probe --render`.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "core/error.h"
#include "engine/probe_report.h"
#include "run_vega.h"

using vega::test::CmdResult;
using vega::test::run_vega;
using vega::test::quote;
using vega::test::temp_dir;

namespace vega {
namespace {

// A gfx906 report whose every study measured the middle of the seeds' MI50 range
// (1.0 where none is published), dot8 included.
probe::Report gfx906_report() {
    probe::Report r;
    r.device = "AMD Instinct MI50 (test)";
    r.arch = "gfx906:sramecc+:xnack-";
    r.target = "gfx906";
    r.compute_units = 60;
    r.memory_gib = 16;
    for (const probe::Study& s : probe::studies()) {
        const double mid = (s.gfx906_lo + s.gfx906_hi) / 2;
        r.results.push_back({s.id, mid > 0 ? mid : 1.0, true, ""});
    }
    r.kernels.push_back({"dot4 GEMM Q4_0 4096x4096, 512 rows", "TOPS", 22.0, "50% of dot4_acc4"});
    return r;
}

TEST(ProbeReport, EveryStudyOfTheSeedsIsInTheTable) {
    std::set<std::string> ids;
    for (const probe::Study& s : probe::studies()) {
        EXPECT_TRUE(ids.insert(s.id).second) << "duplicate study id " << s.id;
        EXPECT_NE(std::string(s.unit), "") << s.id;
        EXPECT_LE(s.gfx906_lo, s.gfx906_hi) << s.id;
    }
    // The list: dot4 and dot8 with 1 and 4 accumulators, dot2 f16, LDS b32 vs b128,
    // column reads at stride 32 vs 33, global dword vs dwordx4, DPP vs bpermute vs LDS, launch gap.
    for (const char* id : {"dot4_acc1", "dot4_acc4", "dot8_acc1", "dot8_acc4", "dot2_f16_acc1", "lds_read_b32",
                           "lds_read_b128", "lds_col_stride32", "lds_col_stride33", "global_read_dword",
                           "global_read_dwordx4", "xchg_dpp_row_shr", "xchg_bpermute_xor", "xchg_lds_xor", "launch_gap"})
        EXPECT_TRUE(ids.count(id)) << "missing study " << id;
    // Published MI50 numbers the seeds give (dot4/dot8 study, LDS layout standard).
    EXPECT_DOUBLE_EQ(probe::find_study("dot4_acc4")->gfx906_hi, 44.4);
    EXPECT_DOUBLE_EQ(probe::find_study("lds_col_stride32")->gfx906_lo, 1865);
    EXPECT_DOUBLE_EQ(probe::find_study("lds_col_stride33")->gfx906_lo, 3974);
}

TEST(ProbeReport, Gfx906JsonParsesBackWithEveryStudy) {
    const probe::Report r = gfx906_report();
    const std::string text = probe::to_json(r).dump(2);
    const nlohmann::json j = nlohmann::json::parse(text);
    EXPECT_EQ(j.at("target"), "gfx906");
    EXPECT_EQ(j.at("compute_units"), 60);
    ASSERT_EQ(j.at("studies").size(), probe::studies().size());
    for (const auto& e : j.at("studies")) {
        const probe::Study* s = probe::find_study(e.at("id").get<std::string>());
        ASSERT_NE(s, nullptr) << e.dump();
        EXPECT_EQ(e.at("unit"), s->unit);
        EXPECT_TRUE(e.at("measured").get<bool>()) << s->id;
        EXPECT_GT(e.at("value").get<double>(), 0) << s->id;
        if (s->gfx906_hi > 0) {
            EXPECT_DOUBLE_EQ(e.at("mi50").at("low").get<double>(), s->gfx906_lo);
            EXPECT_DOUBLE_EQ(e.at("mi50").at("high").get<double>(), s->gfx906_hi);
        } else {
            EXPECT_TRUE(e.at("mi50").is_null()) << s->id;
        }
    }
    const probe::Report back = probe::from_json(j);
    EXPECT_EQ(back.device, r.device);
    ASSERT_EQ(back.results.size(), r.results.size());
    for (size_t i = 0; i < r.results.size(); ++i) {
        EXPECT_EQ(back.results[i].id, r.results[i].id);
        EXPECT_DOUBLE_EQ(back.results[i].value, r.results[i].value);
    }
    ASSERT_EQ(back.kernels.size(), 1u);
    EXPECT_DOUBLE_EQ(back.kernels[0].value, 22.0);
}

TEST(ProbeReport, MarkdownHasARowPerStudyAndTheRatio) {
    probe::Report r = gfx906_report();
    r.results[0].value = 2 * (probe::studies()[0].gfx906_lo + probe::studies()[0].gfx906_hi) / 2;
    const std::string md = probe::to_markdown(r);
    for (const probe::Study& s : probe::studies()) EXPECT_NE(md.find(std::string("| ") + s.id + " |"), std::string::npos) << s.id;
    EXPECT_NE(md.find("| 2.00x |"), std::string::npos) << md;  // the doubled first study
    EXPECT_NE(md.find("| 1.00x |"), std::string::npos) << md;
    EXPECT_NE(md.find("dot4 GEMM Q4_0"), std::string::npos);
    // A study a target cannot run says why.
    r.results[2].measured = false;
    r.results[2].why = "no int4 dot instruction on this target";
    EXPECT_NE(probe::to_markdown(r).find("n/a: no int4 dot instruction"), std::string::npos);
}

TEST(ProbeReport, MalformedReportsAreRefusedByField) {
    nlohmann::json j = probe::to_json(gfx906_report());
    nlohmann::json no_target = j;
    no_target.erase("target");
    try {
        probe::from_json(no_target);
        FAIL() << "accepted a report without a target";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'target'"), std::string::npos) << e.what();
    }
    nlohmann::json bad_id = j;
    bad_id["studies"][3]["id"] = "dot16";
    try {
        probe::from_json(bad_id);
        FAIL() << "accepted an unknown study";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("studies[3]"), std::string::npos) << e.what();
    }
    nlohmann::json no_value = j;
    no_value["studies"][0].erase("value");
    EXPECT_THROW(probe::from_json(no_value), Error);
    nlohmann::json wrong_type = j;
    wrong_type["compute_units"] = "sixty";
    EXPECT_THROW(probe::from_json(wrong_type), Error);
}

TEST(ProbeReport, CliRendersASavedReport) {
    const std::string path = temp_dir() + "/probe_report_test.json";
    {
        std::ofstream f(path);
        f << probe::to_json(gfx906_report()).dump(2);
    }
    const CmdResult md = run_vega("probe --render " + quote(path));
    ASSERT_EQ(md.exit_code, 0) << md.err;
    EXPECT_NE(md.out.find("| dot4_acc4 | int8 dot4, 4 independent accumulators | TOPS | 43.7 | 43.0 - 44.4 | 1.00x |"),
              std::string::npos)
        << md.out;
    const CmdResult js = run_vega("probe --render " + quote(path) + " --json");
    ASSERT_EQ(js.exit_code, 0) << js.err;
    EXPECT_EQ(nlohmann::json::parse(js.out).at("studies").size(), probe::studies().size());
    {
        std::ofstream f(path);
        f << "{\"device\": 1";
    }
    const CmdResult bad = run_vega("probe --render " + quote(path));
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("is not JSON"), std::string::npos) << bad.err;
    std::remove(path.c_str());
}

}  // namespace
}  // namespace vega
