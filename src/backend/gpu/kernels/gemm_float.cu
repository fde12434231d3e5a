// The GEMM for float weights (F32, F16, BF16): the dot4 GEMM's tile and staging
// (gemm_dot4.cu) with f32 values in LDS and f32 FMA, for the rows where the matvec
// would re-read the weights once per 8 activation rows.
//
//   y [rows][n_out] = x [rows][n_in] @ W^T     x: the f32 input (Act::x), each value
//                                              rounded to the weight's type first, as
//                                              the CPU backend and matvec_f do
//   SWIGLU: y = silu(x @ G^T) * (x @ U^T)
//
// Block: 64 weight rows x 64 input rows (arch::kGemmTile's bm, bn, tm, tn), K steps of
// 16 elements. Every thread stages 4 consecutive elements of one weight row (F32: one
// dwordx4 load; F16/BF16: 8 bytes) and 4 of one input row (dwordx4), converted to f32,
// into one of two LDS stages; rows of 16 floats plus one vec4 (80 bytes: the dot4 GEMM's
// conflict-free stride). Per 4 elements a thread reads 4 weight and 4 input vec4s
// (ds_read_b128) into 16 independent FMA chains. The next step is loaded before this
// step's FMAs and stored after them: one barrier per step. Widths must be multiples of
// 4 (whole vector loads); a short last step is zero-filled.
// f32 FMA, not v_dot2_f32_f16: BF16 weights do not fit f16, and float weights are rare in
// the files people run (norms and routers stay F32 but are not matmuls of many rows).
// @audit kernel=*gemm_float_k<* min_waves=2 expect=global_load_dwordx4,ds_read_b128,ds_write_b128 loop_inflight=2 loop_trips=1 loop_waits=2 loop_x4 no_flat no_glc
#include "backend/gpu/launch.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/runtime.h"
#include "backend/gpu/wave.h"
#include "backend/gpu/kernels/float_row.h"
#include "backend/gpu/kernels/gemm_cols.h"

