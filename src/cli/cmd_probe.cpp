// vega probe: the gfx906 seed studies (dot4/dot8/dot2 throughput, LDS widths and
// column strides, global load widths, lane exchanges, launch gap) run on this machine's
// GPU, printed as markdown (or --json) next to the numbers the seeds measured on an
// MI50. --kernels adds vega's own kernels: the dot4 GEMM's prompt rate as a share of
// the measured dot4 peak, and the decode matvec's weight bandwidth per type as a share
// of the measured read bandwidth (L2-cold: the matrix cycles through copies).
// --render FILE prints a saved --json report as markdown (no GPU needed).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "engine/probe_report.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#ifdef VEGA_HAVE_GPU
#include "backend/gpu/gpu_backend.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/probe.h"
#endif

namespace vega::cli {

namespace {

struct ProbeOptions {
    int device = 0;
    bool json = false, quick = false, kernels = false, tune = false;
    std::string render;
};

#ifdef VEGA_HAVE_GPU
// A weight [n_out][n_in] of type t on the backend: 64 random rows, repeated.
struct TestMatrix {
    gguf::TensorInfo ti;
    std::vector<uint8_t> data;
};
TestMatrix make_matrix(GgmlType t, int64_t n_in, int64_t n_out, std::mt19937& rng) {
    TestMatrix m;
    m.ti.name = "probe";
    m.ti.type = t;
    m.ti.n_dims = 2;
    m.ti.ne[0] = n_in, m.ti.ne[1] = n_out;
    const size_t rb = quant::row_bytes(t, n_in);
    m.data.resize(rb * size_t(n_out));
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_out; ++r) {
        if (r < 64) for (auto& x : row) x = nd(rng);
        quant::quantize_row(t, row.data(), m.data.data() + size_t(r) * rb, n_in);
    }
    m.ti.data = m.data.data();
    m.ti.n_bytes = m.data.size();
    return m;
}

// Seconds per call of `calls` matmuls of the weights in ws (cycled), replayed from one
// captured graph (launch overhead excluded, as in decode), best of 3 timings of 10 replays.
double seconds_per_matmul(Backend& be, const std::vector<Weight>& ws, float* x, float* y, int rows, int64_t n_in,
                          int calls) {
    be.synchronize();
    be.capture_begin();
    be.matmul_input(x, rows, n_in);
    for (int i = 0; i < calls; ++i) be.matmul(ws[size_t(i) % ws.size()], y);
    const int g = be.capture_end();
    be.replay(g);
    be.synchronize();
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 10; ++i) be.replay(g);
        be.synchronize();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    be.release_graph(g);
    return best / (10.0 * calls);
}

// The dot4 GEMM (forced from 9 rows) and, where the target has one, the default
// prompt matmul, on a 4096 x 4096 matrix and 512 activation rows; the decode matvec's
// weight bandwidth on 4096 x 4096 and 11008 x 4096 (one row; with tune, every compiled
// decode shape, VEGA_GPU_TUNING builds).
void kernel_rows(int dev, probe::Report& r, bool tune) {
    auto be = make_gpu_backend(dev);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    const double dot4_peak = probe::value_of(r, "dot4_acc4"), read_bw = probe::value_of(r, "global_read_dwordx4");
    const int64_t n = 4096;
    const int rows = 512;
    be->reserve(rows, 11008);
    std::vector<float> xs(size_t(rows) * size_t(11008));
    for (auto& v : xs) v = nd(rng);
    float* x = static_cast<float*>(be->alloc(xs.size() * 4, "probe input"));
    float* y = static_cast<float*>(be->alloc(size_t(rows) * 11008 * 4, "probe output"));
    be->upload(x, xs.data(), xs.size() * 4);
    const int saved = gpu::ops::gemm_min_rows();
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
        TestMatrix m = make_matrix(t, n, n, rng);
        std::vector<Weight> ws = {be->upload_weight(m.ti)};
        const double ops = 2.0 * double(n) * double(n) * rows;
        gpu::ops::set_gemm_min_rows(9);
        const double tg = seconds_per_matmul(*be, ws, x, y, rows, n, 10);
        r.kernels.push_back({fmt::format("dot4 GEMM {} {}x{}, {} rows", type_traits(t).name, n, n, rows), "TOPS",
                             ops / tg / 1e12,
                             dot4_peak > 0 ? fmt::format("{:.0f}% of dot4_acc4", 100 * ops / tg / 1e12 / dot4_peak) : ""});
        gpu::ops::set_gemm_min_rows(0);
        if (gpu::ops::mma_min_rows() > 0) {
            const double tm = seconds_per_matmul(*be, ws, x, y, rows, n, 10);
            r.kernels.push_back({fmt::format("tensor-core matmul {} {}x{}, {} rows", type_traits(t).name, n, n, rows),
                                 "TOPS", ops / tm / 1e12, fmt::format("dot4 GEMM / this: {:.2f}", tm / tg)});
        }
        gpu::ops::set_gemm_min_rows(saved);
        for (Weight& w : ws) be->release(const_cast<void*>(w.data));
    }
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16}) {
        for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{4096, 4096}, {11008, 4096}}) {
            TestMatrix m = make_matrix(t, n_in, n_out, rng);
            // Copies, cycled, so that the weights come from memory, not the L2: 512 MB in all.
            const int n_copies = int(std::max<size_t>(2, (size_t(512) << 20) / m.data.size() + 1));
            std::vector<Weight> ws;
            for (int i = 0; i < n_copies; ++i) ws.push_back(be->upload_weight(m.ti));
            struct Shape {
                int rows, unroll;
            };
            std::vector<Shape> shapes = {{0, 0}};
            if (tune && t != GgmlType::F16) shapes = {{0, 0}, {1, 2}, {1, 4}, {2, 2}, {2, 4}, {4, 1}, {4, 2}};
            for (const Shape& sh : shapes) {
                gpu::ops::MatvecTuning tu;
                tu.plain.rows = sh.rows, tu.plain.unroll = sh.unroll;
                gpu::ops::set_matvec_tuning(tu);
                const double s = seconds_per_matmul(*be, ws, x, y, 1, n_in, 20);
                const double gbs = double(m.data.size()) / s / 1e9;
                const std::string shape = sh.rows ? fmt::format(", shape {},{}", sh.rows, sh.unroll) : "";
                r.kernels.push_back({fmt::format("matvec {} {}x{}, 1 row{}", type_traits(t).name, n_out, n_in, shape),
                                     "GB/s", gbs,
                                     read_bw > 0 ? fmt::format("{:.0f}% of global_read_dwordx4", 100 * gbs / read_bw) : ""});
            }
            gpu::ops::set_matvec_tuning({});
            for (Weight& w : ws) be->release(const_cast<void*>(w.data));
        }
    }
    be->release(x), be->release(y);
}
#endif

