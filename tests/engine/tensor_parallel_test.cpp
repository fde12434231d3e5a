// Tensor parallel (--split-mode tensor) on two and four in-process CPU ranks with the
// host-memory all-reduce: each rank holds its share of every layer's heads (q, k, v by
// rows, o by columns) and FFN rows (gate, up by rows, down by columns) or experts (whole
// experts by device; every rank routes, and computes the chosen ones it holds), and the logits
// equal the unsplit model's up to the order of float sums (the parts are summed per
// device, then across; with quantized activations, an int8 code rounded the other way).
// Shapes that do not divide are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "engine/session.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/route_trace.h"
#include "model/synth.h"
#include "model_copy.h"
#include "recording_backend.h"
#include "test_data.h"

namespace vega::test {
namespace {

// A prompt per sequence, then single-token and batched steps; every row's logits.
std::vector<std::vector<float>> drive(Session& s, int n_vocab) {
    std::vector<std::vector<float>> out;
    std::mt19937 rng(9);
    std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
    std::vector<int> len(2, 0);
    for (int q = 0; q < 2; ++q) {
        std::vector<BatchToken> b;
        for (int i = 0; i < 11 + q; ++i) b.push_back({tok(rng), i, q, true, true});
        len[size_t(q)] = int(b.size());
        out.push_back(s.decode(b));
    }
    for (int step = 0; step < 6; ++step) {
        std::vector<BatchToken> b;
        for (int q = 0; q < (step % 2 ? 2 : 1); ++q) b.push_back({tok(rng), len[size_t(q)]++, q, true});
        out.push_back(s.decode(b));
    }
    return out;
}

double nmse(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) num += double(a[i] - b[i]) * (a[i] - b[i]), den += double(b[i]) * b[i];
    return den > 0 ? num / den : num;
}

// A tensor-parallel placement over `ranks` one-thread CPU backends, owned by `owned`.
Placement cpu_tensor_placement(int ranks, std::vector<std::unique_ptr<Backend>>& owned) {
    Placement p;
    p.mode = SplitMode::kTensor;
    for (int r = 0; r < ranks; ++r) {
        owned.push_back(make_cpu_backend(1));
        p.devices.push_back(owned.back().get());
    }
    return p;
}

ContextParams params() {
    ContextParams cp;
    cp.n_ctx = 64;
    cp.n_seq = 2;
    cp.n_batch = 16;  // prompts in several chunks
    return cp;
}

// llama (f32), qwen2 (q/k/v biases, Q8_0), qwen3 (q/k norms, f32 and Q8_0), qwen3moe
// (routed experts, f32 and Q8_0).
const char* const kModels[] = {"models/stories260K.gguf",      "models/synth-qwen2-q8_0.gguf",
                               "models/synth-qwen3-f32.gguf",  "models/synth-qwen3-q8_0.gguf",
                               "moe/synth-qwen3moe-f32.gguf", "moe/synth-qwen3moe-q8_0.gguf"};

TEST(TensorParallel, RanksWithHostAllReduceEqualTheUnsplitModel) {
    VEGA_REQUIRE_TEST_DATA();
    for (const char* rel : kModels) {
        auto one = make_cpu_backend(2);
        auto m1 = Model::load(data_file(rel), *one, nullptr);
        Session s1(*m1, *one, params());
        const int V = m1->hparams().n_vocab;
        const auto want = drive(s1, V);
        for (int ranks : {2, 4}) {
            if (m1->hparams().n_head_kv % ranks) continue;  // (stories260K: 4 KV heads; the synth ones 2)
            std::vector<std::unique_ptr<Backend>> owned;
            const Placement p = cpu_tensor_placement(ranks, owned);
            auto m = Model::load(data_file(rel), p, nullptr);
            ASSERT_EQ(m->split_mode(), SplitMode::kTensor);
            ASSERT_EQ(m->stages().size(), size_t(ranks));
            EXPECT_EQ(m->stages()[1].n_head * ranks, m->hparams().n_head);
            EXPECT_EQ(m->stages()[1].n_head_kv * ranks, m->hparams().n_head_kv);
            if (m->hparams().moe()) {
                EXPECT_EQ(m->stages()[1].n_expert * ranks, m->hparams().n_expert);
                EXPECT_EQ(m->stages()[1].first_expert, m->stages()[1].n_expert);
                EXPECT_EQ(m->weights(1).layers[0].ffn_gate_exps.n_mat, m->stages()[1].n_expert);
            } else {
                EXPECT_EQ(m->stages()[1].n_ff * ranks, m->hparams().n_ff);
            }
            // Each rank holds about 1/ranks of the layers' weights (plus its own embedding).
            EXPECT_LT(m->stages()[1].weight_bytes, m->weight_bytes());
            Session s(*m, params());
            EXPECT_NE(s.collective_name().find("host memory"), std::string::npos) << s.collective_name();
            EXPECT_EQ(s.kv_bytes(), s1.kv_bytes()) << "the KV heads are split, not copied";
            const auto got = drive(s, V);
            ASSERT_EQ(got.size(), want.size());
            double worst = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(got[i].size(), want[i].size()) << rel << " call " << i;
                worst = std::max(worst, nmse(got[i], want[i]));
            }
            // f32 weights: only the order of float sums differs. Q8_0: x + (the sum of the
            // parts) rounds apart from x + the whole block's output by an ulp now and then,
            // and so may round an int8 code of the next block's input the other way
            // (measured 3e-7 to 7e-5; the dense bound against other implementations is 5e-3).
            // (An expert's weight is the same on every rank: each routes the same x.)
            const double bound = std::string(rel).find("q8_0") != std::string::npos ? 1e-3 : 1e-8;
            EXPECT_LT(worst, bound) << rel << " over " << ranks << " ranks";
            std::printf("[ %s, %d ranks ] worst call NMSE %.3g against one device\n", rel, ranks, worst);
        }
    }
}