namespace vega::gpu {
namespace {

constexpr arch::GemmTile kTile = arch::kGemmTile;
constexpr int kBm = kTile.bm, kBn = kTile.bn, kTm = kTile.tm, kTn = kTile.tn;
constexpr int kRg = kBm / kTm, kCg = kBn / kTn;
constexpr int kThreads = kTile.threads();
constexpr int kK = 16;               // elements per K step
constexpr int kRowFloats = kK + 4;   // an LDS row: 16 floats + one vec4
static_assert(kBm * kK / 4 == kThreads && kBn * kK / 4 == kThreads, "4 weight and 4 input elements per thread and step");
static_assert((kBm / 2) * (kK / 4) % kWave == 0, "SWIGLU: G's and U's rows staged by whole waves");

// 4 consecutive weights of a float-type row from element i (i % 4 == 0).
template <GgmlType T>
__device__ __forceinline__ float4 load4(const uint8_t* row, int64_t i) {
    if constexpr (T == GgmlType::F32) return reinterpret_cast<const float4*>(row)[i / 4];
    const uint2 v = reinterpret_cast<const uint2*>(row)[i / 4];
    if constexpr (T == GgmlType::F16)
        return make_float4(h2f(uint16_t(v.x)), h2f(uint16_t(v.x >> 16)), h2f(uint16_t(v.y)), h2f(uint16_t(v.y >> 16)));
    return make_float4(bf2f(uint16_t(v.x)), bf2f(uint16_t(v.x >> 16)), bf2f(uint16_t(v.y)), bf2f(uint16_t(v.y >> 16)));
}

template <GgmlType T, bool SW>
__global__ void __launch_bounds__(kThreads) VEGA_WAVES(arch::kGemmWaves, arch::kGemmWaves)
    gemm_float_k(GpuMat W, GpuMat U, const float* __restrict__ x, GemmCols cols, float* __restrict__ y) {
    __shared__ __align__(16) float s_w[2][kBm][kRowFloats];
    __shared__ __align__(16) float s_x[2][kBn][kRowFloats];
    constexpr int kOutRows = SW ? kBm / 2 : kBm;
    const int64_t n_out = W.n_out, n_in = W.n_in;
    const int64_t o0 = int64_t(blockIdx.y) * kOutRows;
    const int tid = int(threadIdx.x), tr = tid % kRg, tc = tid / kRg;
    const int steps = int((n_in + kK - 1) / kK);
    constexpr size_t kEsz = T == GgmlType::F32 ? 4 : 2;

    // This thread's 4 elements: row lr, elements 4q..4q+3 of the step.
    const int q = tid % (kK / 4), lr = tid / (kK / 4);
    const bool up = SW && wave_in_block_uniform() * kWave >= (kBm / 2) * (kK / 4);
    const uint8_t* wplane = up ? U.qs : W.qs;

    pdl_wait();
    pdl_trigger();
    const TileCols tcols = tile_cols<kBn>(cols, n_out);
    if (tcols.none) return;
    const uint8_t* wr = wplane + (tcols.wbase + min(o0 + (up ? lr - kBm / 2 : lr), n_out - 1)) * n_in * int64_t(kEsz);
    const float* xr = x + act_row(cols, tcols, lr) * n_in;

    struct Stage {
        float4 w, x;
    };
    // A step's loads (an element past the row's end reads the row's last 4 again and is
    // zeroed at the store).
    auto load = [&](int step) {
        const int64_t i = min(int64_t(step) * kK + 4 * q, n_in - 4);
        return Stage{load4<T>(wr, i), reinterpret_cast<const float4*>(xr)[i / 4]};
    };
    auto store = [&](int step, int st, const Stage& r) {
        const bool valid = int64_t(step) * kK + 4 * q < n_in;
        const float4 w = valid ? r.w : make_float4(0.f, 0.f, 0.f, 0.f);
        const float4 v = valid ? make_float4(round_to<T>(r.x.x), round_to<T>(r.x.y), round_to<T>(r.x.z), round_to<T>(r.x.w))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4*>(&s_w[st][lr][4 * q]) = w;
        *reinterpret_cast<float4*>(&s_x[st][lr][4 * q]) = v;
    };

    float acc[kTm][kTn];
#pragma unroll
    for (int i = 0; i < kTm; ++i)
#pragma unroll
        for (int j = 0; j < kTn; ++j) acc[i][j] = 0.f;

    store(0, 0, load(0));
    __syncthreads();
    for (int k = 0; k < steps; ++k) {
        const int st = k & 1;
        const bool more = k + 1 < steps;
        const Stage next = load(min(k + 1, steps - 1));
#pragma unroll 1
        for (int e = 0; e < kK; e += 4) {
            float4 wv[kTm], xv[kTn];
#pragma unroll
            for (int i = 0; i < kTm; ++i) wv[i] = *reinterpret_cast<const float4*>(&s_w[st][tr + kRg * i][e]);
#pragma unroll
            for (int j = 0; j < kTn; ++j) xv[j] = *reinterpret_cast<const float4*>(&s_x[st][tc + kCg * j][e]);
#pragma unroll
            for (int i = 0; i < kTm; ++i)
#pragma unroll
                for (int j = 0; j < kTn; ++j) {
                    float a = acc[i][j];
                    a = fmaf(wv[i].x, xv[j].x, a);
                    a = fmaf(wv[i].y, xv[j].y, a);
                    a = fmaf(wv[i].z, xv[j].z, a);
                    a = fmaf(wv[i].w, xv[j].w, a);
                    acc[i][j] = a;
                }
        }
        if (more) store(k + 1, st ^ 1, next);
        __syncthreads();
    }

    store_gemm_tile<kTm, kTn, kRg, kCg, SW>(acc, cols, tcols, o0, tr, tc, n_out, y);
}

template <bool SW>
bool dispatch(const GpuMat& W, const GpuMat& U, const float* x, const GemmCols& cols, unsigned col_blocks, float* y,
              void* s) {
    constexpr int kOutRows = SW ? kBm / 2 : kBm;
    const dim3 grid(col_blocks, unsigned((W.n_out + kOutRows - 1) / kOutRows));
    switch (W.type) {
        case GgmlType::F32: launch(gemm_float_k<GgmlType::F32, SW>, grid, dim3(kThreads), s, W, U, x, cols, y); return true;
        case GgmlType::F16: launch(gemm_float_k<GgmlType::F16, SW>, grid, dim3(kThreads), s, W, U, x, cols, y); return true;
        case GgmlType::BF16: launch(gemm_float_k<GgmlType::BF16, SW>, grid, dim3(kThreads), s, W, U, x, cols, y); return true;
        default: return false;
    }
}

}  // namespace

bool ops::gemm_float(const GpuMat& W, const GpuMat* U, const Act& a, float* y, void* s) {
    if (!a.x || a.ss || !is_float_type(W.type) || W.n_in % 4 != 0 || W.n_in < 4 || !gemm_weights_fit<kBm>(W, U))
        return false;
    GemmCols cols;
    cols.rows = a.rows;
    const unsigned blocks = unsigned((a.rows + kBn - 1) / kBn);
    const bool ok = U ? dispatch<true>(W, *U, a.x, cols, blocks, y, s) : dispatch<false>(W, W, a.x, cols, blocks, y, s);
    gemm_launch_count() += ok;
    return ok;
}

}  // namespace vega::gpu
