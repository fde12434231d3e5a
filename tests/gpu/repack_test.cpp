// The GPU weight layout (repack.h) decodes to exactly what the reference
// dequantizer gives for every quantized type, bit for bit, on random rows (through
// repacked_elem, the decoder the GPU's embedding lookup runs too).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/gpu/repack.h"
#include "quant/quant.h"
#include "quant/type_table.h"

namespace vega::gpu {
namespace {

class RepackTest : public ::testing::TestWithParam<GgmlType> {};

void decodes_like_reference(GgmlType t, int64_t n_in) {
    const int64_t n_out = 7;
    std::mt19937 rng(uint32_t(t) * 7919u + 1);
    std::normal_distribution<float> nd(0.f, 1.f);
    const size_t rb = quant::row_bytes(t, n_in);
    std::vector<uint8_t> src(rb * n_out);
    std::vector<float> row(n_in);
    for (int64_t r = 0; r < n_out; ++r) {
        for (auto& x : row) x = nd(rng);
        quant::quantize_row(t, row.data(), src.data() + r * rb, n_in);
    }
    const RepackLayout L = repack_layout(t, n_in, n_out);
    std::vector<uint8_t> dst(L.total, 0xCD);
    repack_matrix(t, src.data(), n_in, n_out, dst.data(), 3);
    // Rows repacked one by one from the last: a row that wrote past its own planes would
    // now clobber the next row's bytes (the threads of repack_matrix race on them).
    std::vector<uint8_t> rev(L.total, 0xCD);
    for (int64_t r = n_out - 1; r >= 0; --r) repack_rows(t, src.data(), n_in, n_out, r, r + 1, rev.data());
    ASSERT_TRUE(rev == dst) << "rows repacked last to first differ from the whole matrix";
    std::vector<float> ref(n_in), got(n_in);
    for (int64_t r = 0; r < n_out; ++r) {
        quant::dequantize_row(t, src.data() + r * rb, ref.data(), n_in);
        dequantize_repacked_row(t, dst.data(), n_in, n_out, r, got.data());
        for (int64_t i = 0; i < n_in; ++i)
            ASSERT_EQ(got[i], ref[i]) << "row " << r << " elem " << i;  // the same float arithmetic
    }
}

// Rows of 16 chunks, and of 17 for 32-element blocks (a row's scale bytes then end inside
// an 8-byte word: the 1-byte planes of IQ4_XS and MXFP4 must not spill into the next row).
TEST_P(RepackTest, DecodesLikeReference) {
    const GgmlType t = GetParam();
    for (const int64_t n_in : {512, 544}) {
        if (n_in % type_traits(t).block_size != 0) continue;
        SCOPED_TRACE("n_in " + std::to_string(n_in));
        decodes_like_reference(t, n_in);
    }
}

// Every plane a GpuMat points at lies inside the buffer, for the last row of a
// 128k-row matrix too, and planes the type does not use are null (a kernel that
// read the absent qh plane of a Q4_0 token embedding crashed on llama3-8b).
TEST_P(RepackTest, ViewPlanesStayInsideTheBuffer) {
    const GgmlType t = GetParam();
    const int64_t n_in = 4096, n_out = 128256;
    const RepackLayout L = repack_layout(t, n_in, n_out);
    static const uint8_t base_byte = 0;
    const uint8_t* base = &base_byte;  // only addresses are compared
    const GpuMat m = gpu_mat_view(t, n_in, n_out, base);
    const PlaneSizes ps = plane_sizes(t);
    EXPECT_EQ(m.n_chunk, n_in / 32);
    const size_t chunks = size_t(n_out) * size_t(m.n_chunk);
    auto inside = [&](const uint8_t* p, size_t bytes, const char* plane) {
        ASSERT_NE(p, nullptr) << plane;
        EXPECT_LE(size_t(p - base) + bytes, L.total) << plane << " plane ends past the buffer";
    };
    inside(m.qs, chunks * size_t(ps.qs), "qs");
    inside(m.sc, chunks * size_t(ps.sc), "sc");
    if (ps.qh) inside(m.qh, chunks * size_t(ps.qh), "qh");
    else EXPECT_EQ(m.qh, nullptr) << "a type without a qh plane must not point at one";
    if (ps.sb) inside(m.sb, chunks / 8 * size_t(ps.sb), "sb");
    else EXPECT_EQ(m.sb, nullptr) << "a type without super-blocks must not point at an sb plane";
}

// Every type the CPU computes with has a GPU format (a new type is not forgotten on the
// GPU), and the GPU's packed codebooks are the type table's.
TEST(RepackView, EveryQuantizedTypeHasAGpuFormat) {
    for (int id = 0; id < 64; ++id) {
        const GgmlType t = GgmlType(id);
        const bool cpu = quant::with_weight_type(t, []<GgmlType>() {});
        EXPECT_EQ(is_repacked(t), cpu) << (type_traits(t).name ? type_traits(t).name : "?");
    }
    for (int i = 0; i < 16; ++i) {
        EXPECT_EQ(book_value(GpuBook::kIq4nl, i), quant::kIq4nlValues[i]) << i;
        EXPECT_EQ(book_value(GpuBook::kMxfp4, i), quant::kMxfp4Values[i]) << i;
    }
}

// A codebook's two 8-entry tables looked up as NVIDIA's kernels do: the lower by the
// selectors, the upper by the selectors ^ 8 (prmt's sign mode on the other half).
// check(code, lane, lower byte, upper byte) for every code in every byte lane: four
// selector nibbles c0, c1, c1 ^ 5, c0 ^ 10, and bits above them that prmt ignores.
template <class Check>
void each_code_in_each_lane(uint32_t lo0, uint32_t lo1, uint32_t up0, uint32_t up1, Check check) {
    for (uint32_t c0 = 0; c0 < 16; ++c0)
        for (uint32_t c1 = 0; c1 < 16; ++c1) {
            const uint32_t sel = c0 | c1 << 4 | (c1 ^ 5u) << 8 | (c0 ^ 10u) << 12 | 0xABCD0000u;
            const uint32_t lo = prmt_host(lo0, lo1, sel), up = prmt_host(up0, up1, sel ^ 0x88888888u);
            for (int i = 0; i < 4; ++i)
                check(int(sel >> (4 * i)) & 15, i, uint8_t(lo >> (8 * i)), uint8_t(up >> (8 * i)));
        }
}

// NVIDIA's codebook dot (wave.h book_dot8): for every code, the lower table's lookup
// by c plus the upper table's by c ^ 8 (prmt's sign mode on the other half) is the
// book's entry plus the split's bias, in the byte lanes the selectors' nibbles name.
TEST(RepackView, SplitCodebookLookupsAddUpToTheEntries) {
    for (GpuBook b : {GpuBook::kIq4nl, GpuBook::kMxfp4}) {
        const SplitBook t = split_book(b);
        ASSERT_TRUE(t.ok);
        EXPECT_EQ(t.bias, b == GpuBook::kIq4nl ? 0 : -1);
        each_code_in_each_lane(t.lo0, t.lo1, t.up0, t.up1, [&](int c, int i, uint8_t lo, uint8_t up) {
            const int sum = int(int8_t(lo)) + int(int8_t(up));  // signed bytes
            EXPECT_EQ(sum, book_value(b, c) + t.bias) << "book " << int(b) << " code " << c << " lane " << i;
        });
    }
}

// The tensor-core matmul's codebook dequantization (matmul_mma.cu book_dequant8): the
// lower table looked up by the codes minus the upper looked up by codes ^ 8 is the entry,
// every code in every byte lane; both bytes as f16 (1024 + byte) are exact, so is their
// difference.
TEST(RepackView, DiffCodebookLookupsDifferByTheEntries) {
    for (GpuBook b : {GpuBook::kIq4nl, GpuBook::kMxfp4}) {
        const DiffBook t = diff_book(b);
        ASSERT_TRUE(t.ok);
        each_code_in_each_lane(t.lo0, t.lo1, t.up0, t.up1, [&](int c, int i, uint8_t lo, uint8_t up) {
            const int diff = int(lo) - int(up);  // unsigned bytes
            EXPECT_EQ(diff, book_value(b, c)) << "book " << int(b) << " code " << c << " lane " << i;
        });
    }
}

TEST(RepackView, FloatTypesKeepTheirRows) {
    static const uint8_t b = 0;
    const GpuMat m = gpu_mat_view(GgmlType::F16, 64, 3, &b);
    EXPECT_EQ(m.qs, &b);
    EXPECT_EQ(m.qh, nullptr);
    EXPECT_EQ(m.sc, nullptr);
    EXPECT_EQ(m.sb, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Types, RepackTest,
                         ::testing::Values(GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                           GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                           GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4),
                         [](const auto& info) { return std::string(type_traits(info.param).name); });

}  // namespace
}  // namespace vega::gpu
