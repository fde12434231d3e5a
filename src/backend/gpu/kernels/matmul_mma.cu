// Tensor-core matmul for many activation rows (NVIDIA sm_80+): batched decode of
// 9..64 sequences and prompts, where the matvec kernels would re-read the weights
// once per 8 rows or run out of dot4 throughput.
//
//   y [rows][n_out] = x [rows][n_in] @ W^T, W quantized (gpu_mat.h), x as q8
//   (Act::q / Act::ds); with SWIGLU h = silu(x @ G^T) * (x @ U^T).
//
// Block: kMmaKWarps warps over one tile of 16 output rows (the mma's M) and NT*8
// activation rows (N), each warp a contiguous slice of the row's 32-element
// chunks (K): grid (rows / (NT*8), n_out / 16). Per chunk a warp issues one
// mma.m16n8k32 (s8 x s8 -> s32) per 8 activation rows: lane (g, t) holds bytes
// 4t..4t+3 of rows g and g+8 of the chunk, whose low and high nibbles are
// elements 4t.. and 16+4t.. (exactly the A fragment's k order). The weights reach
// the lanes in 16-byte loads and a transpose across each quad (WideRow), not
// through shared memory. The int32 dot of one chunk is scaled by
// the row's and the activation's chunk scales (chunk_value, as in the matvec);
// Q6_K, whose halves have their own scales, takes two m16n8k16. The warps' partial
// sums meet in shared memory in a fixed order (deterministic results).
//
// Weights are read from DRAM once per step: the column groups (NT*8 activation
// rows each) of a row tile run next to each other and share it through L2.
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/kernels/quant_chunk.h"
#include "backend/gpu/kernels/silu.h"
#include "backend/gpu/kernels/vector_load.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace vega::gpu {

#if defined(VEGA_GPU_CUDA) && !defined(VEGA_GPU_EMULATE_GFX906)
namespace {

constexpr int kMmaM = 16;                   // output rows per block
constexpr int kMmaKWarps = arch::kMmaKWarps;  // warps per block, each a slice of K
constexpr int kMmaThreads = kMmaKWarps * 32;

// d = A (16x32 s8, row) x B (32x8 s8, col); fragments as the PTX ISA lays them out:
// a0 = A[g][4t..], a1 = A[g+8][4t..], a2 = A[g][16+4t..], a3 = A[g+8][16+4t..];
// b0 = B[4t..][g], b1 = B[16+4t..][g]; d0, d1 = D[g][2t, 2t+1], d2, d3 = D[g+8][2t, 2t+1].
__device__ __forceinline__ void mma_k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int z = 0;
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(z));
#else
    d[0] = d[1] = d[2] = d[3] = 0;  // never launched: the host checks the device (mma_device_ok)
#endif
}
// The same for K = 16: a0 = A[g][4t..], a1 = A[g+8][4t..]; b0 = B[4t..][g].
__device__ __forceinline__ void mma_k16(int (&d)[4], int a0, int a1, int b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int z = 0;
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(b0), "r"(z));
#else
    d[0] = d[1] = d[2] = d[3] = 0;
#endif
}

// One weight row's U chunks from chunk cw, as lane t of the row's quad holds them.
// The row's quantized bytes are read with 16-byte loads, lane t taking pieces t,
// t+4, ... (a piece: 16 bytes, one 4-bit chunk or half a Q8_0 chunk), and each
// group of 4 pieces is transposed across the quad (4 shuffles), so that lane t ends
// with word t of every piece: the A fragment's k order. (The plain reading, 4
// bytes per lane from 8 rows per instruction, kept the L1 85% busy at 16 useful
// bytes per row.) The chunk scales of the U chunks come in one vector load per row.
template <GgmlType T, int U>
struct WideRow {
    static constexpr PlaneSizes kPs = plane_sizes(T);
    static constexpr int kGroups = U * kPs.qs / 64;  // 4-piece groups
    static constexpr int kScWords = U * kPs.sc / 4;
    static_assert(U % 4 == 0 && kGroups >= 1 && kScWords >= 1, "whole groups and scale words");
    uint32_t q[kGroups][4];  // q[j][i]: word t of piece 4j + i
    uint32_t sc[kScWords];   // the U chunks' scale bytes (sc plane)
    uint32_t sb;             // the super-block's d (and dmin), K-quants
    uint32_t h0[kPs.qh ? U : 1], h1[kPs.qh == 8 ? U : 1];  // high-bit planes per chunk
};

