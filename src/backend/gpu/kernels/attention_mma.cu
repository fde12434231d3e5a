// Prompt attention on NVIDIA tensor cores (sm_80+): many query rows of one sequence
// against K/V tiles staged in shared memory, online softmax, causal mask (flash
// attention). The gfx906 form of the same step is attention_dot2.cu; ops.h's
// attention_tiled picks the one of the build's target.
//
//   out [rows][n_head][hd] = softmax(q k^T * scale) v over positions 0..pos[t] of seq[t]
//
// Block (4 warps): a tile of kBm = 64 * MT query rows, rows = (token, head of one GQA
// group): row r is token t0 + r / G, head kvh * G + r % G (G = n_head / n_kv_head,
// kBm / G tokens a tile), so every row of the block reads the same K/V rows. Grid
// (token tiles, kv heads), the last tokens' tiles (the most positions) first.
// Warp w owns MT m-tiles of 16 rows (the mma's M) from row 16 MT w. Per K/V tile of
// BN positions, per m-tile:
//   S [16][BN] = Q K^T     mma.m16n8k16, Q (f16, scale * log2 e folded in) and K
//                          from shared memory by ldmatrix (a K fragment serves the
//                          warp's MT m-tiles);
//   causal mask, online softmax in the log2 domain (exp2), rows' maxima and sums
//   across the 4 lanes of a quad (each lane holds 2 columns of every 8);
//   O [16][hd] += P V      P from S's accumulators (the C fragment of two n-tiles is
//                          the A fragment of one k-step), V by ldmatrix .trans.
// K/V tiles stream through two shared-memory buffers by cp.async (tile i + 1 in
// flight while i is computed); positions past the tile's kv length are zero-filled
// (a stale cell could hold NaN, and 0 * NaN would reach O).
//
// Rows of several sequences in one tile (a batch mixing a prompt chunk with other
// sequences' rows): the block runs one pass per sequence present, each pass masking
// the other sequences' rows; a prompt's tiles take one pass.
//
// Shared memory (row stride hd + 8 halves: ldmatrix's 8 rows hit 8 distinct 16-byte
// bank groups): Q [kBm][hd+8] + 2 x (K, V) [BN][hd+8] f16: MT 1 87 KB at hd 128 (BN 64),
// 101 KB at hd 256 (BN 32, the O accumulators being 128 registers); MT 2 70 KB at hd
// 128 (BN 32; two blocks an SM by registers, 248 of them).
#include "core/env.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/per_device.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/kernels/tensor_core.h"
#include "backend/gpu/kernels/tile_pass.h"
#include "backend/gpu/arch/arch.h"
#include "backend/gpu/wave.h"

#include <algorithm>
#include <climits>
#include <string>

