// Layer split (Model::load over several backends, --devices/--split-mode layer): a
// model whose layers are spread over two or three backends gives the same logits as
// on one, for prompts, single-token steps, batched steps and greedy/top-k selection,
// with and without graph replay (RecordingBackend: the CPU recording ops as a GPU
// graph does); the ranges follow the shares; the weights and caches sit where the
// placement says.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "engine/session.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model_copy.h"
#include "recording_backend.h"
#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

TEST(LayerSplit, RangesFollowTheShares) {
    EXPECT_EQ(split_layers(4, {1, 1}), (std::vector<int>{0, 2, 4}));
    EXPECT_EQ(split_layers(32, {3, 1}), (std::vector<int>{0, 24, 32}));
    EXPECT_EQ(split_layers(7, {1}), (std::vector<int>{0, 7}));
    EXPECT_EQ(split_layers(80, {24, 24, 16}), (std::vector<int>{0, 30, 60, 80}));
    // Free memory in bytes works as shares too.
    EXPECT_EQ(split_layers(10, {30e9, 10e9}), (std::vector<int>{0, 8, 10}));
    // Every device keeps at least one layer while there are enough.
    EXPECT_EQ(split_layers(2, {3, 1}), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(split_layers(3, {1, 8, 1}), (std::vector<int>{0, 1, 2, 3}));
}

TEST(LayerSplit, RefusesADeviceWithoutLayers) {
    try {
        split_layers(2, {1, 1, 1});
        FAIL() << "three devices for two layers";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no layer"), std::string::npos) << e.what();
    }
    EXPECT_THROW(split_layers(8, {1, 0}), Error);
    EXPECT_THROW(split_layers(8, {0, 0}), Error);
    EXPECT_THROW(split_layers(8, {-1, 2}), Error);
}

// Random decode work on one sequence set: a prompt per sequence (prompt rows), then
// single-token and batched steps, each wanting logits, argmax or top-k.
struct Results {
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<int32_t>> ids;
};

Results drive(Session& s, int n_vocab, int n_seq) {
    Results out;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
    std::vector<int> len(size_t(n_seq), 0);
    for (int q = 0; q < n_seq; ++q) {
        std::vector<BatchToken> b;
        for (int i = 0; i < 9 + q; ++i) b.push_back({tok(rng), i, q, i % 4 == 0, true});
        len[size_t(q)] = int(b.size());
        out.logits.push_back(s.decode(b));
    }
    for (int step = 0; step < 8; ++step) {
        std::vector<BatchToken> b;
        const int rows = step % 2 ? n_seq : 1;
        for (int q = 0; q < rows; ++q) b.push_back({tok(rng), len[size_t(q)]++, q, true});
        switch (step % 3) {
            case 0: out.logits.push_back(s.decode(b)); break;
            case 1: out.ids.push_back(s.decode_greedy(b)); break;
            default: {
                const Session::TopK& t = s.decode_top_k(b, 4);
                out.ids.push_back(t.ids);
                out.logits.push_back(t.logits);
            }
        }
    }
    return out;
}

void expect_same(const Results& a, const Results& b, const std::string& what) {
    ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
    for (size_t i = 0; i < a.logits.size(); ++i) EXPECT_EQ(a.logits[i], b.logits[i]) << what << ", logits call " << i;
    ASSERT_EQ(a.ids.size(), b.ids.size()) << what;
    for (size_t i = 0; i < a.ids.size(); ++i) EXPECT_EQ(a.ids[i], b.ids[i]) << what << ", ids call " << i;
}

ContextParams params(bool batch_graphs) {
    ContextParams cp;
    cp.n_ctx = 64;
    cp.n_seq = 3;
    cp.n_batch = 64;
    cp.batch_graphs = batch_graphs;
    return cp;
}

// Every model kind the tests carry: llama (tied output), qwen2 (biases), qwen3
// (q/k norms), qwen3moe (routed experts).
const char* const kModels[] = {"models/stories260K.gguf", "models/synth-qwen2-q8_0.gguf",
                               "models/synth-qwen3-q8_0.gguf", "moe/synth-qwen3moe-q8_0.gguf"};

// drive() on the model alone on one CPU backend; its vocabulary size and layer count in n_vocab, n_layer.
Results on_one_device(const char* rel, int& n_vocab, int& n_layer) {
    auto one = make_cpu_backend(2);
    auto m = Model::load(data_file(rel), *one, nullptr);
    Session s(*m, *one, params(false));
    n_vocab = m->hparams().n_vocab, n_layer = m->hparams().n_layer;
    return drive(s, n_vocab, 3);
}

TEST(LayerSplit, TwoBackendsEqualOne) {
    VEGA_REQUIRE_TEST_DATA();
    for (const char* rel : kModels) {
        int V = 0, n_layer = 0;
        const Results want = on_one_device(rel, V, n_layer);
        for (const std::vector<double>& shares : {std::vector<double>{1, 1}, std::vector<double>{3, 1}}) {
            auto a = make_cpu_backend(1), b = make_cpu_backend(1);
            auto m2 = Model::load(data_file(rel), {a.get(), b.get()}, shares, nullptr);
            ASSERT_EQ(m2->stages().size(), 2u);
            EXPECT_EQ(m2->stages()[0].first_layer, 0);
            EXPECT_EQ(m2->stages()[1].end_layer, m2->hparams().n_layer);
            EXPECT_EQ(m2->stages()[0].end_layer, m2->stages()[1].first_layer);
            Session s2(*m2, params(false));
            expect_same(drive(s2, V, 3), want, std::string(rel) + " split " + std::to_string(shares[0]));
        }
    }
}

// Graph replay per stage (one-token and bucketed batch steps) equals one backend op by op.
TEST(LayerSplit, StageGraphsEqualOneBackend) {
    VEGA_REQUIRE_TEST_DATA();
    for (const char* rel : kModels) {
        int V = 0, n_layer = 0;
        const Results want = on_one_device(rel, V, n_layer);
        RecordingBackend r0(1), r1(1), r2(1);
        std::vector<Backend*> devs{&r0, &r1};
        if (n_layer >= 3) devs.push_back(&r2);
        auto m2 = Model::load(data_file(rel), devs, {}, nullptr);
        Session s2(*m2, params(true));
        ASSERT_TRUE(s2.use_graphs());
        expect_same(drive(s2, V, 3), want, std::string(rel) + " with graphs");
        EXPECT_GT(r0.replays(), 0) << rel;
        EXPECT_GT(s2.batch_graph_replays(), 0) << rel;
    }
}

TEST(LayerSplit, WeightsAndCachesSitOnTheirStage) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string tied = tied_copy(data_file("models/stories260K.gguf"), "stories260K-tied.gguf");
    auto a = make_cpu_backend(1), b = make_cpu_backend(1);
    auto m = Model::load(tied, {a.get(), b.get()}, {1, 1}, nullptr);
    const auto& st = m->stages();
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(&m->first_backend(), a.get());
    EXPECT_EQ(&m->last_backend(), b.get());
    // A tied output reads the embedding: each end holds a copy (the CPU's
    // point into the same mapping), counted once in the total.
    EXPECT_TRUE(m->hparams().tied_output);
    EXPECT_GT(st[0].weight_bytes + st[1].weight_bytes, m->weight_bytes());
    const std::string where = m->describe_placement();
    EXPECT_NE(where.find("layers 0-"), std::string::npos) << where;
    // A session over the split holds both stages' caches; a session naming one backend is refused.
    ContextParams cp = params(false);
    Session s(*m, cp);
    auto one = make_cpu_backend(1);
    auto m1 = Model::load(tied, *one, nullptr);
    Session s1(*m1, *one, cp);
    EXPECT_EQ(s.kv_bytes(), s1.kv_bytes());
    // ... and the split model computes what the unsplit one does.
    const int V = m->hparams().n_vocab;
    expect_same(drive(s, V, 3), drive(s1, V, 3), "tied output");
    EXPECT_THROW(Session(*m, *a, cp), Error);
    // --tensor-split with the wrong count names it.
    try {
        Model::load(data_file("models/stories260K.gguf"), {a.get(), b.get()}, {1, 1, 1}, nullptr);
        FAIL() << "three shares for two devices";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--tensor-split"), std::string::npos) << e.what();
    }
}

