// Prompt attention for gfx906 (and its emulation build on NVIDIA): many query rows
// of one sequence against K/V tiles staged in LDS, online softmax, causal mask, with
// v_dot2_f32_f16 for q.k and p.v. The NVIDIA form (tensor cores) is attention_mma.cu;
// ops.h's attention_tiled is the one of the build's target.
//
//   out [rows][n_head][hd] = softmax(q k^T * scale) v over positions 0..pos[t] of seq[t]
//
// Block: kTiledAttnWaves waves share one K/V tile of kBn positions (a wave's width;
// half of it from head dim 256 on); wave w owns query rows kRw*w .. kRw*w + kRw - 1 of
// the block's kBm. Rows are (token, head of one GQA group) as in attention_mma.cu: row
// r is token t0 + r / G, head kvh * G + r % G. Per tile and wave:
//   q.k   lane j takes position j0 + j: its K row (ds_read_b128, 8 dims) against each
//         row's q (the same LDS address on every lane: a broadcast), 4 v_dot2 per read;
//   softmax  max and (at the end) sum over the wave (DPP), exp2 (scale * log2 e in q);
//         the wave's p go to LDS as f16;
//   p.v   lane d takes dims d, d + 64, ...: its row of V^T (8 positions a ds_read_b128)
//         against each row's p (broadcast), 4 v_dot2 per read.
// LDS layout (the seed rules): K [kBn][hd + 8 halves], V^T [hd][kBn + 8 halves] (the
// +1 vec4 puts 8 consecutive rows' b128 reads in 32 distinct banks), q [kBm][hd],
// p [waves][kRw][kBn]: 48 KB at hd 128 (one block of 8 waves per CU: 2 per SIMD).
// The next tile's K/V are loaded into registers while this one is computed.
//
// Audit (2026-11-26): see docs/GFX906_AUDIT.md for VGPRs and waves per SIMD.
// @audit kernel=*attn_dot2_k* min_waves=2 expect=v_dot2_f32_f16,dpp,ds_read_b128 loop_x4 no_flat no_glc
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/kernels/tile_pass.h"
#include "backend/gpu/wave.h"