namespace vega::gpu {

#if defined(VEGA_GPU_CUDA) && !defined(VEGA_GPU_EMULATE_GFX906)
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

// MT: 16-row m-tiles per warp. Each K / V fragment a warp loads from shared memory feeds
// MT mma per n-tile, so MT = 2 halves the ldmatrix bytes per mma (the shared-memory
// port, not the tensor cores, bounds MT = 1: 36 KB of ldmatrix per 128 mma a warp and
// tile) at twice the accumulators (hd 128: 128 O + 64 S registers) and half the blocks.
template <int HD, int MT>
struct Tile {
    static constexpr int kBm = 16 * MT * kWarps;      // query rows per block
    static constexpr int kBn = HD <= 128 && MT == 1 ? 64 : 32;  // K/V positions per tile (registers: S is MT x kBn / 8 x 4)
    static constexpr int kStride = HD + 8;            // halves per shared row
    static constexpr int kQ = kBm * kStride;          // halves
    static constexpr int kKv = kBn * kStride;         // halves of one K (or V) buffer
    static constexpr int kBytes = (kQ + 4 * kKv) * 2;
    static constexpr int kChunks = HD / 8;            // 16-byte chunks per row
    static_assert(HD % 16 == 0 && HD <= 256, "head dims: multiples of 16 up to 256");
    static_assert(kBm <= kMaxTileTokens, "one pending bit per token");
    static_assert(MT == 1 || HD <= 128, "hd 256 at MT 2 would need 256 O registers");
};

// 2^x by the SFU alone (ex2.approx.ftz: results under 2^-126 flush to 0, weights too
// small to reach a sum); exp2f adds the subnormal range's scaling around it.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// K and V rows [j0, j0 + kBn) of one (seq, kv head) into shared buffers; rows from
// kv_len on zero-filled. Where the block's threads cover whole rows of 16-byte chunks
// (hd 64, 128, 256), a thread copies the same chunk ch of rows r0, r0 + kRowStep, ..:
// its shared offset and chunk are set once per block (KvCopy), and a tile costs an add
// per row; other head dims walk the chunks with a division.
template <int HD, int MT>
struct KvCopy {
    using T = Tile<HD, MT>;
    static constexpr bool kWholeRows = kThreads % T::kChunks == 0;
    int r0, ch;
    SmemAddr off;  // byte offset of (r0, ch) in a K or V buffer
    __device__ KvCopy() {
        r0 = int(threadIdx.x) / T::kChunks, ch = int(threadIdx.x) % T::kChunks;
        off = SmemAddr((r0 * T::kStride + ch * 8) * 2);
    }
    __device__ __forceinline__ void load(SmemAddr ks, SmemAddr vs, const uint16_t* kg, const uint16_t* vg, int j0,
                                         int kv_len) const {
        if constexpr (kWholeRows) {
            constexpr int kRowStep = kThreads / T::kChunks;  // rows one pass of the block covers
            static_assert(T::kBn % kRowStep == 0, "whole passes per tile");
#pragma unroll
            for (int i = 0; i < T::kBn / kRowStep; ++i) {
                const int j = j0 + r0 + i * kRowStep;
                const int bytes = j < kv_len ? 16 : 0;
                const int64_t src = int64_t(j < kv_len ? j : 0) * HD + ch * 8;
                const SmemAddr o = off + SmemAddr(i * kRowStep * T::kStride * 2);
                cp_async_zfill(ks + o, kg + src, bytes);
                cp_async_zfill(vs + o, vg + src, bytes);
            }
        } else {
            for (int c = int(threadIdx.x); c < T::kBn * T::kChunks; c += kThreads) {
                const int r = c / T::kChunks, cc = c % T::kChunks;
                const int j = j0 + r;
                const int bytes = j < kv_len ? 16 : 0;
                const int64_t src = int64_t(j < kv_len ? j : 0) * HD + cc * 8;
                const SmemAddr o = SmemAddr((r * T::kStride + cc * 8) * 2);
                cp_async_zfill(ks + o, kg + src, bytes);
                cp_async_zfill(vs + o, vg + src, bytes);
            }
        }
        cp_async_commit();
    }
};

template <int HD, int MT>
__global__ void __launch_bounds__(kThreads) attn_mma_k(ops::KvLayer c, const float* __restrict__ q,
                                                       float* __restrict__ out, int rows, int n_head, float scale,
                                                       const int32_t* __restrict__ pos,
                                                       const int32_t* __restrict__ seq) {
    using T = Tile<HD, MT>;
    constexpr int kBm = T::kBm, kBn = T::kBn, kS = T::kStride;
    extern __shared__ __align__(16) uint16_t smem[];
    __shared__ int s_pos[kBm];  // per row of the tile: its position this pass, -1 when masked
    __shared__ int s_seq, s_len;
    const int G = n_head / c.n_kv_head, bt = kBm / G;  // heads per kv head, tokens per tile
    const int tile = int(gridDim.x) - 1 - int(blockIdx.x), kvh = int(blockIdx.y);
    const int t0 = tile * bt;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, tq = lane & 3;
    const SmemAddr qs = SmemAddr(__cvta_generic_to_shared(smem));
    const SmemAddr kvs = qs + T::kQ * 2;  // buffer b: K at kvs + b * 2 * kKv * 2, V after it
    auto k_buf = [&](int b) { return kvs + SmemAddr(b * 2 * T::kKv * 2); };
    auto v_buf = [&](int b) { return kvs + SmemAddr((b * 2 + 1) * T::kKv * 2); };

    pdl_wait();  // q and the cache rows of this step: written by the previous kernels
    pdl_trigger();

    // Q of every row (scaled into the log2 domain), f16; rows past the batch: zero.
    const float qscale = scale * kLog2e;
    for (int e = int(threadIdx.x); e < kBm * (HD / 4); e += kThreads) {
        const int r = e / (HD / 4), d = (e % (HD / 4)) * 4;
        const int t = t0 + r / G;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < bt * G && t < rows)
            v = *reinterpret_cast<const float4*>(q + (int64_t(t) * n_head + kvh * G + r % G) * HD + d);
        uint32_t* dst = reinterpret_cast<uint32_t*>(smem + r * kS + d);
        dst[0] = pack_half2(v.x * qscale, v.y * qscale);
        dst[1] = pack_half2(v.z * qscale, v.w * qscale);
    }

