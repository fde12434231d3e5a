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

// The current device's SM (CU) count, at least 1, asked of the runtime once per device
// (the launch shapes that fill the device: the tensor-core matmul's persistent grid, the
// prompt attention's m-tiles).
inline int current_device_sms() {
    static PerDevice<int> n;
    return n.get([] {
        const int sms = rt::device_info(rt::current_device()).n_sm;
        return sms > 1 ? sms : 1;
    });
}

}  // namespace vega::gpu
