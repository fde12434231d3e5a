// resolve_hf_model against a loopback Hub: full and resumed downloads, checksum
// mismatches, 404s, offline reuse and quant selection.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "fake_hub.h"
#include "hub/cache.h"
#include "hub/hub.h"
#include "run_vega.h"
#include "test_data.h"

namespace fs = std::filesystem;

namespace vega::test {
namespace {

class HubDownload : public ::testing::Test {
protected:
    void SetUp() override {
        cache = temp_dir() + "/cache-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
        fs::remove_all(cache);
        unsetenv("HF_TOKEN");
        unsetenv("HF_ENDPOINT");
        setenv("no_proxy", "127.0.0.1", 1);  // never send loopback traffic to a proxy
        setenv("NO_PROXY", "127.0.0.1", 1);
        hub.files["model-Q4_K_M.gguf"] = random_bytes(300000, 1);
        hub.files["model-Q8_0.gguf"] = random_bytes(200000, 2);
    }

    hub::HfRequest req(const std::string& spec) {
        hub::HfRequest r;
        r.spec = spec;
        r.endpoint = hub.endpoint();
        r.cache_dir = cache;
        r.verbose = false;
        return r;
    }

    std::string error_of(const hub::HfRequest& r) {
        try {
            hub::resolve_hf_model(r);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }

    std::string dir() const { return cache + "/hf/owner/model-GGUF"; }

    FakeHub hub;
    std::string cache;
};

TEST_F(HubDownload, FullDownloadIsVerifiedAndRecorded) {
    hub::HfRequest r = req("owner/model-GGUF");
    r.token = "secret-token";
    const std::string path = hub::resolve_hf_model(r);
    EXPECT_EQ(path, dir() + "/model-Q4_K_M.gguf");  // the default choice
    EXPECT_EQ(read_file(path), hub.files["model-Q4_K_M.gguf"]);
    EXPECT_FALSE(fs::exists(path + ".part"));
    const auto v = hub::read_verified(path);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->sha256, hub::sha256_hex(hub.files["model-Q4_K_M.gguf"]));
    EXPECT_EQ(v->size, 300000u);

