// The valid range of every sampling and size option, written once for both front
// ends. The CLI names an option by its flags ("--top-p"), the server by its request
// field ("top_p"); the range, and the message that refuses a value outside it, are
// the same: "'--top-p' must be between 0 and 1 (got 5)" / "'top_p' must be between
// 0 and 1 (got 5)".
#pragma once
#include <string>

namespace vega {

struct OptionLimit {
    const char* flags = nullptr;  // CLI11 names, e.g. "-t,--threads"; nullptr: not a CLI option
    const char* field = nullptr;  // request field, e.g. "top_p"; nullptr: not a server field
    bool integer = false;         // whole numbers only; bounds print as integers
    double lo = 0, hi = 0;        // valid: lo <= x <= hi (integer bounds are exact: |bound| < 2^53)
    std::string note;             // said after the range when a value is refused ("" for none)
};

struct OptionLimits {
    // Sampling (SamplerParams).
    OptionLimit temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, frequency_penalty, presence_penalty;
    // Sizes. n_predict is -n on the CLI and max_tokens in requests (max_completion_tokens:
    // the same limit under OpenAI's newer name).
    OptionLimit n_predict, max_completion_tokens, n_choices;
    OptionLimit ctx_size, batch_size, threads, parallel;
    // vega bench's lists (-p, -n, -B, -d) and repetitions; vega perplexity --chunks.
    OptionLimit bench_n_prompt, bench_n_gen, bench_batch_seqs, bench_depth, bench_reps, ppl_chunks;
};

// The table, built once (threads' upper bound is this machine's hardware threads).
const OptionLimits& option_limits();

// std::thread::hardware_concurrency(), at least 1.
int hardware_threads();

// How the option is named in a message: by its CLI flags ("-t/--threads") or by its
// request field ("top_p").
enum class OptionSpelling { Flag, Field };

// "" when value is valid for the option; else one line naming the option, its range and
// the value: "'--top-p' must be between 0 and 1 (got 5)". NaN and infinities are refused
// like any other value outside the range.
std::string option_error(const OptionLimit& limit, double value, OptionSpelling spelling);

// The option's name as option_error spells it, without quotes.
std::string option_name(const OptionLimit& limit, OptionSpelling spelling);

// "[0, 1]": the range for help text.
std::string option_range(const OptionLimit& limit);

// Throws vega::Error with option_error's message when value is not valid.
void check_option(const OptionLimit& limit, double value, OptionSpelling spelling);

}  // namespace vega
