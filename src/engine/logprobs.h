// Log-probabilities of a sampled token and the most likely alternatives, as OpenAI's
// logprobs report them: from the logits the sampler was given (the model's
// distribution: before penalties, temperature and truncation), log-softmax in double.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace vega {

constexpr int kMaxTopLogprobs = 20;  // OpenAI's top_logprobs limit

struct TokenLogprobs {
    int32_t token = -1;
    float logprob = 0.f;                          // <= 0
    std::vector<std::pair<int32_t, float>> top;  // the n best (id, logprob), best first, ties to the lower id
};

// logits [n_vocab]; n_top in [0, kMaxTopLogprobs].
TokenLogprobs token_logprobs(const float* logits, int n_vocab, int32_t chosen, int n_top);

}  // namespace vega