void run_probe(const ProbeOptions& o) {
    if (!o.render.empty()) {
        std::ifstream f(o.render);
        if (!f) fail("cannot open '{}'", o.render);
        std::stringstream ss;
        ss << f.rdbuf();
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(ss.str());
        } catch (const nlohmann::json::exception& e) {
            fail("'{}' is not JSON: {}", o.render, e.what());
        }
        const probe::Report r = probe::from_json(j);
        std::fputs(o.json ? (probe::to_json(r).dump(2) + "\n").c_str() : probe::to_markdown(r).c_str(), stdout);
        return;
    }
#ifdef VEGA_HAVE_GPU
    const int n_dev = gpu_device_count_impl();
    if (n_dev == 0) fail("vega probe: no GPU found (the studies run on a GPU)");
    if (o.device < 0 || o.device >= n_dev) fail("vega probe: no GPU {} (this machine has {})", o.device, n_dev);
    const gpu::probe::DeviceSummary d = gpu::probe::describe(o.device);
    probe::Report r;
    r.device = d.name, r.arch = d.arch, r.target = d.target, r.compute_units = d.compute_units, r.memory_gib = d.memory_gib;
    std::fprintf(stderr, "vega probe: %s (%s), %s studies\n", d.name.c_str(), d.arch.c_str(), o.quick ? "quick" : "full");
    for (const gpu::probe::Value& v : gpu::probe::run(o.device, o.quick)) r.results.push_back({v.id, v.value, v.measured, v.why});
    if (o.kernels) {
        std::fprintf(stderr, "vega probe: kernels (dot4 GEMM, matvec)\n");
        kernel_rows(o.device, r, o.tune);
    }
    std::fputs(o.json ? (probe::to_json(r).dump(2) + "\n").c_str() : probe::to_markdown(r).c_str(), stdout);
#else
    fail("vega probe: this build has no GPU backend (configure with -DVEGA_CUDA=ON or -DVEGA_HIP=ON); --render FILE "
         "prints a saved report");
#endif
}

}  // namespace

void register_probe(CLI::App& app) {
    auto o = std::make_shared<ProbeOptions>();
    auto* c = app.add_subcommand("probe",
                                 "Measure this GPU's instruction, LDS, memory and launch rates (the gfx906 seed studies) "
                                 "and print them next to the MI50's published numbers");
    c->add_option("--device", o->device, "GPU index")->check(CLI::NonNegativeNumber);
    c->add_flag("--json", o->json, "Print the report as JSON");
    c->add_flag("--quick", o->quick, "Shorter runs (a smoke check; the numbers are noisier)");
    c->add_flag("--kernels", o->kernels,
                "Also vega's kernels: the dot4 GEMM (512 rows) against the dot4 peak, the matvec against the read "
                "bandwidth");
    c->add_flag("--tune", o->tune, "With --kernels: every compiled decode matvec shape (VEGA_GPU_TUNING builds)");
    c->add_option("--render", o->render, "Print a saved --json report (as markdown, or --json) instead of measuring");
    c->callback([o] { run_probe(*o); });
}

}  // namespace vega::cli