// The rows of stories260K's output matrix all made row 0's: every logit of a row equal,
// so every share's argmax ties with every other's.
std::string flat_output_copy(const std::string& src, const std::string& name) {
    std::vector<uint8_t> flat;
    return model_copy(src, name, [&](const gguf::TensorInfo& t, const uint8_t*& data) {
        if (t.name == "output.weight") {
            const size_t row = size_t(t.n_bytes) / size_t(t.ne[1]);
            flat.resize(size_t(t.n_bytes));
            for (int64_t r = 0; r < t.ne[1]; ++r) std::memcpy(flat.data() + size_t(r) * row, t.data, row);
            data = flat.data();
        }
        return true;
    });
}

// Each rank computes the logits of its share of the vocabulary (the output matrix split
// by rows, contiguous, in rank order); the session merges the shares on the host. Whole
// rows, argmaxes and top-k equal one device's, and ties across shares go to the lowest id
// as on one device.
TEST(TensorParallel, VocabularySharesMergeAsOneDevice) {
    VEGA_REQUIRE_TEST_DATA();
    EXPECT_EQ(split_vocab(128256, 2), (std::vector<int64_t>{0, 64128, 128256}));
    EXPECT_EQ(split_vocab(151936, 4), (std::vector<int64_t>{0, 37952, 75968, 113920, 151936}));
    EXPECT_EQ(split_vocab(200, 3), (std::vector<int64_t>{0, 64, 128, 200}));  // starts on 64 rows
    EXPECT_EQ(split_vocab(100, 4), (std::vector<int64_t>{0, 25, 50, 75, 100}));
    for (const char* rel : {"models/stories260K.gguf", "models/synth-qwen3-f32.gguf"}) {
        auto one = make_cpu_backend(2);
        auto m1 = Model::load(data_file(rel), *one, nullptr);
        const int V = m1->hparams().n_vocab;
        for (int ranks : {2, 4}) {
            if (m1->hparams().n_head_kv % ranks) continue;
            std::vector<std::unique_ptr<Backend>> owned;
            auto m = Model::load(data_file(rel), cpu_tensor_placement(ranks, owned), nullptr);
            int64_t next = 0;
            for (size_t r = 0; r < m->stages().size(); ++r) {
                const ModelStage& st = m->stages()[r];
                EXPECT_EQ(st.first_vocab, next) << rel << " rank " << r;
                EXPECT_GT(st.n_vocab, 0) << rel << " rank " << r;
                EXPECT_EQ(m->weights(r).output.n_out, st.n_vocab) << rel << " rank " << r;
                next = st.first_vocab + st.n_vocab;
            }
            EXPECT_EQ(next, V) << rel;
            EXPECT_EQ(m->output_stages().size(), size_t(ranks));
            EXPECT_NE(m->describe_placement().find("logits 0-"), std::string::npos) << m->describe_placement();
            Session s1(*m1, *one, params()), s(*m, params());
            std::vector<BatchToken> prompt;
            for (int i = 0; i < 12; ++i) prompt.push_back({int32_t(3 + (i * 37) % (V - 3)), i, 0, true, true});
            const std::string what = std::string(rel) + " over " + std::to_string(ranks) + " ranks";
            EXPECT_EQ(s.decode_greedy(prompt), s1.decode_greedy(prompt)) << what;
            // logits_of after a reduced decode: the rows from every share.
            const std::vector<int> rows{0, 4, 5, 11};
            const std::vector<float> want_rows = s1.logits_of(rows), got_rows = s.logits_of(rows);
            EXPECT_LT(nmse(got_rows, want_rows), 1e-8) << what;
            for (int k : {1, 7, 64}) {
                const Session::TopK want = s1.decode_top_k(prompt, k), got = s.decode_top_k(prompt, k);
                EXPECT_EQ(got.ids, want.ids) << what << " k=" << k;
                ASSERT_EQ(got.logits.size(), want.logits.size());
                for (size_t i = 0; i < got.logits.size(); ++i)
                    ASSERT_NEAR(got.logits[i], want.logits[i], 1e-4 * std::max(1.f, std::fabs(want.logits[i])))
                        << what << " k=" << k << " entry " << i;
            }
        }
    }
    // VEGA_TP_VOCAB_SPLIT=0 (the A/B switch): device 0 computes every logit, the same ones.
    {
        auto one = make_cpu_backend(2);
        auto m1 = Model::load(data_file("models/stories260K.gguf"), *one, nullptr);
        struct Switch {  // set for the load only, unset however it ends
            Switch() { ::setenv("VEGA_TP_VOCAB_SPLIT", "0", 1); }
            ~Switch() { ::unsetenv("VEGA_TP_VOCAB_SPLIT"); }
        };
        std::vector<std::unique_ptr<Backend>> owned;
        std::unique_ptr<Model> m;
        {
            const Switch off;
            m = Model::load(data_file("models/stories260K.gguf"), cpu_tensor_placement(2, owned), nullptr);
        }
        EXPECT_EQ(m->stages()[0].n_vocab, m1->hparams().n_vocab);
        EXPECT_EQ(m->stages()[1].n_vocab, 0);
        EXPECT_EQ(m->output_stages(), std::vector<size_t>{0});
        Session s1(*m1, *one, params()), s(*m, params());
        const std::vector<BatchToken> prompt{{1, 0, 0, true, true}, {300, 1, 0, true, true}, {42, 2, 0, true, true}};
        EXPECT_EQ(s.decode_greedy(prompt), s1.decode_greedy(prompt));
        EXPECT_LT(nmse(s.decode(prompt), s1.decode(prompt)), 1e-8);
    }
    // Every logit of a row equal: the argmax is 0 and the top-k 0..k-1, over any split.
    const std::string flat = flat_output_copy(data_file("models/stories260K.gguf"), "stories260K-flat.gguf");
    for (int ranks : {1, 2, 4}) {
        std::vector<std::unique_ptr<Backend>> owned;
        auto m = Model::load(flat, cpu_tensor_placement(ranks, owned), nullptr);
        Session s(*m, params());
        const std::vector<BatchToken> prompt{{1, 0, 0, true, true}, {7, 1, 0, true, true}};
        EXPECT_EQ(s.decode_greedy(prompt), (std::vector<int32_t>{0, 0})) << ranks << " ranks";
        const Session::TopK t = s.decode_top_k(prompt, 64);
        for (size_t i = 0; i < t.ids.size(); ++i)
            ASSERT_EQ(t.ids[i], int32_t(i % 64)) << ranks << " ranks, entry " << i;
    }
}

