// The `vega` command's interfaces that acceptance checks rely on, and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

std::string write_temp(const std::string& name, const std::string& bytes) {
    const std::string p = temp_dir() + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

TEST(Cli, HelpListsSubcommands) {
    const CmdResult r = run_vega("--help");
    EXPECT_EQ(r.exit_code, 0);
    for (const char* c : {"run", "eval", "perplexity", "tokenize", "inspect", "synth", "bench"})
        EXPECT_NE(r.out.find(c), std::string::npos) << c;
    for (const char* c : {"run", "eval", "perplexity", "tokenize", "inspect", "synth"})
        EXPECT_EQ(run_vega(std::string(c) + " --help").exit_code, 0) << c;
}

TEST(Cli, TokenizeMatchesVocabVectorsFromFileBytes) {
    VEGA_REQUIRE_TEST_DATA();
    // The .inp strings (separated by a marker line) tokenize to the .out lines; take
    // strings with a trailing newline or leading spaces to check -f keeps bytes exactly.
    const std::string inp = read_file(data_file("vocab/ggml-vocab-llama-bpe.gguf.inp"));
    const std::string out = read_file(data_file("vocab/ggml-vocab-llama-bpe.gguf.out"));
    const std::string sep = "\n__ggml_vocab_test__\n";
    size_t a = 0, line_start = 0;
    int checked = 0;
    while (true) {
        const size_t b = inp.find(sep, a);
        if (b == std::string::npos) break;
        const std::string text = inp.substr(a, b - a);
        const size_t line_end = out.find('\n', line_start);
        std::string expected = out.substr(line_start, line_end - line_start);
        if (!expected.empty() && expected[0] == ' ') expected.erase(0, 1);
        a = b + sep.size();
        line_start = line_end + 1;
        if (text.empty()) continue;
        const std::string f = write_temp("tok.txt", text);
        const CmdResult r = run_vega("tokenize -m " + quote(data_file("vocab/ggml-vocab-llama-bpe.gguf")) + " -f " + quote(f));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, expected + "\n") << "text: [" << text << "]";
        ++checked;
    }
    EXPECT_GE(checked, 40);
}

TEST(Cli, TokenizeBosAndSpecialFlags) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string m = quote(data_file("vocab/ggml-vocab-llama-bpe.gguf"));
    const CmdResult plain = run_vega("tokenize -m " + m + " -p 'Hello'");
    const CmdResult bos = run_vega("tokenize -m " + m + " -p 'Hello' --bos");
    ASSERT_EQ(plain.exit_code, 0);
    EXPECT_EQ(bos.out, "128000 " + plain.out);
    const CmdResult lit = run_vega("tokenize -m " + m + " -p '<|eot_id|>'");
    const CmdResult sp = run_vega("tokenize -m " + m + " -p '<|eot_id|>' --special");
    EXPECT_EQ(sp.out, "128009\n");
    EXPECT_NE(lit.out, "128009\n");
}

TEST(Cli, MissingAndCorruptModelsGiveOneLineErrors) {
    VEGA_REQUIRE_TEST_DATA();
    CmdResult r = run_vega("run -m /nonexistent/model.gguf -p hi");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_FALSE(r.err.empty());

    const std::string bytes = read_file(data_file("models/stories260K.gguf"));
    const std::string cut = write_temp("truncated.gguf", bytes.substr(0, 5000));
    r = run_vega("run -m " + quote(cut) + " -p hi -n 4");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("offset"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

    const std::string bad = write_temp("notgguf.gguf", "this is not a gguf file at all, really");
    r = run_vega("inspect " + quote(bad));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("magic"), std::string::npos) << r.err;
}

TEST(Cli, InspectPrintsMetadataAndTensors) {
    VEGA_REQUIRE_TEST_DATA();
    const CmdResult r = run_vega("inspect " + quote(data_file("models/synth-qwen2-q8_0.gguf")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* s : {"general.architecture", "qwen2", "blk.0.attn_q.bias", "Q8_0", "token_embd.weight"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST(Cli, SeededSamplingIsReproducible) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string cmd = "run -q -m " + quote(data_file("models/stories260K.gguf")) +
                            " -p 'Once upon a time' -n 24 --temp 0.9 --top-k 20 --seed 1234 --device " + test_device();
    const CmdResult a = run_vega(cmd), b = run_vega(cmd);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_GT(a.out.size(), std::string("Once upon a time").size() + 10);
}

TEST(Cli, RunReportsSpeedAndEvalRejectsBadTokens) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string model = quote(data_file("models/stories260K.gguf"));
    CmdResult r = run_vega("run -m " + model + " -p 'Lily' -n 8 --temp 0 --device " + test_device());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("load"), std::string::npos) << r.err;

    const std::string toks = write_temp("bad.tokens", "1 2 99999\n\n");
    r = run_vega("eval -m " + model + " --tokens-file " + quote(toks) + " --logits-out " + quote(temp_dir() + "/x.f32"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("99999"), std::string::npos) << r.err;
}

TEST(Cli, RunRejectsContextOverflowAndUnknownDevice) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string model = quote(data_file("models/stories260K.gguf"));
    CmdResult r = run_vega("run -m " + model + " -p 'Lily' -n 100 -c 16");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("context"), std::string::npos) << r.err;
    r = run_vega("run -m " + model + " -p 'Lily' -n 4 --device banana");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("banana"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vega::test

namespace vega::test {
namespace {

TEST(Cli, BenchJsonHasPromptAndGenerationTests) {
    VEGA_REQUIRE_TEST_DATA();
    const CmdResult r = run_vega("bench -m " + quote(data_file("models/stories260K.gguf")) +
                                 " -r 2 -p 16 -n 8 --json --device " + test_device());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Two entries, pp16 and tg8, each with a positive mean rate and two samples.
    for (const char* t : {"\"test\": \"pp16\"", "\"test\": \"tg8\"", "\"avg_ts\"", "\"stddev_ts\"", "\"samples_ts\""})
        EXPECT_NE(r.out.find(t), std::string::npos) << t << "\n" << r.out;
    EXPECT_EQ(r.out.find("\"avg_ts\": 0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vega::test
