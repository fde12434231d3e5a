// The server's engine thread: it alone owns the Scheduler (and so the Session and
// the backend). HTTP handler threads hand it jobs through a mutex-guarded inbox
// and read each job's results from its JobState; the thread runs one scheduler
// step at a time while any job is queued or running, and sleeps otherwise.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/scheduler.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace vega::server {

// One generated token's logprobs, with the texts of the token and its alternatives.
struct TokenLp {
    std::string token;
    float logprob = 0.f;
    std::vector<std::pair<std::string, float>> top;
};

// Results of one job, written by the engine thread, read by its handler.
struct JobState {
    std::mutex m;
    std::condition_variable cv;
    std::string text;          // generated text not yet taken by the handler
    bool done = false;
    std::string error;         // set when the engine could not run the job
    bool shutdown = false;     // ended unfinished because the server is shutting down (error says so)
    FinishReason reason = FinishReason::Stop;
    int n_prompt = 0, n_generated = 0, n_cached = 0;
    std::vector<TokenLp> logprobs;  // GenRequest::logprobs >= 0: per generated token, not yet taken
    // Moves the logprobs gathered so far into `out` (appends).
    void take_logprobs(std::vector<TokenLp>& out);
    // Waits until there is text or the job is done; moves the text into `out`.
    // Returns false once done and drained.
    bool take(std::string& out);
    // Waits at most `ms` for text or the end; moves the text into `out` (maybe
    // empty). Returns true once the job is done (and `out` holds its last text).
    bool take_for(std::string& out, int ms);
};

struct EngineStats {
    int64_t requests_done = 0, prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0, steps = 0;
    int64_t grammar_tokens = 0, grammar_whole_rows = 0;  // SchedulerStats' grammar counters
    double grammar_seconds = 0;
    int slots = 0, slots_busy = 0, queued = 0;
};

class EngineLoop {
public:
    // max_queue: jobs that may wait for a slot; beyond that submit() refuses.
    EngineLoop(Session& session, const Tokenizer& tok, int max_queue);
    ~EngineLoop();  // shutdown()

    // Stops the engine thread; every queued or running job ends unfinished, with
    // JobState::shutdown set and `error` saying why, so handlers waiting on them return
    // and tell their clients. Idempotent.
    void shutdown();

    // Queues a job; nullptr when the queue is full (the caller answers 503).
    std::shared_ptr<JobState> submit(GenRequest req, std::vector<std::string> stops);
    // Cancels a queued or running job (a client went away); its slot is freed.
    void cancel(const std::shared_ptr<JobState>& job);
    EngineStats stats();

private:
    struct Job {
        GenRequest req;
        std::vector<std::string> stops;
        std::shared_ptr<JobState> state;
    };
    struct Running {
        std::shared_ptr<JobState> state;
        StopMatcher stop;
        Utf8Stream utf8;
        bool stopped = false;
        bool counted_cache = false;
        bool ignore_eos = false;
        bool render_special = false;
    };
    void loop();
    void finish(int id, FinishReason r);

    Session& session_;
    const Tokenizer& tok_;
    Scheduler sched_;
    const int max_queue_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Job> inbox_;
    std::vector<std::shared_ptr<JobState>> cancels_;
    bool quit_ = false;
    int sched_queued_ = 0;  // the scheduler's queue length after the last step
    EngineStats stats_;
    std::unordered_map<int, Running> running_;  // engine thread only
    std::thread thread_;
};

}  // namespace vega::server
