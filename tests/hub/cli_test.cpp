// `vega pull` and `-hf` as a user runs them, against a loopback Hub.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fake_hub.h"
#include "run_vega.h"
#include "test_data.h"

namespace fs = std::filesystem;

namespace vega::test {
namespace {

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

class HubCli : public ::testing::Test {
protected:
    void SetUp() override {
        cache = temp_dir() + "/cli-cache-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
        fs::remove_all(cache);
        setenv("VEGA_CACHE_DIR", cache.c_str(), 1);  // the vega child processes inherit these
        unsetenv("HF_TOKEN");
        unsetenv("HF_ENDPOINT");
        setenv("no_proxy", "127.0.0.1", 1);
        setenv("NO_PROXY", "127.0.0.1", 1);
        // A small real model, so that `run -hf` can load what it downloaded.
        const std::string model = temp_dir() + "/tiny-q8.gguf";
        if (!fs::exists(model)) {
            const CmdResult r = run_vega("synth --shape tiny --type Q8_0 -o " + quote(model));
            ASSERT_EQ(r.exit_code, 0) << r.err;
        }
        hub.files["tiny-Q8_0.gguf"] = read_file(model);
        hub.files["tiny-F16.gguf"] = random_bytes(5000, 7);
    }
    void TearDown() override { unsetenv("VEGA_CACHE_DIR"); }

    std::string ep() const { return " --hf-endpoint " + quote(hub.endpoint()); }

    FakeHub hub;
    std::string cache;
};

TEST_F(HubCli, PullDownloadsThenReusesTheCache) {
    const std::string want = cache + "/hf/owner/model-GGUF/tiny-Q8_0.gguf";
    CmdResult r = run_vega("pull owner/model-GGUF:q8_0" + ep());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want + "\n");
    EXPECT_EQ(read_file(want), hub.files["tiny-Q8_0.gguf"]);
    // stderr is not a terminal here: a line at the start and one at the end, no bar.
    EXPECT_NE(r.err.find("downloading 'tiny-Q8_0.gguf' in 'owner/model-GGUF'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("downloaded"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 2) << r.err;

    hub.stop();  // offline: the cached file is used without the Hub
    r = run_vega("pull owner/model-GGUF:Q8_0" + ep());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want + "\n");
    EXPECT_NE(r.err.find("using cached"), std::string::npos) << r.err;
}

TEST_F(HubCli, PullTakesTheEndpointFromTheEnvironment) {
    setenv("HF_ENDPOINT", hub.endpoint().c_str(), 1);
    const CmdResult r = run_vega("pull -q owner/model-GGUF:tiny-F16.gguf");
    unsetenv("HF_ENDPOINT");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, cache + "/hf/owner/model-GGUF/tiny-F16.gguf\n");
    EXPECT_EQ(r.err, "");
}

TEST_F(HubCli, PullErrorsAreOneLine) {
    CmdResult r = run_vega("pull owner/nope" + ep());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.rfind("error: repository 'owner/nope' not found", 0), 0u) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;

    r = run_vega("pull owner/model-GGUF:Q5_K_M" + ep());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("tiny-F16.gguf, tiny-Q8_0.gguf"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;

    r = run_vega("pull not-a-repo");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("OWNER/REPO"), std::string::npos) << r.err;
}

TEST_F(HubCli, RunWithoutAModelSaysHowToGetOne) {
    const CmdResult r = run_vega("run -p hi -n 2");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.rfind("error: no model given", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("-hf"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("vega pull"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
}

TEST_F(HubCli, RunLoadsAModelGivenWithHf) {
    const CmdResult r = run_vega("run -hf owner/model-GGUF:Q8_0" + ep() + " -p hi -n 2 --temp 0 --device cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(cache + "/hf/owner/model-GGUF/tiny-Q8_0.gguf"));
    EXPECT_EQ(r.out.rfind("hi", 0), 0u) << r.out;
}

}  // namespace
}  // namespace vega::test
