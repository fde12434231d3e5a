// `vega eval --routes-out / --routes-in` (model/route_trace.h): the experts a mixture
// of experts chose, recorded on the test device and replayed on the CPU. Replaying a
// run's own routes changes nothing; a replayed expert away from the CPU's own top k is
// reported with its gap; a routes file from another run or a malformed one is refused
// with the file and line.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "nmse.h"
#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

const char* kModel = "moe/synth-qwen3moe-q8_0.gguf";

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
    std::ofstream f(path);
    for (const std::string& l : lines) f << l << '\n';
}

struct Replay {
    double logits_nmse = -1;
    long rule_mismatches = -1;
    double weight_error = -1;
    long differing = -1;
    double gap = -1, rel_gap = -1;
};

// The "routes: replayed ..." line of vega eval's stdout.
Replay parse_replay(const std::string& out) {
    static const std::regex re(
        R"(routes: replayed the experts of \d+ rows x layers; router logits nmse (\S+) \(worst entry\); (\d+) rows not )"
        R"(this rule's top k of the recorded logits; weights off by (\S+) at most; (\d+) differ from this device's own )"
        R"(top k, widest gap (\S+) logits \((\S+) standard deviations)");
    std::smatch m;
    Replay r;
    if (std::regex_search(out, m, re)) {
        r.logits_nmse = std::stod(m[1]), r.rule_mismatches = std::stol(m[2]), r.weight_error = std::stod(m[3]);
        r.differing = std::stol(m[4]), r.gap = std::stod(m[5]), r.rel_gap = std::stod(m[6]);
    }
    return r;
}

class RouteTrace : public ::testing::Test {
protected:
    void SetUp() override {
        VEGA_REQUIRE_TEST_DATA();
        dir_ = temp_dir();
        tokens_ = dir_ + "/tokens.txt";
        write_lines(tokens_, {"1 5 9 13 200 31 7 88 99 100 4 17", "17 18 19 20 21 22"});
    }
    CmdResult eval(const std::string& device, const std::string& out, const std::string& extra,
                   const std::string& tokens = "") {
        return run_vega("eval -q -m " + quote(data_file(kModel)) + " --device " + device + " -c 64 -t 2 --tokens-file " +
                        quote(tokens.empty() ? tokens_ : tokens) + " --logits-out " + quote(out) + " " + extra);
    }
    std::string dir_, tokens_;
};

TEST_F(RouteTrace, ReplayingARunsOwnRoutesGivesItsLogits) {
    const std::string rec = dir_ + "/rec.f32", rep = dir_ + "/rep.f32", routes = dir_ + "/routes.txt";
    const CmdResult a = eval(test_device(), rec, "--routes-out " + quote(routes));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_NE(a.out.find("routes: recorded the experts of"), std::string::npos) << a.out;
    // 2 routed layers of 8 experts, 2 used; the prompt as one entry of 12 rows, then an
    // entry of one row per generated token; each entry a head line and a line per row.
    const std::vector<std::string> lines = read_lines(routes);
    ASSERT_EQ(lines.size(), 1u + 2u * (1u + 12u) + 2u * 6u * 2u);
    EXPECT_EQ(lines[0], "vega-routes 2");
    EXPECT_EQ(lines[1], "0 12 2 8");

    const CmdResult b = eval("cpu", rep, "--routes-in " + quote(routes));
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const Replay r = parse_replay(b.out);
    ASSERT_GE(r.differing, 0) << b.out;
    const std::vector<float> x = read_f32(rec), y = read_f32(rep);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(r.rule_mismatches, 0) << b.out;  // the recording side's routing kernel is this rule
    if (test_device() == "cpu") {  // the same device: the same choices and the same bits
        EXPECT_EQ(r.logits_nmse, 0.0) << b.out;
        EXPECT_EQ(r.weight_error, 0.0) << b.out;
        EXPECT_EQ(r.differing, 0) << b.out;
        EXPECT_EQ(x, y);
    } else {  // another device: router and model logits to rounding on one path
        EXPECT_LT(r.logits_nmse, 5e-3) << b.out;  // the q8 activations' rounding, as the model logits
        EXPECT_LT(r.weight_error, 1e-5) << b.out;
        EXPECT_LT(nmse(x, y), 5e-3);
    }
}

