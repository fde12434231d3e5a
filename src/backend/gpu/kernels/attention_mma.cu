// Prompt attention on NVIDIA tensor cores (sm_80+): many query rows of one sequence
// against K/V tiles staged in shared memory, online softmax, causal mask (flash
// attention). The gfx906 form of the same step is attention_dot2.cu; ops.h's
// attention_tiled picks the one of the build's target.
//
//   out [rows][n_head][hd] = softmax(q k^T * scale) v over positions 0..pos[t] of seq[t]
//
// Block (4 warps): a tile of kBm = 64 query rows, rows = (token, head of one GQA
// group): row r is token t0 + r / G, head kvh * G + r % G (G = n_head / n_kv_head,
// kBm / G tokens a tile), so every row of the block reads the same K/V rows. Grid
// (token tiles, kv heads), the last tokens' tiles (the most positions) first.
// Warp w owns rows 16w..16w+15 (the mma's M). Per K/V tile of BN positions:
//   S [16][BN] = Q K^T     mma.m16n8k16, Q (f16, scale * log2 e folded in) and K
//                          from shared memory by ldmatrix;
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
// bank groups): Q [64][hd+8] + 2 x (K, V) [BN][hd+8] f16: 87 KB at hd 128 (BN 64),
// 101 KB at hd 256 (BN 32, the O accumulators being 128 registers).
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/per_device.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/kernels/tensor_core.h"
#include "backend/gpu/kernels/tile_pass.h"
#include "backend/gpu/arch/arch.h"
#include "backend/gpu/wave.h"

#include <string>

