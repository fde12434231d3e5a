// Tensor-core matmul for many activation rows (NVIDIA sm_80+): batched decode of
// 9..64 sequences and prompts, where the matvec kernels would re-read the weights
// once per 8 rows or run out of dot4 throughput.
//
//   y [rows][n_out] = x [rows][n_in] @ W^T, W quantized (gpu_mat.h), x as its q8
//   values in f16 (Act::h: f16(q * d)); with SWIGLU h = silu(x @ G^T) * (x @ U^T).
//
// Block: arch::mma_warps warps over WM row groups (1, 2 or 4: row_groups,
// mma_row_groups.h) of MT = 2 tiles of 16 output rows (the mma's M; with SWIGLU one tile
// of W and the same rows of V) and NT*8 activation rows (N), over all of K in stages of
// 8, 16 or 32 chunks (32 elements each); a launch may walk the row tiles of up to three
// matrices (MmaMats: q, k and v). The stages stream through a ring of shared-memory
// slots filled by cp.async (Ring): while stage s is computed, the next kStages - 1 are
// in flight, so an SM keeps tens of KB of weights in flight without holding them in
// registers. Within a stage each warp of a row group takes its own chunks. ldmatrix
// hands lane (g, t) bytes 4t..4t+3 of rows g and g+8 of a chunk, whose codes are
// elements 4t..4t+3 and 16+4t..16+4t+3; the lane turns them into f16 weights (code -
// offset) * scale + min (one rounding, as exact as the f16 activation) and issues two
// mma.m16n8k16 (f16 x f16 -> f32) per tile and 8 activation rows, the chunk's elements
// in a k order both operands share: mma 0 takes elements 0..15, lane t's k pairs (2t,
// 2t+1) and (2t+8, 2t+9) being elements (4t, 4t+1) and (4t+2, 4t+3); mma 1 the same from
// 16. The activation's 8 bytes of those 4 elements are one 64-bit shared load. Sums
// accumulate in f32 in the mma: no per-chunk scaling of outputs (the int8 form of this
// kernel spent half its instructions there). The warps' partial sums meet in shared
// memory in a fixed order (deterministic results).
//
// Weights are read from DRAM once per step: the column groups (NT*8 activation
// rows each) of a row tile run next to each other and share it through L2.
#include "core/env.h"
#include "backend/gpu/launch.h"
#include "backend/gpu/mma_row_groups.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/per_device.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/kernels/quant_chunk.h"
#include "backend/gpu/kernels/scale_f16.h"
#include "backend/gpu/kernels/silu.h"
#include "backend/gpu/kernels/tensor_core.h"
#include "backend/gpu/kernels/vector_load.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace vega::gpu {

int ops::mma_row_multiple(GgmlType t) {
    // Whole 8-byte copies of every row's scale bytes (a 1-byte sc plane: 8 chunks).
    return plane_sizes(t).sc == 1 ? 256 : 128;
}

int64_t& ops::mma_wide_launch_count() {
    static int64_t n = 0;
    return n;
}

#if defined(VEGA_GPU_CUDA) && !defined(VEGA_GPU_EMULATE_GFX906)
namespace {

constexpr int kMmaM = kMmaTileRows;  // weight rows per mma tile (the mma's M)

// One 16-row tile of a row group's [16][NT*8] outputs, summed over the group's
// SLOTS warps in a fixed order: part holds each of those warps' tiles (row stride
// NT*8 + 4 against bank conflicts), written by the warps whose `mine` is set
// (warp % SLOTS picks the slot); then all THREADS threads sum: thread i gets
// outputs e = i, i + THREADS, ... below kOut (row = e % 16, column = e / 16).
template <int NT, int SLOTS, int THREADS>
struct Reduce {
    static constexpr int kCols = NT * 8, kStride = kCols + 4, kOut = kMmaM * kCols;
    static constexpr int kPer = (kOut + THREADS - 1) / THREADS;
    static constexpr int kBytes = SLOTS * kMmaM * kStride * 4;
    static_assert(kOut % THREADS == 0 || THREADS % kOut == 0, "outputs spread evenly");
    __device__ static void run(float (*part)[kMmaM * kStride], const float (&acc)[NT][4], bool mine, float (&out)[kPer]) {
        const int slot = int(threadIdx.x) / 32 % SLOTS, lane = int(threadIdx.x) % 32, g = lane >> 2, t = lane & 3;
        __syncthreads();  // part may still be read by a previous call
        if (mine) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    part[slot][(i < 2 ? g : g + 8) * kStride + nt * 8 + 2 * t + (i & 1)] = acc[nt][i];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int e = min(int(threadIdx.x) + k * THREADS, kOut - 1), r = e % kMmaM, col = e / kMmaM;
            float s = 0.f;
#pragma unroll
            for (int w = 0; w < SLOTS; ++w) s += part[w][r * kStride + col];
            out[k] = s;  // (threads past kOut: a copy, not stored)
        }
    }
};

