// Session graph replay of batched decode steps (ContextParams::batch_graphs): on a
// backend that records and replays ops like a CUDA graph, steps of 2..64 sequences
// padded to their bucket give exactly what the same steps give op by op, for whole
// logits, argmax and top-k, and generation through the Scheduler is unchanged.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/session.h"
#include "model/model.h"
#include "recording_backend.h"
#include "test_data.h"

namespace vega::test {
namespace {

TEST(BatchGraphs, BucketStepsEqualOpByOpSteps) {
    VEGA_REQUIRE_TEST_DATA();
    RecordingBackend rec(2);
    auto cpu = make_cpu_backend(2);
    auto m_rec = Model::load(data_file("models/synth-qwen3-q8_0.gguf"), rec, nullptr);
    auto m_cpu = Model::load(data_file("models/synth-qwen3-q8_0.gguf"), *cpu, nullptr);
    ContextParams cp;
    cp.n_ctx = 48;
    cp.n_seq = 40;
    cp.n_batch = 64;
    cp.batch_graphs = true;
    Session g(*m_rec, rec, cp);
    cp.batch_graphs = false;
    Session plain(*m_cpu, *cpu, cp);
    const int n_vocab = m_cpu->hparams().n_vocab;
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
    std::vector<int> len(40, 0);  // tokens in each sequence's cache
    // Steps of 3, 5, 2, 33 and 40 sequences (buckets 4, 8, 2, 48, 64), each sequence
    // at its own position; every selection mode.
    int step = 0;
    for (int B : {3, 5, 2, 33, 40, 3}) {
        std::vector<BatchToken> b;
        for (int i = 0; i < B; ++i) {
            const int s = (i * 7 + step) % 40;
            bool dup = false;
            for (const BatchToken& t : b) dup |= t.seq == s;
            if (dup) continue;
            b.push_back({tok(rng), len[size_t(s)], s, true});
        }
        for (const BatchToken& t : b) ++len[size_t(t.seq)];
        if (step % 3 == 0) {
            const std::vector<float> a = g.decode(b), r = plain.decode(b);
            ASSERT_EQ(a.size(), r.size());
            EXPECT_EQ(a, r) << "logits, step " << step << ", " << b.size() << " rows";
        } else if (step % 3 == 1) {
            const std::vector<int32_t> a = g.decode_greedy(b), r = plain.decode_greedy(b);
            EXPECT_EQ(a, r) << "argmax, step " << step;
        } else {
            const Session::TopK a = g.decode_top_k(b, 5), r = plain.decode_top_k(b, 5);
            EXPECT_EQ(a.ids, r.ids) << "top-k, step " << step;
            EXPECT_EQ(a.logits, r.logits) << "top-k, step " << step;
        }
        ++step;
    }
    EXPECT_EQ(g.batch_graph_replays(), 6);  // every step went through a bucket graph
    EXPECT_EQ(plain.batch_graph_replays(), 0);
    // One-row steps: the one-token graph (ids block of stride 1), every selection mode.
    for (int i = 0; i < 3; ++i) {
        const int s = 5 + i;
        const std::vector<BatchToken> b = {{tok(rng), len[size_t(s)]++, s, true}};
        if (i == 0) {
            EXPECT_EQ(g.decode(b), plain.decode(b)) << "one-row logits";
        } else if (i == 1) {
            EXPECT_EQ(g.decode_greedy(b), plain.decode_greedy(b)) << "one-row argmax";
        } else {
            EXPECT_EQ(g.decode_top_k(b, 5).ids, plain.decode_top_k(b, 5).ids) << "one-row top-k";
        }
    }
    EXPECT_EQ(g.batch_graph_replays(), 6);  // (not a bucket step)
}

TEST(BatchGraphs, SchedulerGenerationIsUnchanged) {
    VEGA_REQUIRE_TEST_DATA();
    RecordingBackend rec(2);
    auto cpu = make_cpu_backend(2);
    auto m_rec = Model::load(data_file("models/stories260K.gguf"), rec, nullptr);
    auto m_cpu = Model::load(data_file("models/stories260K.gguf"), *cpu, nullptr);
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily wanted to", "One day",
                                              "Tom and Sue", "The sun"};
    auto generate = [&](const Model& m, Backend& be, bool graphs, int* replays) {
        ContextParams cp;
        cp.n_ctx = 64;
        cp.n_seq = 4;
        cp.n_batch = 64;
        cp.batch_graphs = graphs;
        Session s(m, be, cp);
        Scheduler sched(s, m.tokenizer());
        std::vector<std::vector<int32_t>> out(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) {
            GenRequest r;
            r.prompt = m.tokenizer().encode(prompts[i], true, false);
            r.sampling.temperature = 0.f;
            r.n_predict = 12 + int(i) * 3;
            r.ignore_eos = true;
            sched.submit(r);
        }
        sched.run([&](int id, int32_t t) { out[size_t(id)].push_back(t); return true; }, nullptr);
        *replays = s.batch_graph_replays();
        return out;
    };
    int with = 0, without = 0;
    const auto a = generate(*m_rec, rec, true, &with);
    const auto b = generate(*m_cpu, *cpu, false, &without);
    EXPECT_EQ(a, b);
    EXPECT_GT(with, 10);
    EXPECT_EQ(without, 0);
}

}  // namespace
}  // namespace vega::test
