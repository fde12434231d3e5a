#include "server/engine_loop.h"

#include <chrono>
#include <cstdio>

#include "core/error.h"

namespace vega::server {

bool JobState::take(std::string& out) {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return done || !text.empty(); });
    out.swap(text);
    text.clear();
    return !out.empty() || !done;
}

bool JobState::take_for(std::string& out, int ms) {
    std::unique_lock<std::mutex> lk(m);
    cv.wait_for(lk, std::chrono::milliseconds(ms), [&] { return done || !text.empty(); });
    out.swap(text);
    text.clear();
    return done;
}

void JobState::take_logprobs(std::vector<TokenLp>& out) {
    std::lock_guard<std::mutex> lk(m);
    out.insert(out.end(), std::make_move_iterator(logprobs.begin()), std::make_move_iterator(logprobs.end()));
    logprobs.clear();
}

namespace {
constexpr const char* kShutdownMessage = "the server is shutting down; the request was not finished";
void end_for_shutdown(JobState& st) {
    std::lock_guard<std::mutex> lk(st.m);
    if (st.done) return;
    st.done = true;
    st.shutdown = true;
    st.error = kShutdownMessage;
    st.reason = FinishReason::Cancelled;
    st.cv.notify_all();
}
}  // namespace

EngineLoop::EngineLoop(Session& session, const Tokenizer& tok, int max_queue)
    : session_(session), tok_(tok), sched_(session, tok), max_queue_(max_queue) {
    stats_.slots = sched_.n_slots();
    thread_ = std::thread([this] { loop(); });
}

EngineLoop::~EngineLoop() { shutdown(); }

