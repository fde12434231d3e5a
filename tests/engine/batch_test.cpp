// Batched decode: one step over B sequences, each at its own position, gives the
// logits that B single-sequence steps give (B = 1, 3, 8, 33), and the Scheduler
// (continuous batching) generates exactly what each prompt generates alone. The
// device is $VEGA_TEST_DEVICE (default cpu): on the CPU rows are computed
// independently, so results must be bitwise equal; a GPU runs other kernels for
// one row than for many, so there the bound is the end-to-end tests' NMSE.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "engine/grammar_constraint.h"
#include "engine/scheduler.h"
#include "engine/session.h"
#include "grammar/json_schema.h"
#include "model/model.h"
#include "nmse.h"
#include "run_vega.h"
#include "test_data.h"

namespace vega::test {
namespace {

struct Loaded {
    std::unique_ptr<Backend> be;
    std::unique_ptr<Model> model;
};
Loaded load_model(const std::string& rel) {
    Loaded l;
    l.be = create_backend(test_device(), 2);
    l.model = Model::load(data_file(rel), *l.be, nullptr);
    return l;
}

// Prefix lengths 1..: sequence i holds prefix_len(i) tokens before the batched step.
int prefix_len(int i) { return 1 + (i * 7) % 23; }

class BatchedStep : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(BatchedStep, MatchesSingleSequenceSteps) {
    VEGA_REQUIRE_TEST_DATA();
    const auto& [rel, B] = GetParam();
    Loaded l = load_model(rel);
    const int n_vocab = l.model->hparams().n_vocab;
    std::mt19937 rng(uint32_t(B) * 31u + 7u);
    std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
    std::vector<std::vector<int32_t>> prefix(B);
    std::vector<int32_t> next(B);
    for (int i = 0; i < B; ++i) {
        prefix[i].resize(size_t(prefix_len(i)));
        for (auto& t : prefix[i]) t = tok(rng);
        next[i] = tok(rng);
    }
    ContextParams cp;
    cp.n_ctx = 64;
    cp.n_seq = B;
    cp.n_batch = 64;
    // Batched: every prefix in one batch (positions differ per sequence), then one step with B rows.
    Session batched(*l.model, *l.be, cp);
    std::vector<BatchToken> b;
    for (int i = 0; i < B; ++i)
        for (size_t p = 0; p < prefix[i].size(); ++p) b.push_back({prefix[i][p], int32_t(p), i, false, /*prompt=*/true});
    batched.decode(b);
    b.clear();
    for (int i = 0; i < B; ++i) b.push_back({next[i], int32_t(prefix[i].size()), i, true});
    const std::vector<float> got = batched.decode(b);
    ASSERT_EQ(got.size(), size_t(B) * n_vocab);
    // Reference: one sequence at a time, one token per step.
    cp.n_seq = 1;
    Session single(*l.model, *l.be, cp);
    const bool cpu = test_device() == "cpu";
    for (int i = 0; i < B; ++i) {
        single.eval(prefix[i], 0);
        const std::vector<float>& ref = single.eval({next[i]}, int(prefix[i].size()), 0, false, /*prompt=*/false);
        const float* row = got.data() + size_t(i) * n_vocab;
        const double e = nmse(row, ref.data(), size_t(n_vocab));
        if (cpu) EXPECT_EQ(e, 0.0) << "sequence " << i << " (position " << prefix[i].size() << ")";
        else EXPECT_LT(e, 5e-3) << "sequence " << i << " (position " << prefix[i].size() << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchedStep,
                         ::testing::Combine(::testing::Values("models/stories260K.gguf", "models/synth-llama-q4_0.gguf",
                                                              "models/synth-qwen3-q8_0.gguf", "models/synth-qwen2-q8_0.gguf"),
                                            ::testing::Values(1, 3, 8, 33)),
                         [](const auto& info) {
                             return data_file_id(std::get<0>(info.param)) + "_B" + std::to_string(std::get<1>(info.param));
                         });

// A batch whose prompt rows (BatchToken::prompt) and generated rows interleave: the
// session stages generated rows first and prompt rows after them (the backend's
// decode and tiled attention kernels), and still returns the wanted rows' logits in
// the caller's order, each equal to its sequence evaluated alone.
TEST(Session, PromptAndGeneratedRowsInterleavedKeepTheCallersOrder) {
    VEGA_REQUIRE_TEST_DATA();
    Loaded l = load_model("models/synth-llama-q4_0.gguf");
    const int n_vocab = l.model->hparams().n_vocab;
    const std::vector<int32_t> prompt0 = {5, 17, 42, 8, 99}, prefix1 = {7, 7, 300, 12, 61, 2, 44, 10, 3, 29};
    const int32_t gen1 = 77;
    ContextParams cp;
    cp.n_ctx = 32;
    cp.n_seq = 2;
    Session s(*l.model, *l.be, cp);
    std::vector<BatchToken> b;
    for (size_t p = 0; p < prefix1.size(); ++p) b.push_back({prefix1[p], int32_t(p), 1, false, true});
    s.decode(b);
    // seq 0's prompt with a generated row of seq 1 between its rows; rows 0, 1, 3, 5 want logits.
    b = {{prompt0[0], 0, 0, true, true},   {gen1, 10, 1, true, false},      {prompt0[1], 1, 0, false, true},
         {prompt0[2], 2, 0, true, true},   {prompt0[3], 3, 0, false, true}, {prompt0[4], 4, 0, true, true}};
    const std::vector<float> got = s.decode(b);
    ASSERT_EQ(got.size(), size_t(4) * n_vocab);
    cp.n_seq = 1;
    Session alone(*l.model, *l.be, cp);
    const std::vector<float> rows0 = alone.eval(prompt0, 0, 0, /*all_logits=*/true);
    Session alone1(*l.model, *l.be, cp);
    alone1.eval(prefix1, 0);
    const std::vector<float> row1 = alone1.eval({gen1}, int(prefix1.size()), 0, false, /*prompt=*/false);
    const float* want[4] = {rows0.data(), row1.data(), rows0.data() + size_t(2) * n_vocab,
                            rows0.data() + size_t(4) * n_vocab};
    const bool cpu = test_device() == "cpu";
    for (int i = 0; i < 4; ++i) {
        const double e = nmse(got.data() + size_t(i) * n_vocab, want[i], size_t(n_vocab));
        if (cpu) EXPECT_EQ(e, 0.0) << "wanted row " << i;
        else EXPECT_LT(e, 5e-3) << "wanted row " << i;
    }
}

// A context whose KV cache cannot fit says so before allocating it: the bytes needed,
// the bytes free, and what to lower.
TEST(Session, KvCacheThatCannotFitIsRefusedWithWhatToLower) {
    VEGA_REQUIRE_TEST_DATA();
    Loaded l = load_model("models/stories260K.gguf");
    ContextParams cp;
    cp.n_ctx = 1 << 20;
    cp.n_seq = 256;  // stories260K: 5 layers x 4 kv heads x 8 dims, f32: 320 GiB
    cp.kv_type = GgmlType::F32;
    if (l.be->free_memory() == 0) GTEST_SKIP() << "this backend cannot say how much memory is free";
    try {
        Session s(*l.model, *l.be, cp);
        FAIL() << "a 320 GiB KV cache was accepted";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("KV cache does not fit"), std::string::npos) << m;
        EXPECT_NE(m.find("GiB"), std::string::npos) << m;
        EXPECT_NE(m.find("lower -c/--ctx-size or --parallel"), std::string::npos) << m;
    }
    ContextParams ok;
    ok.n_ctx = 256;
    Session s(*l.model, *l.be, ok);
    KvCacheDesc d;
    d.n_layer = l.model->hparams().n_layer, d.n_seq = 1, d.n_ctx = 256, d.n_kv_head = l.model->hparams().n_head_kv;
    d.head_dim = l.model->hparams().head_dim;
    EXPECT_EQ(s.kv_bytes(), kv_cache_bytes(d));
}

// Greedy generation through the Scheduler (4 slots, 9 requests of different
// lengths joining as others finish, prompts chunked into a small batch) equals
// each prompt generated alone.
TEST(Scheduler, ContinuousBatchingEqualsOneAtATime) {
    VEGA_REQUIRE_TEST_DATA();
    Loaded l = load_model("models/stories260K.gguf");
    const Tokenizer& tk = l.model->tokenizer();
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily wanted to", "One day, a big",
                                              "Tom and Sue went to the park and", "The sun", "A bird sat on",
                                              "There was a girl named", "Max"};
    SamplerParams greedy;
    greedy.temperature = 0.f;
    auto generate = [&](int n_seq, int n_batch, const std::vector<size_t>& which) {
        ContextParams cp;
        cp.n_ctx = 96;
        cp.n_seq = n_seq;
        cp.n_batch = n_batch;
        Session s(*l.model, *l.be, cp);
        Scheduler sched(s, tk);
        std::vector<std::vector<int32_t>> out(prompts.size());
        std::vector<int> id_to_prompt;
        for (size_t i : which) {
            GenRequest r;
            r.prompt = tk.encode(prompts[i], true, false);
            r.sampling = greedy;
            r.n_predict = 20 + int(i) * 5;  // different lengths: slots free up at different steps
            r.ignore_eos = true;
            EXPECT_EQ(sched.submit(r), int(id_to_prompt.size()));
            id_to_prompt.push_back(int(i));
        }
        std::vector<FinishReason> reasons(which.size(), FinishReason::Cancelled);
        sched.run([&](int id, int32_t t) { out[size_t(id_to_prompt[size_t(id)])].push_back(t); return true; },
                  [&](int id, FinishReason r) { reasons[size_t(id)] = r; });
        for (FinishReason r : reasons) EXPECT_EQ(r, FinishReason::Length);
        EXPECT_TRUE(sched.idle());
        return out;
    };
    std::vector<size_t> all(prompts.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    const auto together = generate(4, 7, all);
    for (size_t i = 0; i < prompts.size(); ++i) {
        const auto alone = generate(1, 64, {i});
        EXPECT_EQ(together[i], alone[i]) << "prompt " << i << ": " << prompts[i];
        EXPECT_EQ(together[i].size(), size_t(20 + i * 5));
    }
}

// A slot keeps its cache: a second request that extends the first one's prompt
// only evaluates the new tokens, and gives what a fresh session gives.
TEST(Scheduler, ReusesTheLongestCachedPrefix) {
    VEGA_REQUIRE_TEST_DATA();
    Loaded l = load_model("models/stories260K.gguf");
    const Tokenizer& tk = l.model->tokenizer();
    ContextParams cp;
    cp.n_ctx = 128;
    cp.n_seq = 2;
    Session s(*l.model, *l.be, cp);
    Scheduler sched(s, tk);
    SamplerParams greedy;
    greedy.temperature = 0.f;
    GenRequest a;
    a.prompt = tk.encode("Once upon a time there was a dog", true, false);
    a.sampling = greedy;
    a.n_predict = 8;
    a.ignore_eos = true;
    std::vector<int32_t> first;
    sched.submit(a);
    sched.run([&](int, int32_t t) { first.push_back(t); return true; }, nullptr);
    const int64_t evaluated_before = sched.stats().prompt_tokens;
    // The follow-up re-sends the whole history plus new text (as a chat client does).
    GenRequest b = a;
    b.prompt.insert(b.prompt.end(), first.begin(), first.end());
    const std::vector<int32_t> more = tk.encode(" and a cat", false, false);
    b.prompt.insert(b.prompt.end(), more.begin(), more.end());
    std::vector<int32_t> second;
    sched.submit(b);
    sched.run([&](int, int32_t t) { second.push_back(t); return true; }, nullptr);
    // The cache held the first prompt and all but the last generated token.
    const int64_t reused = int64_t(a.prompt.size() + first.size() - 1);
    EXPECT_EQ(sched.stats().cached_tokens, reused);
    EXPECT_EQ(sched.stats().prompt_tokens - evaluated_before, int64_t(b.prompt.size()) - reused);
    // Same tokens as a fresh scheduler evaluating the whole prompt.
    Session s2(*l.model, *l.be, cp);
    Scheduler fresh(s2, tk);
    std::vector<int32_t> ref;
    fresh.submit(b);
    fresh.run([&](int, int32_t t) { ref.push_back(t); return true; }, nullptr);
    EXPECT_EQ(second, ref);
}

// A grammar's rows take the device's argmax or top-k candidates when the grammar allows
// enough of them, and their whole logits otherwise: either way each request generates
// exactly what Sampler::sample on the whole row with the grammar gives, greedy and
// sampling (top-k 3: the candidates serve; top-k 40: often too few allowed), alone and
// sharing steps with each other and with an unconstrained request.
TEST(Scheduler, GrammarRowsFromCandidatesEqualWholeRowSampling) {
    VEGA_REQUIRE_TEST_DATA();
    Loaded l = load_model("models/stories260K.gguf");
    const Tokenizer& tk = l.model->tokenizer();
    const auto schema = nlohmann::ordered_json::parse(
        R"({"type":"object","properties":{"name":{"type":"string","maxLength":24},"n":{"type":"integer"}},"required":["name","n"]})");
    auto g = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(grammar::json_schema_to_gbnf(schema)));
    struct Case {
        float temperature;
        int top_k;
        bool grammar;
    };
    const std::vector<Case> cases = {{0.f, 40, true}, {1.f, 3, true}, {1.f, 40, true}, {0.8f, 10, false}};
    auto request = [&](const Case& c, size_t i) {
        GenRequest r;
        r.prompt = tk.encode(i % 2 ? "The little dog" : "Once upon a time", true, false);
        r.sampling.temperature = c.temperature;
        r.sampling.top_k = c.top_k;
        r.sampling.seed = 1234 + i;
        r.n_predict = 40;
        if (c.grammar) r.grammar = g;
        return r;
    };
    // The reference: one sequence, whole logits every step, the sampler asking the grammar.
    auto reference = [&](const GenRequest& r) {
        ContextParams cp;
        cp.n_ctx = 96;
        Session s(*l.model, *l.be, cp);
        Sampler sp(r.sampling, l.model->hparams().n_vocab);
        std::unique_ptr<GrammarConstraint> gc;
        if (r.grammar) gc = std::make_unique<GrammarConstraint>(r.grammar, tk);
        for (int32_t t : r.prompt) sp.accept(t);
        std::vector<int32_t> out;
        std::vector<float> logits = s.eval(r.prompt, 0);
        while (int(out.size()) < r.n_predict) {
            const int32_t t = sp.sample(logits.data(), gc.get());
            if (t < 0) break;
            if (gc) gc->accept(t);
            sp.accept(t);
            out.push_back(t);
            if (tk.is_eog(t)) break;
            logits = s.eval({t}, int(r.prompt.size() + out.size()) - 1, 0, false, false);
        }
        return out;
    };
    auto scheduled = [&](const std::vector<GenRequest>& reqs, SchedulerStats* stats, int n_batch = 512) {
        ContextParams cp;
        cp.n_ctx = 96;
        cp.n_seq = int(reqs.size());
        cp.n_batch = n_batch;
        Session s(*l.model, *l.be, cp);
        Scheduler sched(s, tk);
        std::vector<std::vector<int32_t>> out(reqs.size());
        for (const GenRequest& r : reqs) sched.submit(r);
        sched.run([&](int id, int32_t t) { out[size_t(id)].push_back(t); return true; }, nullptr);
        *stats = sched.stats();
        return out;
    };
    std::vector<GenRequest> all;
    std::vector<std::vector<int32_t>> want;
    int64_t whole = 0, constrained = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        all.push_back(request(cases[i], i));
        want.push_back(reference(all.back()));
        ASSERT_FALSE(want.back().empty()) << "case " << i;
        SchedulerStats st;
        EXPECT_EQ(scheduled({all.back()}, &st)[0], want.back()) << "case " << i << " alone";
        if (cases[i].grammar) whole += st.whole_logits_rows, constrained += st.generated;
    }
    // Both ways served some rows.
    EXPECT_GT(whole, 0);
    EXPECT_LT(whole, constrained);
    SchedulerStats st;
    const auto together = scheduled(all, &st);
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(together[i], want[i]) << "case " << i << " together";
    // n_batch 2 with 4 slots: prompts and generated rows share steps differently; the same tokens.
    const auto chunked = scheduled(all, &st, 2);
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(chunked[i], want[i]) << "case " << i << " in chunks of 2";
}