// Whole rows, argmaxes and top-k (k = 64 too, wider than a share of 37 rows) of prompts,
// one-token steps and batched steps (3 rows in a bucket of 4, and 4): `graphs` the
// session's captured steps, else op by op.
struct Drive {
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<int32_t>> ids;
};
Drive drive_steps(Session& s, int n_vocab) {
    Drive out;
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
    std::vector<int> len(4, 0);
    for (int q = 0; q < 4; ++q) {
        std::vector<BatchToken> b;
        for (int i = 0; i < 5 + q; ++i) b.push_back({tok(rng), i, q, i % 3 == 0, true});
        len[size_t(q)] = int(b.size());
        out.logits.push_back(s.decode(b));
    }
    for (int step = 0; step < 9; ++step) {
        std::vector<BatchToken> b;
        const int rows = step % 3 == 0 ? 1 : step % 3 == 1 ? 3 : 4;
        for (int q = 0; q < rows; ++q) b.push_back({tok(rng), len[size_t(q)]++, q, true});
        out.ids.push_back(s.decode_greedy(b));
        const Session::TopK& t = s.decode_top_k(b, step % 2 ? 64 : 5);
        out.ids.push_back(t.ids);
        out.logits.push_back(t.logits);
        out.logits.push_back(s.logits_of({0, rows - 1}));  // (after the top-k: its rows)
    }
    return out;
}