// Issues the row's loads (no waiting): chunks cw .. cw+U-1, cw a multiple of U and
// n_chunk a multiple of U (ops::matmul_mma checks), so every vector load is aligned.
template <GgmlType T, int U>
__device__ __forceinline__ void load_wide(const GpuMat& W, int64_t row, int cw, int t, WideRow<T, U>& r) {
    using R = WideRow<T, U>;
    const int64_t i0 = row * W.n_chunk + cw;
    const uint4* q = reinterpret_cast<const uint4*>(W.qs) + i0 * (R::kPs.qs / 16);
#pragma unroll
    for (int j = 0; j < R::kGroups; ++j) {
        const uint4 v = q[4 * j + t];
        r.q[j][0] = v.x, r.q[j][1] = v.y, r.q[j][2] = v.z, r.q[j][3] = v.w;
    }
    load_words(reinterpret_cast<const uint32_t*>(W.sc + i0 * R::kPs.sc), r.sc);
    r.sb = 0;
    if constexpr (R::kPs.sb == 4) r.sb = reinterpret_cast<const uint32_t*>(W.sb)[row * (W.n_chunk / 8) + cw / 8];
    if constexpr (R::kPs.sb == 2) r.sb = reinterpret_cast<const uint16_t*>(W.sb)[row * (W.n_chunk / 8) + cw / 8];
#pragma unroll
    for (int k = 0; k < U; ++k) {
        uint32_t a = 0, b = 0;
        if constexpr (R::kPs.qh != 0) load_qh<T>(W, row, cw + k, &a, &b);
        if constexpr (R::kPs.qh != 0) r.h0[k] = a;
        if constexpr (R::kPs.qh == 8) r.h1[k] = b;
    }
}

// 4x4 transpose across the quad (lanes 4g..4g+3, t = lane & 3): lane t's words
// x[0..3] become lane i's word t for i = 0..3, i.e. x[i] = old word t of lane i.
__device__ __forceinline__ void quad_transpose(uint32_t (&x)[4], int t) {
    const bool b1 = t & 2, b0 = t & 1;
    // Swap the off-diagonal 2x2 blocks with lane t ^ 2.
    uint32_t r0 = __shfl_xor_sync(0xffffffffu, b1 ? x[0] : x[2], 2);
    uint32_t r1 = __shfl_xor_sync(0xffffffffu, b1 ? x[1] : x[3], 2);
    if (b1) x[0] = r0, x[1] = r1;
    else x[2] = r0, x[3] = r1;
    // Transpose each 2x2 block with lane t ^ 1.
    r0 = __shfl_xor_sync(0xffffffffu, b0 ? x[0] : x[1], 1);
    r1 = __shfl_xor_sync(0xffffffffu, b0 ? x[2] : x[3], 1);
    if (b0) x[0] = r0, x[2] = r1;
    else x[1] = r0, x[3] = r1;
}

template <GgmlType T, int U>
__device__ __forceinline__ void transpose_wide(WideRow<T, U>& r, int t) {
#pragma unroll
    for (int j = 0; j < WideRow<T, U>::kGroups; ++j) quad_transpose(r.q[j], t);
}

// Chunk k's scale factors from the row's scale words (decode_scales, as the matvec).
template <GgmlType T, int U>
__device__ __forceinline__ void wide_scales(const WideRow<T, U>& r, int k, float* f0, float* f1) {
    constexpr int sc_bytes = WideRow<T, U>::kPs.sc;  // 2 or 4 per chunk
    const uint32_t sc = sc_bytes == 4 ? r.sc[k] : r.sc[k / 2] >> (16 * (k & 1));
    decode_scales<T>(sc, r.sb, f0, f1);
}