// Session::logits_of: after a reduced step (argmax, top-k), the whole logits of chosen
// rows are the rows decode() gives for the same step; rows not in that step are refused.
TEST(Scheduler, LogitsOfRowsAfterAReducedStep) {
    VEGA_REQUIRE_TEST_DATA();
    Loaded l = load_model("models/stories260K.gguf");
    const int n_vocab = l.model->hparams().n_vocab;
    ContextParams cp;
    cp.n_ctx = 32;
    cp.n_seq = 3;
    auto batch = [] {
        std::vector<BatchToken> b;
        for (int s = 0; s < 3; ++s) b.push_back({int32_t(20 + s), 0, s, true});
        return b;
    };
    Session ref(*l.model, *l.be, cp);
    const std::vector<float> want = ref.decode(batch());
    Session s(*l.model, *l.be, cp);
    const std::vector<int32_t> greedy = s.decode_greedy(batch());
    ASSERT_EQ(greedy.size(), 3u);
    const std::vector<float> got = s.logits_of({0, 2});
    ASSERT_EQ(got.size(), 2u * size_t(n_vocab));
    EXPECT_LT(nmse(got.data(), want.data(), size_t(n_vocab)), 1e-10);
    EXPECT_LT(nmse(got.data() + n_vocab, want.data() + 2 * size_t(n_vocab), size_t(n_vocab)), 1e-10);
    EXPECT_THROW(s.logits_of({3}), Error);
    EXPECT_THROW(s.logits_of({-1}), Error);
}