// The decode graphs under tensor parallel (captured one-token and bucket steps: each
// device's argmax, its logit and its top-k written into the step's ids block) give the same
// bits as the same split run op by op: on the tests' recording backends, whose graphs the
// host all-reduce replays with (Backend::records_host_calls). A model of 300 tokens over 8
// ranks has shares of 37 and 38 rows, narrower than a top-64; stories260K is also run with
// its output tied to the embedding (each rank a copy of its rows of the table).
TEST(TensorParallel, DecodeGraphsMergeTheSharesAsOpByOp) {
    VEGA_REQUIRE_TEST_DATA();
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(::testing::TempDir()) / ("vega-tp-graphs-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    SynthShape narrow = find_synth_shape("tiny");
    narrow.name = "tiny-8kv-300", narrow.n_head = 8, narrow.n_head_kv = 8, narrow.n_vocab = 300;
    const std::string narrow_path = (dir / "narrow.gguf").string();
    write_synth_model(narrow, GgmlType::F32, narrow_path, 5);
    const std::string stories = data_file("models/stories260K.gguf");
    const std::string tied = tied_copy(stories, "stories260K-tied-tp.gguf");
    for (const auto& [path, ranks] : {std::pair{stories, 2}, {stories, 4}, {tied, 2}, {narrow_path, 8}}) {
        const std::string what = path + " over " + std::to_string(ranks) + " ranks";
        ContextParams cp;
        cp.n_ctx = 64, cp.n_seq = 4, cp.n_batch = 64, cp.batch_graphs = true;
        std::vector<std::unique_ptr<Backend>> owned;
        auto m_ops = Model::load(path, cpu_tensor_placement(ranks, owned), nullptr);
        Session ops(*m_ops, cp);
        ASSERT_FALSE(ops.use_graphs()) << what;
        std::vector<std::unique_ptr<RecordingBackend>> rec;
        Placement p;
        p.mode = SplitMode::kTensor;
        for (int r = 0; r < ranks; ++r) {
            rec.push_back(std::make_unique<RecordingBackend>(1));
            p.devices.push_back(rec.back().get());
        }
        auto m = Model::load(path, p, nullptr);
        if (path == tied) EXPECT_TRUE(m->hparams().tied_output);
        Session graphs(*m, cp);
        ASSERT_TRUE(graphs.use_graphs()) << what;
        const int V = m->hparams().n_vocab;
        const Drive want = drive_steps(ops, V), got = drive_steps(graphs, V);
        EXPECT_GT(rec[0]->replays(), 0) << what;
        EXPECT_GT(graphs.batch_graph_replays(), 0) << what;
        ASSERT_EQ(got.ids.size(), want.ids.size());
        for (size_t i = 0; i < got.ids.size(); ++i) EXPECT_EQ(got.ids[i], want.ids[i]) << what << ", ids call " << i;
        ASSERT_EQ(got.logits.size(), want.logits.size());
        for (size_t i = 0; i < got.logits.size(); ++i)
            EXPECT_EQ(got.logits[i], want.logits[i]) << what << ", logits call " << i;
    }
    fs::remove_all(dir);
}

// VEGA_STEP_REPLAYS=2 (the host-gap diagnostic) replays every decode graph twice a step:
// a step is idempotent, so the bits equal one replay's, on one device and over 2 ranks,
// and each backend replays exactly twice as often.
TEST(TensorParallel, DecodeGraphsReplayedTwiceAStepGiveTheSameBits) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string path = data_file("models/stories260K.gguf");
    struct Run {
        Drive d;
        int replays = 0;
    };
    auto run = [&](int ranks, const char* replays) {
        if (replays) ::setenv("VEGA_STEP_REPLAYS", replays, 1);
        else ::unsetenv("VEGA_STEP_REPLAYS");
        ContextParams cp;
        cp.n_ctx = 64, cp.n_seq = 4, cp.n_batch = 64, cp.batch_graphs = true;
        std::vector<std::unique_ptr<RecordingBackend>> rec;
        Placement p;
        p.mode = ranks > 1 ? SplitMode::kTensor : SplitMode::kLayer;
        for (int r = 0; r < ranks; ++r) {
            rec.push_back(std::make_unique<RecordingBackend>(1));
            p.devices.push_back(rec.back().get());
        }
        auto m = Model::load(path, p, nullptr);
        Session s(*m, cp);
        EXPECT_TRUE(s.use_graphs());
        Run r;
        r.d = drive_steps(s, m->hparams().n_vocab);
        r.replays = rec[0]->replays();
        ::unsetenv("VEGA_STEP_REPLAYS");
        return r;
    };
    for (int ranks : {1, 2}) {
        const Run once = run(ranks, nullptr), twice = run(ranks, "2");
        const std::string what = std::to_string(ranks) + " rank(s)";
        EXPECT_GT(once.replays, 0) << what;
        EXPECT_EQ(twice.replays, 2 * once.replays) << what;
        ASSERT_EQ(twice.d.ids.size(), once.d.ids.size()) << what;
        for (size_t i = 0; i < once.d.ids.size(); ++i)
            EXPECT_EQ(twice.d.ids[i], once.d.ids[i]) << what << ", ids call " << i;
        ASSERT_EQ(twice.d.logits.size(), once.d.logits.size()) << what;
        for (size_t i = 0; i < once.d.logits.size(); ++i)
            EXPECT_EQ(twice.d.logits[i], once.d.logits[i]) << what << ", logits call " << i;
    }
    EXPECT_THROW(run(1, "0"), std::invalid_argument);  // (out of range: refused by name, env::integer_in)
    ::unsetenv("VEGA_STEP_REPLAYS");
}

