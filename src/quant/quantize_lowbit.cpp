// Reference quantizers of the types after the first eleven (Q2_K, Q3_K, IQ4_NL, IQ4_XS,
// MXFP4), for `vega synth` and tests. Their blocks decode through quant/type_table.h like
// llama.cpp's. They are vega's own: round to nearest with a short search for each block's
// scale, not llama.cpp's iterative (importance-weighted) search, so their error is near,
// not equal to, llama-quantize's (tests/quant/quants_data_test.cpp prints both).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/internal.h"
#include "quant/type_table.h"

namespace vega::quant::detail {
namespace {

// Round half away from zero (these quantizers' rule; quantize.cpp's K-quant fitters round
// ties to even).
int nearest(float v) { return int(std::lround(v)); }

// A 16-entry codebook sorted for nearest-value search: values ascending and their indices.
// The books' values are integers, so the nearest entry is the same on each open interval
// (j/2, (j+1)/2): a table over those intervals answers in one load, the binary search
// only at their ends (exact half-integers, out of range, NaN). Same result as the search.
struct SortedBook {
    float v[16];
    uint8_t idx[16];
    uint8_t by_half[512];  // interval (j/2, (j+1)/2) for j in [-256, 256): by_half[j + 256]
    float value[16];       // book[i] as float, by index
    explicit SortedBook(const int8_t* book) {
        for (int k = 0; k < 16; ++k) value[k] = float(book[k]);
        for (int k = 0; k < 16; ++k) idx[k] = uint8_t(k);
        std::sort(idx, idx + 16, [&](uint8_t a, uint8_t b) { return book[a] < book[b]; });
        for (int k = 0; k < 16; ++k) v[k] = float(book[idx[k]]);
        for (int j = -256; j < 256; ++j) by_half[j + 256] = search((float(j) + 0.5f) * 0.5f);
    }
    // The index of the entry nearest to x (ties to the lower value).
    uint8_t nearest(float x) const {
        const float t2 = 2.f * x;
        if (t2 > -256.f && t2 < 256.f) {  // (false for NaN)
            const int i = int(t2);        // toward zero; floor is one less for a negative fraction
            const float fi = float(i);
            if (fi != t2) return by_half[i - (t2 < fi ? 1 : 0) + 256];
        }
        return search(x);
    }
    // The same by binary search.
    uint8_t search(float x) const {
        int lo = 0, hi = 15;
        while (hi - lo > 1) {
            const int mid = (lo + hi) / 2;
            (x < v[mid] ? hi : lo) = mid;
        }
        return std::fabs(x - v[lo]) <= std::fabs(x - v[hi]) ? idx[lo] : idx[hi];
    }
};

const SortedBook& sorted(const int8_t* book) {
    static const SortedBook iq4(kIq4nlValues), mx(kMxfp4Values);
    return book == kIq4nlValues ? iq4 : mx;
}

// A 32-element block against a 16-entry codebook: the scale d (value = d * book[code])
// with the least squared error among candidates around amax / book extreme, each refined
// by least squares for its code assignment (15 candidates, as llama.cpp's 2 x 7 + 1).
// codes[32] out; returns d.
float codebook_block(const float* x, const int8_t* book, uint8_t* codes) {
    const SortedBook& sb = sorted(book);
    const float vmax = signed_absmax(x, 32);
    if (vmax == 0) {
        std::memset(codes, 0, 32);
        for (int k = 0; k < 16; ++k)
            if (book[k] == 0) std::memset(codes, k, 32);
        return 0.f;
    }
    // The 15 candidates side by side: each one's sums run over j in order, as one
    // candidate at a time would (the same bits), but 15 chains at once (vectorized over the
    // candidates) instead of one chain of 32 dependent adds after another.
    constexpr int kSteps = 15, kLanes = 16;  // steps -7..7; lane 15 unused (zeros)
    const float ext = vmax < 0 ? sb.v[0] : sb.v[15];
    float d0[kLanes] = {}, sxv[kLanes] = {}, svv[kLanes] = {}, err[kLanes] = {}, d[kLanes] = {};
    alignas(16) float v[32][kLanes] = {};  // v[j][s]: book value of element j's code in candidate s
    uint8_t trial[kSteps][32];
    for (int st = 0; st < kSteps; ++st) {
        // The largest element lands on an extreme of the book (of its sign), scaled by 1 + step/32.
        d0[st] = vmax / ext * (1.f + float(st - 7) / 32.f);
        float t[32];
        for (int j = 0; j < 32; ++j) t[j] = x[j] / d0[st];  // (vectorized: the divisions apart)
        for (int j = 0; j < 32; ++j) trial[st][j] = sb.nearest(t[j]), v[j][st] = sb.value[trial[st][j]];
    }
    for (int j = 0; j < 32; ++j)
        for (int st = 0; st < kLanes; ++st) sxv[st] += x[j] * v[j][st], svv[st] += v[j][st] * v[j][st];
    for (int st = 0; st < kLanes; ++st) d[st] = svv[st] > 0 ? sxv[st] / svv[st] : d0[st];
    for (int j = 0; j < 32; ++j)
        for (int st = 0; st < kLanes; ++st) {
            const float e = x[j] - d[st] * v[j][st];
            err[st] += e * e;
        }
    int best = 0;  // (NaN input: the first)
    for (int st = 1; st < kSteps; ++st)
        if (err[st] < err[best]) best = st;
    std::memcpy(codes, trial[best], 32);
    const float best_d = d[best];
    return best_d;
}

void pack_nibbles(const uint8_t* codes, uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = uint8_t((codes[j] & 0xF) | (codes[j + 16] & 0xF) << 4);
}

// Codes of 32 elements for a fixed scale d through the codebook.
void codes_for_scale(const float* x, const int8_t* book, float d, uint8_t* codes) {
    const SortedBook& sb = sorted(book);
    const float id = d != 0 ? 1.f / d : 0.f;
    for (int j = 0; j < 32; ++j) codes[j] = sb.nearest(x[j] * id);
}

}  // namespace

void quantize_iq4_nl(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockIQ4_NL*>(dst);
    uint8_t codes[32];
    for (int64_t i = 0; i < n / 32; ++i, x += 32) {
        const float d = codebook_block(x, kIq4nlValues, codes);
        y[i].d = f32_to_f16(d);
        codes_for_scale(x, kIq4nlValues, f16_to_f32(y[i].d), codes);  // the codes of the stored scale
        pack_nibbles(codes, y[i].qs);
    }
}

void quantize_iq4_xs(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockIQ4_XS*>(dst);
    uint8_t codes[32];
    for (int64_t i = 0; i < n / 256; ++i, x += 256) {
        float dc[8], amax = 0;
        for (int c = 0; c < 8; ++c) dc[c] = codebook_block(x + 32 * c, kIq4nlValues, codes), amax = std::max(amax, std::fabs(dc[c]));
        // Chunk scales d * (ls - 32), ls 0..63: the widest chunk scale at 31 steps.
        const float d = amax / 31.f;
        y[i].d = f32_to_f16(d);
        const float dd = f16_to_f32(y[i].d);
        y[i].scales_h = 0;
        std::memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int c = 0; c < 8; ++c) {
            const int ls = dd > 0 ? clampi(nearest(dc[c] / dd) + 32, 0, 63) : 32;
            y[i].scales_l[c / 2] |= uint8_t((ls & 0xF) << (4 * (c % 2)));
            y[i].scales_h |= uint16_t((ls >> 4) << (2 * c));
            codes_for_scale(x + 32 * c, kIq4nlValues, dd * float(ls - 32), codes);
            pack_nibbles(codes, y[i].qs + 16 * c);
        }
    }
}