    // thread 0: tokens not yet attended
    PendingTokens pending = threadIdx.x == 0 ? tile_tokens(t0, bt, rows) : PendingTokens{0, 0};
    const int row0 = warp * 16 * MT;  // the warp's first row; m-tile m: rows row0 + 16m ..
    // This lane's ldmatrix row addresses, in bytes from each operand's first row: every
    // fragment's address is one of them plus a constant of the unrolled loops (so the
    // tile loop keeps three registers for them, not one per fragment).
    //   Q (A of S = Q K^T): rows row0 + (lane & 7) + 8 ((lane >> 3) & 1), dims 8 (lane >> 4) (+16 m, +16 kd)
    //   K (B, [n][k]):      rows (lane & 7) + 8 (lane >> 4), dims 8 ((lane >> 3) & 1)    (+8 n, +16 kd)
    //   V (B, .trans):      rows (lane & 7) + 8 ((lane >> 3) & 1), dims 8 (lane >> 4)    (+16 ks, +16 dn)
    const SmemAddr q_lane = qs + SmemAddr(((row0 + (lane & 7) + ((lane >> 3) & 1) * 8) * kS + (lane >> 4) * 8) * 2);
    const SmemAddr k_lane = SmemAddr((((lane & 7) + (lane >> 4) * 8) * kS + ((lane >> 3) & 1) * 8) * 2);
    const SmemAddr v_lane = SmemAddr((((lane & 7) + ((lane >> 3) & 1) * 8) * kS + (lane >> 4) * 8) * 2);
    const KvCopy<HD, MT> copy;
    for (;;) {
        __syncthreads();  // the previous pass has read s_pos (and Q is in place)
        if (threadIdx.x == 0) next_tile_pass(pending, pos, seq, t0, bt, G, kBm, s_pos, &s_seq, &s_len);
        __syncthreads();
        if (s_seq < 0) break;  // every token attended
        const int kv_len = s_len;
        int p_lo[MT], p_hi[MT];  // this lane's rows of m-tile m: row0 + 16m + g and + 8
        int wmax = -1, wmin = INT_MAX;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            p_lo[m] = s_pos[row0 + 16 * m + g], p_hi[m] = s_pos[row0 + 16 * m + g + 8];
            wmax = max(wmax, max(p_lo[m], p_hi[m]));
            wmin = min(wmin, min(p_lo[m] < 0 ? INT_MAX : p_lo[m], p_hi[m] < 0 ? INT_MAX : p_hi[m]));
        }
        // The warp's last useful position: tiles past it only cost it masking, skip them.
        // Tiles up to its rows' first position need no mask (a masked row, p < 0, is
        // never stored, so its unmasked scores do not matter).
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) {
            wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
            wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
        }
        const int64_t base = c.row(s_seq, kvh, 0);
        const uint16_t* kg = static_cast<const uint16_t*>(c.k) + base;
        const uint16_t* vg = static_cast<const uint16_t*>(c.v) + base;

        float o_acc[MT][HD / 8][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int i = 0; i < HD / 8; ++i) o_acc[m][i][0] = o_acc[m][i][1] = o_acc[m][i][2] = o_acc[m][i][3] = 0.f;
        // l: this lane's part of the row sums
        float m_lo[MT], m_hi[MT], l_lo[MT], l_hi[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m) m_lo[m] = m_hi[m] = -INFINITY, l_lo[m] = l_hi[m] = 0.f;

        const int n_tiles = (kv_len + kBn - 1) / kBn;
        copy.load(k_buf(0), v_buf(0), kg, vg, 0, kv_len);
        for (int it = 0; it < n_tiles; ++it) {
            const int j0 = it * kBn, buf = it & 1;
            if (it + 1 < n_tiles) {
                copy.load(k_buf(buf ^ 1), v_buf(buf ^ 1), kg, vg, j0 + kBn, kv_len);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();  // tile it is in place for every warp
            if (j0 <= wmax) {  // (warp-uniform)
                // S = Q K^T: [16 MT][kBn] in kBn / 8 n-tiles; each K fragment feeds MT m-tiles.
                float s[MT][kBn / 8][4];
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int n = 0; n < kBn / 8; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.f;
                const SmemAddr kb = k_buf(buf) + k_lane;
#pragma unroll
                for (int kd = 0; kd < HD / 16; ++kd) {
                    uint32_t a[MT][4];
#pragma unroll
                    for (int m = 0; m < MT; ++m)
                        ldmatrix_x4(q_lane + SmemAddr((16 * m * kS + kd * 16) * 2), a[m][0], a[m][1], a[m][2], a[m][3]);
#pragma unroll
                    for (int n = 0; n < kBn / 8; n += 2) {
                        uint32_t b0, b1, b2, b3;  // (b0, b1): n-tile n; (b2, b3): n-tile n + 1
                        ldmatrix_x4(kb + SmemAddr((n * 8 * kS + kd * 16) * 2), b0, b1, b2, b3);
#pragma unroll
                        for (int m = 0; m < MT; ++m) {
                            mma_f16(s[m][n], a[m][0], a[m][1], a[m][2], a[m][3], b0, b1);
                            mma_f16(s[m][n + 1], a[m][0], a[m][1], a[m][2], a[m][3], b2, b3);
                        }
                    }
                }
                // Per m-tile: causal mask, online softmax in the log2 domain, P = exp2(S - m)
                // as the A fragments of the P V k-steps (16 positions each).
                uint32_t pa[MT][kBn / 16][4];
#pragma unroll
                for (int m = 0; m < MT; ++m) {
                    // Causal mask and the tile's row maxima (quad: the 4 lanes of a row).
                    if (j0 + kBn - 1 > wmin) {  // (warp-uniform)
#pragma unroll
                        for (int n = 0; n < kBn / 8; ++n) {
                            const int j = j0 + n * 8 + 2 * tq;
                            s[m][n][0] = j <= p_lo[m] ? s[m][n][0] : -INFINITY;
                            s[m][n][1] = j + 1 <= p_lo[m] ? s[m][n][1] : -INFINITY;
                            s[m][n][2] = j <= p_hi[m] ? s[m][n][2] : -INFINITY;
                            s[m][n][3] = j + 1 <= p_hi[m] ? s[m][n][3] : -INFINITY;
                        }
                    }
                    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
                    for (int n = 0; n < kBn / 8; ++n) {
                        mx_lo = fmaxf(mx_lo, fmaxf(s[m][n][0], s[m][n][1]));
                        mx_hi = fmaxf(mx_hi, fmaxf(s[m][n][2], s[m][n][3]));
                    }
#pragma unroll
                    for (int o = 1; o <= 2; o <<= 1) {
                        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, o));
                        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, o));
                    }
                    const float mn_lo = fmaxf(m_lo[m], mx_lo), mn_hi = fmaxf(m_hi[m], mx_hi);
                    // A row with no position yet (mn = -inf) keeps corr 1 and p 0.
                    const float b_lo = mn_lo == -INFINITY ? 0.f : mn_lo, b_hi = mn_hi == -INFINITY ? 0.f : mn_hi;
                    const float corr_lo = fast_exp2(m_lo[m] - b_lo), corr_hi = fast_exp2(m_hi[m] - b_hi);
                    m_lo[m] = mn_lo, m_hi[m] = mn_hi;
                    l_lo[m] *= corr_lo, l_hi[m] *= corr_hi;
                    // Deep in a sequence the maxima rarely move: a warp whose corrections
                    // are all 1 skips the rescale (x * 1 is x: the same result).
                    if (!__all_sync(0xffffffffu, corr_lo == 1.f && corr_hi == 1.f)) {
#pragma unroll
                        for (int i = 0; i < HD / 8; ++i) {
                            o_acc[m][i][0] *= corr_lo, o_acc[m][i][1] *= corr_lo;
                            o_acc[m][i][2] *= corr_hi, o_acc[m][i][3] *= corr_hi;
                        }
                    }
