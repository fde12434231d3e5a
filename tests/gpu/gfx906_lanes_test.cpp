// The gfx906 cross-lane instructions as the emulation build runs them
// (src/backend/gpu/gfx906_lanes.h, used by gfx906_emulation.h), against plain
// models of each instruction written here from the ISA's description, on a
// simulated 64-lane wave with every lane active and with partly active waves.
#include "backend/gpu/gfx906_lanes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>

namespace vega::gpu::gfx906 {
namespace {

using Wave = std::array<float, 64>;
using Exec = unsigned long long;
constexpr Exec kAll = ~0ull;

bool active(Exec e, int lane) { return (e >> lane) & 1ull; }

// ---- plain models: lane arithmetic as the ISA describes it ----
int model_quad_perm(int ctrl, int lane) {
    const int perm[4] = {ctrl & 3, (ctrl >> 2) & 3, (ctrl >> 4) & 3, (ctrl >> 6) & 3};
    return lane / 4 * 4 + perm[lane % 4];
}
int model_row_mirror(int lane) { return lane / 16 * 16 + (15 - lane % 16); }
int model_row_half_mirror(int lane) { return lane / 8 * 8 + (7 - lane % 8); }
int model_row_shl(int n, int lane) { return lane % 16 + n < 16 ? lane + n : kNone; }
int model_row_shr(int n, int lane) { return lane % 16 - n >= 0 ? lane - n : kNone; }
int model_row_ror(int n, int lane) { return lane / 16 * 16 + (lane % 16 + 16 - n) % 16; }
int model_swizzle(int and_mask, int or_mask, int xor_mask, int lane) {
    return lane / 32 * 32 + ((((lane % 32) & and_mask) | or_mask) ^ xor_mask);
}

// One instruction on a simulated wave: inactive lanes keep their value (they do
// not execute); active lanes read per the instruction's rule.
Wave run_dpp(const Wave& v, Exec e, int ctrl, bool bound_ctrl) {
    Wave r = v;
    for (int l = 0; l < 64; ++l)
        if (active(e, l)) {
            const int s = dpp_source(ctrl, l);
            r[l] = dpp_read(s >= 0 ? v[s] : 0.f, v[l], s, e, bound_ctrl);
        }
    return r;
}
Wave run_swizzle(const Wave& v, Exec e, int offset) {
    Wave r = v;
    for (int l = 0; l < 64; ++l)
        if (active(e, l)) {
            const int s = swizzle_source(offset, l);
            r[l] = lds_xchg_read(v[s], s, e);
        }
    return r;
}

Wave random_wave(std::mt19937& rng, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    Wave w;
    for (float& x : w) x = u(rng);
    return w;
}

TEST(Gfx906Lanes, DppSourcesMatchTheIsa) {
    for (int lane = 0; lane < 64; ++lane) {
        for (int ctrl = 0; ctrl <= 0xFF; ++ctrl) ASSERT_EQ(dpp_source(ctrl, lane), model_quad_perm(ctrl, lane)) << ctrl;
        EXPECT_EQ(dpp_source(kRowMirror, lane), model_row_mirror(lane));
        EXPECT_EQ(dpp_source(kRowHalfMirror, lane), model_row_half_mirror(lane));
        for (int n = 1; n < 16; ++n) {
            EXPECT_EQ(dpp_source(0x100 + n, lane), model_row_shl(n, lane)) << "row_shl:" << n;
            EXPECT_EQ(dpp_source(0x110 + n, lane), model_row_shr(n, lane)) << "row_shr:" << n;
            EXPECT_EQ(dpp_source(0x120 + n, lane), model_row_ror(n, lane)) << "row_ror:" << n;
        }
        EXPECT_EQ(dpp_source(kQuadXor1, lane), lane ^ 1);
        EXPECT_EQ(dpp_source(kQuadXor2, lane), lane ^ 2);
        // Controls the emulation does not model are refused, not guessed.
        EXPECT_EQ(dpp_source(0x142, lane), kUnsupported);  // row_bcast:15
        EXPECT_EQ(dpp_source(0x130, lane), kUnsupported);  // wave_shl
    }
}

TEST(Gfx906Lanes, SwizzleAndBpermuteSourcesMatchTheIsa) {
    std::mt19937 rng(7);
    for (int t = 0; t < 200; ++t) {
        const int a = int(rng() & 31), o = int(rng() & 31), x = int(rng() & 31);
        const int offset = a | (o << 5) | (x << 10);
        for (int lane = 0; lane < 64; ++lane) ASSERT_EQ(swizzle_source(offset, lane), model_swizzle(a, o, x, lane));
    }
    for (int lane = 0; lane < 64; ++lane) {
        EXPECT_EQ(swizzle_source(kSwizzleXor16, lane), lane ^ 16);
        EXPECT_EQ(swizzle_source(0x8000 | 0x1B, lane), kUnsupported);  // quad-permute mode
        EXPECT_EQ(bpermute_source(lane * 4), lane);
        EXPECT_EQ(bpermute_source((lane + 64) * 4 + 2), lane);  // mod 64, low address bits ignored
    }
}

TEST(Gfx906Lanes, InvalidAndInactiveSourcesReadZeroOrOld) {
    // bound_ctrl: 0 from a lane out of the row or inactive; without it the old value.
    const Exec half = 0x00000000FFFFFFFFull;
    EXPECT_EQ(dpp_read(5.f, 9.f, 3, kAll, true), 5.f);
    EXPECT_EQ(dpp_read(5.f, 9.f, kNone, kAll, true), 0.f);
    EXPECT_EQ(dpp_read(5.f, 9.f, kNone, kAll, false), 9.f);
    EXPECT_EQ(dpp_read(5.f, 9.f, 40, half, true), 0.f);
    EXPECT_EQ(dpp_read(5.f, 9.f, 40, half, false), 9.f);
    EXPECT_EQ(lds_xchg_read(5.f, 40, half), 0.f);
    EXPECT_EQ(lds_xchg_read(5.f, 12, half), 5.f);
}

TEST(Gfx906Lanes, DppAndSwizzleOnPartlyActiveWaves) {
    std::mt19937 rng(11);
    for (int t = 0; t < 100; ++t) {
        const Wave v = random_wave(rng, -4.f, 4.f);
        const Exec e = t == 0 ? kAll : (Exec(rng()) << 32) | Exec(rng());
        for (int ctrl : {kQuadXor1, kQuadXor2, kRowMirror, kRowHalfMirror, 0x111, 0x10F}) {
            for (bool bc : {true, false}) {
                const Wave r = run_dpp(v, e, ctrl, bc);
                for (int l = 0; l < 64; ++l) {
                    if (!active(e, l)) {
                        ASSERT_EQ(r[l], v[l]);  // an inactive lane is not written
                        continue;
                    }
                    int s = kNone;
                    if (ctrl == kRowMirror) s = model_row_mirror(l);
                    else if (ctrl == kRowHalfMirror) s = model_row_half_mirror(l);
                    else if (ctrl == 0x111) s = model_row_shr(1, l);
                    else if (ctrl == 0x10F) s = model_row_shl(15, l);
                    else s = model_quad_perm(ctrl, l);
                    const float want = (s != kNone && active(e, s)) ? v[s] : (bc ? 0.f : v[l]);
                    ASSERT_EQ(r[l], want) << "ctrl " << ctrl << " lane " << l;
                }
            }
        }
        const Wave r = run_swizzle(v, e, kSwizzleXor16);
        for (int l = 0; l < 64; ++l) {
            if (active(e, l)) {
                ASSERT_EQ(r[l], active(e, l ^ 16) ? v[l ^ 16] : 0.f);
            }
        }
    }
}

// wave.h's reductions as step sequences of these instructions (readlane of lanes
// 0 and 32 for the last step of a wave64).
Wave reduce(Wave v, Exec e, int w, bool is_max) {
    auto combine = [&](const Wave& a, const Wave& b) {
        Wave r = a;
        for (int l = 0; l < 64; ++l)
            if (active(e, l)) r[l] = is_max ? std::max(a[l], b[l]) : a[l] + b[l];
        return r;
    };
    const int steps[4] = {kQuadXor1, kQuadXor2, kRowHalfMirror, kRowMirror};
    for (int i = 0; i < 4 && (2 << i) <= w; ++i) v = combine(v, run_dpp(v, e, steps[i], /*bound_ctrl=*/!is_max));
    if (w >= 32) v = combine(v, run_swizzle(v, e, kSwizzleXor16));
    if (w >= 64) {
        const float r = is_max ? std::max(v[0], v[32]) : v[0] + v[32];
        for (float& x : v) x = r;
    }
    return v;
}

TEST(Gfx906Lanes, ReductionsOverConvergedGroups) {
    std::mt19937 rng(3);
    for (int w : {2, 4, 8, 16, 32, 64}) {
        const Wave v = random_wave(rng, -8.f, -1.f);  // all negative: a stray 0 would win a max
        const Wave s = reduce(v, kAll, w, false), m = reduce(v, kAll, w, true);
        for (int l = 0; l < 64; ++l) {
            double want_s = 0;
            float want_m = -1e30f;
            for (int j = l / w * w; j < l / w * w + w; ++j) want_s += v[j], want_m = std::max(want_m, v[j]);
            EXPECT_NEAR(s[l], want_s, 1e-4) << "sum, groups of " << w << ", lane " << l;
            EXPECT_EQ(m[l], want_m) << "max, groups of " << w << ", lane " << l;
        }
    }
}

TEST(Gfx906Lanes, MaxInAPartlyActiveRowNeverInventsAZero) {
    // In divergent code a butterfly cannot reach every lane (no reduction can), but
    // each step of the max keeps the lane's own value where its source is inactive,
    // so every result is one of the active values. With bound_ctrl (as a sum's
    // steps read) an inactive source reads 0, which beats every negative value.
    std::mt19937 rng(5);
    for (int t = 0; t < 200; ++t) {
        const Wave v = random_wave(rng, -8.f, -1.f);
        const Exec e = ((Exec(rng()) << 32) | Exec(rng())) | 1ull;
        const Wave m = reduce(v, e, 16, true);
        for (int l = 0; l < 64; ++l) {
            if (!active(e, l)) continue;
            bool found = false;
            for (int j = l / 16 * 16; j < l / 16 * 16 + 16; ++j) found |= active(e, j) && m[l] == v[j];
            ASSERT_TRUE(found) << "lane " << l << " got " << m[l];
        }
    }
    // The old form of the max (bound_ctrl steps) on a quad with lanes 1..3 inactive.
    Wave v{};
    v.fill(-3.f);
    const Exec e = kAll & ~0xEull;
    const Wave bad = run_dpp(v, e, kQuadXor1, true);
    EXPECT_EQ(std::max(v[0], bad[0]), 0.f);  // what the fix removes
    const Wave good = run_dpp(v, e, kQuadXor1, false);
    EXPECT_EQ(std::max(v[0], good[0]), -3.f);
}

}  // namespace
}  // namespace vega::gpu::gfx906