// Chunk k of the row as lane t's A-fragment words: lo (elements 4t..4t+3), hi (16+4t..).
template <GgmlType T, int U>
__device__ __forceinline__ void wide_frag(const WideRow<T, U>& r, int k, int t, int* lo, int* hi) {
    if constexpr (T == GgmlType::Q8_0) {  // pieces 2k (words 0..3), 2k+1 (words 4..7)
        *lo = int(r.q[k / 2][(2 * k) % 4]), *hi = int(r.q[k / 2][(2 * k + 1) % 4]);
    } else {
        constexpr int qh = WideRow<T, U>::kPs.qh;  // 0, 4 (h0) or 8 (h0, h1) bytes per chunk
        uint32_t h0 = 0, h1 = 0;
        if constexpr (qh != 0) h0 = r.h0[k];
        if constexpr (qh == 8) h1 = r.h1[k];
        nibbles<T>(r.q[k / 4][k % 4], h0, h1, t, lo, hi);
    }
}

// acc (this lane's 4 outputs of one 16x8 tile) += chunk k's contribution, with
// rg / rg8 the tile's weight rows g and g+8, b0, b1 the B fragment (activation
// row g of the tile) and d0, d1 the chunk scales of activation columns 2t, 2t+1.
template <GgmlType T, int U>
__device__ __forceinline__ void mma_chunk(float (&acc)[4], const WideRow<T, U>& rg, const WideRow<T, U>& rg8, int k,
                                          int t, int b0, int b1, float2 d0, float2 d1) {
    int lo0, hi0, lo1, hi1;
    wide_frag(rg, k, t, &lo0, &hi0);
    wide_frag(rg8, k, t, &lo1, &hi1);
    float f00, f01, f10, f11;
    wide_scales(rg, k, &f00, &f01);
    wide_scales(rg8, k, &f10, &f11);
    int s0[4], s1[4] = {0, 0, 0, 0};
    if constexpr (T == GgmlType::Q6_K) {
        mma_k16(s0, lo0, lo1, b0);
        mma_k16(s1, hi0, hi1, b1);
    } else {
        mma_k32(s0, lo0, lo1, hi0, hi1, b0, b1);
    }
    acc[0] += chunk_value<T>(f00, f01, d0, s0[0], s1[0]);
    acc[1] += chunk_value<T>(f00, f01, d1, s0[1], s1[1]);
    acc[2] += chunk_value<T>(f10, f11, d0, s0[2], s1[2]);
    acc[3] += chunk_value<T>(f10, f11, d1, s0[3], s1[3]);
}

// The block's [16][NT*8] outputs, summed over the warps in a fixed order: part
// holds each warp's tile (row stride NT*8 + 4 against bank conflicts); thread i
// gets outputs i, i + kMmaThreads, ... (row = e % 16, column = e / 16).
template <int NT>
struct Reduce {
    static constexpr int kCols = NT * 8, kStride = kCols + 4, kPer = kMmaM * kCols / kMmaThreads;
    static_assert(kMmaM * kCols % kMmaThreads == 0, "whole outputs per thread");
    __device__ static void run(float (*part)[kMmaM * kStride], const float (&acc)[NT][4], float (&out)[kPer]) {
        const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, t = lane & 3;
        __syncthreads();  // part may still be read by a previous call
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i)
                part[warp][(i < 2 ? g : g + 8) * kStride + nt * 8 + 2 * t + (i & 1)] = acc[nt][i];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int e = int(threadIdx.x) + k * kMmaThreads, r = e % kMmaM, col = e / kMmaM;
            float s = 0.f;
#pragma unroll
            for (int w = 0; w < kMmaKWarps; ++w) s += part[w][r * kStride + col];
            out[k] = s;
        }
    }
};

// The activation rows of one column group for one phase of kMmaKWarps * U
// chunks, staged in shared memory by the whole block, laid out for conflict-free
// fragment reads (ncu: 5.7-way bank conflicts and the L1 85% busy before):
//   q [rows][chunks][32 bytes], each chunk's words permuted to w0 w4 w1 w5 w2 w6
//     w3 w7, so lane t reads its B fragment (words t, 4+t) as one 8-byte load;
//     row stride padded by 32 bytes (a half-warp's 8-byte loads: 32 banks);
//   ds [chunks][rows]: a lane's two columns 2t, 2t+1 are one 16-byte load.
// The warps' partial tiles (Reduce) reuse it. (Staging the weight tile there
// too, with 16-byte global loads, measured 1.4x slower: docs/PERFORMANCE.md.)
template <int NT, int U>
struct Stage {
    static constexpr int kRows = NT * 8, kChunks = kMmaKWarps * U;
    static constexpr int kQStride = kChunks * 32 + 32;  // bytes
    static constexpr int kQBytes = kRows * kQStride, kDsBytes = kRows * kChunks * 8;
    static constexpr int kBytes = kQBytes + kDsBytes;
    static_assert(kBytes <= 48 * 1024, "static shared memory");
    static_assert(kBytes >= kMmaKWarps * kMmaM * (NT * 8 + 4) * 4, "the reduction's tiles fit");
};