// The shared-memory ring of matmul_mma_k: kStages slots, each one stage (kChunks
// chunks of K) of the block's weight rows and activation rows, copied in by
// cp.async and laid out so that the 8 rows one fragment read touches fall in 8
// distinct bank groups (row strides of 16 mod 128 bytes; 72 for 2-byte scales):
//   wq [kRows][kChunks * qs + 16]   the weights' qs plane (gpu_mat.h)
//   sc [kRows][kChunks * sc + 8|16] their chunk scale bits (stride: a multiple of one warp's load)
//   qh [kRows][kChunks * qh + 16]   their high-bit planes (Q5_*, Q6_K)
//   sb [kRows][16 bytes]            super-block d (dmin) words of the stage (K-quants;
//                                   Q6_K's 2-byte entries start at half (row's parity))
//   xh [kCols][kChunks * 64 + 32]   the activations in f16 (Act::h); a stride of 32 mod
//                                   128 bytes keeps a 64-bit load of 8 rows x 4 lanes
//                                   conflict-free
// The warps' partial tiles (Reduce) follow the ring.
// WM row groups: the block's rows are WM groups of MT * 16, each taken by kWK =
// kWarps / WM warps that split every stage's chunks (WM = 2 halves the activation
// bytes read per weight byte; for launches with enough row tiles).
template <GgmlType T, int MT, int NT, int WM>
struct Ring {
    static constexpr PlaneSizes kPs = kFmt<T>.ps;
    static constexpr int kRows = WM * MT * kMmaM, kCols = NT * 8;
    static constexpr int kWarps = arch::mma_warps(kCols);
    static constexpr int kWK = kWarps / WM;  // warps per row group
    static constexpr int kThreads = kWarps * 32;
    // This thread's warp's row group and that group's first shared row.
    __device__ static int group() { return int(threadIdx.x) / 32 / kWK; }
    __device__ static int group_row0() { return group() * MT * kMmaM; }
    // Chunks per stage: the f16 activations (64 bytes per chunk and row) take most of
    // a slot, so wider column groups take shorter stages (4 slots at 32 and 64 rows).
    static constexpr int kChunks = arch::mma_stage_chunks(kCols, WM);
    static constexpr int kU = kChunks / kWK;  // per warp and stage
    static constexpr int kWqStride = kChunks * kPs.qs + 16;
    static constexpr int kScLoad = kU * kPs.sc;  // a warp's scale bytes per row (one load: 1, 2, 4, 8 or 16)
    static constexpr int kScStride = kChunks * kPs.sc + (kScLoad >= 16 ? 16 : 8);
    static constexpr int kQhStride = kPs.qh ? kChunks * kPs.qh + 16 : 0;
    static constexpr int kSbWords = kPs.sb == 4 ? kChunks / 8 : kPs.sb == 2 ? kChunks / 16 + 1 : 0;  // per row
    static constexpr int kSbStride = (kSbWords * 4 + 15) / 16 * 16;
    static constexpr int kXhStride = kChunks * 64 + 32;
    static constexpr int kSc = kRows * kWqStride;
    static constexpr int kQh = (kSc + kRows * kScStride + 15) / 16 * 16;
    static constexpr int kSb = kQh + kRows * kQhStride;
    static constexpr int kXh = kSb + kRows * kSbStride;
    static constexpr int kSlot = kXh + kCols * kXhStride;
    using R = Reduce<NT, kWK, kThreads>;
    static constexpr int kReduceBytes = R::kBytes;  // after the ring (used while it streams on)
    static constexpr int kStages = std::min(arch::kMmaMaxStages, std::max(2, (arch::mma_smem_bytes(WM) - kReduceBytes) / kSlot));
    static constexpr int kBytes = kStages * kSlot + kReduceBytes;
    // Copy items per stage (16- or 8-byte pieces): [rows][pieces] per plane.
    static constexpr int kQsP = kChunks * kPs.qs / 16, kScP = kChunks * kPs.sc / 8, kQhP = kChunks * kPs.qh / 16;
    static constexpr int kXhP = kChunks * 4;
    static_assert(MT == 2, "4-bit A words of both tiles from one ldmatrix");
    static_assert(kWarps % WM == 0 && kU >= 1 && kU <= 8 && kChunks % kWK == 0 && kChunks % 8 == 0 && NT % 2 == 0,
                  "stage shape");
    static_assert(kScLoad == 1 || kScLoad == 2 || kScLoad % 4 == 0, "a warp's scale bytes: one entry of 1 or 2 bytes, or whole words");
    static_assert(kSlot % 16 == 0 && kSbStride <= 16, "slot layout (16-byte sb rows: conflict-free)");
};

// A thread's copies of one plane per stage: items i = tid + j * THREADS below N,
// each at byte offset off[j] (chunk 0 of its row) of its plane; computed once, so
// a stage's copy costs an add and the cp.async. (32-bit offsets: ops::matmul_mma
// checks that every plane is under 4 GiB.)
template <int N, int THREADS>
struct Items {
    static constexpr int kPer = (N + THREADS - 1) / THREADS;
    uint32_t off[kPer];
    template <typename F>
    __device__ __forceinline__ void each(F&& f) const {
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int i = int(threadIdx.x) + j * THREADS;
            if (N % THREADS == 0 || i < N) f(i, off[j]);
        }
    }
    template <typename F>
    __device__ __forceinline__ void init(F&& f) {
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int i = int(threadIdx.x) + j * THREADS;
            off[j] = N % THREADS == 0 || i < N ? f(i) : 0u;
        }
    }
};

// The matrices of one launch: y[m] [rows][w[m].n_out] = x @ w[m]^T for m < n_mat
// (q, k and v in one walk: same type and width), or with SWIGLU y[0] =
// silu(x @ w[0]^T) * (x @ w[1]^T) (n_mat 1). Row tiles are numbered across the
// matrices: w[0]'s first, then w[1]'s, then w[2]'s (first[m] is matrix m's first).
struct MmaMats {
    GpuMat w[3];
    float* y[3] = {nullptr, nullptr, nullptr};
    int n_mat = 0;
    int first[4] = {0, 0, 0, 0};
    // Grouped experts (ops::matmul_mma_experts; n_mat 1): w[0] (and w[1], SWIGLU) are the
    // stacked experts, expert e's row o at e * n_out + o with n_out = rows per expert
    // (w[0].n_out here). Block x takes work item x of the plan (ops::ExpertPlan::items:
    // slot << 16 | column group g, the slot's pairs g * kCols ..); blocks past n_items
    // exit. Column j of a group reads act row pairs[j] (per_slot) or pairs[j] / n_used
    // and writes y row pairs[j].
    bool grouped = false;
    ops::ExpertPlan plan;
    int n_used = 1;
    bool per_slot = false;
    int plan_slots = 0;    // active experts at most (grid sizing)
    int grouped_cols = 0;  // the plan's column-group width: 16, 32 or 64 (picks NT)
};

// This thread's copy items and the planes they read. Shared weight row r is row
// row0 + r of W, or with SWIGLU rows 0..15 are W's and 16..31 V's (both row0 +
// r % 16); weight offsets are relative to the tile's first row (row0 * bytes per
// row added per stage), and rows past the end are not copied (their outputs are
// not stored). Activation rows past the last re-read it. (Act::h rows are n_in
// halves: 64 bytes per chunk.)
template <GgmlType T, int MT, int NT, int WM, bool SW>
struct Copies {
    using L = Ring<T, MT, NT, WM>;
    static constexpr int kThr = L::kThreads;
    const uint8_t *wqs, *wsc, *wqh, *wsb, *vqs, *vsc, *vqh, *vsb;  // by value: no stack copies
    const uint16_t* xh;
    int64_t n_out, nc;  // the current matrix's rows; chunks per row (every matrix)
    int mat = 0;        // the matrix whose planes wqs.. are
    Items<L::kRows * L::kQsP, kThr> qs;
    Items<L::kRows * L::kScP, kThr> sc;
    Items<L::kRows * (L::kQhP ? L::kQhP : 1), kThr> qh;
    Items<L::kCols * L::kXhP, kThr> ah;

