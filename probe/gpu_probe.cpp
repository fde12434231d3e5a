// vega_probe_gpu: device ceilings and per-kernel efficiency on the GPU.
//   1. device-to-device copy bandwidth (read + write bytes / s)
//   2. matvec weight-read bandwidth per type on llama2-7b-shaped matrices
//      (4096 x 4096 and 11008 x 4096), 1 activation row, timed over many calls
//      replayed from one captured graph (launch overhead excluded as in decode),
//      cycling over copies of the matrix so the weights are read from memory.
//      VEGA_PROBE_TUNE=1 adds a row per compiled decode shape (ops::MatvecTuning).
// usage: vega_probe_gpu [device]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/gpu/gpu_backend.h"
#include "backend/gpu/ops.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

using namespace vega;

int main(int argc, char** argv) {
    const int dev = argc > 1 ? std::atoi(argv[1]) : 0;
    if (gpu_device_count_impl() <= dev) {
        std::printf("no GPU %d: nothing to probe\n", dev);
        return 0;
    }
    auto be = make_gpu_backend(dev);
    const double copy = gpu_copy_bandwidth_gbs(dev);
    std::printf("%s\ncopy bandwidth: %.0f GB/s (read + write)\n\n", be->name().c_str(), copy);
    // VEGA_PROBE_TUNE=1: also every decode shape variant (rows per wave, loads in
    // flight) of the plain matvec; needs a build with VEGA_GPU_TUNING=ON.
    const bool tune = std::getenv("VEGA_PROBE_TUNE") && std::string(std::getenv("VEGA_PROBE_TUNE")) == "1";
    std::printf("| type | shape | rows | R,U | us/call | weight GB/s | %% of copy |\n| --- | --- | ---: | --- | ---: | ---: | ---: |\n");
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    be->reserve(8, 11008);
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::F16}) {
        for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{4096, 4096}, {11008, 4096}, {4096, 11008}}) {
            gguf::TensorInfo ti;
            ti.name = "probe";
            ti.type = t;
            ti.ne[0] = n_in, ti.ne[1] = n_out;
            const size_t rb = quant::row_bytes(t, n_in);
            std::vector<uint8_t> data(rb * n_out);
            std::vector<float> row(n_in);
            for (int64_t r = 0; r < n_out; ++r) {
                if (r < 64) for (auto& x : row) x = nd(rng);  // 64 distinct rows, repeated
                quant::quantize_row(t, row.data(), data.data() + r * rb, n_in);
            }
            ti.data = data.data();
            ti.n_bytes = data.size();
            // Copies of the matrix, cycled, so the weights come from memory and not from
            // the L2 (50 MB on the H200): at least 512 MB in all.
            const int n_copies = int(std::max<size_t>(2, (size_t(512) << 20) / data.size() + 1));
            std::vector<Weight> ws;
            for (int i = 0; i < n_copies; ++i) ws.push_back(be->upload_weight(ti));
            std::vector<float> xs(size_t(n_in) * 8);
            for (auto& x : xs) x = nd(rng);
            float* x = static_cast<float*>(be->alloc(xs.size() * 4, "x"));
            float* y = static_cast<float*>(be->alloc(size_t(n_out) * 8 * 4, "y"));
            be->upload(x, xs.data(), xs.size() * 4);
            struct Variant {
                int rows, unroll;  // decode shape (0, 0: the table's)
            };
            const std::vector<Variant> variants = {{0, 0}, {1, 2}, {1, 4}, {2, 2}, {2, 4}, {4, 1}, {4, 2}};
            for (int rows : {1, 4}) {
                for (const Variant& v : variants) {
                    if (rows > 1 && v.rows != 0) continue;
                    if (v.rows && (t == GgmlType::F16 || !tune)) continue;
                    gpu::ops::MatvecTuning tu;
                    tu.plain.rows = v.rows, tu.plain.unroll = v.unroll;
                    gpu::ops::set_matvec_tuning(tu);
                    be->synchronize();
                    be->capture_begin();
                    be->matmul_input(x, rows, n_in);
                    for (int i = 0; i < 20; ++i) be->matmul(ws[size_t(i) % ws.size()], y);
                    const int g = be->capture_end();
                    be->replay(g);
                    be->synchronize();
                    const int reps = 20;
                    const auto t0 = std::chrono::steady_clock::now();
                    for (int i = 0; i < reps; ++i) be->replay(g);
                    be->synchronize();
                    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    const double per = s / (reps * 20);
                    const double gbs = double(data.size()) / per / 1e9;
                    char shape[32] = "table";
                    if (v.rows) std::snprintf(shape, sizeof shape, "%d,%d", v.rows, v.unroll);
                    std::printf("| %s | %lldx%lld | %d | %s | %.1f | %.0f | %.1f%% |\n", type_traits(t).name,
                                (long long)n_out, (long long)n_in, rows, shape, per * 1e6, gbs, 100 * gbs / copy);
                    be->release_graph(g);
                }
            }
            gpu::ops::set_matvec_tuning({});
            be->release(x), be->release(y);
            for (Weight& w : ws) be->release(const_cast<void*>(w.data));
        }
    }
    return 0;
}
