// baregpu.testing: fault injection on simulated devices, for tests of how errors reach Python
// (drivers/registry.hpp has the same hooks for the C++ tests). Each returns False when the
// device is not a simulated chip that can do it.
#include "base/error.hpp"
#include "drivers/registry.hpp"
#include "python/bindings.hpp"

#include <cerrno>

namespace baregpu::python {

void bind_testing(py::module_& m) {
    py::module_ t = m.def_submodule("testing", "Fault injection on simulated devices (sim-am, sim-nv), for tests.");
    t.def("inject_dispatch_hang", [](const Device& d, bool hang) { return registry::inject_dispatch_hang(d.runtime->device(), hang); },
          py::arg("device"), py::arg("hang"),
          "While set, the compute queue's next dispatch never completes (until cleared).");
    t.def("inject_bus_removal", [](const Device& d, bool gone) { return registry::inject_bus_removal(d.runtime->device(), gone); },
          py::arg("device"), py::arg("gone"),
          "Removes the device from its simulated bus: gone=False a surprise removal (reads return all-ones), True a device known "
          "to be gone (every access raises DeviceLostError).");
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