// U: chunks per warp and phase (their weight loads all in flight at once).
// Phase p covers chunks [p * kMmaKWarps * U, +kMmaKWarps * U): the block stages
// their activations in shared memory while each warp loads the weights of its U
// chunks, then every warp runs its mmas from registers and shared memory.
// MT: 16-row tiles per block (one matrix only): each warp runs MT tiles' mmas on
// every B fragment it reads, so the activations staged per phase and the shared
// memory reads per mma serve MT x 16 output rows.
template <GgmlType T, int NT, bool SWIGLU, int U, int MT>
__global__ void __launch_bounds__(kMmaThreads, 2) matmul_mma_k(GpuMat W, GpuMat V, ops::Act a, float* __restrict__ y) {
    static_assert(MT == 1 || !SWIGLU, "several row tiles: one matrix (registers)");
    using R = Reduce<NT>;
    using St = Stage<NT, U>;
    __shared__ __align__(16) unsigned char smem[St::kBytes];
    unsigned char* const xq_s = smem;                                      // [kRows][kQStride bytes]
    float2* const xd_s = reinterpret_cast<float2*>(smem + St::kQBytes);  // [kChunks][kRows]
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, t = lane & 3;
    const int64_t row0 = int64_t(blockIdx.y) * kMmaM * MT;
    int64_t rg[MT], rg8[MT];  // rows g, g+8 of each tile; past the end: re-read
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        rg[mt] = min(row0 + mt * kMmaM + g, W.n_out - 1), rg8[mt] = min(row0 + mt * kMmaM + g + 8, W.n_out - 1);
    const int col0 = int(blockIdx.x) * R::kCols;
    const int nc = int(W.n_chunk);  // (32-bit chunk indices: rows * n_chunk is far below 2^31)
    const int4* __restrict__ aq = reinterpret_cast<const int4*>(a.q);  // [rows][nc][2]
    const float2* __restrict__ ads = reinterpret_cast<const float2*>(a.ds);
    float acc[MT][NT][4], accu[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) acc[mt][nt][i] = 0.f;
            accu[nt][i] = 0.f;
        }

    for (int p0 = 0; p0 < nc; p0 += St::kChunks) {
        // This warp's weights for the phase (a warp past the row's end re-reads its
        // last U chunks, unused).
        const int cw = min(p0 + warp * U, nc - U);
        WideRow<T, U> w0[MT], w1[MT], u0, u1;  // rows g, g+8 of each tile of W (and of V)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) load_wide<T, U>(W, rg[mt], cw, t, w0[mt]), load_wide<T, U>(W, rg8[mt], cw, t, w1[mt]);
        if constexpr (SWIGLU) load_wide<T, U>(V, rg[0], cw, t, u0), load_wide<T, U>(V, rg8[0], cw, t, u1);
        if (p0 == 0) {  // the first weights are in flight while the previous kernel drains (launch.h)
            pdl_wait();
            pdl_trigger();
        }
        const int n_ch = min(St::kChunks, nc - p0);
        __syncthreads();  // the previous phase is done with the stage
        // The phase's activations (rows past the last: its copy; chunks past the row: skipped).
        for (int i = int(threadIdx.x); i < St::kRows * St::kChunks; i += kMmaThreads) {
            const int r = i / St::kChunks, c = i % St::kChunks;
            if (c >= n_ch) continue;
            const int4* src = aq + (int64_t(min(col0 + r, a.rows - 1)) * nc + p0 + c) * 2;
            const int4 lo = src[0], hi = src[1];  // words 0..3, 4..7
            int4* dst = reinterpret_cast<int4*>(xq_s + r * St::kQStride + c * 32);
            dst[0] = make_int4(lo.x, hi.x, lo.y, hi.y);
            dst[1] = make_int4(lo.z, hi.z, lo.w, hi.w);
        }
        for (int i = int(threadIdx.x); i < St::kRows * St::kChunks; i += kMmaThreads) {
            const int c = i / St::kRows, r = i % St::kRows;
            if (c >= n_ch) continue;
            xd_s[i] = ads[int64_t(min(col0 + r, a.rows - 1)) * nc + p0 + c];  // [chunk][row]
        }
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) transpose_wide(w0[mt], t), transpose_wide(w1[mt], t);
        if constexpr (SWIGLU) transpose_wide(u0, t), transpose_wide(u1, t);