// The command line: a split over two CPU backends gives the ids of one device; bad
// options are one line naming them.
TEST(LayerSplit, CommandLine) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string m = quote(data_file("models/stories260K.gguf"));
    const std::string base = "run -m " + m + " -p 'Once upon a time' -n 12 --temp 0 -t 1 ";
    const CmdResult one = run_vega(base + "--device cpu");
    ASSERT_EQ(one.exit_code, 0) << one.err;
    for (const std::string split : {"--devices cpu,cpu", "--devices cpu,cpu --tensor-split 1,3",
                                    "--devices cpu,cpu --split-mode tensor", "--devices cpu,cpu --split-mode none"}) {
        const CmdResult r = run_vega(base + split);
        ASSERT_EQ(r.exit_code, 0) << split << ": " << r.err;
        EXPECT_EQ(r.out, one.out) << split;
        if (split.find("none") == std::string::npos)
            EXPECT_NE(r.err.find("2 devices ("), std::string::npos) << split << ": " << r.err;
    }
    const struct {
        std::string args, says;
    } bad[] = {
        {"--devices cpu,cpu --split-mode rows", "unknown --split-mode 'rows'"},
        {"--devices cpu,,cpu", "empty item"},
        {"--device cpu --tensor-split 1,1", "--tensor-split needs --devices"},
        {"--devices cpu,cpu --tensor-split 1,x", "'x' is not a non-negative number"},
        {"--devices cpu,cpu --tensor-split 1,1,1", "3 value(s) for 2 device(s)"},
        {"--devices cpu,cpu --split-mode tensor --tensor-split 1,3", "splits every layer evenly"},
        {"--device cpu --devices cpu,cpu", "excludes"},
    };
    for (const auto& b : bad) {
        const CmdResult r = run_vega(base + b.args);
        EXPECT_NE(r.exit_code, 0) << b.args;
        EXPECT_NE(r.err.find(b.says), std::string::npos) << b.args << ": " << r.err;
    }
}

}  // namespace
}  // namespace vega::test