#pragma unroll
                    for (int n = 0; n < kBn / 8; ++n) {
                        const float e0 = fast_exp2(s[m][n][0] - b_lo), e1 = fast_exp2(s[m][n][1] - b_lo);
                        const float e2 = fast_exp2(s[m][n][2] - b_hi), e3 = fast_exp2(s[m][n][3] - b_hi);
                        l_lo[m] += e0 + e1, l_hi[m] += e2 + e3;
                        pa[m][n / 2][(n & 1) * 2 + 0] = pack_half2(e0, e1);  // rows g: a0 (n even) / a2 (n odd)
                        pa[m][n / 2][(n & 1) * 2 + 1] = pack_half2(e2, e3);  // rows g + 8: a1 / a3
                    }
                }
                // O += P V: k-steps of 16 positions, two n-tiles (16 dims) per ldmatrix, each
                // V fragment feeding MT m-tiles.
                const SmemAddr vb = v_buf(buf) + v_lane;
#pragma unroll
                for (int ks = 0; ks < kBn / 16; ++ks) {
#pragma unroll
                    for (int dn = 0; dn < HD / 16; ++dn) {
                        uint32_t b0, b1, b2, b3;  // (b0, b1): dims dn*16..+7; (b2, b3): +8..+15
                        ldmatrix_x4_trans(vb + SmemAddr((ks * 16 * kS + dn * 16) * 2), b0, b1, b2, b3);
#pragma unroll
                        for (int m = 0; m < MT; ++m) {
                            const uint32_t* p = pa[m][ks];
                            mma_f16(o_acc[m][2 * dn], p[0], p[1], p[2], p[3], b0, b1);
                            mma_f16(o_acc[m][2 * dn + 1], p[0], p[1], p[2], p[3], b2, b3);
                        }
                    }
                }
            }
            __syncthreads();  // every warp is done with buffer buf before it is refilled
        }
        // Row sums over the quad, then out = O / l for the rows of this pass.