#pragma unroll
        for (int k = 0; k < U; ++k) {
            const int cl = warp * U + k;  // chunk within the phase
            if (cl >= n_ch) break;        // warp-uniform
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int2 b = *reinterpret_cast<const int2*>(xq_s + (nt * 8 + g) * St::kQStride + cl * 32 + 8 * t);
                const float4 dd = *reinterpret_cast<const float4*>(xd_s + cl * St::kRows + nt * 8 + 2 * t);
                const float2 d0 = make_float2(dd.x, dd.y), d1 = make_float2(dd.z, dd.w);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) mma_chunk<T, U>(acc[mt][nt], w0[mt], w1[mt], k, t, b.x, b.y, d0, d1);
                if constexpr (SWIGLU) mma_chunk<T, U>(accu[nt], u0, u1, k, t, b.x, b.y, d0, d1);
            }
        }
    }
    auto* part = reinterpret_cast<float(*)[kMmaM * R::kStride]>(smem);  // after Reduce's first barrier
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        float out[R::kPer];
        R::run(part, acc[mt], out);
        if constexpr (SWIGLU) {
            float up[R::kPer];
            R::run(part, accu, up);
#pragma unroll
            for (int k = 0; k < R::kPer; ++k) out[k] = silu(out[k]) * up[k];
        }
#pragma unroll
        for (int k = 0; k < R::kPer; ++k) {
            const int e = int(threadIdx.x) + k * kMmaThreads;
            const int64_t r = row0 + mt * kMmaM + e % kMmaM;
            const int col = col0 + e / kMmaM;
            if (r < W.n_out && col < a.rows) y[int64_t(col) * W.n_out + r] = out[k];
        }
    }
}

// Chunks per warp and phase (their weight loads all in flight at once): 8 for one
// matrix, one row tile and 16 activation rows, else 4 (the stage's 48 KiB with 32
// rows; the registers of two matrices or two row tiles). Rows must hold whole
// groups of U chunks (aligned vector loads): 4 always (ops::matmul_mma checks), 8
// where the 16-row one-tile kernel runs.
constexpr int mma_chunks_per_warp(bool swiglu, int nt, int mt = 1) { return swiglu || nt >= 4 || mt > 1 ? 4 : 8; }

int device_sms() {  // of the device current at the first call (as mma_device_ok)
    static const int n = [] {
        int dev = 0;
        return cudaGetDevice(&dev) == cudaSuccess ? std::max(1, rt::device_info(dev).n_sm) : 1;
    }();
    return n;
}

// Row tiles per block for one matrix: 2 where the grid of 32-row blocks still has
// kMmaTwoTileBlocksPerSm per SM (H200, llama2-7b Q4_0: B=64 +22%, pp512 +25%; B=16
// and B=32 on the 4096-row matrices, 128 blocks, 7-8% slower), else 1.
// VEGA_GPU_MMA_TILES=1 or 2 forces it (read once). Q6_K keeps 1 (it spills with 2).
template <GgmlType T, bool SW>
int mma_row_tiles(int64_t n_out, int cols) {
    static const int forced = [] {
        const char* v = std::getenv("VEGA_GPU_MMA_TILES");
        return v && *v ? (std::atoi(v) == 2 ? 2 : 1) : 0;
    }();
    if (SW || T == GgmlType::Q6_K) return 1;
    if (forced) return forced;
    const int64_t blocks2 = int64_t(cols) * ((n_out + 2 * kMmaM - 1) / (2 * kMmaM));
    return 2 * blocks2 >= int64_t(3) * device_sms() ? 2 : 1;  // blocks2 >= 1.5 x SMs
}