    // Shared row r's row of its matrix from the tile's first: SW row groups are 16 rows
    // of W then the same 16 of V.
    __device__ static int tile_row(int r) { return SW ? r / (2 * kMmaM) * kMmaM + r % kMmaM : r; }
    // The planes of matrix m (SW: w[0], and w[1] as V), picked field by field from
    // the kernel parameters (an indexed parameter would go through local memory).
    __device__ void set_matrix(const MmaMats& P, int m) {
        auto pick3 = [&](auto f) { return m == 0 ? f(P.w[0]) : m == 1 ? f(P.w[1]) : f(P.w[2]); };
        mat = m;
        wqs = pick3([](const GpuMat& x) { return x.qs; }), wsc = pick3([](const GpuMat& x) { return x.sc; });
        wqh = pick3([](const GpuMat& x) { return x.qh; }), wsb = pick3([](const GpuMat& x) { return x.sb; });
        n_out = pick3([](const GpuMat& x) { return x.n_out; });
        if constexpr (SW) vqs = P.w[1].qs, vsc = P.w[1].sc, vqh = P.w[1].qh, vsb = P.w[1].sb;
    }
    // gpairs (grouped): the group's gcnt pairs, column r reading act row in_row(pairs[r]).
    __device__ Copies(const MmaMats& P, const ops::Act& a, int col0, const int32_t* gpairs = nullptr, int gcnt = 0) {
        constexpr PlaneSizes ps = L::kPs;
        vqs = vsc = vqh = vsb = nullptr;
        set_matrix(P, 0);
        xh = a.h, nc = P.w[0].n_chunk;
        auto arow = [&](int r) {
            if (!gpairs) return int64_t(min(col0 + r, a.rows - 1));
            const int p = gpairs[min(r, gcnt - 1)];  // past the group: re-reads its last (not stored)
            return int64_t(P.per_slot ? p : p / P.n_used);
        };
        qs.init([&](int i) { return uint32_t(tile_row(i / L::kQsP) * nc * ps.qs + (i % L::kQsP) * 16); });
        sc.init([&](int i) { return uint32_t(tile_row(i / L::kScP) * nc * ps.sc + (i % L::kScP) * 8); });
        if constexpr (ps.qh != 0) qh.init([&](int i) { return uint32_t(tile_row(i / L::kQhP) * nc * ps.qh + (i % L::kQhP) * 16); });
        ah.init([&](int i) { return uint32_t(arow(i / L::kXhP) * nc * 64 + (i % L::kXhP) * 16); });
    }
    __device__ const uint8_t* pick(int r, const uint8_t* w, const uint8_t* v) const {
        return SW && r % (2 * kMmaM) >= kMmaM ? v : w;
    }

    // Stage chunks [c0, c0 + n_ch) of the weight rows of the tile from row0 into a slot.
    __device__ __forceinline__ void weights(SmemAddr slot, int64_t row0, int c0, int n_ch) const {
        constexpr PlaneSizes ps = L::kPs;
        const int64_t left = n_out - row0;  // rows of the tile that exist
        const int64_t rc = row0 * nc;       // the tile's first chunk
        qs.each([&](int i, uint32_t o) {
            const int r = i / L::kQsP, p = i % L::kQsP;
            if (p * 16 < n_ch * ps.qs && tile_row(r) < left)
                cp_async<16>(slot + r * L::kWqStride + p * 16, pick(r, wqs, vqs) + (rc + c0) * ps.qs + o);
        });
        sc.each([&](int i, uint32_t o) {
            const int r = i / L::kScP, p = i % L::kScP;
            if (p * 8 < n_ch * ps.sc && tile_row(r) < left)
                cp_async<8>(slot + L::kSc + r * L::kScStride + p * 8, pick(r, wsc, vsc) + (rc + c0) * ps.sc + o);
        });
        if constexpr (ps.qh != 0)
            qh.each([&](int i, uint32_t o) {
                const int r = i / L::kQhP, p = i % L::kQhP;
                if (p * 16 < n_ch * ps.qh && tile_row(r) < left)
                    cp_async<16>(slot + L::kQh + r * L::kQhStride + p * 16, pick(r, wqh, vqh) + (rc + c0) * ps.qh + o);
            });
        if constexpr (ps.sb != 0) {  // the stage's super-block entries (one per 8 chunks) of each row, as 4-byte words
            const int n_sb = (n_ch + 7) / 8;
            constexpr int kN = L::kRows * L::kSbWords;
#pragma unroll
            for (int j0 = 0; j0 < (kN + kThr - 1) / kThr; ++j0) {
                const int i = int(threadIdx.x) + j0 * kThr, r = i / L::kSbWords, j = i % L::kSbWords;
                if (i >= kN || tile_row(r) >= left) continue;
                const int64_t e0 = (row0 + tile_row(r)) * (nc / 8) + c0 / 8;  // the row's first entry of the stage
                const auto* src = reinterpret_cast<const uint32_t*>(pick(r, wsb, vsb));
                if constexpr (ps.sb == 4) {
                    if (j < n_sb) cp_async<4>(slot + L::kSb + r * L::kSbStride + j * 4, src + e0 + j);
                } else {  // 2-byte entries: the words holding them, from the one holding e0 (its parity: compute_stage)
                    if (j < (int(e0 & 1) + n_sb + 1) / 2) cp_async<4>(slot + L::kSb + r * L::kSbStride + j * 4, src + e0 / 2 + j);
                }
            }
        }
    }
    // Stage chunks [c0, c0 + n_ch) of the activation rows into a slot.
    __device__ __forceinline__ void acts(SmemAddr slot, int c0, int n_ch) const {
        ah.each([&](int i, uint32_t o) {
            const int r = i / L::kXhP, p = i % L::kXhP;
            if (p * 16 < n_ch * 64)
                cp_async<16>(slot + L::kXh + r * L::kXhStride + p * 16, reinterpret_cast<const uint8_t*>(xh) + o + c0 * 64);
        });
    }
};

// Weight codes minus this offset, times the half's scale, plus its min, are the
// weights (codes: quant_chunk.h; Q8_0's bytes made unsigned by flipping bit 7).
// Codebook types dequantize through book_dequant8 instead.
template <GgmlType T>
constexpr int code_offset() {
    constexpr GpuFormat F = kFmt<T>;
    return F.codes == GpuCodes::kBytes ? 128 : F.offset;
}

// Chunk k (of this warp's kU in the stage) of a shared row, from the row's scale
// words w (the warp's chunks' sc bytes, one load) and sb entry: its f16 scales as
// half2 splats, s0 for elements 0..15, s1 for 16..31, and the halves' mins m0, m1
// (chunk_scales_f16). Q2_K's weights come from dequant4_q2k instead.
template <GgmlType T, int MT, int NT, int WM>
__device__ __forceinline__ void ring_scales(const uint32_t* w, uint32_t sb, int k, uint32_t& s0, uint32_t& s1,
                                            uint32_t& m0, uint32_t& m1) {
    constexpr int kSc = Ring<T, MT, NT, WM>::kPs.sc;  // bytes per chunk: 1, 2 or 4
    constexpr int kPerWord = 4 / kSc;
    chunk_scales_f16<T>(w[k / kPerWord], (k % kPerWord) * kSc, sb, s0, s1, m0, m1);
}

// Chunk cl of shared row r: lane t's codes of elements 4t.. (lo) and 16+4t.. (hi),
// unsigned with code_offset: 4-bit codes from the row's qs word w (ldmatrix), 2-bit
// codes from the chunk's two words (one 8-byte shared load; the 4 lanes of a row
// read the same address), with their high-bit planes (codebook types: book_dequant8).
template <GgmlType T, int MT, int NT, int WM>
__device__ __forceinline__ void ring_codes(const unsigned char* slot, int r, int cl, int t, uint32_t w, uint32_t* lo,
                                           uint32_t* hi) {
    using L = Ring<T, MT, NT, WM>;
    constexpr GpuFormat F = kFmt<T>;
    uint32_t h0 = 0, h1 = 0;
    if constexpr (L::kPs.qh == 4) h0 = reinterpret_cast<const uint32_t*>(slot + L::kQh + r * L::kQhStride)[cl];
    if constexpr (L::kPs.qh == 8) {
        const uint2 h = reinterpret_cast<const uint2*>(slot + L::kQh + r * L::kQhStride)[cl];
        h0 = h.x, h1 = h.y;
    }
    static_assert(F.book == GpuBook::kNone, "codebook chunks: book_dequant8");
    if constexpr (F.codes == GpuCodes::kPairs) {
        (void)w;
        const uint2 q = *reinterpret_cast<const uint2*>(slot + r * L::kWqStride + cl * 8);
        codes<T>(q.x, q.y, h0, h1, t, lo, hi);
    } else {
        codes<T>(w, 0u, h0, h1, t, lo, hi);
    }
}

