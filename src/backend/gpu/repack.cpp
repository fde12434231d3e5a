#include "backend/gpu/repack.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/gpu/repacked_elem.h"
#include "core/half.h"
#include "quant/type_table.h"

namespace vega::gpu {

namespace {

constexpr size_t align256(size_t x) { return (x + 255) & ~size_t(255); }

// 32 values (0..15) -> 16 bytes: byte i = v[i] | v[i+16] << 4.
void pack_nibbles(const uint8_t* v, uint8_t* out) {
    for (int i = 0; i < 16; ++i) out[i] = uint8_t((v[i] & 0xF) | ((v[i + 16] & 0xF) << 4));
}

struct Planes {
    uint8_t *qs, *qh, *sc, *sb;
    PlaneSizes ps;
    int64_t n_chunk;
    uint8_t* qs_at(int64_t r, int64_t c) const { return qs + (r * n_chunk + c) * ps.qs; }
    uint8_t* qh_at(int64_t r, int64_t c) const { return qh + (r * n_chunk + c) * ps.qh; }
    uint8_t* sc_at(int64_t r, int64_t c) const { return sc + (r * n_chunk + c) * ps.sc; }
    uint8_t* sb_at(int64_t r, int64_t c) const { return sb + (r * (n_chunk / 8) + c / 8) * ps.sb; }
};

Planes planes_of(GgmlType t, int64_t n_in, int64_t n_out, uint8_t* buf) {
    const RepackLayout L = repack_layout(t, n_in, n_out);
    return {buf + L.qs, buf + L.qh, buf + L.sc, buf + L.sb, plane_sizes(t), n_in / 32};
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// A chunk's scale bits in the GPU layout (GpuScales): sc of chunk c; sb, the
// super-block's, written with its first chunk. The one per-type piece of the repacker.
template <GgmlType T>
void scale_bits(const typename quant::WeightType<T>::Block& b, int c, uint8_t* sc, uint8_t* sb) {
    using quant::WeightType;
    constexpr GgmlType t = T;
    if constexpr (t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || t == GgmlType::Q8_0 || t == GgmlType::IQ4_NL) {
        put16(sc, b.d);
    } else if constexpr (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) {
        put16(sc, b.d), put16(sc + 2, b.m);
    } else if constexpr (t == GgmlType::Q4_K || t == GgmlType::Q5_K) {
        quant::get_scale_min_k4(c, b.scales, &sc[0], &sc[1]);
        put16(sb, b.d), put16(sb + 2, b.dmin);
    } else if constexpr (t == GgmlType::Q6_K) {
        sc[0] = uint8_t(b.scales[2 * c]), sc[1] = uint8_t(b.scales[2 * c + 1]);
        put16(sb, b.d);
    } else if constexpr (t == GgmlType::Q2_K) {
        sc[0] = b.scales[2 * c], sc[1] = b.scales[2 * c + 1];
        put16(sb, b.d), put16(sb + 2, b.dmin);
    } else if constexpr (t == GgmlType::Q3_K) {
        sc[0] = uint8_t(int8_t(WeightType<t>::scale(b, 2 * c))), sc[1] = uint8_t(int8_t(WeightType<t>::scale(b, 2 * c + 1)));
        put16(sb, b.d);
    } else if constexpr (t == GgmlType::IQ4_XS) {
        sc[0] = uint8_t(int8_t(WeightType<t>::scale(b, c)));  // (1-byte plane)
        put16(sb, b.d);
    } else if constexpr (t == GgmlType::MXFP4) {
        sc[0] = b.e;  // (1-byte plane)
    } else {
        static_assert(t == GgmlType::Q4_0, "a GPU type without scale bits");
    }
}

// Codebook value -> its index (the codes the GPU stores; MXFP4's -0 becomes +0's index).
struct BookIndex {
    int8_t idx[256];
    explicit BookIndex(GpuBook b) {
        for (int i = 15; i >= 0; --i) idx[uint8_t(int8_t(book_value(b, i)))] = int8_t(i);
    }
};

// Row r: each chunk's codes from the type table's decode (quant/type_table.h), stored
// as gpu_format(T) says, and its scale bits.
template <GgmlType T>
void repack_row_t(const uint8_t* src, const Planes& P, int64_t r) {
    using WT = quant::WeightType<T>;
    constexpr GpuFormat f = gpu_format(T);
    static const BookIndex book(f.book == GpuBook::kNone ? GpuBook::kIq4nl : f.book);
    const auto* blocks = reinterpret_cast<const typename WT::Block*>(src);
    quant::ChunkCodes cc;
    uint8_t q[32];
    for (int64_t c = 0; c < P.n_chunk; ++c) {
        const auto& b = blocks[c / WT::kChunks];
        const int cb = int(c % WT::kChunks);
        WT::decode(b, cb, cc);
        for (int i = 0; i < 32; ++i) q[i] = f.book != GpuBook::kNone ? uint8_t(book.idx[uint8_t(cc.q[i])]) : uint8_t(cc.q[i] + f.offset);
        uint8_t* qs = P.qs_at(r, c);
        if constexpr (f.codes == GpuCodes::kBytes) {
            std::memcpy(qs, q, 32);
        } else if constexpr (f.codes == GpuCodes::kNibbles) {
            pack_nibbles(q, qs);
        } else {  // kPairs: word h, byte b, bits 2k = element 16h + 4k + b
            std::memset(qs, 0, 8);
            for (int i = 0; i < 32; ++i) qs[4 * (i / 16) + i % 4] |= uint8_t((q[i] & 3) << (2 * ((i % 16) / 4)));
        }
        if constexpr (f.high_bits == 1) {
            uint32_t h = 0;
            for (int i = 0; i < 32; ++i) h |= uint32_t((q[i] >> f.high_at) & 1) << i;
            std::memcpy(P.qh_at(r, c), &h, 4);
        } else if constexpr (f.high_bits == 2) {
            uint32_t h[2] = {0, 0};
            for (int i = 0; i < 32; ++i) h[i / 16] |= uint32_t((q[i] >> f.high_at) & 3) << (2 * (i % 16));
            std::memcpy(P.qh_at(r, c), h, 8);
        }
        uint8_t sb_unused[4];
        scale_bits<T>(b, cb, P.sc_at(r, c), f.ps.sb ? P.sb_at(r, c) : sb_unused);
    }
}

void repack_row(GgmlType t, const uint8_t* src, const Planes& P, int64_t r) {
    switch (t) {
#define VEGA_REPACK_CASE(TT) \
    case GgmlType::TT: return repack_row_t<GgmlType::TT>(src, P, r);
        VEGA_GPU_QUANT_TYPES(VEGA_REPACK_CASE)
#undef VEGA_REPACK_CASE
        default: break;
    }
}

// The host's bit conversions for repacked_elem.
struct HostConv {
    float f16(uint16_t h) const { return f16_to_f32(h); }
    float bits(uint32_t u) const {
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};

}  // namespace

bool is_repacked(GgmlType t) { return plane_sizes(t).qs != 0; }

RepackLayout repack_layout(GgmlType t, int64_t n_in, int64_t n_out) {
    RepackLayout L;
    if (!is_repacked(t)) {
        L.total = size_t(n_out) * size_t(n_in) * size_t(type_traits(t).type_size);
        return L;
    }
    const PlaneSizes ps = plane_sizes(t);
    const size_t nch = size_t(n_out) * size_t(n_in / 32);
    L.qs = 0;
    L.qh = align256(L.qs + nch * ps.qs);
    L.sc = align256(L.qh + nch * ps.qh);
    L.sb = align256(L.sc + nch * ps.sc);
    L.total = align256(L.sb + nch / 8 * ps.sb);
    return L;
}

GpuMat gpu_mat_view(GgmlType t, int64_t n_in, int64_t n_out, const uint8_t* base) {
    GpuMat m;
    m.type = t;
    m.n_in = n_in, m.n_out = n_out;
    if (!is_repacked(t)) {
        m.qs = base;  // float rows as in the file
        return m;
    }
    const RepackLayout L = repack_layout(t, n_in, n_out);
    const PlaneSizes ps = plane_sizes(t);
    m.n_chunk = n_in / 32;
    m.qs = base + L.qs;
    m.qh = ps.qh ? base + L.qh : nullptr;
    m.sc = ps.sc ? base + L.sc : nullptr;
    m.sb = ps.sb ? base + L.sb : nullptr;
    return m;
}

void repack_rows(GgmlType t, const void* src, int64_t n_in, int64_t n_out, int64_t r0, int64_t r1, uint8_t* dst) {
    const size_t rb = size_t(n_in / type_traits(t).block_size) * size_t(type_traits(t).type_size);
    if (!is_repacked(t)) {
        std::memcpy(dst + size_t(r0) * rb, static_cast<const uint8_t*>(src) + size_t(r0) * rb, size_t(r1 - r0) * rb);
        return;
    }
    const Planes P = planes_of(t, n_in, n_out, dst);
    for (int64_t r = r0; r < r1; ++r) repack_row(t, static_cast<const uint8_t*>(src) + size_t(r) * rb, P, r);
}

void repack_matrix(GgmlType t, const void* src, int64_t n_in, int64_t n_out, uint8_t* dst, int n_threads) {
    if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
    const int64_t per = std::max<int64_t>(64, (n_out + n_threads - 1) / n_threads);
    if (n_out <= per) {
        repack_rows(t, src, n_in, n_out, 0, n_out, dst);
        return;
    }
    std::vector<std::thread> th;
    for (int64_t r0 = 0; r0 < n_out; r0 += per)
        th.emplace_back([=] { repack_rows(t, src, n_in, n_out, r0, std::min(n_out, r0 + per), dst); });
    for (auto& x : th) x.join();
}

void dequantize_repacked_row(GgmlType t, const uint8_t* buf, int64_t n_in, int64_t n_out, int64_t row, float* out) {
    const GpuFormat f = gpu_format(t);
    const GpuMat W = gpu_mat_view(t, n_in, n_out, buf);
    for (int64_t i = 0; i < n_in; ++i) out[i] = repacked_elem(f, W, row, i, HostConv{});
}

}  // namespace vega::gpu
