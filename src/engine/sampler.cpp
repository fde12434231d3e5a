// Sampler stages (see sampler.h for the order and each stage's rule).
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace vega {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t draw_random_seed() {
    std::random_device rd;
    uint64_t s = (uint64_t(rd()) << 32) ^ uint64_t(rd());
    return s != 0 ? s : 0x9E3779B97F4A7C15ull;  // 0 means "random" in SamplerParams: never report it
}

}  // namespace

Sampler::Sampler(const SamplerParams& params, int32_t n_vocab) : params_(params), n_vocab_(n_vocab) {
    if (n_vocab <= 0) fail("sampler: n_vocab must be positive, got {}", n_vocab);
    if (std::isnan(params.temperature)) fail("sampler: temperature is NaN");
    if (!(params.repeat_penalty > 0.f) || !std::isfinite(params.repeat_penalty))
        fail("sampler: repeat_penalty must be a positive finite number, got {}", params.repeat_penalty);
    if (!std::isfinite(params.frequency_penalty) || !std::isfinite(params.presence_penalty))
        fail("sampler: frequency/presence penalties must be finite");
    if (std::isnan(params.top_p) || std::isnan(params.min_p)) fail("sampler: top_p/min_p is NaN");

    seed_ = params.seed != 0 ? params.seed : draw_random_seed();
    rng_.seed(seed_);

    if (params.repeat_last_n > 0) ring_.assign(size_t(params.repeat_last_n), 0);
    counts_.assign(size_t(n_vocab), 0);
    work_.resize(size_t(n_vocab));
    ids_.resize(size_t(n_vocab));
    probs_.resize(size_t(n_vocab));
}

bool Sampler::penalties_active() const {
    return params_.repeat_last_n != 0 &&
           (params_.repeat_penalty != 1.f || params_.frequency_penalty != 0.f || params_.presence_penalty != 0.f);
}

void Sampler::accept(int32_t token) {
    if (token < 0 || token >= n_vocab_) fail("sampler: accepted token {} is outside the vocabulary [0, {})", token, n_vocab_);
    if (params_.repeat_last_n == 0) return;
    if (params_.repeat_last_n < 0) {  // unbounded window: counts only
        counts_[size_t(token)]++;
        return;
    }
    if (ring_size_ == ring_.size()) {  // evict the oldest (it sits where we write next)
        counts_[size_t(ring_[ring_head_])]--;
    } else {
        ring_size_++;
    }
    ring_[ring_head_] = token;
    counts_[size_t(token)]++;
    ring_head_ = (ring_head_ + 1) % ring_.size();
}

void Sampler::reset() {
    std::fill(counts_.begin(), counts_.end(), 0);
    ring_head_ = ring_size_ = 0;
    rng_.seed(seed_);
}

// For every token seen c > 0 times in the window:
//   repetition: l > 0 -> l / rp, l <= 0 -> l * rp  (llama.cpp's rule)
//   then OpenAI-style: l -= c * frequency_penalty + presence_penalty
void Sampler::apply_penalties(float* logits) const {
    if (!penalties_active()) return;
    const float rp = params_.repeat_penalty, fp = params_.frequency_penalty, pp = params_.presence_penalty;
    for (int32_t i = 0; i < n_vocab_; ++i) {
        const int32_t c = counts_[size_t(i)];
        if (c <= 0) continue;
        float l = logits[i];
        l = l > 0.f ? l / rp : l * rp;
        l -= float(c) * fp + pp;
        logits[i] = l;
    }
}

// Highest logit, lowest id on ties; NaN never wins.
int32_t Sampler::argmax(const float* x) const {
    int32_t best = -1;
    float best_v = kNegInf;
    for (int32_t i = 0; i < n_vocab_; ++i) {
        if (std::isnan(x[i])) continue;
        if (best < 0 || x[i] > best_v) {  // strict: the first (lowest id) of equal maxima stays
            best = i;
            best_v = x[i];
        }
    }
    return best < 0 ? 0 : best;
}

