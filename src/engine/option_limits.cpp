#include "engine/option_limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>

#include "core/error.h"

namespace vega {

namespace {

// Most tokens one request or -n may ask for (the server's bound since it was written).
constexpr double kMaxTokens = 1 << 30;
// Largest context (tokens per sequence): the longest any supported model trains with
// (1M); beyond it n_ctx * n_seq and the cache's byte counts approach int range.
constexpr double kMaxCtx = 1 << 20;
// Most sequences decoded together (slots, --parallel, bench -B).
constexpr double kMaxSeqs = 256;
// top_k at or above the vocabulary size is off; this bound only keeps it an int.
constexpr double kMaxTopK = 1 << 30;

OptionLimit real(const char* flags, const char* field, double lo, double hi) { return {flags, field, false, lo, hi, ""}; }
OptionLimit whole(const char* flags, const char* field, double lo, double hi, std::string note = "") {
    return {flags, field, true, lo, hi, std::move(note)};
}

OptionLimits make_limits() {
    OptionLimits t;
    // The server's ranges (OpenAI's for temperature and the penalties); the CLI uses the same.
    t.temperature = real("--temp", "temperature", 0, 2);
    t.top_k = whole("--top-k", "top_k", 0, kMaxTopK);
    t.top_p = real("--top-p", "top_p", 0, 1);
    t.min_p = real("--min-p", "min_p", 0, 1);
    t.repeat_penalty = real("--repeat-penalty", "repeat_penalty", 0.01, 10);
    // -1: the whole history; the sampler's ring buffer holds this many ids.
    t.repeat_last_n = whole("--repeat-last-n", nullptr, -1, kMaxCtx);
    t.frequency_penalty = real("--frequency-penalty", "frequency_penalty", -2, 2);
    t.presence_penalty = real("--presence-penalty", "presence_penalty", -2, 2);

    // -1: until end of generation or the context is full.
    t.n_predict = whole("-n,--n-predict", "max_tokens", -1, kMaxTokens);
    t.max_completion_tokens = whole(nullptr, "max_completion_tokens", -1, kMaxTokens);
    t.n_choices = whole(nullptr, "n", 1, 1 << 20);
    t.ctx_size = whole("-c,--ctx-size", nullptr, 0, kMaxCtx);  // 0: the model's, at most 4096
    t.batch_size = whole("-b,--batch-size", nullptr, 1, kMaxCtx);  // the session clamps it to the cache anyway
    const int hw = hardware_threads();
    // More threads than the machine has only makes the pool's workers wait on each other.
    t.threads = whole("-t,--threads", nullptr, 0, hw,
                      fmt::format("this machine has {} hardware thread{}; 0 uses all of them", hw, hw == 1 ? "" : "s"));
    t.parallel = whole("--parallel", nullptr, 1, kMaxSeqs);

    t.bench_n_prompt = whole("-p,--n-prompt", nullptr, 0, kMaxCtx);
    t.bench_n_gen = whole("-n,--n-gen", nullptr, 0, kMaxCtx);
    t.bench_batch_seqs = whole("-B,--batch-seqs", nullptr, 1, kMaxSeqs);
    t.bench_depth = whole("-d,--depth", nullptr, 0, kMaxCtx);
    t.bench_reps = whole("-r,--repetitions", nullptr, 1, 10000);
    t.ppl_chunks = whole("--chunks", nullptr, 1, kMaxTokens);
    return t;
}

std::string bound(const OptionLimit& l, double x) {
    return l.integer ? fmt::format("{}", int64_t(x)) : fmt::format("{}", x);
}

}  // namespace

int hardware_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

const OptionLimits& option_limits() {
    static const OptionLimits t = make_limits();
    return t;
}

std::string option_name(const OptionLimit& l, OptionSpelling s) {
    if (s == OptionSpelling::Field) return l.field ? l.field : "?";
    std::string n = l.flags ? l.flags : "?";
    std::replace(n.begin(), n.end(), ',', '/');  // "-t,--threads" -> "-t/--threads"
    return n;
}

std::string option_range(const OptionLimit& l) { return "[" + bound(l, l.lo) + ", " + bound(l, l.hi) + "]"; }

std::string option_error(const OptionLimit& l, double x, OptionSpelling s) {
    const bool whole_ok = !l.integer || !std::isfinite(x) || x == std::trunc(x);
    if (std::isfinite(x) && x >= l.lo && x <= l.hi && whole_ok) return "";
    std::string m = fmt::format("'{}' must be {}between {} and {} (got {})", option_name(l, s),
                                whole_ok ? "" : "an integer ", bound(l, l.lo), bound(l, l.hi), x);
    if (!l.note.empty()) m += ": " + l.note;
    return m;
}

void check_option(const OptionLimit& l, double x, OptionSpelling s) {
    std::string e = option_error(l, x, s);
    if (!e.empty()) throw Error(e);
}

}  // namespace vega
