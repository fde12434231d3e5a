// vega probe's measurements on a GPU (kernels/probe.cu): the seed studies of gfx906
// (docs: ../shared/seeds), run on whatever device this build serves. Plain C++; the
// study table, units and published gfx906 numbers are engine/probe_report.h's.
#pragma once
#include <string>
#include <vector>

namespace vega::gpu::probe {

// One study's result, by the id of probe_report.h's table. measured false: the target
// has no such instruction (why says so).
struct Value {
    std::string id;
    double value = 0;
    bool measured = false;
    std::string why;
};

// The device and the build's kernel target (the arch table's name: gfx906, nvidia).
struct DeviceSummary {
    std::string name, arch, target;
    int compute_units = 0;
    double memory_gib = 0;
};
DeviceSummary describe(int device);

// Every device study on GPU `device` (quick: shorter runs, for tests and smoke checks).
std::vector<Value> run(int device, bool quick);
// Global memory read bandwidth with 16-byte loads in GB/s: the probe's global_read_dwordx4
// study alone (vega bench's roofline), over 1 GiB, or 256 or 64 MiB where less is free
// (0 where not even that is).
double read_bandwidth_gbs(int device);

}  // namespace vega::gpu::probe