// Four codes (the bytes of u) -> f16 weights (w0, w1) and (w2, w3), half2 bit
// patterns: w = (code - OFF) * s + m. 1024 + code is exact in f16 (PRMT of the
// byte into 0x64xx), so is the subtraction; the fma is the one rounding.
template <int OFF>
__device__ __forceinline__ void dequant4(uint32_t u, uint32_t s, uint32_t m, uint32_t& w01, uint32_t& w23) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const uint32_t bias = (0x6400u + OFF) * 0x10001u;  // f16 1024 + OFF, twice
    asm("{\n .reg .b32 a, b;\n"
        " prmt.b32 a, %2, 0x64646464, 0x4140;\n prmt.b32 b, %2, 0x64646464, 0x4342;\n"
        " sub.rn.f16x2 a, a, %5;\n sub.rn.f16x2 b, b, %5;\n"
        " fma.rn.f16x2 %0, a, %3, %4;\n fma.rn.f16x2 %1, b, %3, %4;\n}"
        : "=r"(w01), "=r"(w23)
        : "r"(u), "r"(s), "r"(m), "r"(bias));
#else
    (void)u, (void)s, (void)m, w01 = w23 = 0;  // never launched (mma_device_ok)
#endif
}

// A codebook type's chunk word w (8 codes, as ring_codes' qs word: byte j = code of
// element 4t + j | code of 16 + 4t + j << 4) -> f16 weights, half2 bit patterns: a0 =
// elements (4t, 4t+1), a1 = (4t+2, 4t+3) times s0, a2 = (16+4t, 17+4t), a3 = (18+4t,
// 19+4t) times s1. The codes select from the book's two difference tables (gpu_mat.h
// DiffBook) in nibble order, four codes a prmt, so each pair's bytes sit in one word;
// one prmt per table and pair makes them 1024 + byte in f16, the difference is the
// entry (exact), the multiply the one rounding, as dequant4's fma. Per 8 codes: 3
// selector ops, 4 lookups, 8 prmt and 8 f16 ops, where the lookup, its byte masks and
// select, the reorder, the xor and dequant4 took about 30.
template <GpuBook B>
__device__ __forceinline__ void book_dequant8(uint32_t w, uint32_t s0, uint32_t s1, uint32_t& a0, uint32_t& a1,
                                              uint32_t& a2, uint32_t& a3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr DiffBook d = diff_book(B);
    const uint32_t wx = w ^ 0x88888888u;  // the upper table's selectors
    // codes (4t, 16+4t, 4t+1, 17+4t) of the low half-word, (4t+2, 18+4t, 4t+3, 19+4t) of the high
    const uint32_t la = prmt_b32(d.lo0, d.lo1, w), ua = prmt_b32(d.up0, d.up1, wx);
    const uint32_t lb = prmt_b32(d.lo0, d.lo1, w >> 16), ub = prmt_b32(d.up0, d.up1, wx >> 16);
#define VEGA_BOOK_PAIR(OUT, L, U, SEL, S)                                                           \
    asm("{\n .reg .b32 a, b;\n prmt.b32 a, %1, 0x64646464, " SEL ";\n prmt.b32 b, %2, 0x64646464, " SEL \
        ";\n sub.rn.f16x2 a, a, b;\n mul.rn.f16x2 %0, a, %3;\n}"                                   \
        : "=r"(OUT)                                                                                 \
        : "r"(L), "r"(U), "r"(S))
    VEGA_BOOK_PAIR(a0, la, ua, "0x4240", s0);  // bytes 0 and 2: the pair's lower codes
    VEGA_BOOK_PAIR(a1, lb, ub, "0x4240", s0);
    VEGA_BOOK_PAIR(a2, la, ua, "0x4341", s1);  // bytes 1 and 3: 16 elements on
    VEGA_BOOK_PAIR(a3, lb, ub, "0x4341", s1);
#undef VEGA_BOOK_PAIR
#else
    (void)w, (void)s0, (void)s1, a0 = a1 = a2 = a3 = 0;  // never launched (mma_device_ok)
#endif
}

// Q2_K: each weight code * d*scale - dmin*min in f32 (exact: 2-bit codes, 4-bit scale
// and min, f16 d and dmin), rounded once to f16. dequant4's f16 scale and min would round
// both first: an error shared by the 16 weights of a half, which with Q2_K's large mins
// moved a two-layer block 30x further from the CPU than the other types (parity test).
// w[0..3]: elements 4t.. as (w0, w1), (w2, w3); w[4..7] the same from 16.
template <GgmlType T>
__device__ __forceinline__ void dequant4_q2k(const uint32_t* scw, uint32_t sb, int k, uint32_t lo, uint32_t hi,
                                             uint32_t& a0, uint32_t& a1, uint32_t& a2, uint32_t& a3) {
    const uint32_t sc = (scw[k / 2] >> (16 * (k & 1))) & 0xFFFFu;
    float f0, f1, g0, g1;
    decode_scales<T>(sc, sb, &f0, &f1, &g0, &g1);
    auto w = [](uint32_t u, int i, float f, float g) { return fmaf(float((u >> (8 * i)) & 0xFFu), f, -g); };
    a0 = pack_h2(w(lo, 0, f0, g0), w(lo, 1, f0, g0)), a1 = pack_h2(w(lo, 2, f0, g0), w(lo, 3, f0, g0));
    a2 = pack_h2(w(hi, 0, f1, g1), w(hi, 1, f1, g1)), a3 = pack_h2(w(hi, 2, f1, g1), w(hi, 3, f1, g1));
}

