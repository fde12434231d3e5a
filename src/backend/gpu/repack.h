// Host-side conversion of GGUF weight rows into the GPU layout of gpu_mat.h.
// Plain C++ (no GPU headers) so it is unit-tested on the CPU in CI.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/gpu/gpu_mat.h"

namespace vega::gpu {

// Byte offsets of the planes inside one buffer holding a whole matrix (each
// plane 256-byte aligned), and the buffer size.
struct RepackLayout {
    size_t qs = 0, qh = 0, sc = 0, sb = 0, total = 0;
};
RepackLayout repack_layout(GgmlType t, int64_t n_in, int64_t n_out);

// The GpuMat of a matrix stored at `base` in that layout. Planes the type does not
// use are null, so no kernel can read a neighbour plane (or past the buffer) by
// mistake: a Q4_0 token embedding of a 128k vocabulary once read its absent qh
// plane 20-30 MB past the allocation for high token ids.
GpuMat gpu_mat_view(GgmlType t, int64_t n_in, int64_t n_out, const uint8_t* base);

// True when the type is stored repacked (quantized types); float types are copied.
bool is_repacked(GgmlType t);

// Repacks rows [r0, r1) of src (GGUF rows of type t, n_in elements each) into
// dst (a buffer of repack_layout(t, n_in, n_out).total bytes).
void repack_rows(GgmlType t, const void* src, int64_t n_in, int64_t n_out, int64_t r0, int64_t r1, uint8_t* dst);

// Whole matrix, split over threads (n_threads <= 0: hardware concurrency).
void repack_matrix(GgmlType t, const void* src, int64_t n_in, int64_t n_out, uint8_t* dst, int n_threads = 0);

// Reference decoder of the GPU layout (the same arithmetic the kernels use for
// one element): row `row` -> out[n_in]. For tests.
void dequantize_repacked_row(GgmlType t, const uint8_t* buf, int64_t n_in, int64_t n_out, int64_t row, float* out);

}  // namespace vega::gpu