namespace vega::gpu {

#if defined(VEGA_GPU_CUDA) && !defined(VEGA_GPU_EMULATE_GFX906)
namespace {

constexpr int kBm = 64;          // query rows per block
constexpr int kWarps = kBm / 16;  // 16 rows (the mma's M) per warp
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct Tile {
    static constexpr int kBn = HD <= 128 ? 64 : 32;  // K/V positions per tile
    static constexpr int kStride = HD + 8;            // halves per shared row
    static constexpr int kQ = kBm * kStride;          // halves
    static constexpr int kKv = kBn * kStride;         // halves of one K (or V) buffer
    static constexpr int kBytes = (kQ + 4 * kKv) * 2;
    static constexpr int kChunks = HD / 8;            // 16-byte chunks per row
    static_assert(HD % 16 == 0 && HD <= 256, "head dims: multiples of 16 up to 256");
};

// K and V rows [j0, j0 + kBn) of one (seq, kv head) into shared buffers; rows from
// kv_len on zero-filled.
template <int HD>
__device__ __forceinline__ void load_kv_tile(SmemAddr ks, SmemAddr vs, const uint16_t* kg, const uint16_t* vg, int j0,
                                             int kv_len) {
    using T = Tile<HD>;
    for (int c = int(threadIdx.x); c < T::kBn * T::kChunks; c += kThreads) {
        const int r = c / T::kChunks, ch = c % T::kChunks;
        const int j = j0 + r;
        const int bytes = j < kv_len ? 16 : 0;
        const int64_t src = int64_t(j < kv_len ? j : 0) * HD + ch * 8;
        const SmemAddr off = SmemAddr((r * T::kStride + ch * 8) * 2);
        cp_async_zfill(ks + off, kg + src, bytes);
        cp_async_zfill(vs + off, vg + src, bytes);
    }
    cp_async_commit();
}

template <int HD>
__global__ void __launch_bounds__(kThreads) attn_mma_k(ops::KvLayer c, const float* __restrict__ q,
                                                       float* __restrict__ out, int rows, int n_head, float scale,
                                                       const int32_t* __restrict__ pos,
                                                       const int32_t* __restrict__ seq) {
    using T = Tile<HD>;
    constexpr int kBn = T::kBn, kS = T::kStride;
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

    uint64_t pending = threadIdx.x == 0 ? tile_tokens(t0, bt, rows) : 0;  // thread 0: tokens not yet attended
    const int r_lo = warp * 16 + g, r_hi = r_lo + 8;  // this lane's two rows
    for (;;) {
        __syncthreads();  // the previous pass has read s_pos (and Q is in place)
        if (threadIdx.x == 0) next_tile_pass(pending, pos, seq, t0, bt, G, kBm, s_pos, &s_seq, &s_len);
        __syncthreads();
        if (s_seq < 0) break;  // every token attended
        const int kv_len = s_len;
        const int p_lo = s_pos[r_lo], p_hi = s_pos[r_hi];
        // The warp's last useful position: tiles past it only cost it masking, skip them.
        int wmax = max(p_lo, p_hi);
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
        const int64_t base = c.row(s_seq, kvh, 0);
        const uint16_t* kg = static_cast<const uint16_t*>(c.k) + base;
        const uint16_t* vg = static_cast<const uint16_t*>(c.v) + base;

        float o_acc[HD / 8][4];
#pragma unroll
        for (int i = 0; i < HD / 8; ++i) o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.f;
        float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // l: this lane's part of the sums

        const int n_tiles = (kv_len + kBn - 1) / kBn;
        load_kv_tile<HD>(k_buf(0), v_buf(0), kg, vg, 0, kv_len);
        for (int it = 0; it < n_tiles; ++it) {
            const int j0 = it * kBn, buf = it & 1;
            if (it + 1 < n_tiles) {
                load_kv_tile<HD>(k_buf(buf ^ 1), v_buf(buf ^ 1), kg, vg, j0 + kBn, kv_len);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();  // tile it is in place for every warp
            if (j0 <= wmax) {  // (warp-uniform)
                // S = Q K^T: [16][kBn] in kBn / 8 n-tiles.
                float s[kBn / 8][4];
#pragma unroll
                for (int n = 0; n < kBn / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
                const SmemAddr kb = k_buf(buf);
#pragma unroll
                for (int kd = 0; kd < HD / 16; ++kd) {
                    uint32_t a0, a1, a2, a3;
                    {
                        const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, d = kd * 16 + (lane >> 4) * 8;
                        ldmatrix_x4(qs + SmemAddr((r * kS + d) * 2), a0, a1, a2, a3);
                    }
#pragma unroll
                    for (int n = 0; n < kBn / 8; n += 2) {
                        uint32_t b0, b1, b2, b3;  // (b0, b1): n-tile n; (b2, b3): n-tile n + 1
                        const int j = n * 8 + (lane & 7) + (lane >> 4) * 8, d = kd * 16 + ((lane >> 3) & 1) * 8;
                        ldmatrix_x4(kb + SmemAddr((j * kS + d) * 2), b0, b1, b2, b3);
                        mma_f16(s[n], a0, a1, a2, a3, b0, b1);
                        mma_f16(s[n + 1], a0, a1, a2, a3, b2, b3);
                    }
                }
                // Causal mask and the tile's row maxima (quad: the 4 lanes of a row).
                float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
                for (int n = 0; n < kBn / 8; ++n) {
                    const int j = j0 + n * 8 + 2 * tq;
                    s[n][0] = j <= p_lo ? s[n][0] : -INFINITY;
                    s[n][1] = j + 1 <= p_lo ? s[n][1] : -INFINITY;
                    s[n][2] = j <= p_hi ? s[n][2] : -INFINITY;
                    s[n][3] = j + 1 <= p_hi ? s[n][3] : -INFINITY;
                    mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
                    mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
                }
#pragma unroll
                for (int o = 1; o <= 2; o <<= 1) {
                    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, o));
                    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, o));
                }
                const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
                // A row with no position yet (mn = -inf) keeps corr 1 and p 0.
                const float b_lo = mn_lo == -INFINITY ? 0.f : mn_lo, b_hi = mn_hi == -INFINITY ? 0.f : mn_hi;
                const float corr_lo = exp2f(m_lo - b_lo), corr_hi = exp2f(m_hi - b_hi);
                m_lo = mn_lo, m_hi = mn_hi;
                l_lo *= corr_lo, l_hi *= corr_hi;
#pragma unroll
                for (int i = 0; i < HD / 8; ++i) {
                    o_acc[i][0] *= corr_lo, o_acc[i][1] *= corr_lo;
                    o_acc[i][2] *= corr_hi, o_acc[i][3] *= corr_hi;
                }
                // P = exp2(S - m) as the A fragments of the P V k-steps (16 positions each).
                uint32_t pa[kBn / 16][4];
#pragma unroll
                for (int n = 0; n < kBn / 8; ++n) {
                    const float e0 = exp2f(s[n][0] - b_lo), e1 = exp2f(s[n][1] - b_lo);
                    const float e2 = exp2f(s[n][2] - b_hi), e3 = exp2f(s[n][3] - b_hi);
                    l_lo += e0 + e1, l_hi += e2 + e3;
                    pa[n / 2][(n & 1) * 2 + 0] = pack_half2(e0, e1);  // rows g: a0 (n even) / a2 (n odd)
                    pa[n / 2][(n & 1) * 2 + 1] = pack_half2(e2, e3);  // rows g + 8: a1 / a3
                }
                // O += P V: k-steps of 16 positions, two n-tiles (16 dims) per ldmatrix.
                const SmemAddr vb = v_buf(buf);
#pragma unroll
                for (int ks = 0; ks < kBn / 16; ++ks) {
#pragma unroll
                    for (int dn = 0; dn < HD / 16; ++dn) {
                        uint32_t b0, b1, b2, b3;  // (b0, b1): dims dn*16..+7; (b2, b3): +8..+15
                        const int j = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, d = dn * 16 + (lane >> 4) * 8;
                        ldmatrix_x4_trans(vb + SmemAddr((j * kS + d) * 2), b0, b1, b2, b3);
                        mma_f16(o_acc[2 * dn], pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3], b0, b1);
                        mma_f16(o_acc[2 * dn + 1], pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3], b2, b3);
                    }
                }
            }
            __syncthreads();  // every warp is done with buffer buf before it is refilled
        }
        // Row sums over the quad, then out = O / l for the rows of this pass.