TEST(Scheduler, StopsCancelsAndRejectsBadRequests) {
    VEGA_REQUIRE_TEST_DATA();
    Loaded l = load_model("models/stories260K.gguf");
    const Tokenizer& tk = l.model->tokenizer();
    ContextParams cp;
    cp.n_ctx = 32;
    cp.n_seq = 1;
    Session s(*l.model, *l.be, cp);
    Scheduler sched(s, tk);
    GenRequest r;
    r.prompt = tk.encode("Once upon a time", true, false);
    r.sampling.temperature = 0.f;
    r.n_predict = 1000;
    r.ignore_eos = true;
    // Too long for the context; empty; out of range.
    GenRequest too_long = r;
    too_long.prompt.assign(33, 5);
    EXPECT_THROW(sched.submit(too_long), std::exception);
    GenRequest empty = r;
    empty.prompt.clear();
    EXPECT_THROW(sched.submit(empty), std::exception);
    GenRequest bad = r;
    bad.prompt[1] = 1 << 20;
    EXPECT_THROW(sched.submit(bad), std::exception);
    // Runs until the context is full: ends with Length.
    std::vector<FinishReason> reasons;
    std::vector<int> ids;
    int n = 0;
    const int a = sched.submit(r);
    // A second request waits (one slot); the callback stops the first after 3 tokens.
    const int b = sched.submit(r);
    const int c = sched.submit(r);
    sched.cancel(c);  // cancelled while queued
    sched.run(
        [&](int id, int32_t) { return !(id == a && ++n == 3); },
        [&](int id, FinishReason why) {
            ids.push_back(id);
            reasons.push_back(why);
        });
    ASSERT_EQ(ids.size(), 3u);
    EXPECT_EQ(ids[0], c);
    EXPECT_EQ(reasons[0], FinishReason::Cancelled);
    EXPECT_EQ(ids[1], a);
    EXPECT_EQ(reasons[1], FinishReason::Stop);
    EXPECT_EQ(ids[2], b);
    EXPECT_EQ(reasons[2], FinishReason::Length);  // the context (32 cells) ran out
    EXPECT_EQ(n, 3);
}

}  // namespace
}  // namespace vega::test