void quantize_mxfp4(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockMXFP4*>(dst);
    uint8_t codes[32] = {}, trial[32];
    for (int64_t i = 0; i < n / 32; ++i, x += 32) {
        const float amax = std::fabs(signed_absmax(x, 32));
        // Value = kMxfp4Values[code] * 2^(e - 128): the smallest e whose 12 * 2^(e-128)
        // covers amax, and the one below it (clipping the largest may cost less).
        int e_top = amax > 0 ? int(std::ceil(std::log2(amax / 12.f))) + 128 : 0;
        e_top = clampi(e_top, 1, 254);
        float best = INFINITY;
        int best_e = e_top;
        for (int e = e_top; e >= std::max(0, e_top - 1); --e) {
            const float d = e8m0_half(uint8_t(e));
            codes_for_scale(x, kMxfp4Values, d, trial);
            float err = 0;
            for (int j = 0; j < 32; ++j) {
                const float r = x[j] - d * float(kMxfp4Values[trial[j]]);
                err += r * r;
            }
            if (e == e_top || err < best) best = err, best_e = e, std::memcpy(codes, trial, 32);  // (NaN input: the first)
        }
        y[i].e = uint8_t(best_e);
        pack_nibbles(codes, y[i].qs);
    }
}

// Q2_K: per 16 elements x ~ s * q - m (q 0..3, m >= 0), s and m stored as 4-bit multiples
// of the block's d and dmin.
void quantize_q2_k(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ2_K*>(dst);
    for (int64_t i = 0; i < n / 256; ++i, x += 256) {
        float s[16], m[16], smax = 0, mmax = 0;
        for (int k = 0; k < 16; ++k) {
            float lo = 0, hi = 0;  // the range includes 0: m >= 0
            for (int l = 0; l < 16; ++l) lo = std::min(lo, x[16 * k + l]), hi = std::max(hi, x[16 * k + l]);
            s[k] = (hi - lo) / 3.f, m[k] = -lo;
            smax = std::max(smax, s[k]), mmax = std::max(mmax, m[k]);
        }
        y[i].d = f32_to_f16(smax / 15.f);
        y[i].dmin = f32_to_f16(mmax / 15.f);
        const float d = f16_to_f32(y[i].d), dmin = f16_to_f32(y[i].dmin);
        std::memset(y[i].qs, 0, sizeof y[i].qs);
        for (int k = 0; k < 16; ++k) {
            const int sc = d > 0 ? clampi(nearest(s[k] / d), 0, 15) : 0;
            const int mq = dmin > 0 ? clampi(nearest(m[k] / dmin), 0, 15) : 0;
            y[i].scales[k] = uint8_t(sc | mq << 4);
            const float ds = d * float(sc), dm = dmin * float(mq);
            // Element 16k + l is chunk c = k / 2, byte l + 16 (k % 2) of qs[32 (c / 4)..], bits 2 (c % 4).
            const int c = k / 2;
            for (int l = 0; l < 16; ++l) {
                const int q = ds > 0 ? clampi(nearest((x[16 * k + l] + dm) / ds), 0, 3) : 0;
                y[i].qs[32 * (c / 4) + 16 * (k % 2) + l] |= uint8_t(q << (2 * (c % 4)));
            }
        }
    }
}