// vega eval --routes-out under tensor parallel: every slot's expert comes from the rank
// that holds it, as a global id. Replayed on one device, the trace's experts are that
// device's rule applied to the recorded logits, and the run follows it to the end.
TEST(TensorParallel, RoutesRecordedAcrossRanksReplayOnOneDevice) {
    VEGA_REQUIRE_TEST_DATA();
    const std::string rel = "moe/synth-qwen3moe-f32.gguf";
    std::vector<std::unique_ptr<Backend>> owned;
    const Placement p = cpu_tensor_placement(2, owned);
    auto m = Model::load(data_file(rel), p, nullptr);
    const int V = m->hparams().n_vocab;
    RouteTrace rec = RouteTrace::recorder();
    Session s(*m, params());
    s.set_route_trace(&rec);
    const auto split = drive(s, V);
    const std::string path = ::testing::TempDir() + "/tp_routes.txt";
    rec.save(path);

    auto one = make_cpu_backend(2);
    auto m1 = Model::load(data_file(rel), *one, nullptr);
    RouteTrace replay = RouteTrace::load(path);
    Session s1(*m1, *one, params());
    s1.set_route_trace(&replay);
    const auto got = drive(s1, V);
    replay.check_all_replayed();
    EXPECT_GT(replay.stats().entries, 0);
    EXPECT_EQ(replay.stats().rule_mismatches, 0) << replay.summary();
    EXPECT_LT(replay.stats().worst_weight_error, 1e-5f) << replay.summary();
    EXPECT_LT(replay.stats().worst_logits_nmse, 1e-8) << replay.summary();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(nmse(got[i], split[i]), 1e-8) << "call " << i;
    // Replaying a trace under tensor parallel is refused by name.
    Session s2(*m, params());
    try {
        s2.set_route_trace(&replay);
        FAIL() << "a replay under tensor parallel";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--routes-in"), std::string::npos) << e.what();
    }
}