TEST_F(RouteTrace, AReplayedExpertAwayFromTheTopKShowsItsGap) {
    const std::string rec = dir_ + "/rec.f32", rep = dir_ + "/rep.f32", routes = dir_ + "/routes.txt";
    const CmdResult a = eval("cpu", rec, "--routes-out " + quote(routes));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    std::vector<std::string> lines = read_lines(routes);
    ASSERT_GE(lines.size(), 2u);
    // Layer 0 of the prompt, row 0 (line 3): replace its first expert by one it did not choose.
    std::istringstream in(lines[2]);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    ASSERT_EQ(f.size(), 2u + 2u + 8u);
    int other = 0;
    while (std::to_string(other) == f[0] || std::to_string(other) == f[1]) ++other;
    f[0] = std::to_string(other);
    std::string edited;
    for (const std::string& w : f) edited += (edited.empty() ? "" : " ") + w;
    lines[2] = edited;
    write_lines(routes, lines);

    const CmdResult b = eval("cpu", rep, "--routes-in " + quote(routes));
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const Replay r = parse_replay(b.out);
    EXPECT_EQ(r.differing, 1) << b.out;
    EXPECT_EQ(r.rule_mismatches, 1) << b.out;  // nor is it the top k of the recorded logits
    EXPECT_GT(r.gap, 0.0) << b.out;
    EXPECT_GT(r.rel_gap, 0.0) << b.out;
    // The edited route changes the output: the replay is applied, not just reported.
    const std::vector<float> x = read_f32(rec), y = read_f32(rep);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_NE(x, y);
}

TEST_F(RouteTrace, RoutesOfAnotherRunOrAMalformedFileAreRefused) {
    const std::string out = dir_ + "/x.f32", routes = dir_ + "/routes.txt";
    ASSERT_EQ(eval("cpu", out, "--routes-out " + quote(routes)).exit_code, 0);
    // Another prompt length: the first entry's rows do not match.
    const std::string longer = dir_ + "/longer.txt";
    write_lines(longer, {"1 5 9 13 200 31 7 88 99 100 4 17 3", "17"});
    CmdResult r = eval("cpu", out, "--routes-in " + quote(routes), longer);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("the runs differ"), std::string::npos) << r.err;
    // Fewer generated tokens: entries left over.
    const std::string shorter = dir_ + "/shorter.txt";
    write_lines(shorter, {"1 5 9 13 200 31 7 88 99 100 4 17", "17 18"});
    r = eval("cpu", out, "--routes-in " + quote(routes), shorter);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("were not replayed"), std::string::npos) << r.err;
    // A malformed row line is named by file and line.
    const std::vector<std::string> good = read_lines(routes);
    std::vector<std::string> lines = good;
    lines[3] = "1 2 x";
    write_lines(routes, lines);
    r = eval("cpu", out, "--routes-in " + quote(routes));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("routes.txt:4: weight 0 of 2 is missing"), std::string::npos) << r.err;
    // An expert id outside the layer's experts.
    lines = good;
    lines[2].replace(0, lines[2].find(' '), "99");
    write_lines(routes, lines);
    r = eval("cpu", out, "--routes-in " + quote(routes));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("routes.txt:3: expert id 0 of 2 is missing or outside [0, 8)"), std::string::npos) << r.err;
    // An expert twice in one row.
    lines = good;
    {
        std::istringstream in(lines[2]);
        std::string first;
        in >> first;
        const size_t sp = lines[2].find(' ');
        lines[2] = first + " " + first + lines[2].substr(lines[2].find(' ', sp + 1));
    }
    write_lines(routes, lines);
    r = eval("cpu", out, "--routes-in " + quote(routes));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("routes.txt:3: expert"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("chosen twice"), std::string::npos) << r.err;
    // A file cut short inside an entry.
    lines = good;
    lines.resize(5);  // the magic, the head line and rows 0..2
    write_lines(routes, lines);
    r = eval("cpu", out, "--routes-in " + quote(routes));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("the entry has 12 rows, the file ends at row 3"), std::string::npos) << r.err;
    // Not a routes file at all.
    write_lines(routes, {"hello"});
    r = eval("cpu", out, "--routes-in " + quote(routes));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("not a routes file"), std::string::npos) << r.err;
    // Record and replay at once make no sense.
    r = eval("cpu", out, "--routes-in " + quote(routes) + " --routes-out " + quote(routes));
    EXPECT_NE(r.exit_code, 0);
}

TEST_F(RouteTrace, OnlyTheCpuReplays) {
    if (test_device() == "cpu") GTEST_SKIP() << "needs a GPU device (VEGA_TEST_DEVICE=gpu)";
    const std::string out = dir_ + "/x.f32", routes = dir_ + "/routes.txt";
    ASSERT_EQ(eval("cpu", out, "--routes-out " + quote(routes)).exit_code, 0);
    const CmdResult r = eval(test_device(), out, "--routes-in " + quote(routes));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("route replay (--routes-in) runs on the CPU"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vega::test