#pragma unroll
        for (int m = 0; m < MT; ++m) {
#pragma unroll
            for (int o = 1; o <= 2; o <<= 1) {
                l_lo[m] += __shfl_xor_sync(0xffffffffu, l_lo[m], o);
                l_hi[m] += __shfl_xor_sync(0xffffffffu, l_hi[m], o);
            }
            const float inv_lo = l_lo[m] > 0.f ? 1.f / l_lo[m] : 0.f, inv_hi = l_hi[m] > 0.f ? 1.f / l_hi[m] : 0.f;
            auto store = [&](int r, int half, float inv) {
                const int t = t0 + r / G;
                float* o = out + (int64_t(t) * n_head + kvh * G + r % G) * HD;
#pragma unroll
                for (int i = 0; i < HD / 8; ++i)
                    *reinterpret_cast<float2*>(o + i * 8 + 2 * tq) =
                        make_float2(o_acc[m][i][half * 2] * inv, o_acc[m][i][half * 2 + 1] * inv);
            };
            if (p_lo[m] >= 0) store(row0 + 16 * m + g, 0, inv_lo);
            if (p_hi[m] >= 0) store(row0 + 16 * m + g + 8, 1, inv_hi);
        }
    }
}

template <int HD, int MT>
bool launch_hd(const ops::KvLayer& c, const float* q, float* out, int rows, int n_head, float scale,
               const int32_t* pos, const int32_t* seq, void* s) {
    using T = Tile<HD, MT>;
    // (1 KB for the kernel's static shared memory: s_pos and the pass's sequence and length.)
    static PerDevice<bool> ok;
    if (!ok.get([] { return allow_dynamic_smem(attn_mma_k<HD, MT>, T::kBytes, 1024); })) return false;
    const int G = n_head / c.n_kv_head, bt = T::kBm / G;
    const dim3 grid{unsigned((rows + bt - 1) / bt), unsigned(c.n_kv_head)};
    launch_smem(attn_mma_k<HD, MT>, grid, dim3(kThreads), size_t(T::kBytes), s, c, q, out, rows, n_head, scale, pos,
                seq);
    return true;
}