    const auto seen = hub.seen();
    ASSERT_EQ(seen.size(), 3u);  // tree, resolve (302), cdn
    EXPECT_EQ(seen[0].path, "/api/models/owner/model-GGUF/tree/main");
    EXPECT_EQ(seen[0].auth, "Bearer secret-token");
    EXPECT_EQ(seen[1].path, "/owner/model-GGUF/resolve/main/model-Q4_K_M.gguf");
    EXPECT_EQ(seen[2].range, "");
    EXPECT_EQ(hub.bytes_sent.load(), 300000u);
}

TEST_F(HubDownload, ResumesAPartialFileWithARangeRequest) {
    const std::string& content = hub.files["model-Q8_0.gguf"];
    fs::create_directories(dir());
    std::ofstream(dir() + "/model-Q8_0.gguf.part", std::ios::binary) << content.substr(0, 123456);

    const std::string path = hub::resolve_hf_model(req("owner/model-GGUF:model-Q8_0.gguf"));
    EXPECT_EQ(path, dir() + "/model-Q8_0.gguf");
    EXPECT_EQ(read_file(path), content);
    EXPECT_FALSE(fs::exists(path + ".part"));
    const auto seen = hub.seen();
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[2].path, "/cdn/owner/model-GGUF/model-Q8_0.gguf");
    EXPECT_EQ(seen[2].range, "bytes=123456-");
    EXPECT_EQ(hub.bytes_sent.load(), content.size() - 123456);  // only the rest was sent
}

TEST_F(HubDownload, ACompletePartFileIsOnlyVerified) {
    const std::string& content = hub.files["model-Q8_0.gguf"];
    fs::create_directories(dir());
    std::ofstream(dir() + "/model-Q8_0.gguf.part", std::ios::binary) << content;
    EXPECT_EQ(read_file(hub::resolve_hf_model(req("owner/model-GGUF:Q8_0"))), content);
    EXPECT_EQ(hub.bytes_sent.load(), 0u);
}

TEST_F(HubDownload, ChecksumMismatchLeavesNothingBehind) {
    const std::string wrong(64, 'b');
    hub.listed_sha["model-Q8_0.gguf"] = wrong;
    const std::string e = error_of(req("owner/model-GGUF:Q8_0"));
    EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
    EXPECT_NE(e.find("model-Q8_0.gguf"), std::string::npos) << e;
    EXPECT_NE(e.find(wrong), std::string::npos) << e;
    EXPECT_NE(e.find(hub::sha256_hex(hub.files["model-Q8_0.gguf"])), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(dir() + "/model-Q8_0.gguf"));
    EXPECT_FALSE(fs::exists(dir() + "/model-Q8_0.gguf.part"));
    EXPECT_FALSE(fs::exists(dir() + "/model-Q8_0.gguf.json"));

    // A corrupt prefix kept from an earlier run is caught the same way, and a retry
    // after it starts clean.
    hub.listed_sha.clear();
    fs::create_directories(dir());
    std::string bad = hub.files["model-Q8_0.gguf"].substr(0, 1000);
    bad[10] ^= 1;
    std::ofstream(dir() + "/model-Q8_0.gguf.part", std::ios::binary) << bad;
    EXPECT_NE(error_of(req("owner/model-GGUF:Q8_0")).find("checksum mismatch"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir() + "/model-Q8_0.gguf.part"));
    EXPECT_EQ(read_file(hub::resolve_hf_model(req("owner/model-GGUF:Q8_0"))), hub.files["model-Q8_0.gguf"]);
}

TEST_F(HubDownload, NotFoundNamesTheRepoOrFile) {
    std::string e = error_of(req("owner/no-such-repo"));
    EXPECT_NE(e.find("repository 'owner/no-such-repo' not found"), std::string::npos) << e;
    EXPECT_NE(e.find("404"), std::string::npos) << e;

    e = error_of(req("owner/model-GGUF:missing.gguf"));
    EXPECT_NE(e.find("'missing.gguf' not found in 'owner/model-GGUF'"), std::string::npos) << e;

    hub.missing_blobs.insert("model-Q8_0.gguf");  // listed, but the download is a 404
    e = error_of(req("owner/model-GGUF:Q8_0"));
    EXPECT_NE(e.find("'model-Q8_0.gguf' in 'owner/model-GGUF' not found"), std::string::npos) << e;
    EXPECT_NE(e.find("/resolve/main/model-Q8_0.gguf"), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(dir() + "/model-Q8_0.gguf"));
    EXPECT_FALSE(fs::exists(dir() + "/model-Q8_0.gguf.part"));  // an empty .part is not kept
}

TEST_F(HubDownload, NetworkErrorsNameTheUrl) {
    hub.stop();
    const std::string e = error_of(req("owner/model-GGUF:Q8_0"));
    EXPECT_NE(e.find(hub.endpoint() + "/api/models/owner/model-GGUF/tree/main"), std::string::npos) << e;
}

TEST_F(HubDownload, CachedFilesAreUsedWithoutAnyRequest) {
    const std::string a = hub::resolve_hf_model(req("owner/model-GGUF:q8_0"));
    const std::string b = hub::resolve_hf_model(req("owner/model-GGUF"));
    const size_t n = hub.n_requests();
    EXPECT_EQ(hub::resolve_hf_model(req("owner/model-GGUF:Q8_0")), a);  // any case of the tag
    EXPECT_EQ(hub::resolve_hf_model(req("owner/model-GGUF")), b);
    EXPECT_EQ(hub::resolve_hf_model(req("owner/model-GGUF:model-Q8_0.gguf")), a);
    EXPECT_EQ(hub.n_requests(), n);  // not one request

    hub.stop();  // offline
    EXPECT_EQ(hub::resolve_hf_model(req("owner/model-GGUF:Q8_0")), a);
    EXPECT_EQ(hub::resolve_hf_model(req("owner/model-GGUF")), b);
    EXPECT_EQ(read_file(a), hub.files["model-Q8_0.gguf"]);

    // A file whose size no longer matches its record is not trusted (this needs the Hub).
    std::ofstream(a, std::ios::app) << "x";
    EXPECT_NE(error_of(req("owner/model-GGUF:Q8_0")).find("cannot fetch"), std::string::npos);
}

TEST_F(HubDownload, QuantSelectionThroughTheHub) {
    hub.files["model-Q4_K_S.gguf"] = random_bytes(1000, 3);
    EXPECT_EQ(hub::resolve_hf_model(req("owner/model-GGUF:q4_k_s")), dir() + "/model-Q4_K_S.gguf");
    const std::string e = error_of(req("owner/model-GGUF:Q2_K"));
    EXPECT_NE(e.find("no .gguf file in 'owner/model-GGUF' matches 'Q2_K'"), std::string::npos) << e;
    EXPECT_NE(e.find("model-Q4_K_M.gguf, model-Q4_K_S.gguf, model-Q8_0.gguf"), std::string::npos) << e;
}

}  // namespace
}  // namespace vega::test
