// llama.cpp's tokenizer test vectors (HF-generated): every .inp string of every
// vocab/*.gguf must encode (add_special=false, parse_special=false) to exactly
// the ids of its .out line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tok_test_util.h"

namespace vega::test {
namespace {

std::string show_ids(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += " " + std::to_string(id);
    return s;
}

TEST(TokenizerVectors, EveryVocabularyMatchesLlamaCpp) {
    VEGA_REQUIRE_TEST_DATA();
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/vocab")) {
        const std::string fn = e.path().filename().string();
        if (fn.size() > 5 && fn.ends_with(".gguf") && std::filesystem::exists(e.path().string() + ".inp") &&
            std::filesystem::exists(e.path().string() + ".out"))
            names.push_back(fn);
    }
    std::sort(names.begin(), names.end());
    ASSERT_GE(names.size(), 7u) << "expected the 7 vocabularies listed in testdata/README.md";

    size_t total = 0, total_pass = 0;
    for (const std::string& name : names) {
        const std::string rel = "vocab/" + name;
        const std::string base = data_dir() + "/" + rel;
        const auto inputs = split_vocab_inputs(read_file(base + ".inp"));
        const auto expected = parse_vocab_outputs(read_file(base + ".out"));
        ASSERT_EQ(inputs.size(), expected.size()) << name << ": .inp and .out disagree on the number of strings";
        ASSERT_FALSE(inputs.empty()) << name;
        const Tokenizer& tok = tokenizer_for(rel);
        size_t pass = 0;
        for (size_t i = 0; i < inputs.size(); ++i) {
            const auto got = tok.encode(inputs[i], false, false);
            if (got == expected[i]) {
                ++pass;
            } else {
                ADD_FAILURE() << name << " string #" << i << " '" << inputs[i] << "'\n  expected:" << show_ids(expected[i])
                              << "\n  got:     " << show_ids(got);
            }
        }
        std::printf("[ vocab    ] %-36s %-22s %zu/%zu strings match\n", name.c_str(), tok.kind().c_str(), pass,
                    inputs.size());
        total += inputs.size();
        total_pass += pass;
    }
    std::printf("[ vocab    ] total %zu/%zu\n", total_pass, total);
    EXPECT_EQ(total_pass, total);
}

}  // namespace
}  // namespace vega::test