// This warp's chunks of stage st of a tile (kU from warp * kU) into acc[mt][nt]
// (lane's 4 outputs of the tile of weight rows mt*16.. and activation rows nt*8..).
// par: Q6_K, the parity of the first super-block entry of this lane's rows in the
// tile; a stage's entries start at half (par + st * kChunks / 8) & 1 of its words.
template <GgmlType T, int MT, int NT, int WM>
__device__ __forceinline__ void compute_stage(const unsigned char* slot, SmemAddr slot_s, int n_ch, int st,
                                              const int (&par)[MT][2], float (&acc)[MT][NT][4]) {
    using L = Ring<T, MT, NT, WM>;
    constexpr int kScW = L::kScLoad >= 4 ? L::kScLoad / 4 : 1;  // scale words of the warp's chunks per row
    constexpr int kOff = code_offset<T>();
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, t = lane & 3;
    const int rb = L::group_row0();
    const int cw = warp % L::kWK * L::kU;         // the warp's first chunk (its kU chunks share one super-block)
    if (cw >= n_ch) return;                       // warp-uniform: the last stage of a row
    uint32_t scw[MT][2][kScW], sbw[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = rb + mt * kMmaM + g + 8 * h;
            const unsigned char* sp = slot + L::kSc + r * L::kScStride + cw * L::kPs.sc;
            if constexpr (L::kScLoad == 1) scw[mt][h][0] = *sp;
            else if constexpr (L::kScLoad == 2) scw[mt][h][0] = *reinterpret_cast<const uint16_t*>(sp);
            else load_words(reinterpret_cast<const uint32_t*>(sp), scw[mt][h]);
            sbw[mt][h] = 0;
            if constexpr (L::kPs.sb == 4) sbw[mt][h] = reinterpret_cast<const uint32_t*>(slot + L::kSb + r * L::kSbStride)[cw / 8];
            if constexpr (L::kPs.sb == 2)
                sbw[mt][h] = reinterpret_cast<const uint16_t*>(slot + L::kSb + r * L::kSbStride)[((par[mt][h] + st * (L::kChunks / 8)) & 1) + cw / 8];
        }
#pragma unroll
    for (int k = 0; k < L::kU; ++k) {
        const int cl = cw + k;
        if (cl >= n_ch) break;  // warp-uniform
        // B fragments: the f16 activations of elements 4t..4t+3 (mma 0) and 16+4t.. (mma 1)
        // of column nt*8 + g, one 64-bit load each.
        uint2 blo[NT], bhi[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const unsigned char* bp = slot + L::kXh + (nt * 8 + g) * L::kXhStride + cl * 64 + 8 * t;
            blo[nt] = *reinterpret_cast<const uint2*>(bp);
            bhi[nt] = *reinterpret_cast<const uint2*>(bp + 32);
        }
        // A words of rows mt*16 + g and + 8: 4-bit types one qs word each (one ldmatrix
        // for all rows), Q8_0 the chunk's two halves (one ldmatrix per tile).
        uint32_t wa[MT][4];
        if constexpr (kFmt<T>.codes == GpuCodes::kBytes) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                ldmatrix_x4(slot_s + (rb + mt * kMmaM + (lane & 15)) * L::kWqStride + cl * 32 + (lane >> 4) * 16, wa[mt][0],
                            wa[mt][1], wa[mt][2], wa[mt][3]);
        } else if constexpr (kFmt<T>.codes == GpuCodes::kNibbles) {
            ldmatrix_x4(slot_s + (rb + lane) * L::kWqStride + cl * 16, wa[0][0], wa[0][1], wa[1][0], wa[1][1]);
        } else {  // kPairs: ring_codes loads the chunk's 8 bytes itself
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) wa[mt][0] = wa[mt][1] = 0;
        }
        // Weights of both tiles first, then the mma in an order where no two in a row
        // accumulate into the same tile (an mma's result feeds the next one's C only
        // after its latency).
        uint32_t a[MT][8];  // mma 0: a[mt][0..3], mma 1: a[mt][4..7] (rows g, g+8; element pairs 4t.., 4t+2..)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            const int r0 = rb + mt * kMmaM + g, r1 = r0 + 8;
            if constexpr (kFmt<T>.scales == GpuScales::kQ2K) {
                uint32_t lo0, hi0, lo1, hi1;
                ring_codes<T, MT, NT, WM>(slot, r0, cl, t, wa[mt][0], &lo0, &hi0);
                ring_codes<T, MT, NT, WM>(slot, r1, cl, t, wa[mt][1], &lo1, &hi1);
                dequant4_q2k<T>(scw[mt][0], sbw[mt][0], k, lo0, hi0, a[mt][0], a[mt][2], a[mt][4], a[mt][6]);
                dequant4_q2k<T>(scw[mt][1], sbw[mt][1], k, lo1, hi1, a[mt][1], a[mt][3], a[mt][5], a[mt][7]);
            } else {
                uint32_t s00, s01, m00, m01, s10, s11, m10, m11;
                ring_scales<T, MT, NT, WM>(scw[mt][0], sbw[mt][0], k, s00, s01, m00, m01);
                ring_scales<T, MT, NT, WM>(scw[mt][1], sbw[mt][1], k, s10, s11, m10, m11);
                if constexpr (kFmt<T>.book != GpuBook::kNone) {  // codebook: the weights straight from the codes
                    book_dequant8<kFmt<T>.book>(wa[mt][0], s00, s01, a[mt][0], a[mt][2], a[mt][4], a[mt][6]);
                    book_dequant8<kFmt<T>.book>(wa[mt][1], s10, s11, a[mt][1], a[mt][3], a[mt][5], a[mt][7]);
                } else {
                    uint32_t lo0, hi0, lo1, hi1;
                    if constexpr (kFmt<T>.codes == GpuCodes::kBytes) {
                        lo0 = wa[mt][0] ^ 0x80808080u, lo1 = wa[mt][1] ^ 0x80808080u;
                        hi0 = wa[mt][2] ^ 0x80808080u, hi1 = wa[mt][3] ^ 0x80808080u;
                    } else {
                        ring_codes<T, MT, NT, WM>(slot, r0, cl, t, wa[mt][0], &lo0, &hi0);
                        ring_codes<T, MT, NT, WM>(slot, r1, cl, t, wa[mt][1], &lo1, &hi1);
                    }
                    dequant4<kOff>(lo0, s00, m00, a[mt][0], a[mt][2]);
                    dequant4<kOff>(lo1, s10, m10, a[mt][1], a[mt][3]);
                    dequant4<kOff>(hi0, s01, m01, a[mt][4], a[mt][6]);
                    dequant4<kOff>(hi1, s11, m11, a[mt][5], a[mt][7]);
                }
            }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const uint2 b = half ? bhi[nt] : blo[nt];
                    mma_f16(acc[mt][nt], a[mt][4 * half], a[mt][4 * half + 1], a[mt][4 * half + 2], a[mt][4 * half + 3],
                            b.x, b.y);
                }
    }
}

