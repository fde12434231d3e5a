// The CLI's sampling and size options against the shared table of ranges
// (engine/option_limits.h): a bad value ends the command with exit status 1 and one
// line naming the option and its range, before any model is read; good values,
// bounds included, still run.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

// A file that is not a model: reading it would fail with "magic", so a message about
// an option proves the option was refused before the model was read.
std::string not_a_model() {
    static const std::string p = [] {
        const std::string f = temp_dir() + "/not-a-model.gguf";
        std::ofstream(f, std::ios::binary) << "this is not a gguf file";
        return f;
    }();
    return quote(p);
}

std::string hw() { return std::to_string(std::max(1u, std::thread::hardware_concurrency())); }

// `vega <cmd> -m <not a model> <args>` fails with exactly "error: <expected>...".
void expect_refused(const std::string& cmd, const std::string& args, const std::string& expected) {
    const CmdResult r = run_vega(cmd + " -m " + not_a_model() + " " + args);
    EXPECT_EQ(r.exit_code, 1) << cmd << " " << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error: " + expected, 0), 0u) << cmd << " " << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.find("magic"), std::string::npos) << "the model was read: " << r.err;
}

TEST(CliOptions, SamplingOptionsOutOfRange) {
    const std::string run = "run -p hi";
    expect_refused(run, "--temp inf", "'--temp' must be between 0 and 2 (got inf)");
    expect_refused(run, "--temp nan", "'--temp' must be between 0 and 2 (got nan)");
    expect_refused(run, "--temp -0.5", "'--temp' must be between 0 and 2 (got -0.5)");
    expect_refused(run, "--temp 2.5", "'--temp' must be between 0 and 2 (got 2.5)");
    expect_refused(run, "--top-p 5", "'--top-p' must be between 0 and 1 (got 5)");
    expect_refused(run, "--top-p 1.1", "'--top-p' must be between 0 and 1 (got 1.1)");
    expect_refused(run, "--top-k -5", "'--top-k' must be between 0 and 1073741824 (got -5)");
    expect_refused(run, "--min-p -1", "'--min-p' must be between 0 and 1 (got -1)");
    expect_refused(run, "--repeat-penalty 0", "'--repeat-penalty' must be between 0.01 and 10 (got 0)");
    expect_refused(run, "--repeat-last-n -2", "'--repeat-last-n' must be between -1 and 1048576 (got -2)");
    expect_refused(run, "--frequency-penalty 3", "'--frequency-penalty' must be between -2 and 2 (got 3)");
    expect_refused(run, "--presence-penalty -inf", "'--presence-penalty' must be between -2 and 2 (got -inf)");
    expect_refused("chat", "--temp 5", "'--temp' must be between 0 and 2 (got 5)");
}

TEST(CliOptions, SizeOptionsOutOfRange) {
    const std::string run = "run -p hi";
    expect_refused(run, "-c -5", "'-c/--ctx-size' must be between 0 and 1048576 (got -5)");
    expect_refused(run, "--ctx-size 2000000", "'-c/--ctx-size' must be between 0 and 1048576 (got 2000000)");
    expect_refused(run, "-b 0", "'-b/--batch-size' must be between 1 and 1048576 (got 0)");
    expect_refused(run, "-n -5", "'-n/--n-predict' must be between -1 and 1073741824 (got -5)");
    expect_refused(run, "--parallel 0", "'--parallel' must be between 1 and 256 (got 0)");
    expect_refused(run, "--parallel 1000", "'--parallel' must be between 1 and 256 (got 1000)");
    expect_refused("chat", "-n -2", "'-n/--n-predict' must be between -1 and 1073741824 (got -2)");
    expect_refused("eval", "-c -1 --tokens-file x --logits-out y", "'-c/--ctx-size' must be between 0 and 1048576 (got -1)");
    expect_refused("perplexity", "--chunks 0 -f " + not_a_model(), "'--chunks' must be between 1 and 1073741824 (got 0)");
    // bench's lists: every item is checked.
    expect_refused("bench", "-B 0", "'-B/--batch-seqs' must be between 1 and 256 (got 0)");
    expect_refused("bench", "-n 128,-2", "'-n/--n-gen' must be between 0 and 1048576 (got -2)");
    expect_refused("bench", "-p -1", "'-p/--n-prompt' must be between 0 and 1048576 (got -1)");
    expect_refused("bench", "-d 0,-3", "'-d/--depth' must be between 0 and 1048576 (got -3)");
    expect_refused("bench", "-r 0", "'-r/--repetitions' must be between 1 and 10000 (got 0)");
}

TEST(CliOptions, ThreadsAreBoundedByTheMachine) {
    const std::string range = "'-t/--threads' must be between 0 and " + hw();
    expect_refused("run -p hi", "-t -1", range + " (got -1)");
    expect_refused("run -p hi", "-t 10000", range + " (got 10000): this machine has " + hw() + " hardware thread");
    expect_refused("bench", "--threads 10000", range + " (got 10000)");
}

TEST(CliOptions, UnconvertibleValuesStillGetCli11sError) {
    const CmdResult r = run_vega("run -m " + not_a_model() + " -p hi --top-k 1.5");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--top-k"), std::string::npos) << r.err;
}

TEST(CliOptions, GoodValuesAndBoundsStillRun) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string m = quote(data_file("models/stories260K.gguf"));
    const std::string base = "run -q -m " + m + " -p 'Once upon a time' --device " + test_device();
    for (const std::string& args : std::vector<std::string>{"-n 4 --temp 2 --top-p 1 --top-k 0 --min-p 0 --seed 7", "-n 4 --temp 0 --top-p 0 --min-p 1",
          "-n 4 --temp 0.7 --repeat-penalty 10 --repeat-last-n -1 --frequency-penalty -2 --presence-penalty 2",
          "-n 4 --repeat-penalty 0.01 --repeat-last-n 0 -c 0 -b 1 -t 0", "-n 4 -t " + hw(), "-n 0",
          "-n -1 -c 32 --temp 0"}) {
        const CmdResult r = run_vega(base + " " + args);
        EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
        EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << args << ": " << r.out;
    }
}

}  // namespace
}  // namespace vega::test