#pragma unroll
        for (int o = 1; o <= 2; o <<= 1) {
            l_lo += __shfl_xor_sync(0xffffffffu, l_lo, o);
            l_hi += __shfl_xor_sync(0xffffffffu, l_hi, o);
        }
        const float inv_lo = l_lo > 0.f ? 1.f / l_lo : 0.f, inv_hi = l_hi > 0.f ? 1.f / l_hi : 0.f;
        auto store = [&](int r, int half, float inv) {
            const int t = t0 + r / G;
            float* o = out + (int64_t(t) * n_head + kvh * G + r % G) * HD;
#pragma unroll
            for (int i = 0; i < HD / 8; ++i)
                *reinterpret_cast<float2*>(o + i * 8 + 2 * tq) =
                    make_float2(o_acc[i][half * 2] * inv, o_acc[i][half * 2 + 1] * inv);
        };
        if (p_lo >= 0) store(r_lo, 0, inv_lo);
        if (p_hi >= 0) store(r_hi, 1, inv_hi);
    }
}

template <int HD>
bool launch_hd(const ops::KvLayer& c, const float* q, float* out, int rows, int n_head, float scale,
               const int32_t* pos, const int32_t* seq, void* s) {
    using T = Tile<HD>;
    // (1 KB for the kernel's static shared memory: s_pos and the pass's sequence and length.)
    static PerDevice<bool> ok;
    if (!ok.get([] { return allow_dynamic_smem(attn_mma_k<HD>, T::kBytes, 1024); })) return false;
    const int G = n_head / c.n_kv_head, bt = kBm / G;
    const dim3 grid{unsigned((rows + bt - 1) / bt), unsigned(c.n_kv_head)};
    launch_smem(attn_mma_k<HD>, grid, dim3(kThreads), size_t(T::kBytes), s, c, q, out, rows, n_head, scale, pos, seq);
    return true;
}

}  // namespace

bool ops::attention_tiled_serves(const KvLayer& c, int n_head) {
    if (c.elem != KvElem::F16 || c.n_kv_head <= 0 || n_head % c.n_kv_head || n_head / c.n_kv_head > kBm) return false;
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
        case 64: return launch_hd<64>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 80: return launch_hd<80>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 96: return launch_hd<96>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 112: return launch_hd<112>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 128: return launch_hd<128>(c, q, out, rows, n_head, scale, pos, seq, s);
        case 256: return launch_hd<256>(c, q, out, rows, n_head, scale, pos, seq, s);
        default: return false;
    }
}

#endif

}  // namespace vega::gpu