// The block's outputs of one tile (rows row0.., activation rows col0..): the warps'
// partial sums reduced (Reduce, in its own shared region) and stored, SWIGLU's as
// silu(gate) * up.
// col_map (grouped experts): output column col is y row col_map[col] (col0 0, rows the
// group's pair count).
template <GgmlType T, int MT, int NT, int WM, bool SWIGLU, bool G>
__device__ __forceinline__ void store_tile(float* part_mem, const float (&acc)[MT][NT][4], int64_t row0, int col0,
                                           int64_t n_out, int rows, float* __restrict__ y,
                                           const int32_t* __restrict__ col_map) {
    auto out_row = [&](int col) {
        if constexpr (G) return int64_t(col_map[col]);
        else return int64_t(col);
    };
    using L = Ring<T, MT, NT, WM>;
    using R = typename L::R;
    auto* part = reinterpret_cast<float(*)[kMmaM * R::kStride]>(part_mem);
    const int my = L::group();
#pragma unroll
    for (int rg = 0; rg < WM; ++rg) {
        if constexpr (SWIGLU) {  // row group rg: output rows rg*16.. (W's tile 0, V's tile 1)
            float out[R::kPer], up[R::kPer];
            R::run(part, acc[0], my == rg, out);
            R::run(part, acc[MT - 1], my == rg, up);
#pragma unroll
            for (int k = 0; k < R::kPer; ++k) {
                const int e = int(threadIdx.x) + k * L::kThreads;
                const int64_t r = row0 + rg * kMmaM + e % kMmaM;
                const int col = col0 + e / kMmaM;
                if (e < R::kOut && r < n_out && col < rows) y[out_row(col) * n_out + r] = silu(out[k]) * up[k];
            }
        } else {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                float out[R::kPer];
                R::run(part, acc[mt], my == rg, out);
#pragma unroll
                for (int k = 0; k < R::kPer; ++k) {
                    const int e = int(threadIdx.x) + k * L::kThreads;
                    const int64_t r = row0 + (rg * MT + mt) * kMmaM + e % kMmaM;
                    const int col = col0 + e / kMmaM;
                    if (e < R::kOut && r < n_out && col < rows) y[out_row(col) * n_out + r] = out[k];
                }
            }
        }
    }
}

// One block: tiles of WM x MT x 16 weight rows (SWIGLU: WM x 16 rows of W and the
// same of V) x NT*8 activation rows, over all of K in stages of kChunks chunks streamed
// through the ring. A block walks tiles blockIdx.y, + gridDim.y, ... (the grid
// holds about one block per SM), and its stages form one sequence across them:
// stage g + kStages - 1 is copied in while stage g is computed, so each SM keeps
// (kStages - 1) stages of weights in flight without registers, also across tile
// boundaries (no pipeline restart per tile).
// G: grouped experts (MmaMats::grouped), its own instantiation: the plain matmuls
// compile to the code they had before grouping existed. (Grouping as a runtime flag
// cost llama2-7b Q4_0 B=16 decode 2%: docs/PERFORMANCE.md, fifteenth session.)
template <GgmlType T, int MT, int NT, int WM, bool SWIGLU, bool G>
__global__ void __launch_bounds__(Ring<T, MT, NT, WM>::kThreads, 1) matmul_mma_k(MmaMats P, ops::Act a) {
    static_assert(!SWIGLU || MT == 2, "SWIGLU: tile 0 of W, tile 1 of V");
    using L = Ring<T, MT, NT, WM>;
    constexpr int S = L::kStages;
    constexpr int kRowsPerTile = SWIGLU ? WM * kMmaM : L::kRows;
    extern __shared__ __align__(16) unsigned char smem[];  // [kStages][kSlot] ring, then the reduction's tiles
    const SmemAddr smem_s = SmemAddr(__cvta_generic_to_shared(smem));
    const int lane = int(threadIdx.x) % 32, g = lane >> 2;
    const int rb = L::group_row0();
    int col0 = int(blockIdx.x) * L::kCols;
    // Grouped experts: this block's work item (read after the wait: the plan is an
    // earlier kernel's), its expert's first row and its pairs.
    int64_t e_row0 = 0;
    const int32_t* gpairs = nullptr;
    int gcnt = 0;
    if constexpr (G) {
        pdl_wait();
        pdl_trigger();
        if (int(blockIdx.x) >= P.plan.n_items[0]) return;
        const int item = P.plan.items[blockIdx.x], slot = item >> 16, grp = item & 0xFFFF;
        const int b0 = P.plan.slot_begin[slot] + grp * L::kCols;
        gcnt = min(L::kCols, P.plan.slot_begin[slot + 1] - b0);
        gpairs = P.plan.pairs + b0;
        e_row0 = int64_t(P.plan.slot_expert[slot]) * P.w[0].n_out;
        col0 = 0;
    }
    const int64_t nc = P.w[0].n_chunk;
    const int n_st = int((nc + L::kChunks - 1) / L::kChunks);  // stages per tile
    const int n_tiles = P.first[P.n_mat];
    const int n_my = (n_tiles - int(blockIdx.y) + int(gridDim.y) - 1) / int(gridDim.y);
    const int n_seq = n_my * n_st;  // this block's stages, all its tiles
    auto n_chunks = [&](int s) { return int(min(int64_t(L::kChunks), nc - int64_t(s) * L::kChunks)); };
    // This block's tile k: its matrix and first row.
    auto tile_mat = [&](int k) {
        const int gt = int(blockIdx.y) + k * int(gridDim.y);
        return gt >= P.first[2] ? 2 : gt >= P.first[1] ? 1 : 0;
    };
    auto tile_row0 = [&](int k, int m) {
        return int64_t(int(blockIdx.y) + k * int(gridDim.y) - (m == 0 ? 0 : m == 1 ? P.first[1] : P.first[2])) * kRowsPerTile;
    };
    Copies<T, MT, NT, WM, SWIGLU> cp(P, a, col0, gpairs, gcnt);
    if constexpr (G) cp.n_out = e_row0 + P.w[0].n_out;  // rows of the stack up to this expert's end
    // The issue position (tile ki, stage si) runs kStages - 1 ahead of the compute position.
    int ki = 0, si = 0;
    auto issue = [&](bool with_weights, bool with_acts) {
        const SmemAddr slot = smem_s + ((ki * n_st + si) % S) * L::kSlot;
        if (with_weights) {
            const int m = tile_mat(ki);
            if (m != cp.mat) cp.set_matrix(P, m);
            cp.weights(slot, e_row0 + tile_row0(ki, m), si * L::kChunks, n_chunks(si));
        }
        if (with_acts) cp.acts(slot, si * L::kChunks, n_chunks(si));
    };
    auto advance = [&]() {
        if (++si == n_st) si = 0, ++ki;
    };
    int par[MT][2];  // Q6_K: parity of the first sb entry of this lane's rows in the current tile
    auto set_par = [&](int64_t row0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) par[mt][h] = int(((row0 + cp.tile_row(rb + mt * kMmaM + g + 8 * h)) * (nc / 8)) & 1);
    };
    float acc[MT][NT][4];
    auto clear = [&]() {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
    };
    clear();
    int cm = tile_mat(0);  // the compute position's matrix
    set_par(e_row0 + tile_row0(0, cm));

    // Prologue: the first stages' weights go out before pdl_wait (they depend on no
    // earlier kernel, launch.h), then their activations; group j completes stage j.
    for (int j = 0; j < S - 1 && j < n_seq; ++j) issue(true, false), advance();
    if constexpr (!G) {  // (grouped: waited above)
        pdl_wait();
        pdl_trigger();
    }
    ki = 0, si = 0;  // the same positions again, for their activations
    for (int j = 0; j < S - 1; ++j) {
        if (j < n_seq) issue(false, true), advance();
        cp_async_commit();
    }
    for (int q = 0, k = 0, st = 0; q < n_seq; ++q) {  // compute position q: tile k, stage st
        cp_async_wait<S - 2>();  // this thread's copies of stage q have landed
        __syncthreads();         // everyone's; and everyone is done with stage q - 1's slot
        if (q + S - 1 < n_seq) issue(true, true), advance();
        cp_async_commit();  // (empty past the end: the group count stays in step)
        const int slot = q % S;
        compute_stage<T, MT, NT, WM>(smem + slot * L::kSlot, smem_s + slot * L::kSlot, n_chunks(st), st, par, acc);
        if (++st == n_st) {  // the tile is done: its outputs, then the next tile from zero
            float* y = cm == 0 ? P.y[0] : cm == 1 ? P.y[1] : P.y[2];
            const int64_t n_out = cm == 0 ? P.w[0].n_out : cm == 1 ? P.w[1].n_out : P.w[2].n_out;
            store_tile<T, MT, NT, WM, SWIGLU, G>(reinterpret_cast<float*>(smem + S * L::kSlot), acc, tile_row0(k, cm),
                                                 col0, n_out, G ? gcnt : a.rows, y, gpairs);
            clear();
            st = 0, ++k;
            cm = tile_mat(k);
            set_par(e_row0 + tile_row0(k, cm));
        }
    }
    cp_async_wait<0>();
}

