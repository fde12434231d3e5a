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
// elements 4t.. and 16+4t.. (exactly the A fragment's k order), so the weights
// need no shuffling or shared memory. The int32 dot of one chunk is scaled by
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

#include <cstdlib>
#include <string>

namespace vega::gpu {

#if defined(VEGA_GPU_CUDA)
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

// A lane's part of one chunk of weight rows g (0) and g+8 (1): the A fragment
// (lo: elements 4t..4t+3, hi: 16+4t..) and the rows' chunk scales.
struct WFrag {
    int lo0, lo1, hi0, hi1;
    float f00, f01, f10, f11;  // row g: f0, f1; row g+8: f0, f1
};

template <GgmlType T>
__device__ __forceinline__ void load_half(const GpuMat& W, int64_t row, int64_t c, int t, int* lo, int* hi, float* f0,
                                          float* f1) {
    const uint32_t* q = reinterpret_cast<const uint32_t*>(W.qs);
    const int64_t i = row * W.n_chunk + c;
    if constexpr (T == GgmlType::Q8_0) {
        *lo = int(q[i * 8 + t]), *hi = int(q[i * 8 + 4 + t]);
    } else {
        uint32_t h0 = 0, h1 = 0;
        if constexpr (plane_sizes(T).qh != 0) load_qh<T>(W, row, c, &h0, &h1);
        nibbles<T>(q[i * 4 + t], h0, h1, t, lo, hi);
    }
    *f1 = 0.f;
    load_scales<T>(W, row, c, f0, f1);
}

template <GgmlType T>
__device__ __forceinline__ WFrag load_wfrag(const GpuMat& W, int64_t r0, int64_t r1, int64_t c, int t) {
    WFrag f;
    load_half<T>(W, r0, c, t, &f.lo0, &f.hi0, &f.f00, &f.f01);
    load_half<T>(W, r1, c, t, &f.lo1, &f.hi1, &f.f10, &f.f11);
    return f;
}

// acc (this lane's 4 outputs of one 16x8 tile) += the chunk's contribution, with
// b0, b1 the B fragment (activation row g of the tile) and d0, d1 the chunk
// scales of the activation rows of columns 2t and 2t+1.
template <GgmlType T>
__device__ __forceinline__ void mma_chunk(float (&acc)[4], const WFrag& w, int b0, int b1, float2 d0, float2 d1) {
    int s0[4], s1[4] = {0, 0, 0, 0};
    if constexpr (T == GgmlType::Q6_K) {
        mma_k16(s0, w.lo0, w.lo1, b0);
        mma_k16(s1, w.hi0, w.hi1, b1);
    } else {
        mma_k32(s0, w.lo0, w.lo1, w.hi0, w.hi1, b0, b1);
    }
    acc[0] += chunk_value<T>(w.f00, w.f01, d0, s0[0], s1[0]);
    acc[1] += chunk_value<T>(w.f00, w.f01, d1, s0[1], s1[1]);
    acc[2] += chunk_value<T>(w.f10, w.f11, d0, s0[2], s1[2]);
    acc[3] += chunk_value<T>(w.f10, w.f11, d1, s0[3], s1[3]);
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
template <GgmlType T, int NT, bool SWIGLU, int U>
__global__ void __launch_bounds__(kMmaThreads, 2) matmul_mma_k(GpuMat W, GpuMat V, ops::Act a, float* __restrict__ y) {
    using R = Reduce<NT>;
    using St = Stage<NT, U>;
    __shared__ __align__(16) unsigned char smem[St::kBytes];
    unsigned char* const xq_s = smem;                                      // [kRows][kQStride bytes]
    float2* const xd_s = reinterpret_cast<float2*>(smem + St::kQBytes);  // [kChunks][kRows]
    pdl_wait();
    pdl_trigger();
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, t = lane & 3;
    const int64_t row0 = int64_t(blockIdx.y) * kMmaM;
    const int64_t rg = min(row0 + g, W.n_out - 1), rg8 = min(row0 + g + 8, W.n_out - 1);  // past the end: re-read
    const int col0 = int(blockIdx.x) * R::kCols;
    const int nc = int(W.n_chunk);  // (32-bit chunk indices: rows * n_chunk is far below 2^31)
    const int4* __restrict__ aq = reinterpret_cast<const int4*>(a.q);  // [rows][nc][2]
    const float2* __restrict__ ads = reinterpret_cast<const float2*>(a.ds);
    float acc[NT][4], accu[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = 0.f, accu[nt][i] = 0.f;

    for (int p0 = 0; p0 < nc; p0 += St::kChunks) {
        // This warp's weights for the phase (chunks past the row: re-read, not used).
        const int cw = p0 + warp * U;
        WFrag w[U], u[U];
#pragma unroll
        for (int k = 0; k < U; ++k) {
            const int c = min(cw + k, nc - 1);
            w[k] = load_wfrag<T>(W, rg, rg8, c, t);
            if constexpr (SWIGLU) u[k] = load_wfrag<T>(V, rg, rg8, c, t);
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
        for (int k = 0; k < U; ++k) {
            const int cl = warp * U + k;  // chunk within the phase
            if (cl >= n_ch) break;        // warp-uniform
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int2 b = *reinterpret_cast<const int2*>(xq_s + (nt * 8 + g) * St::kQStride + cl * 32 + 8 * t);
                const float4 dd = *reinterpret_cast<const float4*>(xd_s + cl * St::kRows + nt * 8 + 2 * t);
                const float2 d0 = make_float2(dd.x, dd.y), d1 = make_float2(dd.z, dd.w);
                mma_chunk<T>(acc[nt], w[k], b.x, b.y, d0, d1);
                if constexpr (SWIGLU) mma_chunk<T>(accu[nt], u[k], b.x, b.y, d0, d1);
            }
        }
    }
    auto* part = reinterpret_cast<float(*)[kMmaM * R::kStride]>(smem);  // after Reduce's first barrier
    float out[R::kPer];
    R::run(part, acc, out);
    if constexpr (SWIGLU) {
        float up[R::kPer];
        R::run(part, accu, up);
#pragma unroll
        for (int k = 0; k < R::kPer; ++k) out[k] = silu(out[k]) * up[k];
    }
#pragma unroll
    for (int k = 0; k < R::kPer; ++k) {
        const int e = int(threadIdx.x) + k * kMmaThreads;
        const int64_t r = row0 + e % kMmaM;
        const int col = col0 + e / kMmaM;
        if (r < W.n_out && col < a.rows) y[int64_t(col) * W.n_out + r] = out[k];
    }
}

template <GgmlType T, int NT, bool SW>
void launch_nt(const GpuMat& W, const GpuMat& V, const ops::Act& a, float* y, void* s) {
    // Chunks per warp and phase: 8 for one matrix and 16 activation rows, 4 with
    // 32 rows or two matrices, 2 with both or two matrices of 5/6-bit types (the
    // stage's 48 KiB and 128 registers: 2 blocks per SM, few spills).
    constexpr int U = SW ? (NT >= 4 || plane_sizes(T).qh != 0 ? 2 : 4) : (NT >= 4 ? 4 : 8);
    // x: the column groups of one row tile, adjacent in launch order, so the
    // tile's weights come from DRAM once and from L2 for the other groups.
    const dim3 grid(unsigned((a.rows + NT * 8 - 1) / (NT * 8)), unsigned((W.n_out + kMmaM - 1) / kMmaM));
    launch(matmul_mma_k<T, NT, SW, U>, grid, dim3(kMmaThreads), s, W, V, a, y);
}

template <GgmlType T, bool SW>
void launch_t(const GpuMat& W, const GpuMat& V, const ops::Act& a, float* y, void* s) {
    // 8 activation rows per n-tile: 2 tiles up to 16 rows, else 4 per column group
    // (8 would need more than 128 registers: half the warps per SM, or spills).
    if (a.rows <= 16) launch_nt<T, 2, SW>(W, V, a, y, s);
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
    if (min_rows <= 0 || a.rows < min_rows || is_float_type(W.type) || !a.q || !a.ds || a.ss || W.n_chunk <= 0)
        return false;
    if (U && (U->type != W.type || U->n_in != W.n_in || U->n_out != W.n_out)) return false;
    return U ? dispatch<true>(W, *U, a, y, s) : dispatch<false>(W, W, a, y, s);
}

#else  // HIP: no tensor-core path (gfx906 has none); the matvec kernels serve every batch.

int ops::mma_min_rows() { return 0; }
bool ops::matmul_mma(const GpuMat&, const GpuMat*, const Act&, float*, void*) { return false; }

#endif

}  // namespace vega::gpu