double Sampler::uniform01() { return double(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(const float* logits, const TokenConstraint* constraint) {
    if (constraint) return sample_constrained(logits, *constraint);
    if (is_greedy() && !penalties_active()) return argmax(logits);  // no copy needed
    const size_t n = size_t(n_vocab_);
    float* w = work_.data();
    // Penalties (on a copy; NaN logits become -inf so they can never be drawn).
    for (size_t i = 0; i < n; ++i) w[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
    apply_penalties(w);

    if (is_greedy()) return argmax(w);

    int32_t* ids = ids_.data();
    std::iota(ids, ids + n, 0);
    // Descending logit, ascending id: a total order, so every truncation is deterministic.
    auto before = [w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };

    // top-k: the k best, sorted, become the candidate set.
    size_t n_kept = n;
    bool sorted = false;
    if (params_.top_k > 0 && size_t(params_.top_k) < n) {
        n_kept = size_t(params_.top_k);
        std::partial_sort(ids, ids + n_kept, ids + n, before);
        sorted = true;
    }
    return truncate_and_draw(w, ids, n_kept, sorted);
}

// The allowed tokens in the chain's order (descending penalised logit, ascending id),
// found window by window (256, then 8x more each round) so that the usual case, where
// the best tokens are allowed, sorts and asks little: the first one (greedy) or the
// first top_k (all of them without top-k); then the rest of the chain over them.
// After the first window the constraint's allowed_mask, where it has one, may answer
// instead of allows() (the same set: a grammar walks the vocabulary trie once rather
// than trying each remaining token): when the tokens still to try, at the first
// window's allowed rate, would cost more than a walk that visits about every allowed
// token. Measured on 128k/32k vocabularies with a JSON Schema grammar: allows() 2.3-2.5
// us a token, the walk about 1.1 us per allowed token (0.04 ms where 5 tokens are
// allowed against 33 ms of trying all; 141 against 320 ms where 120k are).
int32_t Sampler::sample_constrained(const float* logits, const TokenConstraint& c) {
    const size_t n = size_t(n_vocab_);
    float* w = work_.data();
    for (size_t i = 0; i < n; ++i) w[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
    apply_penalties(w);
    int32_t* ids = ids_.data();
    std::iota(ids, ids + n, 0);
    auto before = [w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
    const size_t want = is_greedy() ? 1 : params_.top_k > 0 && size_t(params_.top_k) < n ? size_t(params_.top_k) : n;
    size_t n_allowed = 0, done = 0, win = 256;
    bool exhausted = false;  // only -inf logits are left
    bool tried_mask = false;  // (the constraint's allowed_mask is considered once)
    constexpr double kTryCost = 2.4, kWalkCost = 1.1;  // us per token tried, per allowed token walked
    // The rest of the chain's order among the allowed tokens only: the untried ids
    // compacted to the allowed, finite ones, then just the wanted ones sorted.
    auto by_mask = [&] {
        mask_.resize(n);
        if (!c.allowed_mask(mask_.data())) return false;
        size_t m = n_allowed;
        for (size_t i = done; i < n; ++i)
            if (mask_[size_t(ids[i])] && w[ids[i]] != kNegInf) ids[m++] = ids[i];  // m <= i
        const size_t end = std::min(want, m);
        std::partial_sort(ids + n_allowed, ids + end, ids + m, before);
        n_allowed = end;
        return true;
    };
    // Few tokens can be allowed (structure, digits): the mask first, no window to sort.
    if (c.few_allowed()) {
        tried_mask = true;
        if (by_mask()) done = n;
    }
    while (n_allowed < want && done < n && !exhausted) {
        if (done > 0 && !tried_mask) {
            tried_mask = true;
            const double rate = double(n_allowed) / double(done);  // allowed among those tried
            const double to_try = rate > 0 ? std::min(double(n - done), double(want - n_allowed) / rate) : double(n - done);
            if (to_try * kTryCost > std::max(rate, 1.0 / double(n)) * double(n) * kWalkCost && by_mask()) break;
        }
        const size_t end = std::min(n, done + win);
        std::partial_sort(ids + done, ids + end, ids + n, before);
        for (size_t i = done; i < end && n_allowed < want; ++i) {
            if (w[ids[i]] == kNegInf) {
                exhausted = true;
                break;
            }
            if (c.allows(ids[i])) ids[n_allowed++] = ids[i];  // n_allowed <= i: compacts in place
        }
        done = end, win *= 8;
    }
    if (n_allowed == 0) return -1;
    if (is_greedy()) return ids[0];
    return truncate_and_draw(w, ids, n_allowed, true);
}

int32_t Sampler::sample_candidates(const int32_t* cand_ids, const float* cand_logits, int k) {
    if (penalties_active()) fail("sampler: sample_candidates cannot apply penalties (use sample() on full logits)");
    if (k < 1 || k > n_vocab_) fail("sampler: {} candidates for a vocabulary of {}", k, n_vocab_);
    if (is_greedy()) return cand_ids[0];
    // The candidates are the top-k set, best first: exactly what sample() holds after its
    // top-k stage. Their logits go to their ids' slots of the scratch row (only those are read).
    float* w = work_.data();
    int32_t* ids = ids_.data();
    for (int i = 0; i < k; ++i) {
        if (cand_ids[i] < 0 || cand_ids[i] >= n_vocab_) fail("sampler: candidate id {} out of range", cand_ids[i]);
        ids[i] = cand_ids[i];
        w[cand_ids[i]] = std::isnan(cand_logits[i]) ? kNegInf : cand_logits[i];
    }
    return truncate_and_draw(w, ids, size_t(k), /*sorted=*/true);
}

int32_t Sampler::truncate_and_draw(const float* w, int32_t* ids, size_t n_kept, bool sorted) {
    auto before = [w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
    float max_l = kNegInf;
    for (size_t i = 0; i < n_kept; ++i) max_l = std::max(max_l, w[ids[i]]);
    if (!(max_l > kNegInf)) fail("sampler: every candidate logit is -inf or NaN");

    // top-p and min-p both cut a suffix of the sorted candidates, and min-p's
    // threshold (p >= min_p * p_max, i.e. l >= max_l + ln min_p) does not depend on
    // normalisation; so min-p may filter first (fewer tokens to sort) as long as
    // top-p's mass uses the normaliser of the set top-p sees (after top-k).
    const bool use_top_p = params_.top_p < 1.f;
    double z = 0.0;  // softmax normaliser over the top-k set, relative to max_l
    if (use_top_p)
        for (size_t i = 0; i < n_kept; ++i) z += std::exp(w[ids[i]] - max_l);  // float exp, double sum

    if (params_.min_p > 0.f) {
        const float thr = std::min(max_l, max_l + std::log(params_.min_p));  // min_p > 1 still keeps the max
        auto keep = [w, thr](int32_t id) { return w[id] >= thr; };
        if (sorted) {
            size_t m = 1;  // the max always stays
            while (m < n_kept && keep(ids[m])) ++m;
            n_kept = m;
        } else {
            n_kept = size_t(std::partition(ids, ids + n_kept, keep) - ids);
        }
    }

    if (use_top_p) {
        // Sort only as far as needed: the best 256, then 4x more each round
        // (sorting just the new stretch), until the prefix reaches the mass; a
        // full sort of 150k ids per token would cost ~10 ms.
        const double target = double(std::max(params_.top_p, 0.f)) * z;
        size_t done = 0, k = sorted ? n_kept : std::min<size_t>(n_kept, 256);
        double cum = 0.0;
        for (;;) {
            if (!sorted) {
                if (k == n_kept) std::sort(ids + done, ids + n_kept, before);
                else std::partial_sort(ids + done, ids + k, ids + n_kept, before);
            }
            size_t cut = 0;
            for (size_t i = done; i < k; ++i) {
                cum += std::exp(w[ids[i]] - max_l);
                if (cum >= target) {  // keep the token that reaches the mass (at least one)
                    cut = i + 1;
                    break;
                }
            }
            if (cut > 0) n_kept = cut;
            if (cut > 0 || k == n_kept) break;
            done = k;
            k = std::min(n_kept, k * 4);
        }
    }

    // Temperature, then the draw: p_i ~ exp((l_i - max_l) / T) over the kept set.
    const float inv_t = 1.f / params_.temperature;
    double sum = 0.0;
    for (size_t i = 0; i < n_kept; ++i) {
        const float p = std::exp((w[ids[i]] - max_l) * inv_t);
        probs_[i] = p;
        sum += p;
    }
    const double u = uniform01() * sum;
    double cum = 0.0;
    for (size_t i = 0; i < n_kept; ++i) {
        cum += probs_[i];
        if (u < cum) return ids[i];
    }
    // Rounding left u at the very top: return the last token with non-zero weight.
    for (size_t i = n_kept; i-- > 0;)
        if (probs_[i] > 0.f) return ids[i];
    return ids[0];
}

}  // namespace vega