namespace vega::gpu {

#if defined(VEGA_GPU_TARGET_GFX906)
namespace {

constexpr int kWaves = arch::kTiledAttnWaves;
constexpr int kThreads = kWaves * kWave;
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct Dot2Tile {
    static constexpr int kBn = HD <= 128 ? kWave : kWave / 2;  // positions per tile
    static constexpr int kRw = HD <= 128 ? arch::kTiledAttnWaveRows : (arch::kTiledAttnWaveRows + 1) / 2;
    static constexpr int kBm = kWaves * kRw;               // query rows per block
    static constexpr int kKw = HD / 2 + 4;                 // words per K row (+1 vec4)
    static constexpr int kVw = kBn / 2 + 4;                // words per V^T row (+1 vec4)
    static constexpr int kCh = HD / 8;                     // 16-byte chunks per K/V row
    static constexpr int kLoads = (kBn * kCh + kThreads - 1) / kThreads;  // chunks of K (and V) per thread
    static constexpr int kDl = (HD + kWave - 1) / kWave;  // dims per lane in p.v
    static_assert(HD % 8 == 0 && HD <= 256, "head dims: multiples of 8 up to 256");
    static_assert(kBn % 8 == 0 && kBm <= kMaxTileTokens, "tiles of whole b128 reads; one pending bit per token");
};

template <int HD>
__global__ void __launch_bounds__(kThreads) attn_dot2_k(ops::KvLayer c, const float* __restrict__ q,
                                                        float* __restrict__ out, int rows, int n_head, float scale,
                                                        const int32_t* __restrict__ pos,
                                                        const int32_t* __restrict__ seq) {
    using T = Dot2Tile<HD>;
    constexpr int kBn = T::kBn, kRw = T::kRw, kBm = T::kBm;
    __shared__ __align__(16) uint32_t s_k[kBn][T::kKw];
    __shared__ __align__(16) uint32_t s_vt[HD][T::kVw];
    __shared__ __align__(16) uint32_t s_q[kBm][HD / 2];
    __shared__ __align__(16) uint32_t s_p[kWaves][kRw][kBn / 2];
    __shared__ int s_pos[kBm];  // per row of the tile: its position this pass, -1 when masked
    __shared__ int s_seq, s_len;
    const int G = n_head / c.n_kv_head, bt = kBm / G;
    const int tile = int(gridDim.x) - 1 - int(blockIdx.x), kvh = int(blockIdx.y);
    const int t0 = tile * bt;
    const int wv = int(threadIdx.x) / kWave, ln = lane_id();

    pdl_wait();
    pdl_trigger();

    const float qscale = scale * kLog2e;
    for (int e = int(threadIdx.x); e < kBm * (HD / 2); e += kThreads) {
        const int r = e / (HD / 2), w = e % (HD / 2);
        const int t = t0 + r / G;
        float2 v = make_float2(0.f, 0.f);
        if (r < bt * G && t < rows)
            v = *reinterpret_cast<const float2*>(q + (int64_t(t) * n_head + kvh * G + r % G) * HD + 2 * w);
        s_q[r][w] = pack_h2(v.x * qscale, v.y * qscale);
    }

    // thread 0: tokens not yet attended
    PendingTokens pending = threadIdx.x == 0 ? tile_tokens(t0, bt, rows) : PendingTokens{0, 0};
    for (;;) {
        __syncthreads();  // the previous pass has read s_pos (and q is in place)
        if (threadIdx.x == 0) next_tile_pass(pending, pos, seq, t0, bt, G, kBm, s_pos, &s_seq, &s_len);
        __syncthreads();
        if (s_seq < 0) break;  // every token attended
        const int kv_len = s_len;
        int prow[kRw];
        int wmax = -1;  // the wave's last useful position (wave-uniform: LDS broadcast)
#pragma unroll
        for (int i = 0; i < kRw; ++i) prow[i] = s_pos[wv * kRw + i], wmax = max(wmax, prow[i]);
        const int64_t base = c.row(s_seq, kvh, 0);
        const uint16_t* kg = static_cast<const uint16_t*>(c.k) + base;
        const uint16_t* vg = static_cast<const uint16_t*>(c.v) + base;

        float o[kRw][T::kDl], m[kRw], l[kRw];
#pragma unroll
        for (int i = 0; i < kRw; ++i) {
            m[i] = -INFINITY, l[i] = 0.f;
#pragma unroll
            for (int k = 0; k < T::kDl; ++k) o[i][k] = 0.f;
        }
        // The next tile in registers: K chunk c of the tile is row c / kCh, chunk
        // c % kCh (rows in order: whole rows per lane group); V chunk c is row
        // c % kBn, chunk c / kBn (consecutive lanes write consecutive halves of V^T).
        uint4 kr[T::kLoads], vr[T::kLoads];
        auto fetch = [&](int j0) {
#pragma unroll
            for (int u = 0; u < T::kLoads; ++u) {
                const int ci = int(threadIdx.x) + u * kThreads;
                if (ci >= kBn * T::kCh) continue;
                const int jk = j0 + ci / T::kCh, jv = j0 + ci % kBn;
                const uint4 z = make_uint4(0, 0, 0, 0);
                kr[u] = jk < kv_len ? *reinterpret_cast<const uint4*>(kg + int64_t(jk) * HD + ci % T::kCh * 8) : z;
                vr[u] = jv < kv_len ? *reinterpret_cast<const uint4*>(vg + int64_t(jv) * HD + ci / kBn * 8) : z;
            }
        };
        auto stage = [&]() {
#pragma unroll
            for (int u = 0; u < T::kLoads; ++u) {
                const int ci = int(threadIdx.x) + u * kThreads;
                if (ci >= kBn * T::kCh) continue;
                *reinterpret_cast<uint4*>(&s_k[ci / T::kCh][ci % T::kCh * 4]) = kr[u];
                const int r = ci % kBn, d0 = ci / kBn * 8;
                const uint32_t w[4] = {vr[u].x, vr[u].y, vr[u].z, vr[u].w};
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    reinterpret_cast<uint16_t*>(s_vt[d0 + e])[r] = uint16_t(w[e / 2] >> (16 * (e & 1)));
            }
        };
        const int n_tiles = (kv_len + kBn - 1) / kBn;
        fetch(0);
        for (int it = 0; it < n_tiles; ++it) {
            const int j0 = it * kBn;
            stage();
            __syncthreads();  // the tile is in LDS
            if (it + 1 < n_tiles) fetch(j0 + kBn);  // in flight while this tile is computed
            if (j0 <= wmax) {  // (wave-uniform)
                const int jl = ln % kBn;  // (head dim 256: lanes past the tile re-read a row, masked)
                float s[kRw];
#pragma unroll
                for (int i = 0; i < kRw; ++i) s[i] = 0.f;
#pragma unroll 2
                for (int ch = 0; ch < T::kCh; ++ch) {
                    const uint4 kk = *reinterpret_cast<const uint4*>(&s_k[jl][ch * 4]);
#pragma unroll
                    for (int i = 0; i < kRw; ++i) {
                        const uint4 qq = *reinterpret_cast<const uint4*>(&s_q[wv * kRw + i][ch * 4]);
                        s[i] = dot2_f16(kk.w, qq.w, dot2_f16(kk.z, qq.z, dot2_f16(kk.y, qq.y, dot2_f16(kk.x, qq.x, s[i]))));
                    }
                }
                const int j = j0 + ln;
#pragma unroll
                for (int i = 0; i < kRw; ++i) {
                    const float sv = ln < kBn && j <= prow[i] ? s[i] : -INFINITY;
                    const float mn = fmaxf(m[i], wave_reduce_max(sv));
                    const float b = mn == -INFINITY ? 0.f : mn;  // no position yet: corr and p stay 0
                    const float corr = exp2f(m[i] - b), p = exp2f(sv - b);
                    m[i] = mn;
                    l[i] = l[i] * corr + p;
#pragma unroll
                    for (int k = 0; k < T::kDl; ++k) o[i][k] *= corr;
                    if (ln < kBn) reinterpret_cast<uint16_t*>(s_p[wv][i])[ln] = f2h(p);
                }
                wave_lds_sync();  // the wave's p, written by lane, read by every lane
#pragma unroll 1
                for (int pc = 0; pc < kBn / 8; ++pc) {
#pragma unroll
                    for (int k = 0; k < T::kDl; ++k) {
                        const int d = min(ln + k * kWave, HD - 1);
                        const uint4 vv = *reinterpret_cast<const uint4*>(&s_vt[d][pc * 4]);
#pragma unroll
                        for (int i = 0; i < kRw; ++i) {
                            const uint4 pp = *reinterpret_cast<const uint4*>(&s_p[wv][i][pc * 4]);
                            o[i][k] = dot2_f16(vv.w, pp.w, dot2_f16(vv.z, pp.z, dot2_f16(vv.y, pp.y, dot2_f16(vv.x, pp.x, o[i][k]))));
                        }
                    }
                }
            }
            __syncthreads();  // every wave is done with the tile before the next is staged
        }
#pragma unroll
        for (int i = 0; i < kRw; ++i) {
            const float L = wave_reduce_sum(l[i]);
            const float inv = L > 0.f ? 1.f / L : 0.f;
            if (prow[i] < 0) continue;  // (wave-uniform)
            const int r = wv * kRw + i, t = t0 + r / G;
            float* orow = out + (int64_t(t) * n_head + kvh * G + r % G) * HD;
#pragma unroll
            for (int k = 0; k < T::kDl; ++k) {
                const int d = ln + k * kWave;
                if (d < HD) orow[d] = o[i][k] * inv;
            }
        }
    }
}

template <int HD>
void launch_hd(const ops::KvLayer& c, const float* q, float* out, int rows, int n_head, float scale, const int32_t* pos,
               const int32_t* seq, void* s) {
    const int G = n_head / c.n_kv_head, bt = Dot2Tile<HD>::kBm / G;
    const dim3 grid{unsigned((rows + bt - 1) / bt), unsigned(c.n_kv_head)};
    launch(attn_dot2_k<HD>, grid, dim3(kThreads), s, c, q, out, rows, n_head, scale, pos, seq);
}

}  // namespace

bool ops::attention_tiled_serves(const KvLayer& c, int n_head) {
    if (c.elem != KvElem::F16 || c.n_kv_head <= 0 || n_head % c.n_kv_head) return false;
    const int G = n_head / c.n_kv_head;
    switch (c.hd) {
        case 64: case 80: case 96: case 112: case 128: return G <= Dot2Tile<128>::kBm;
        case 256: return G <= Dot2Tile<256>::kBm;
        default: return false;
    }
}

bool ops::attention_tiled(const KvLayer& c, const float* q, float* out, int rows, int n_head, float scale,
                          const int32_t* pos, const int32_t* seq, void* s) {
    if (!attention_tiled_serves(c, n_head)) return false;
    if (rows <= 0) return true;
    switch (c.hd) {
        case 64: launch_hd<64>(c, q, out, rows, n_head, scale, pos, seq, s); return true;
        case 80: launch_hd<80>(c, q, out, rows, n_head, scale, pos, seq, s); return true;
        case 96: launch_hd<96>(c, q, out, rows, n_head, scale, pos, seq, s); return true;
        case 112: launch_hd<112>(c, q, out, rows, n_head, scale, pos, seq, s); return true;
        case 128: launch_hd<128>(c, q, out, rows, n_head, scale, pos, seq, s); return true;
        case 256: launch_hd<256>(c, q, out, rows, n_head, scale, pos, seq, s); return true;
        default: return false;
    }
}

#endif

}  // namespace vega::gpu