// An integer tuning override from the environment, or fallback when unset or empty.
int env_int(const char* name, int fallback) { return env::integer(name, fallback); }

// Whether blocks walk several row tiles (grid: about one block per SM) or take one
// each; VEGA_GPU_MMA_PERSIST=0 turns it off (read once).
bool mma_persistent() {
    static const bool on = env_int("VEGA_GPU_MMA_PERSIST", 1) != 0;
    return on;
}

// Activation rows per block: 16 up to 16 rows, 32 up to 32, else 64 per column group
// (x = column groups, adjacent in launch order, so a row tile's weights come from
// DRAM once and from L2 for the other groups).
template <GgmlType T, int NT, int WM, bool SW>
bool launch_nt(const MmaMats& P, const ops::Act& a, void* s) {
    constexpr int MT = 2;
    using L = Ring<T, MT, NT, WM>;
    // (4 row groups: plain launches only; grouped experts keep at most 2, as measured)
    constexpr bool kGrouped = WM <= 2;
    if (!kGrouped && P.grouped) return false;
    static PerDevice<bool> ok;
    if (!ok.get([] {
            if (!allow_dynamic_smem(matmul_mma_k<T, MT, NT, WM, SW, false>, L::kBytes)) return false;
            if constexpr (kGrouped) return allow_dynamic_smem(matmul_mma_k<T, MT, NT, WM, SW, true>, L::kBytes);
            return true;
        }))
        return false;
    const int rows_per_tile = SW ? WM * kMmaM : L::kRows;
    MmaMats Q = P;
    for (int m = 0; m < 3; ++m)
        Q.first[m + 1] = Q.first[m] + (m < Q.n_mat ? int((Q.w[m].n_out + rows_per_tile - 1) / rows_per_tile) : 0);
    const int64_t tiles = Q.first[3];
    // Grouped: x = the plan's work items at most (column groups of kCols pairs per active
    // expert: ceil(pairs / kCols) + active experts); blocks walk row tiles as below (a
    // prompt's few hundred items: each block all of its expert's tiles, about two blocks
    // per SM in all).
    const int64_t pairs = int64_t(a.rows) * (Q.per_slot ? 1 : Q.n_used);
    const int cols = Q.grouped ? int((pairs + L::kCols - 1) / L::kCols + std::min<int64_t>(Q.plan_slots, pairs))
                               : (a.rows + L::kCols - 1) / L::kCols;
    const int64_t per_col = mma_persistent() ? std::min(tiles, int64_t(std::max(1, (Q.grouped ? 2 : 1) * current_device_sms() / cols)))
                                             : tiles;
    const dim3 grid{unsigned(cols), unsigned(per_col)};
    if constexpr (kGrouped) {
        if (Q.grouped) {
            launch_smem(matmul_mma_k<T, MT, NT, WM, SW, true>, grid, dim3(L::kThreads), size_t(L::kBytes), s, Q, a);
            return true;
        }
    }
    launch_smem(matmul_mma_k<T, MT, NT, WM, SW, false>, grid, dim3(L::kThreads), size_t(L::kBytes), s, Q, a);
    if constexpr (WM == 4) ++ops::mma_wide_launch_count();
    return true;
}

// Tuning overrides of the choice of 4 row groups (A/B), read once: the fewest column
// groups (VEGA_GPU_MMA_WIDE_COLS, default 1) and a 128-row tile's cost in percent of a
// 64-row tile's (VEGA_GPU_MMA_WIDE_COST, default arch::kMmaWideTileCostPct; 0: no tail check).
int mma_wide_min_cols() {
    static const int n = std::max(1, env_int("VEGA_GPU_MMA_WIDE_COLS", 1));
    return n;
}
int mma_wide_cost_pct() {
    static const int n = std::max(0, env_int("VEGA_GPU_MMA_WIDE_COST", arch::kMmaWideTileCostPct));
    return n;
}

// Row groups per block (mma_row_groups.h: the most whose tiles still cover the SMs, 4
// only for 64-column groups, not for grouped experts, and where the rounds pay).
template <int NT, bool SW>
int row_groups(const MmaMats& P, int rows) {
    MmaLaunchShape shape;
    for (int m = 0; m < P.n_mat; ++m) shape.n_out[m] = P.w[m].n_out;
    shape.n_mat = P.n_mat, shape.swiglu = SW, shape.grouped = P.grouped, shape.rows = rows, shape.nt = NT;
    return mma_row_groups(shape, {current_device_sms(), ops::mma_max_row_groups(), mma_wide_min_cols(), mma_wide_cost_pct()});
}

// The launch at the row groups row_groups picks, or fewer where the device lends too
// little shared memory for that ring.
template <GgmlType T, int NT, bool SW>
bool launch_g(const MmaMats& P, const ops::Act& a, void* s) {
    const int wm = row_groups<NT, SW>(P, a.rows);
    if constexpr (NT == 8)
        if (wm == 4 && launch_nt<T, NT, 4, SW>(P, a, s)) return true;
    if (wm >= 2 && launch_nt<T, NT, 2, SW>(P, a, s)) return true;
    return launch_nt<T, NT, 1, SW>(P, a, s);
}

template <GgmlType T, bool SW>
bool launch_t(const MmaMats& P, const ops::Act& a, void* s) {
    const int cols = P.grouped ? P.grouped_cols : a.rows;
    if (cols <= 16) return launch_g<T, 2, SW>(P, a, s);
    if (cols <= 32) return launch_g<T, 4, SW>(P, a, s);
    return launch_g<T, 8, SW>(P, a, s);
}

template <bool SW>
bool dispatch(const MmaMats& P, const ops::Act& a, void* s) {
    switch (P.w[0].type) {
#define VEGA_MMA_CASE(TT) \
    case GgmlType::TT: return launch_t<GgmlType::TT, SW>(P, a, s);
        VEGA_GPU_QUANT_TYPES(VEGA_MMA_CASE)
#undef VEGA_MMA_CASE
        default: return false;
    }
}

