// baregpu.testing: fault injection on simulated devices, for tests of how errors reach Python
// (drivers/registry.hpp has the same hooks for the C++ tests; each returns False when the device
// is not a simulated chip that can do it), and the C++ loops bench/python_overhead.py compares with.
#include "base/error.hpp"
#include "drivers/registry.hpp"
#include "python/bindings.hpp"

#include <cerrno>
#include <chrono>

namespace baregpu::python {

void bind_testing(py::module_& m) {
    py::module_ t = m.def_submodule("testing", "Fault injection on simulated devices (sim-am, sim-nv), for tests.");
    t.def("inject_dispatch_hang", [](const Device& d, bool hang) { return registry::inject_dispatch_hang(d.open()->device(), hang); },
          py::arg("device"), py::arg("hang"),
          "While set, the compute queue's next dispatch never completes (until cleared).");
    t.def("inject_bus_removal", [](const Device& d, bool gone) { return registry::inject_bus_removal(d.open()->device(), gone); },
          py::arg("device"), py::arg("gone"),
          "Removes the device from its simulated bus: gone=False a surprise removal (reads return all-ones), True a device known "
          "to be gone (every access raises DeviceLostError).");
    // The C++ twins of bench/python_overhead.py's Python loops, run in the same process on the same
    // runtime: what a C++ caller of tensor/ pays for the same calls.
    t.def(
        "cpp_lazy_ops",
        [](const tensor::Tensor& x, int64_t count) {
            py::gil_scoped_release unlocked;
            const auto t0 = std::chrono::steady_clock::now();
            for (int64_t i = 0; i < count; ++i) x.add(x);
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        },
        py::arg("x"), py::arg("count"), "Seconds to record x.add(x) `count` times in C++.");
    t.def(
        "cpp_launches",
        [](const tensor::Tensor& x, int64_t count) {
            py::gil_scoped_release unlocked;
            const auto t0 = std::chrono::steady_clock::now();
            for (int64_t i = 0; i < count; ++i) x.scalar(1.0).add(x).realize();
            x.runtime().device().synchronize();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        },
        py::arg("x"), py::arg("count"), "Seconds for `count` launches of x.scalar(1.0).add(x).realize() in C++, then a synchronize.");
    // Each C++ error type the library throws, thrown here: what the translation (errors.cpp) gives Python.
    t.def(
        "throw_error",
        [](const std::string& kind, const std::string& device, const std::string& message) {
            if (kind == "Error") throw Error(device, message);
            if (kind == "TimeoutError") throw TimeoutError(device, message);
            if (kind == "DeviceLostError") throw DeviceLostError(device, message);
            if (kind == "ProtocolError") throw ProtocolError(device, message);
            if (kind == "BusyError") throw BusyError(device, 4242, message);
            if (kind == "UnsupportedError") throw UnsupportedError(device, message);
            if (kind == "FirmwareError") throw FirmwareError(device, "header.version", 8, "1", message);
            if (kind == "SystemError") throw SystemError(device, message, ENOENT);
            throw py::value_error("throw_error: no C++ error type " + kind);
        },
        py::arg("kind"), py::arg("device"), py::arg("message"),
        "Throws the C++ error `kind` (BusyError with owner pid 4242; FirmwareError for file `device`, field header.version at "
        "offset 8, expected 1, found `message`; SystemError with ENOENT).");
}

}  // namespace baregpu::python