template <GgmlType T, int NT, bool SW>
void launch_nt(const GpuMat& W, const GpuMat& V, const ops::Act& a, float* y, void* s) {
    // x: the column groups of one row tile, adjacent in launch order, so the
    // tile's weights come from DRAM once and from L2 for the other groups.
    const int cols = (a.rows + NT * 8 - 1) / (NT * 8);
    if constexpr (!SW && T != GgmlType::Q6_K) {
        if (mma_row_tiles<T, SW>(W.n_out, cols) == 2) {
            constexpr int U = mma_chunks_per_warp(SW, NT, 2);
            const dim3 grid(unsigned(cols), unsigned((W.n_out + 2 * kMmaM - 1) / (2 * kMmaM)));
            launch(matmul_mma_k<T, NT, SW, U, 2>, grid, dim3(kMmaThreads), s, W, V, a, y);
            return;
        }
    }
    constexpr int U = mma_chunks_per_warp(SW, NT);
    const dim3 grid(unsigned(cols), unsigned((W.n_out + kMmaM - 1) / kMmaM));
    launch(matmul_mma_k<T, NT, SW, U, 1>, grid, dim3(kMmaThreads), s, W, V, a, y);
}

template <GgmlType T, bool SW>
void launch_t(const GpuMat& W, const GpuMat& V, const ops::Act& a, float* y, void* s) {
    // 8 activation rows per n-tile: 2 tiles up to 16 rows, else 4 per column group
    // (8 would need more than 128 registers: half the warps per SM, or spills).
    // Rows of 4k+4 chunks take the 4-tile kernel (U = 4) at any batch.
    if (a.rows <= 16 && W.n_chunk % mma_chunks_per_warp(SW, 2) == 0) launch_nt<T, 2, SW>(W, V, a, y, s);
    else launch_nt<T, 4, SW>(W, V, a, y, s);
}

template <bool SW>
bool dispatch(const GpuMat& W, const GpuMat& V, const ops::Act& a, float* y, void* s) {
    switch (W.type) {
#define VEGA_MMA_CASE(TT) \
    case GgmlType::TT: launch_t<GgmlType::TT, SW>(W, V, a, y, s); return true;
        VEGA_MMA_CASE(Q4_0) VEGA_MMA_CASE(Q4_1) VEGA_MMA_CASE(Q5_0) VEGA_MMA_CASE(Q5_1)
        VEGA_MMA_CASE(Q8_0) VEGA_MMA_CASE(Q4_K) VEGA_MMA_CASE(Q5_K) VEGA_MMA_CASE(Q6_K)
#undef VEGA_MMA_CASE
        default: return false;
    }
}

// The mma instructions need sm_80; builds for older archs keep the matvec path.
bool mma_device_ok() {
    static const bool ok = [] {
        int dev = 0, major = 0;
        if (cudaGetDevice(&dev) != cudaSuccess) return false;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
        return major >= 8;
    }();
    return ok;
}

}  // namespace

bool ops::mma_serves(const GpuMat& W) {
    return !is_float_type(W.type) && W.n_chunk > 0 && W.n_chunk % 4 == 0;
}

int ops::mma_min_rows() {
    // The target's table, or VEGA_GPU_MMA_ROWS (0: never), read once.
    static const int n = [] {
        const char* v = std::getenv("VEGA_GPU_MMA_ROWS");
        return v && *v ? std::atoi(v) : arch::kMmaMinRows;
    }();
    return mma_device_ok() ? n : 0;
}

bool ops::matmul_mma(const GpuMat& W, const GpuMat* U, const Act& a, float* y, void* s) {
    const int min_rows = mma_min_rows();
    if (min_rows <= 0 || a.rows < min_rows || !a.q || !a.ds || a.ss || !mma_serves(W)) return false;
    if (U && (U->type != W.type || U->n_in != W.n_in || U->n_out != W.n_out)) return false;
    return U ? dispatch<true>(W, *U, a, y, s) : dispatch<false>(W, W, a, y, s);
}

#else  // gfx906 (HIP, or its emulation on NVIDIA): no tensor-core path; the matvec kernels serve every batch.

int ops::mma_min_rows() { return 0; }
bool ops::mma_serves(const GpuMat&) { return false; }
bool ops::matmul_mma(const GpuMat&, const GpuMat*, const Act&, float*, void*) { return false; }

#endif

}  // namespace vega::gpu