// Q3_K: per 16 elements x ~ s * q (q -4..3), s = d * (sc - 32) with sc 6 bits; the
// largest magnitude of each 16 maps to -4 (the code with the most room).
void quantize_q3_k(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ3_K*>(dst);
    for (int64_t i = 0; i < n / 256; ++i, x += 256) {
        float s[16], smax = 0;
        for (int k = 0; k < 16; ++k) {
            s[k] = signed_absmax(x + 16 * k, 16) / -4.f;
            smax = std::max(smax, std::fabs(s[k]));
        }
        y[i].d = f32_to_f16(smax / 32.f);
        const float d = f16_to_f32(y[i].d);
        std::memset(y[i].hmask, 0, sizeof y[i].hmask);
        std::memset(y[i].qs, 0, sizeof y[i].qs);
        std::memset(y[i].scales, 0, sizeof y[i].scales);
        for (int k = 0; k < 16; ++k) {
            const int sc = d > 0 ? clampi(nearest(s[k] / d), -32, 31) : 0;
            const int v = sc + 32;  // 6 bits: low nibble in byte k (k < 8) or the high nibble of byte k - 8
            y[i].scales[k % 8] |= uint8_t((v & 0xF) << (4 * (k / 8)));
            y[i].scales[8 + k % 4] |= uint8_t((v >> 4) << (2 * (k / 4)));
            const float ds = d * float(sc);
            const int c = k / 2;
            for (int l = 0; l < 16; ++l) {
                const int q = ds != 0 ? clampi(nearest(x[16 * k + l] / ds), -4, 3) : 0;
                const int u = q + 4, e = 16 * (k % 2) + l;  // byte e of the chunk's 32
                y[i].qs[32 * (c / 4) + e] |= uint8_t((u & 3) << (2 * (c % 4)));
                if (u & 4) y[i].hmask[e] |= uint8_t(1u << c);
            }
        }
    }
}

}  // namespace vega::quant::detail
