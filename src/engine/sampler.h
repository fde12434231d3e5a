// Token sampler: turns one row of logits [n_vocab] into a token id.
//
// Stage order follows llama.cpp's common default chain:
//   penalties -> top-k -> top-p -> min-p -> temperature -> seeded draw.
// temperature <= 0 is greedy: penalties, then argmax (lowest id wins ties);
// the truncation stages and the draw are skipped.
//
// All buffers are sized at construction; sample() and accept() never allocate.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace vega {

struct SamplerParams {
    float temperature = 0.8f;     // <= 0: greedy
    int top_k = 40;               // <= 0 or >= n_vocab: off
    float top_p = 0.95f;          // >= 1: off; keeps the smallest prefix with mass >= top_p (at least 1)
    float min_p = 0.05f;          // <= 0: off; keeps p >= min_p * p_max
    float repeat_penalty = 1.0f;  // 1: off; positive logits / rp, negative logits * rp
    int repeat_last_n = 64;       // window of accepted tokens the penalties look at; 0: off, < 0: all
    float frequency_penalty = 0.f;  // logit -= count * frequency_penalty (count within the window)
    float presence_penalty = 0.f;   // logit -= presence_penalty when count > 0
    uint64_t seed = 0;              // 0 = random from std::random_device
};

// Which tokens may come next (a grammar, engine/grammar_constraint.h): sample() with
// one draws only among the allowed tokens.
class TokenConstraint {
public:
    virtual ~TokenConstraint() = default;
    virtual bool allows(int32_t token) const = 0;
    // Every token's allows() at once into mask [n_vocab] (1 allowed, 0 not), when the
    // constraint has a faster way than asking token by token; false: it has none.
    virtual bool allowed_mask(uint8_t* mask) const {
        (void)mask;
        return false;
    }
    // True when few tokens can be allowed (the next character has few options) and
    // allowed_mask is cheap: a sampler then asks for the mask first, not token by token.
    virtual bool few_allowed() const { return false; }
};

class Sampler {
public:
    // Throws vega::Error on n_vocab <= 0 or non-finite / non-positive parameters
    // where they make no sense (repeat_penalty <= 0, NaN temperature, ...).
    Sampler(const SamplerParams& params, int32_t n_vocab);

    // logits: [n_vocab] floats; not modified. Returns a token in [0, n_vocab).
    // Does not record the token: call accept() with whatever token is kept.
    // With a constraint: the same chain over the allowed tokens only (the best ones are
    // asked first, so a constraint that allows the likely tokens costs a few checks;
    // without top-k and at temperature > 0 every finite token is asked). Returns -1
    // when the constraint allows no token with a finite logit.
    int32_t sample(const float* logits, const TokenConstraint* constraint = nullptr);

    // Samples from the top-k candidates of a row computed elsewhere (e.g. on the GPU),
    // best first with ties by lowest id, k == the top-k the params ask for. Gives the
    // same token as sample() on the full row. Throws when penalties are active (they
    // need the full row).
    int32_t sample_candidates(const int32_t* ids, const float* logits, int k);
    // True when sample_candidates() can serve: top-k on, no penalties, not greedy.
    bool can_sample_candidates() const { return !is_greedy() && !penalties_active() && params_.top_k > 0 && params_.top_k < n_vocab_; }

    // Records a token (sampled or from the prompt) for the repetition penalties.
    // Throws vega::Error when token is outside [0, n_vocab).
    void accept(int32_t token);

    // Forgets the penalty history and restarts the random stream from seed(),
    // so that the same seed after reset() gives the same tokens again.
    void reset();

    bool is_greedy() const { return params_.temperature <= 0.f; }
    // True when the repetition/frequency/presence penalties change logits (they need the full row).
    bool penalties_active() const;
    uint64_t seed() const { return seed_; }  // the seed in use (drawn when params.seed == 0)
    const SamplerParams& params() const { return params_; }
    int32_t n_vocab() const { return n_vocab_; }

    // The penalty stage alone, in place on logits [n_vocab] (exposed for tests
    // and for callers that want penalised logits, e.g. logprob reporting).
    void apply_penalties(float* logits) const;

private:
    // top-p, min-p, temperature and the draw over ids[0..n_kept) (sorted: by `before`).
    int32_t truncate_and_draw(const float* w, int32_t* ids, size_t n_kept, bool sorted);
    int32_t sample_constrained(const float* logits, const TokenConstraint& c);
    int32_t argmax(const float* x) const;
    double uniform01();  // [0, 1) with 53 random bits

    SamplerParams params_;
    int32_t n_vocab_;
    uint64_t seed_;
    std::mt19937_64 rng_;

    // Penalty window: ring buffer of the last repeat_last_n accepted tokens
    // (unbounded window when repeat_last_n < 0 keeps only counts_).
    std::vector<int32_t> ring_;
    size_t ring_head_ = 0;  // next slot to write
    size_t ring_size_ = 0;  // filled slots
    std::vector<int32_t> counts_;  // [n_vocab] occurrences within the window

    // Per-call scratch, [n_vocab] each.
    std::vector<float> work_;   // penalised (then temperature-scaled) logits
    std::vector<int32_t> ids_;  // candidate ids; the kept set is ids_[0..n_kept)
    std::vector<float> probs_;  // softmax weights of the kept candidates
    std::vector<uint8_t> mask_;  // a constraint's allowed_mask, when asked for
};

}  // namespace vega
