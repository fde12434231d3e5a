#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>

#include "backend/cpu/thread_pool.h"
#include "core/error.h"
#include "engine/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace vega {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::Stop: return "stop";
        case FinishReason::Length: return "length";
        case FinishReason::Cancelled: return "cancelled";
    }
    return "?";
}

namespace {

struct Slot {
    int seq = 0;
    int id = -1;  // request in this slot, -1: free
    GenRequest req;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<GrammarConstraint> grammar;  // req.grammar's state, null without one
    std::vector<int32_t> cells;  // the tokens in this sequence's cache cells 0..size-1
    size_t prompt_done = 0;      // prompt tokens in the cache (reused or evaluated)
    int n_generated = 0;
    int32_t next = -1;           // sampled token not yet in the cache
    bool generating = false;
    bool cancel = false;
    int64_t admitted = 0;        // admission order (prompt chunks go first-come)
    size_t reused = 0;           // prompt tokens found in the cache at admission
};

struct Queued {
    int id;
    GenRequest req;
};

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

enum class Mode { Argmax, TopK, Logits };

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct Scheduler::Impl {
    Session& s;
    const Tokenizer& tok;
    std::vector<Slot> slots;
    std::deque<Queued> queue;
    std::vector<int> cancelled_queued;  // ids cancelled while queued, reported by the next step
    int next_id = 0;
    int64_t admissions = 0;
    SchedulerStats stats;
    // Per-step scratch, reused.
    std::vector<BatchToken> batch;
    std::vector<int> row_slot;  // for each row that wants logits: its slot
    TokenLogprobs current_lp;   // the token being reported (has_lp: inside on_token)
    bool has_lp = false;
    std::shared_ptr<const VocabTrie> trie;  // built at the first request with a grammar
    // The host's share of a step runs per row, each row with its own slot's sampler and
    // grammar: on a pool when several rows have host work (made at the first such step).
    std::unique_ptr<ThreadPool> sample_pool;
    std::vector<int32_t> sampled;  // [rows]: each wanted row's token
    std::vector<std::exception_ptr> row_error;
    std::vector<int> whole_rows;   // rows whose candidates did not decide them

    // f(i) for i in [0, n): in parallel when `parallel` and n > 1; the first exception
    // is rethrown after every call ended.
    template <typename F>
    void for_rows(size_t n, bool parallel, F f) {
        row_error.assign(n, nullptr);
        auto one = [&](size_t i) {
            try {
                f(i);
            } catch (...) {
                row_error[i] = std::current_exception();
            }
        };
        if (parallel && n > 1) {
            if (!sample_pool)  // (used once or twice a step: its workers sleep between steps)
                sample_pool = std::make_unique<ThreadPool>(int(std::min(8u, std::max(1u, std::thread::hardware_concurrency()))),
                                                           /*spin=*/0);
            sample_pool->parallel_for(int64_t(n), 1, [&](int64_t b, int64_t e, int) {
                for (int64_t i = b; i < e; ++i) one(size_t(i));
            });
        } else {
            for (size_t i = 0; i < n; ++i) one(i);
        }
        for (const auto& e : row_error)
            if (e) std::rethrow_exception(e);
    }

    // sampled[r] for each row r of `rows`, from whole logits rows [rows.size()][n_vocab]
    // (a grammar takes its row's token: take()).
    void sample_rows(const std::vector<int>& rows, const float* logits) {
        const size_t n_vocab = size_t(s.n_vocab());
        for_rows(rows.size(), true, [&](size_t i) {
            const size_t r = size_t(rows[i]);
            Slot& sl = slots[size_t(row_slot[r])];
            sampled[r] = sl.sampler->sample(logits + i * n_vocab, sl.grammar.get());
            take(sl, sampled[r]);
        });
    }
    // A grammar's matcher takes its row's token (one it refuses throws).
    static void take(Slot& sl, int32_t t) {
        if (sl.grammar && t >= 0) sl.grammar->accept(t);
    }

    // A grammar row's token from the device's candidates (ids/vals [k], best first, ties
    // by lowest id; vals null: ids is the argmax alone), when they decide it as sample()
    // on the whole row would: greedy takes the first allowed candidate with a finite
    // logit; top-k sampling needs its top_k best allowed tokens among them. -1 when
    // they do not decide it (the row then takes its whole logits).
    static int32_t from_candidates(Slot& sl, const int32_t* ids, const float* vals, int k) {
        Sampler& sp = *sl.sampler;
        if (sp.is_greedy()) {
            for (int j = 0; j < k; ++j)
                if ((!vals || std::isfinite(vals[j])) && sl.grammar->allows(ids[j])) return ids[j];
            return -1;
        }
        const int want = sp.params().top_k;  // <= k (choose_mode)
        int32_t allowed_ids[Backend::kTopKMax];
        float allowed_vals[Backend::kTopKMax];
        int n = 0;
        for (int j = 0; j < k && n < want; ++j)
            if (std::isfinite(vals[j]) && sl.grammar->allows(ids[j])) allowed_ids[n] = ids[j], allowed_vals[n++] = vals[j];
        if (n < want) return -1;
        return sp.sample_candidates(allowed_ids, allowed_vals, want);
    }

    Impl(Session& session, const Tokenizer& t) : s(session), tok(t) {
        slots.resize(size_t(s.params().n_seq));
        for (size_t i = 0; i < slots.size(); ++i) slots[i].seq = int(i);
    }

    void finish(Slot& sl, FinishReason r, const DoneFn& on_done) {
        const int id = sl.id;
        sl.id = -1;
        sl.generating = false;
        sl.cancel = false;
        sl.sampler.reset();
        sl.grammar.reset();
        if (on_done) on_done(id, r);
    }

    // Puts queued requests into free slots, each into the free slot whose cache
    // shares the longest prefix with its prompt.
    void admit() {
        while (!queue.empty()) {
            Slot* best = nullptr;
            size_t best_lcp = 0;
            for (Slot& sl : slots) {
                if (sl.id >= 0) continue;
                const size_t l = common_prefix(sl.cells, queue.front().req.prompt);
                if (!best || l > best_lcp) best = &sl, best_lcp = l;
            }
            if (!best) return;
            Queued q = std::move(queue.front());
            queue.pop_front();
            Slot& sl = *best;
            // At least the last prompt token is evaluated: its logits give the first token.
            const size_t reuse = std::min(best_lcp, q.req.prompt.size() - 1);
            sl.cells.resize(reuse);
            sl.prompt_done = reuse;
            sl.reused = reuse;
            stats.cached_tokens += int64_t(reuse);
            sl.id = q.id;
            sl.req = std::move(q.req);
            sl.sampler = std::make_unique<Sampler>(sl.req.sampling, s.n_vocab());
            if (sl.req.grammar) {
                if (!trie) trie = std::make_shared<const VocabTrie>(tok);
                sl.grammar = std::make_unique<GrammarConstraint>(sl.req.grammar, tok, trie);
            }
            for (int32_t t : sl.req.prompt) sl.sampler->accept(t);
            sl.n_generated = 0;
            sl.next = -1;
            sl.generating = false;
            sl.cancel = false;
            sl.admitted = admissions++;
        }
    }

    // What the wanted rows need from the backend: argmax when every one is greedy
    // without penalties; the top-k candidates when the others can sample from them;
    // else whole logits rows. A grammar's row samples from the candidates it allows
    // (from_candidates), so it asks the same, with every candidate the device gives
    // (kTopKMax) when it samples; its whole row is fetched only when they do not serve.
    // (A step of more than n_batch tokens would run in chunks and keep only the last
    // chunk's logits on the device, where logits_of finds them: grammar rows would then take
    // whole logits at once. step() never builds one: a prompt joins only while generating
    // rows leave room, so generating rows never outnumber n_batch.)
    Mode choose_mode(int& k) const {
        Mode m = Mode::Argmax;
        k = 1;
        const bool chunked = batch.size() > size_t(s.params().n_batch);
        for (int si : row_slot) {
            const Slot& sl = slots[size_t(si)];
            const Sampler& sp = *sl.sampler;
            if (sp.penalties_active() || sl.req.logprobs >= 0 || (sl.grammar && chunked)) return Mode::Logits;
            if (sp.is_greedy()) continue;
            if (!sp.can_sample_candidates() || sp.params().top_k > Backend::kTopKMax) return Mode::Logits;
            m = Mode::TopK;
            k = std::max(k, sl.grammar ? std::min(Backend::kTopKMax, s.n_vocab()) : sp.params().top_k);
        }
        return m;
    }
};

Scheduler::Scheduler(Session& session, const Tokenizer& tokenizer)
    : impl_(std::make_unique<Impl>(session, tokenizer)) {}
Scheduler::~Scheduler() = default;

int Scheduler::submit(GenRequest req) {
    Impl& I = *impl_;
    const int n_ctx = I.s.params().n_ctx, n_vocab = I.s.n_vocab();
    if (req.prompt.empty()) fail("request: the prompt has no tokens");
    for (int32_t t : req.prompt)
        if (t < 0 || t >= n_vocab) fail("request: token id {} is out of range [0, {})", t, n_vocab);
    if (int64_t(req.prompt.size()) > n_ctx)
        fail("request: the prompt has {} tokens, more than the context size {}", req.prompt.size(), n_ctx);
    if (req.n_predict < 0) fail("request: n_predict must not be negative (got {})", req.n_predict);
    Sampler check(req.sampling, n_vocab);  // validates the sampling parameters now, not mid-batch
    (void)check;
    const int id = I.next_id++;
    I.queue.push_back({id, std::move(req)});
    return id;
}

void Scheduler::cancel(int id) {
    Impl& I = *impl_;
    for (Slot& sl : I.slots)
        if (sl.id == id) sl.cancel = true;
    for (auto it = I.queue.begin(); it != I.queue.end(); ++it)
        if (it->id == id) {
            I.queue.erase(it);
            I.cancelled_queued.push_back(id);
            break;
        }
}

bool Scheduler::step(const TokenFn& on_token, const DoneFn& on_done) {
    Impl& I = *impl_;
    bool did = false;
    for (int id : I.cancelled_queued) {
        if (on_done) on_done(id, FinishReason::Cancelled);
        did = true;
    }
    I.cancelled_queued.clear();
    for (Slot& sl : I.slots)
        if (sl.id >= 0 && sl.cancel) I.finish(sl, FinishReason::Cancelled, on_done), did = true;
    // A request that asks for no tokens ends at once.
    I.admit();
    for (Slot& sl : I.slots)
        if (sl.id >= 0 && sl.req.n_predict == 0) I.finish(sl, FinishReason::Length, on_done), did = true;
    I.admit();

    const int n_batch = I.s.params().n_batch;
    I.batch.clear();
    I.row_slot.clear();
    // Every generating slot feeds its last token ...
    for (size_t i = 0; i < I.slots.size(); ++i) {
        Slot& sl = I.slots[i];
        if (sl.id < 0 || !sl.generating) continue;
        I.batch.push_back({sl.next, int32_t(sl.cells.size()), sl.seq, true});
        I.row_slot.push_back(int(i));
        sl.cells.push_back(sl.next);
    }
    // ... then prompt chunks fill the rest of the batch, first come first served.
    std::vector<size_t> joining;
    for (size_t i = 0; i < I.slots.size(); ++i)
        if (I.slots[i].id >= 0 && !I.slots[i].generating) joining.push_back(i);
    std::sort(joining.begin(), joining.end(),
              [&](size_t a, size_t b) { return I.slots[a].admitted < I.slots[b].admitted; });
    int budget = std::max(0, n_batch - int(I.batch.size()));
    for (size_t i : joining) {
        Slot& sl = I.slots[i];
        const std::vector<int32_t>& p = sl.req.prompt;
        while (budget > 0 && sl.prompt_done < p.size()) {
            const bool last = sl.prompt_done + 1 == p.size();
            I.batch.push_back({p[sl.prompt_done], int32_t(sl.cells.size()), sl.seq, last, /*prompt=*/true});
            if (last) I.row_slot.push_back(int(i));
            sl.cells.push_back(p[sl.prompt_done]);
            ++sl.prompt_done;
            ++I.stats.prompt_tokens;
            --budget;
        }
    }
    if (I.batch.empty()) return did;

    int k = 1;
    const Mode mode = I.choose_mode(k);
    const std::vector<int32_t>* greedy = nullptr;
    const Session::TopK* cand = nullptr;
    const std::vector<float>* logits = nullptr;
    try {
        if (mode == Mode::Argmax) greedy = &I.s.decode_greedy(I.batch);
        else if (mode == Mode::TopK) cand = &I.s.decode_top_k(I.batch, k);
        else logits = &I.s.decode(I.batch);
    } catch (...) {
        // The cache cells of this batch hold nothing trustworthy now: forget them (no
        // later request may reuse them as a prefix) and end the batch's requests.
        for (const BatchToken& t : I.batch) {
            Slot& sl = I.slots[size_t(t.seq)];
            sl.cells.clear();
            if (sl.id >= 0) sl.cancel = true;
        }
        throw;
    }
    ++I.stats.steps;
    // Each row's token: from the reduced result, or (whole logits, or a grammar's row the
    // candidates did not decide) sampled on the host from the whole row. A grammar's
    // checks and matcher step are the host's work per row: the rows run in parallel.
    const size_t n_rows = I.row_slot.size();
    const bool any_grammar = std::any_of(I.row_slot.begin(), I.row_slot.end(),
                                         [&](int si) { return I.slots[size_t(si)].grammar != nullptr; });
    const auto t_grammar = std::chrono::steady_clock::now();
    I.sampled.assign(n_rows, -1);
    if (!logits)
        I.for_rows(n_rows, any_grammar, [&](size_t r) {
            Slot& sl = I.slots[size_t(I.row_slot[r])];
            Sampler& sp = *sl.sampler;
            const int32_t* ids = greedy ? &(*greedy)[r] : cand->ids.data() + r * size_t(k);
            const float* vals = greedy ? nullptr : cand->logits.data() + r * size_t(k);
            if (sl.grammar) Impl::take(sl, I.sampled[r] = Impl::from_candidates(sl, ids, vals, greedy ? 1 : k));
            else I.sampled[r] = greedy || sp.is_greedy() ? ids[0] : sp.sample_candidates(ids, vals, sp.params().top_k);
        });
    I.whole_rows.clear();
    for (size_t r = 0; r < n_rows; ++r)
        if (logits || (I.sampled[r] < 0 && I.slots[size_t(I.row_slot[r])].grammar)) I.whole_rows.push_back(int(r));
    if (logits) I.sample_rows(I.whole_rows, logits->data());
    else if (!I.whole_rows.empty()) {
        I.stats.whole_logits_rows += int64_t(I.whole_rows.size());
        I.sample_rows(I.whole_rows, I.s.logits_of(I.whole_rows).data());
    }
    if (any_grammar) {
        for (size_t r = 0; r < n_rows; ++r) I.stats.grammar_tokens += I.sampled[r] >= 0 && I.slots[size_t(I.row_slot[r])].grammar;
        I.stats.grammar_seconds += seconds_since(t_grammar);  // (the other rows' share is small)
    }

    const int n_ctx = I.s.params().n_ctx;
    for (size_t r = 0; r < n_rows; ++r) {
        Slot& sl = I.slots[size_t(I.row_slot[r])];
        Sampler& sp = *sl.sampler;
        const int32_t t = I.sampled[r];
        if (t < 0) {  // the grammar allows no token: the text ends here
            I.finish(sl, FinishReason::Stop, on_done);
            continue;
        }
        sp.accept(t);
        ++sl.n_generated;
        ++I.stats.generated;
        if (sl.req.logprobs >= 0 && logits) {
            I.current_lp = token_logprobs(logits->data() + r * size_t(I.s.n_vocab()), I.s.n_vocab(), t, sl.req.logprobs);
            I.has_lp = true;
        }
        const bool keep = on_token ? on_token(sl.id, t) : true;
        I.has_lp = false;
        sl.generating = true;
        sl.next = t;
        if (!keep || (!sl.req.ignore_eos && I.tok.is_eog(t))) I.finish(sl, FinishReason::Stop, on_done);
        else if (sl.n_generated >= sl.req.n_predict || int(sl.cells.size()) >= n_ctx)
            I.finish(sl, FinishReason::Length, on_done);
    }
    return true;
}

const TokenLogprobs* Scheduler::current_logprobs() const { return impl_->has_lp ? &impl_->current_lp : nullptr; }

void Scheduler::run(const TokenFn& on_token, const DoneFn& on_done) {
    while (step(on_token, on_done)) {
    }
}

int Scheduler::reused_tokens(int id) const {
    for (const Slot& sl : impl_->slots)
        if (sl.id == id) return int(sl.reused);
    return -1;
}

bool Scheduler::idle() const { return n_active() == 0 && impl_->queue.empty() && impl_->cancelled_queued.empty(); }
int Scheduler::n_slots() const { return int(impl_->slots.size()); }
int Scheduler::n_active() const {
    int n = 0;
    for (const Slot& sl : impl_->slots) n += sl.id >= 0;
    return n;
}
int Scheduler::n_queued() const { return int(impl_->queue.size()); }
const SchedulerStats& Scheduler::stats() const { return impl_->stats; }

}  // namespace vega