TEST(TensorParallel, RefusesWhatDoesNotDivide) {
    VEGA_REQUIRE_TEST_DATA();
    std::vector<std::unique_ptr<Backend>> owned;
    Placement p = cpu_tensor_placement(3, owned);
    // Three ways: synth-qwen3's 4 heads and 2 KV heads do not divide.
    try {
        Model::load(data_file("models/synth-qwen3-q8_0.gguf"), p, nullptr);
        FAIL() << "three ranks";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("divide by 3"), std::string::npos) << e.what();
    }
    p.devices.resize(2);
    // Q4_K's 256-element blocks: the o projection's 256 inputs cannot be halved.
    try {
        Model::load(data_file("models/synth-llama-q4_k.gguf"), p, nullptr);
        FAIL() << "a Q4_K column split of 128";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot be split 2 ways by columns"), std::string::npos) << e.what();
    }
}

// `vega synth --tp-share N` (tensor_parallel_share): one rank's share of a dense shape as
// a model of its own, the file a rank's decode is timed with on one GPU. Its matrices
// must be the ones rank 0 of the real split holds: the same heads, KV heads, head size,
// FFN rows and matrix shapes; mixtures of experts and counts that do not divide refused.
TEST(TensorParallel, ShareFileHoldsWhatARankHolds) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(::testing::TempDir()) / ("vega-tp-share-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const SynthShape& full = find_synth_shape("tiny");
    for (int ranks : {2}) {
        const SynthShape share = tensor_parallel_share(full, ranks);
        EXPECT_EQ(share.name, "tiny/tp2");
        EXPECT_EQ(share.n_embd, full.n_embd);
        // The widest rank's logits (tiny: 256 of 512, raised to a synth vocabulary's 260 tokens).
        EXPECT_EQ(share.n_vocab, 260);
        SynthShape wide = find_synth_shape("llama3-8b");
        wide.n_vocab = 151936;  // split_vocab over 4: 37952, 38016, 37952, 38016 rows
        EXPECT_EQ(tensor_parallel_share(wide, 4).n_vocab, 38016);
        const std::string fp = (dir / "full.gguf").string(), sp = (dir / "share.gguf").string();
        write_synth_model(full, GgmlType::Q8_0, fp, 3);
        write_synth_model(share, GgmlType::Q8_0, sp, 3);
        std::vector<std::unique_ptr<Backend>> owned;
        const Placement p = cpu_tensor_placement(ranks, owned);
        auto split = Model::load(fp, p, nullptr);
        auto one = make_cpu_backend(1);
        auto alone = Model::load(sp, *one, nullptr);
        const ModelStage& r0 = split->stages()[0];
        const HParams& h = alone->hparams();
        EXPECT_EQ(h.n_head, r0.n_head);
        EXPECT_EQ(h.n_head_kv, r0.n_head_kv);
        EXPECT_EQ(h.n_ff, r0.n_ff);
        EXPECT_EQ(h.head_dim, split->hparams().head_dim);
        EXPECT_EQ(h.n_embd, split->hparams().n_embd);
        EXPECT_EQ(h.n_vocab, std::max<int64_t>(260, r0.n_vocab));
        const LayerWeights &a = alone->weights(0).layers[0], &b = split->weights(0).layers[0];
        for (auto [x, y, what] : {std::tuple{&a.wq, &b.wq, "wq"}, {&a.wk, &b.wk, "wk"}, {&a.wv, &b.wv, "wv"},
                                  {&a.wo, &b.wo, "wo"}, {&a.ffn_gate, &b.ffn_gate, "ffn_gate"},
                                  {&a.ffn_up, &b.ffn_up, "ffn_up"}, {&a.ffn_down, &b.ffn_down, "ffn_down"}}) {
            EXPECT_EQ(x->n_in, y->n_in) << what;
            EXPECT_EQ(x->n_out, y->n_out) << what;
            EXPECT_EQ(x->type, y->type) << what;
        }
    }
    fs::remove_all(dir);
    EXPECT_THROW(tensor_parallel_share(find_synth_shape("qwen3moe-tiny"), 2), Error);  // experts split by expert
    EXPECT_THROW(tensor_parallel_share(full, 3), Error);                               // 4 heads over 3
    EXPECT_THROW(tensor_parallel_share(full, 0), Error);
}