// The m-tiles per warp for a launch: 2 (half the shared-memory reads per mma) for head
// dims up to 128 when its grid has arch::kAttnMmaPairedMinFill blocks per 100 SMs, else 1
// (two blocks are resident an SM either way); VEGA_GPU_ATTN_MT=1/2 forces one (A/B, read
// once).
template <int HD>
int m_tiles(const ops::KvLayer& c, int rows, int n_head) {
    static const int forced = env::integer("VEGA_GPU_ATTN_MT", 0);
    if (HD > 128) return 1;
    if (forced == 1 || forced == 2) return forced;
    const int bt = Tile<HD, 2>::kBm / (n_head / c.n_kv_head);
    const int64_t blocks = int64_t((rows + bt - 1) / bt) * c.n_kv_head;
    const int n_sm = current_device_sms();
    return blocks * 100 >= int64_t(n_sm) * arch::kAttnMmaPairedMinFill ? 2 : 1;
}

template <int HD>
bool launch_auto(const ops::KvLayer& c, const float* q, float* out, int rows, int n_head, float scale,
                 const int32_t* pos, const int32_t* seq, void* s) {
    if (m_tiles<HD>(c, rows, n_head) == 2) return launch_hd<HD, 2>(c, q, out, rows, n_head, scale, pos, seq, s);
    return launch_hd<HD, 1>(c, q, out, rows, n_head, scale, pos, seq, s);
}

}  // namespace

bool ops::attention_tiled_serves(const KvLayer& c, int n_head) {
    if (c.elem != KvElem::F16 || c.n_kv_head <= 0 || n_head % c.n_kv_head || n_head / c.n_kv_head > Tile<64, 1>::kBm)
        return false;
    switch (c.hd) {
        case 64: case 80: case 96: case 112: case 128: case 256: return mma_device_ok();
        default: return false;
    }
}

bool ops::attention_tiled(const KvLayer& c, const float* q, float* out, int rows, int n_head, float scale,
                          const int32_t* pos, const int32_t* seq, void* s) {
    if (!attention_tiled_serves(c, n_head)) return false;
    if (rows <= 0) return true;
    switch (c.hd) {
        case 64: return launch_auto<64>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 80: return launch_auto<80>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 96: return launch_auto<96>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 112: return launch_auto<112>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 128: return launch_auto<128>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 256: return launch_hd<256, 1>(c, q, out, rows, n_head, scale, pos, seq, s);
        default: return false;
    }
}

#endif

}  // namespace vega::gpu
