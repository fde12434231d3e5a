// Continuous batching over one Session: each of its sequences is a slot; every
// step() evaluates, in one forward call, the next token of every generating slot
// plus chunks of the prompts of slots that are joining, then samples each slot's
// token with its own sampler. Requests beyond the slots wait in a FIFO queue and
// join as others finish. A slot remembers the tokens in its cache cells, so a
// request that shares a prefix with them (a chat re-sending its history) only
// evaluates the rest. Used by `vega run --prompts-file --parallel` and the server.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "engine/session.h"

namespace vega {

namespace grammar { struct Grammar; }
class Tokenizer;

struct GenRequest {
    std::vector<int32_t> prompt;  // token ids (BOS included when the model wants it); not empty
    SamplerParams sampling;
    int n_predict = 128;          // most tokens to generate; generation also stops at the context end
    bool ignore_eos = false;      // keep going past end-of-generation tokens
    // Constrained generation (vega run --grammar, the server's grammar field): only text the
    // grammar allows. Its rows take the device's argmax or top-k candidates as other rows
    // do (all kTopKMax of them when it samples), and their whole logits only when the
    // grammar refuses those (SchedulerStats::whole_logits_rows); it ends (Stop) when no
    // token can continue the grammar.
    std::shared_ptr<const grammar::Grammar> grammar;
    // OpenAI logprobs: -1 off; else each sampled token's log-probability and this many
    // (0..kMaxTopLogprobs) best alternatives (Scheduler::current_logprobs). Such a
    // request's rows leave the device as whole logits.
    int logprobs = -1;
    // The text shows special tokens (tool-call markers that are control tokens: Mistral,
    // DeepSeek, Kimi K2); end-of-generation tokens still end the text.
    bool render_special = false;
};

enum class FinishReason { Stop, Length, Cancelled };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled"

struct SchedulerStats {
    int64_t prompt_tokens = 0;    // prompt tokens evaluated
    int64_t cached_tokens = 0;    // prompt tokens reused from a slot's cache
    int64_t generated = 0;        // tokens sampled
    int64_t steps = 0;            // forward calls
    // Rows of a grammar's request whose device candidates (argmax or top-k) it refused
    // (or, sampling, allowed fewer than top_k of), so they took their whole logits.
    int64_t whole_logits_rows = 0;
    int64_t grammar_tokens = 0;  // tokens sampled under a grammar
    // Host time a grammar costs its rows: checking the candidates, fetching and sampling
    // whole rows, advancing the matcher (the rest of a step is the same without one).
    double grammar_seconds = 0;
};

class Scheduler {
public:
    // Called for every sampled token (in batch order within a step). Return false to
    // finish the request now (e.g. a stop string was seen); it ends with Stop.
    using TokenFn = std::function<bool(int id, int32_t token)>;
    // Called once per request when it ends (never for one still queued or running).
    using DoneFn = std::function<void(int id, FinishReason reason)>;

    // Slots = the session's sequences. is_eog decides end of generation.
    Scheduler(Session& session, const Tokenizer& tokenizer);
    ~Scheduler();

    // Queues a request; returns its id (0, 1, 2, ...). Throws vega::Error when the
    // prompt is empty, has an out-of-range id, or does not fit the context.
    int submit(GenRequest req);
    // Ends a queued or running request with Cancelled (reported by the next step()).
    // Unknown or finished ids are ignored.
    void cancel(int id);

    // One forward call over every active slot. Returns false when there was nothing
    // to do (no running and no queued requests). When the forward throws, the error
    // propagates, the batch's slots forget their cache, and their requests end as
    // Cancelled on the next step.
    bool step(const TokenFn& on_token, const DoneFn& on_done);
    // step() until everything submitted has finished.
    void run(const TokenFn& on_token, const DoneFn& on_done);

    // Inside the TokenFn of a request with logprobs on: the token's log-probabilities
    // (null otherwise).
    const TokenLogprobs* current_logprobs() const;

    // Prompt tokens a running request took from its slot's cache (0 if none; -1 when
    // the id is not running).
    int reused_tokens(int id) const;

    bool idle() const;
    int n_slots() const;
    int n_active() const;   // slots holding a request
    int n_queued() const;
    const SchedulerStats& stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace vega