// A rank's links (tensor_parallel_links, Forward::run_rank): without fused sums the part
// links as they are; with them the one-device links with the sum in every block's output
// but the last FFN's, which leaves its part to the all-reduce before the output.
TEST(TensorParallel, RankLinksSumInTheOutputWhereFused) {
    Weight norm_attn, norm_ffn;
    float tmp[4] = {};
    BlockLink attn_first, attn_next, ffn_mid, ffn_last;  // the one-device links (Forward::describe_blocks)
    attn_first.next_norm = &norm_ffn;
    attn_next.input_normed = true, attn_next.next_norm = &norm_ffn;
    ffn_mid.input_normed = true, ffn_mid.next_norm = &norm_attn;
    ffn_last.input_normed = true;  // (the last FFN of the stage: no next norm)
    BlockLink attn_part, ffn_part;  // the part links
    attn_part.part_only = ffn_part.part_only = true;
    attn_part.pending = ffn_part.pending = tmp;
    const int one = 0;
    const FusedSum* fused = reinterpret_cast<const FusedSum*>(&one);  // (opaque here: never dereferenced)

    const RankLinks plain = tensor_parallel_links(attn_next, ffn_mid, attn_part, ffn_part, nullptr);
    EXPECT_TRUE(plain.attn.part_only && plain.ffn.part_only);
    EXPECT_EQ(plain.attn.pending, tmp);
    EXPECT_EQ(plain.attn.sum_output, nullptr);
    EXPECT_EQ(plain.ffn.sum_output, nullptr);

    const RankLinks first = tensor_parallel_links(attn_first, ffn_mid, attn_part, ffn_part, fused);
    EXPECT_FALSE(first.attn.input_normed) << "layer 0 norms the embedding itself";
    EXPECT_EQ(first.attn.sum_output, fused);
    EXPECT_EQ(first.attn.next_norm, &norm_ffn);
    EXPECT_FALSE(first.attn.part_only);
    EXPECT_EQ(first.attn.pending, nullptr);
    EXPECT_EQ(first.ffn.sum_output, fused);
    EXPECT_TRUE(first.ffn.input_normed) << "the attention's output left the FFN's input";
    EXPECT_EQ(first.ffn.next_norm, &norm_attn);

    const RankLinks last = tensor_parallel_links(attn_next, ffn_last, attn_part, ffn_part, fused);
    EXPECT_TRUE(last.attn.input_normed);
    EXPECT_EQ(last.attn.sum_output, fused);
    EXPECT_TRUE(last.ffn.part_only) << "the last part goes through the all-reduce";
    EXPECT_EQ(last.ffn.sum_output, nullptr);
    EXPECT_TRUE(last.ffn.input_normed);
    EXPECT_EQ(last.ffn.pending, nullptr);
}

}  // namespace
}  // namespace vega::test