// The matmul's scale decode (chunk_scales_f16) of n scale words at byte b0 with their
// sb entries: out[4i..4i+3] = s0, s1, m0, m1 (ops::mma_chunk_scales, for a test).
template <GgmlType T>
__global__ void mma_scales_k(const uint32_t* __restrict__ word, const uint32_t* __restrict__ sb, int n, int b0,
                             uint32_t* __restrict__ out) {
    const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    uint32_t s0, s1, m0, m1;
    chunk_scales_f16<T>(word[i], b0, sb[i], s0, s1, m0, m1);
    out[4 * i] = s0, out[4 * i + 1] = s1, out[4 * i + 2] = m0, out[4 * i + 3] = m1;
}

template <GgmlType T>
bool launch_scales(const uint32_t* word, const uint32_t* sb, int n, int b0, uint32_t* out, void* s) {
    if constexpr (kFmt<T>.scales == GpuScales::kQ2K) {
        return false;  // (its weights come from dequant4_q2k)
    } else {
        launch(mma_scales_k<T>, dim3(unsigned((n + 255) / 256)), dim3(256), s, word, sb, n, b0, out);
        return true;
    }
}

}  // namespace

bool ops::mma_serves(const GpuMat& W) {
    return !is_float_type(W.type) && W.n_chunk > 0 && W.n_chunk % (ops::mma_row_multiple(W.type) / 32) == 0;
}

int ops::mma_max_row_groups() {
    static const int n = [] {
        const int v = env_int("VEGA_GPU_MMA_GROUPS", arch::kMmaMaxRowGroups);
        return std::min(v >= 4 ? 4 : v >= 2 ? 2 : 1, arch::kMmaMaxRowGroups);
    }();
    return n;
}

int ops::mma_min_rows() {
    // The target's table, or VEGA_GPU_MMA_ROWS (0: never), read once.
    static const int n = env_int("VEGA_GPU_MMA_ROWS", arch::kMmaMinRows);
    return mma_device_ok() ? n : 0;
}

namespace {
// Grouped expert matmuls through the tensor cores; VEGA_GPU_MOE_MMA=0 keeps the expert
// matvec (A/B), read once.
bool expert_mma_enabled() {
    static const bool on = env_int("VEGA_GPU_MOE_MMA", 1) != 0;
    return on;
}

// Whether the kernel can take W with `rows` input rows that have their f16 form.
bool mma_shape_ok(const GpuMat& W, int rows) {
    const int min_rows = ops::mma_min_rows();
    if (min_rows <= 0 || rows < min_rows || !ops::mma_serves(W)) return false;
    // The kernels' copy offsets are 32-bit: every plane (at most 64 bytes per chunk: Act::h) under 4 GiB.
    constexpr int64_t kMaxChunks = (int64_t(1) << 32) / 64;
    return W.n_out * W.n_chunk < kMaxChunks && int64_t(rows) * W.n_chunk < kMaxChunks;
}
// Whether the kernel can take W with this input: the shared checks of both entries.
bool mma_ok(const GpuMat& W, const ops::Act& a) { return a.h && !a.ss && mma_shape_ok(W, a.rows); }
}  // namespace

bool ops::reads_h_only(const GpuMat& W, int rows) { return mma_shape_ok(W, rows); }

bool ops::matmul_mma(const GpuMat& W, const GpuMat* U, const Act& a, float* y, void* s) {
    if (!mma_ok(W, a)) return false;
    if (!pairs_with(W, U)) return false;
    MmaMats P;
    P.w[0] = W, P.w[1] = U ? *U : W, P.y[0] = y, P.n_mat = 1;
    return U ? dispatch<true>(P, a, s) : dispatch<false>(P, a, s);
}

bool ops::matmul_mma_experts(const GpuMat& W, const GpuMat* U, int64_t n_out, int n_mat, const ExpertPlan& plan,
                             int rows, int n_used, bool per_slot, const Act& a, float* y, void* s) {
    if (!mma_ok(W, a) || !plan.items || !expert_mma_enabled()) return false;
    if (!pairs_with(W, U)) return false;
    const int pairs = rows * n_used, slots = std::min(n_mat, pairs);
    if (pairs < arch::kMmaExpertPairs * slots) return false;  // too few pairs per expert to fill a tile
    const int avg = pairs / std::max(1, slots);
    MmaMats P;
    P.w[0] = W, P.w[1] = U ? *U : W, P.y[0] = y, P.n_mat = 1;
    P.w[0].n_out = P.w[1].n_out = n_out;  // rows per expert (the planes hold all n_mat)
    P.grouped = true, P.plan = plan, P.n_used = n_used, P.per_slot = per_slot, P.plan_slots = slots;
    P.grouped_cols = avg <= 16 ? 16 : avg <= 32 ? 32 : 64;
    plan_items(plan, P.grouped_cols, s);
    return U ? dispatch<true>(P, a, s) : dispatch<false>(P, a, s);
}

bool ops::mma_chunk_scales(GgmlType t, const uint32_t* word, const uint32_t* sb, int n, int b0, uint32_t* out,
                           void* s) {
    if (!mma_device_ok() || n <= 0) return false;
    switch (t) {
#define VEGA_MMA_CASE(TT) \
    case GgmlType::TT: return launch_scales<GgmlType::TT>(word, sb, n, b0, out, s);
        VEGA_GPU_QUANT_TYPES(VEGA_MMA_CASE)
#undef VEGA_MMA_CASE
        default: return false;
    }
}

bool ops::matmul_mma3(const GpuMat* W, float* const* y, int n_mat, const Act& a, void* s) {
    if (n_mat < 1 || n_mat > 3) return false;
    MmaMats P;
    for (int m = 0; m < n_mat; ++m) {
        if (!mma_ok(W[m], a) || W[m].type != W[0].type || W[m].n_in != W[0].n_in) return false;
        P.w[m] = W[m], P.y[m] = y[m];
    }
    P.n_mat = n_mat;
    return dispatch<false>(P, a, s);
}

#else  // gfx906 (HIP, or its emulation on NVIDIA): no tensor-core path; the matvec kernels serve every batch.

int ops::mma_min_rows() { return 0; }
int ops::mma_max_row_groups() { return 1; }
bool ops::mma_serves(const GpuMat&) { return false; }
bool ops::reads_h_only(const GpuMat&, int) { return false; }
bool ops::matmul_mma(const GpuMat&, const GpuMat*, const Act&, float*, void*) { return false; }
bool ops::matmul_mma3(const GpuMat*, float* const*, int, const Act&, void*) { return false; }
bool ops::mma_chunk_scales(GgmlType, const uint32_t*, const uint32_t*, int, int, uint32_t*, void*) { return false; }
bool ops::matmul_mma_experts(const GpuMat&, const GpuMat*, int64_t, int, const ExpertPlan&, int, int, bool, const Act&,
                             float*, void*) {
    return false;
}

#endif

}  // namespace vega::gpu
