// A value computed once per device: function attributes (the dynamic shared memory
// a kernel may use) and device properties belong to one device, so with several
// devices in one process a plain function-local `static` would serve only the first.
#pragma once
#include "backend/gpu/runtime.h"

namespace vega::gpu {

template <class T>
class PerDevice {
public:
    // make() for the current device the first time it asks, its value afterwards.
    template <class F>
    T get(F make) {
        const int d = rt::current_device();
        if (d < 0 || d >= kMaxDevices) return make();
        if (!set_[d]) v_[d] = make(), set_[d] = true;
        return v_[d];
    }

private:
    static constexpr int kMaxDevices = 64;
    T v_[kMaxDevices] = {};
    bool set_[kMaxDevices] = {};
};

}  // namespace vega::gpu