void EngineLoop::shutdown() {
    {
        std::lock_guard<std::mutex> lk(m_);
        quit_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // Jobs that never reached the scheduler.
    std::lock_guard<std::mutex> lk(m_);
    for (Job& j : inbox_) end_for_shutdown(*j.state);
    inbox_.clear();
}

std::shared_ptr<JobState> EngineLoop::submit(GenRequest req, std::vector<std::string> stops) {
    auto st = std::make_shared<JobState>();
    st->n_prompt = int(req.prompt.size());
    {
        std::lock_guard<std::mutex> lk(m_);
        if (quit_) {  // shutting down: the job ends at once, unfinished
            end_for_shutdown(*st);
            return st;
        }
        // Jobs ahead of this one that a free slot will not take at once.
        const int pending = int(inbox_.size()) + sched_queued_;
        if (pending + 1 - (stats_.slots - stats_.slots_busy) > max_queue_) return nullptr;
        inbox_.push_back({std::move(req), std::move(stops), st});
    }
    cv_.notify_all();
    return st;
}

void EngineLoop::cancel(const std::shared_ptr<JobState>& job) {
    {
        std::lock_guard<std::mutex> lk(m_);
        cancels_.push_back(job);
    }
    cv_.notify_all();
}

EngineStats EngineLoop::stats() {
    std::lock_guard<std::mutex> lk(m_);
    EngineStats s = stats_;
    s.queued = int(inbox_.size()) + sched_queued_;
    return s;
}

void EngineLoop::finish(int id, FinishReason r) {
    auto it = running_.find(id);
    if (it == running_.end()) return;
    Running& run = it->second;
    JobState& st = *run.state;
    {
        std::lock_guard<std::mutex> lk(st.m);
        if (!run.stopped) st.text += run.stop.push(run.utf8.flush()).text + run.stop.flush();
        st.done = true;
        st.reason = r;
    }
    st.cv.notify_all();
    std::lock_guard<std::mutex> lk(m_);
    ++stats_.requests_done;
    stats_.generated_tokens += st.n_generated;
    running_.erase(it);
}

void EngineLoop::loop() {
    std::unordered_map<JobState*, int> ids;  // job -> scheduler id, while queued or running
    auto on_token = [&](int id, int32_t t) -> bool {
        Running& run = running_.at(id);
        JobState& st = *run.state;
        if (!run.counted_cache) {
            run.counted_cache = true;
            std::lock_guard<std::mutex> lk(st.m);
            st.n_cached = sched_.reused_tokens(id);
        }
        if (tok_.is_eog(t)) {  // no text; ends the request with Stop unless it ignores EOS
            if (run.ignore_eos) {
                std::lock_guard<std::mutex> lk(st.m);
                ++st.n_generated;
            }
            return true;
        }
        const std::string piece = tok_.token_to_piece(t, run.render_special);
        StopMatcher::Out o = run.stop.push(run.utf8.push(piece));
        TokenLp lp;
        const TokenLogprobs* tl = sched_.current_logprobs();
        if (tl) {
            lp.token = run.render_special ? tok_.token_to_piece(t) : piece, lp.logprob = tl->logprob;
            for (const auto& [id, v] : tl->top) lp.top.push_back({tok_.token_to_piece(id), v});
        }
        {
            std::lock_guard<std::mutex> lk(st.m);
            ++st.n_generated;
            st.text += o.text;
            if (tl) st.logprobs.push_back(std::move(lp));
        }
        st.cv.notify_all();
        run.stopped = o.stopped;
        return !o.stopped;
    };
    auto on_done = [&](int id, FinishReason r) {
        auto it = running_.find(id);
        if (it != running_.end()) ids.erase(it->second.state.get());
        finish(id, r);
    };
    for (;;) {
        std::deque<Job> jobs;
        std::vector<std::shared_ptr<JobState>> cancels;
        {
            std::unique_lock<std::mutex> lk(m_);
            cv_.wait(lk, [&] { return quit_ || !inbox_.empty() || !cancels_.empty() || !sched_.idle(); });
            if (quit_) break;
            jobs.swap(inbox_);
            cancels.swap(cancels_);
        }
        for (Job& j : jobs) {
            int id = -1;
            const bool ignore_eos = j.req.ignore_eos, render_special = j.req.render_special;
            try {
                id = sched_.submit(std::move(j.req));
            } catch (const Error& e) {
                std::lock_guard<std::mutex> lk(j.state->m);
                j.state->error = e.what();
                j.state->done = true;
                j.state->cv.notify_all();
                continue;
            }
            ids[j.state.get()] = id;
            running_.emplace(id, Running{j.state, StopMatcher(std::move(j.stops)), Utf8Stream{}, false, false, ignore_eos,
                                         render_special});
        }
        for (const auto& c : cancels) {
            auto it = ids.find(c.get());
            if (it != ids.end()) sched_.cancel(it->second);
        }
        try {
            sched_.step(on_token, on_done);
        } catch (const std::exception& e) {
            // A backend failure ends every job with the error; the server keeps answering.
            std::fprintf(stderr, "vega serve: engine error: %s\n", e.what());
            for (auto& [id, run] : running_) {
                std::lock_guard<std::mutex> lk(run.state->m);
                run.state->error = e.what();
                run.state->done = true;
                run.state->cv.notify_all();
                sched_.cancel(id);
            }
        }
        {
            std::lock_guard<std::mutex> lk(m_);
            const SchedulerStats& ss = sched_.stats();
            sched_queued_ = sched_.n_queued();
            stats_.prompt_tokens = ss.prompt_tokens;
            stats_.cached_tokens = ss.cached_tokens;
            stats_.steps = ss.steps;
            stats_.grammar_tokens = ss.grammar_tokens;
            stats_.grammar_whole_rows = ss.whole_logits_rows;
            stats_.grammar_seconds = ss.grammar_seconds;
            stats_.slots_busy = sched_.n_active();
        }
    }
    // Shutting down: whatever is still running or queued ends unfinished.
    for (auto& [id, run] : running_) end_for_shutdown(*run.state);
}

}  // namespace vega::server
