#include "backend/gpu/repack.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/half.h"
#include "quant/kscale.h"

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

void repack_row(GgmlType t, const uint8_t* src, const Planes& P, int64_t r) {
    const int64_t nc = P.n_chunk;
    uint8_t v[32];
    switch (t) {
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q5_0:
        case GgmlType::Q5_1: {
            // These blocks already use the nibble order of the GPU layout.
            const bool has_m = t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
            const bool has_h = t == GgmlType::Q5_0 || t == GgmlType::Q5_1;
            const int bsz = type_traits(t).type_size;
            for (int64_t c = 0; c < nc; ++c) {
                const uint8_t* b = src + c * bsz;
                int off = has_m ? 4 : 2;
                std::memcpy(P.sc_at(r, c), b, size_t(off));  // d (, m)
                if (has_h) {
                    std::memcpy(P.qh_at(r, c), b + off, 4);
                    off += 4;
                }
                std::memcpy(P.qs_at(r, c), b + off, 16);
            }
            break;
        }
        case GgmlType::Q8_0:
            for (int64_t c = 0; c < nc; ++c) {
                const auto* b = reinterpret_cast<const BlockQ8_0*>(src) + c;
                put16(P.sc_at(r, c), b->d);
                std::memcpy(P.qs_at(r, c), b->qs, 32);
            }
            break;
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
            for (int64_t sbi = 0; sbi < nc / 8; ++sbi) {
                const uint8_t *scales, *qs, *qh = nullptr;
                uint16_t d, dmin;
                if (t == GgmlType::Q4_K) {
                    const auto* b = reinterpret_cast<const BlockQ4_K*>(src) + sbi;
                    d = b->d, dmin = b->dmin, scales = b->scales, qs = b->qs;
                } else {
                    const auto* b = reinterpret_cast<const BlockQ5_K*>(src) + sbi;
                    d = b->d, dmin = b->dmin, scales = b->scales, qs = b->qs, qh = b->qh;
                }
                uint8_t sc[8], m[8];
                quant::unpack_scales_mins_k4(scales, sc, m);
                for (int j = 0; j < 8; ++j) {
                    const int64_t c = sbi * 8 + j;
                    const int g = j / 2, hi = j % 2;  // 64-element group, which nibble
                    uint32_t h = 0;
                    for (int l = 0; l < 32; ++l) {
                        v[l] = uint8_t(hi ? qs[32 * g + l] >> 4 : qs[32 * g + l] & 0xF);
                        if (qh && (qh[l] >> j) & 1) h |= 1u << l;
                    }
                    pack_nibbles(v, P.qs_at(r, c));
                    if (qh) std::memcpy(P.qh_at(r, c), &h, 4);
                    P.sc_at(r, c)[0] = sc[j];
                    P.sc_at(r, c)[1] = m[j];
                }
                uint8_t* s = P.sb_at(r, sbi * 8);
                put16(s, d);
                put16(s + 2, dmin);
            }
            break;
        case GgmlType::Q6_K:
            for (int64_t sbi = 0; sbi < nc / 8; ++sbi) {
                const auto* b = reinterpret_cast<const BlockQ6_K*>(src) + sbi;
                for (int j = 0; j < 8; ++j) {
                    const int64_t c = sbi * 8 + j;
                    uint32_t h[2] = {0, 0};
                    for (int i = 0; i < 32; ++i) {
                        const int e = 32 * j + i;  // element in the super-block
                        const int n = e / 128, q = (e % 128) / 32, l = e % 32;
                        const uint8_t lo = uint8_t((b->ql[64 * n + l + 32 * (q & 1)] >> (4 * (q >> 1))) & 0xF);
                        const uint32_t hb = (b->qh[32 * n + l] >> (2 * q)) & 3u;
                        v[i] = lo;
                        h[i / 16] |= hb << (2 * (i % 16));
                    }
                    pack_nibbles(v, P.qs_at(r, c));
                    std::memcpy(P.qh_at(r, c), h, 8);
                    P.sc_at(r, c)[0] = uint8_t(b->scales[2 * j]);
                    P.sc_at(r, c)[1] = uint8_t(b->scales[2 * j + 1]);
                }
                put16(P.sb_at(r, sbi * 8), b->d);
            }
            break;
        default:
            break;
    }
}

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
    const Planes P = planes_of(t, n_in, n_out, const_cast<uint8_t*>(buf));
    auto h16 = [](const uint8_t* p) {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return f16_to_f32(v);
    };
    for (int64_t c = 0; c < P.n_chunk; ++c) {
        const uint8_t* qs = P.qs_at(row, c);
        uint32_t qh[2] = {0, 0};
        if (P.ps.qh) std::memcpy(qh, P.qh_at(row, c), size_t(P.ps.qh));
        const uint8_t* sc = P.sc_at(row, c);
        for (int i = 0; i < 32; ++i) {
            const int nib = i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4;
            const int h5 = int((qh[0] >> i) & 1) << 4;
            float y = 0.f;
            switch (t) {
                case GgmlType::Q4_0: y = h16(sc) * float(nib - 8); break;
                case GgmlType::Q4_1: y = h16(sc) * float(nib) + h16(sc + 2); break;
                case GgmlType::Q5_0: y = h16(sc) * float((nib | h5) - 16); break;
                case GgmlType::Q5_1: y = h16(sc) * float(nib | h5) + h16(sc + 2); break;
                case GgmlType::Q8_0: y = h16(sc) * float(int8_t(qs[i])); break;
                case GgmlType::Q4_K:
                case GgmlType::Q5_K: {
                    const uint8_t* sb = P.sb_at(row, c);
                    const int q = t == GgmlType::Q4_K ? nib : (nib | h5);
                    y = h16(sb) * float(sc[0]) * float(q) - h16(sb + 2) * float(sc[1]);
                    break;
                }
                case GgmlType::Q6_K: {
                    const int h2 = int((qh[i / 16] >> (2 * (i % 16))) & 3);
                    y = h16(P.sb_at(row, c)) * float(int8_t(sc[i / 16])) * float((nib | (h2 << 4)) - 32);
                    break;
                }
                default: break;
            }
            out[c * 32 + i] = y;
        }
    }
}

}  // namespace vega::gpu
