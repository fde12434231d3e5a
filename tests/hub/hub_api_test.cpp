// The pure parts: request specs, URLs, tree parsing, file choice, sha256, cache paths.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "hub/cache.h"
#include "hub/hub_api.h"
#include "hub/sha256.h"

namespace vega::hub {
namespace {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(HubSpec, ParsesRepoQuantAndFile) {
    RepoSpec s = parse_spec("bartowski/Qwen2.5-0.5B-Instruct-GGUF");
    EXPECT_EQ(s.repo, "bartowski/Qwen2.5-0.5B-Instruct-GGUF");
    EXPECT_EQ(s.selector, "");
    EXPECT_FALSE(s.explicit_file());
    s = parse_spec("bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M");
    EXPECT_EQ(s.selector, "Q4_K_M");
    EXPECT_FALSE(s.explicit_file());
    s = parse_spec("a/b:sub/Model-Q8_0.GGUF");
    EXPECT_EQ(s.selector, "sub/Model-Q8_0.GGUF");
    EXPECT_TRUE(s.explicit_file());
}

TEST(HubSpec, RejectsBadSpecsWithAnExample) {
    for (const char* bad : {"noslash", "a/b/c", "../b", "a/..", "/b", "a/", "a/b:", "a/b:../../etc/x.gguf",
                            "a/b:/abs.gguf", "a/b:x/../../y.gguf", "a/b:Q4 K"}) {
        const std::string e = error_of([&] { parse_spec(bad); });
        EXPECT_NE(e.find("OWNER/REPO"), std::string::npos) << bad << ": " << e;
    }
}

TEST(HubApi, Urls) {
    EXPECT_EQ(tree_url("http://h", "o/r"), "http://h/api/models/o/r/tree/main");
    EXPECT_EQ(tree_url("http://h", "o/r", "sub dir"), "http://h/api/models/o/r/tree/main/sub%20dir");
    EXPECT_EQ(resolve_url("http://h", "o/r", "d/m Q4+.gguf"), "http://h/o/r/resolve/main/d/m%20Q4%2B.gguf");
    EXPECT_EQ(endpoint_or_default("http://x:1/"), "http://x:1");
    unsetenv("HF_ENDPOINT");
    EXPECT_EQ(endpoint_or_default(""), "https://huggingface.co");
    setenv("HF_ENDPOINT", "http://mirror.example/", 1);
    EXPECT_EQ(endpoint_or_default(""), "http://mirror.example");
    unsetenv("HF_ENDPOINT");
}

TEST(HubApi, ParsesTheTreeListing) {
    const std::string sha(64, 'a');
    const std::string j = R"([
      {"type":"file","oid":"1","size":1519,"path":".gitattributes"},
      {"type":"directory","oid":"2","size":0,"path":"sub"},
      {"type":"file","oid":"3","size":134,"path":"m-Q4_K_M.gguf","lfs":{"oid":")" + sha + R"(","size":491400032,"pointerSize":134}},
      {"type":"file","oid":"4","size":9,"path":"../evil.gguf","lfs":{"oid":")" + sha + R"(","size":9}}
    ])";
    const auto files = parse_tree(j, "o/r");
    ASSERT_EQ(files.size(), 2u);
    EXPECT_EQ(files[0].path, ".gitattributes");
    EXPECT_EQ(files[0].sha256, "");
    EXPECT_EQ(files[1].path, "m-Q4_K_M.gguf");
    EXPECT_EQ(files[1].size, 491400032u);
    EXPECT_EQ(files[1].sha256, sha);
    EXPECT_NE(error_of([] { parse_tree("<html>", "o/r"); }).find("o/r"), std::string::npos);
    EXPECT_NE(error_of([] { parse_tree("{}", "o/r"); }).find("array"), std::string::npos);
}

std::vector<HubFile> listing(std::initializer_list<const char*> paths) {
    std::vector<HubFile> v;
    for (const char* p : paths) v.push_back({p, 1, std::string(64, '0')});
    return v;
}

TEST(HubApi, ChoosesFiles) {
    const auto files = listing({"README.md", "Qwen-IQ4_XS.gguf", "Qwen-Q4_K_M.gguf", "Qwen-Q4_K_S.gguf",
                                "Qwen-Q8_0.gguf", "Qwen-f16.gguf", "mmproj-Qwen-f16.gguf"});
    EXPECT_EQ(choose_file(files, parse_spec("o/r")).path, "Qwen-Q4_K_M.gguf");
    EXPECT_EQ(choose_file(files, parse_spec("o/r:q8_0")).path, "Qwen-Q8_0.gguf");
    EXPECT_EQ(choose_file(files, parse_spec("o/r:Q4_K_S")).path, "Qwen-Q4_K_S.gguf");
    EXPECT_EQ(choose_file(files, parse_spec("o/r:F16")).path, "Qwen-f16.gguf");  // not the projector
    EXPECT_EQ(choose_file(files, parse_spec("o/r:Q4_K")).path, "Qwen-Q4_K_M.gguf");  // substring
    EXPECT_EQ(choose_file(files, parse_spec("o/r:mmproj-Qwen-f16.gguf")).path, "mmproj-Qwen-f16.gguf");
    // Whole-word matches win over substrings.
    EXPECT_EQ(choose_file(listing({"m-Q4_0_4_4.gguf", "m-Q4_0.gguf"}), parse_spec("o/r:Q4_0")).path, "m-Q4_0.gguf");
    // No Q4_K_M: the first .gguf.
    EXPECT_EQ(choose_file(listing({"a.txt", "m-Q8_0.gguf", "m-Q6_K.gguf"}), parse_spec("o/r")).path, "m-Q8_0.gguf");

    std::string e = error_of([&] { choose_file(files, parse_spec("o/r:Q3_K_L")); });
    EXPECT_NE(e.find("Q3_K_L"), std::string::npos) << e;
    EXPECT_NE(e.find("Qwen-Q8_0.gguf"), std::string::npos) << e;  // lists what there is
    EXPECT_EQ(e.find("README"), std::string::npos) << e;
    e = error_of([&] { choose_file(files, parse_spec("o/r:nope.gguf")); });
    EXPECT_NE(e.find("'nope.gguf' not found in 'o/r'"), std::string::npos) << e;
    e = error_of([&] { choose_file(listing({"README.md"}), parse_spec("o/r")); });
    EXPECT_NE(e.find("no .gguf"), std::string::npos) << e;
}

TEST(HubSha256, KnownVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    Sha256 h;  // incremental == one shot, a million 'a's
    const std::string chunk(1000, 'a');
    for (int i = 0; i < 1000; ++i) h.update(chunk.data(), chunk.size());
    EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HubCache, RootFollowsXdg) {
    const char* keep_home = std::getenv("HOME");
    const std::string home = keep_home ? keep_home : "";
    setenv("VEGA_CACHE_DIR", "/tmp/vc", 1);
    setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    EXPECT_EQ(cache_root(), "/tmp/vc");
    unsetenv("VEGA_CACHE_DIR");
    EXPECT_EQ(cache_root(), "/tmp/xdg/vega");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    EXPECT_EQ(cache_root(), "/home/someone/.cache/vega");
    if (keep_home) setenv("HOME", home.c_str(), 1);
    EXPECT_EQ(file_path("/c", "o/r", "m.gguf"), "/c/hf/o/r/m.gguf");
}

}  // namespace
}  // namespace vega::hub
