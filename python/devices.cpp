// baregpu.devices() and baregpu.Device: what this machine has, and opening one by name.
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"
#include "hcq/types.hpp"
#include "python/bindings.hpp"

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <pybind11/stl.h>
#include <string>

namespace baregpu::python {

namespace {

// Every device the module opened, by the URI it was asked for, for the life of the process.
struct OpenDevices {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<tensor::Runtime>> by_uri;
};

OpenDevices& open_devices() {
    static OpenDevices* d = new OpenDevices();  // emptied at exit (bind_devices), not destroyed with the statics
    return *d;
}

std::shared_ptr<tensor::Runtime> open_runtime(std::string uri) {
    // The default device is $BAREGPU_DEVICE when set: the same device as that name.
    const bool by_default = uri.empty();
    if (const char* env = std::getenv("BAREGPU_DEVICE"); by_default && env && *env) uri = env;
    OpenDevices& d = open_devices();
    {
        std::lock_guard lock(d.mutex);
        if (auto it = d.by_uri.find(uri); it != d.by_uri.end()) return it->second;
    }
    std::shared_ptr<tensor::Runtime> rt;
    {
        py::gil_scoped_release unlocked;  // a GPU's bring-up takes seconds
        rt = uri.empty() ? tensor::Runtime::default_runtime() : tensor::Runtime::for_device(hcq::open_device(uri));
    }
    std::lock_guard lock(d.mutex);
    rt = d.by_uri.emplace(uri, rt).first->second;  // a thread that opened it meanwhile wins
    if (by_default) d.by_uri.emplace(rt->device().name(), rt);  // the default device, under its own name too
    return rt;
}

py::dict entry(const std::string& name, const std::string& kind, const std::string& summary) {
    py::dict d;
    d["name"] = name;
    d["kind"] = kind;
    d["summary"] = summary;
    return d;
}

// The real GPUs each hardware backend finds (whether or not they open now), then the built-in HCQ
// devices: the host CPU and the simulated chips. A backend that cannot list its devices is left
// out, as `baregpu devices` reports it.
py::list list_devices() {
    py::list out;
    for (const hcq::Backend& b : hcq::registry().backends()) {
        if (!b.real_hardware || !b.enumerate) continue;
        std::vector<std::string> names;
        try {
            names = b.enumerate();
        } catch (const std::exception&) {
            continue;
        }
        for (const std::string& name : names) out.append(entry(name, b.scheme, b.description));
    }
    for (const registry::BuiltinDevice& d : registry::builtin_devices()) {
        if (d.hcq_device) out.append(entry(d.name, d.kind, d.summary));
    }
    return out;
}

}  // namespace

std::shared_ptr<tensor::Runtime> runtime_for(const py::handle& device) {
    if (device.is_none()) return open_runtime("");
    if (py::isinstance<py::str>(device)) return open_runtime(device.cast<std::string>());
    if (py::isinstance<Device>(device)) return device.cast<const Device&>().open();
    throw py::type_error("device: a baregpu.Device, a device name such as 'cpu' or 'sim-am:navi31', or None (the default device); got " +
                         std::string(py::str(py::type::of(device))));
}

Device device_of(const std::shared_ptr<tensor::Runtime>& runtime) { return Device{runtime}; }

const std::shared_ptr<tensor::Runtime>& Device::open() const {
    if (!runtime) throw py::value_error("this baregpu.Device was closed; baregpu.Device(name) opens the device again");
    return runtime;
}

namespace {

// Forget the device by every name it was opened under and drop this handle's reference: the
// device closes now unless tensors (or other handles) still hold it, then with the last of them.
void close_device(Device& d) {
    std::shared_ptr<tensor::Runtime> rt = std::move(d.runtime);
    if (!rt) return;
    {
        std::lock_guard lock(open_devices().mutex);
        std::erase_if(open_devices().by_uri, [&](const auto& entry) { return entry.second == rt; });
    }
    py::gil_scoped_release unlocked;  // stopping a GPU's queues waits for them
    rt.reset();
}

}  // namespace

void bind_devices(py::module_& m) {
    // At interpreter exit the devices close (queues stopped, memory returned) unless a tensor
    // still holds one; then it closes with the last such tensor.
    py::module_::import("atexit").attr("register")(py::cpp_function([] {
        std::map<std::string, std::shared_ptr<tensor::Runtime>> open;
        {
            std::lock_guard lock(open_devices().mutex);
            open.swap(open_devices().by_uri);
        }
        py::gil_scoped_release unlocked;
        open.clear();
    }));

    m.def("devices", &list_devices,
          "The devices this machine has: real GPUs first (every one a backend could drive, whether or not it opens now), then the "
          "host CPU and the simulated chips. Each entry is a dict with 'name' (what baregpu.Device takes), 'kind' and 'summary'.");

    py::class_<Device>(m, "Device",
                       "An open HCQ device. baregpu.Device(name) opens it once per process: the same name gives the same device. "
                       "No name: the default device ($BAREGPU_DEVICE, else the first GPU that opens, else cpu).")
        .def(py::init([](const std::optional<std::string>& name) { return Device{open_runtime(name.value_or(""))}; }),
             py::arg("name") = py::none())
        .def_property_readonly("name", [](const Device& d) { return d.open()->device().name(); })
        .def_property_readonly("arch", [](const Device& d) { return d.open()->device().arch(); },
                               "The ISA its code objects target: x86_64, gfx1100, sm_89 ...")
        .def_property_readonly("kernels_launched", [](const Device& d) { return d.open()->kernels_launched(); })
        .def_property_readonly("compile_ms", [](const Device& d) { return d.open()->compile_ms(); },
                               "Milliseconds spent generating code so far (kernel cache misses).")
        .def(
            "synchronize",
            [](const Device& d, std::optional<double> timeout_ms) {
                if (timeout_ms && !(*timeout_ms >= 0 && *timeout_ms <= 86400e3)) {
                    throw py::value_error("timeout_ms: from 0 to a day's milliseconds, or None for BAREGPU_TIMEOUT_MS (default 10 s)");
                }
                py::gil_scoped_release unlocked;
                if (timeout_ms) {
                    d.open()->device().synchronize(std::chrono::duration_cast<hcq::Duration>(std::chrono::duration<double, std::milli>(*timeout_ms)));
                } else {
                    d.open()->device().synchronize();
                }
            },
            py::arg("timeout_ms") = py::none(),
            "Wait until everything submitted to the device is done. Past the timeout the device is hung: TimeoutError, and "
            "DeviceLostError from then on.")
        .def("close", &close_device,
             "Close the device: forgotten by name (baregpu.Device(name) opens it anew), closed once no tensor holds it. This "
             "handle cannot be used after.")
        .def("__enter__", [](const py::object& self) { return self; })
        .def("__exit__", [](Device& d, const py::args&) {
            close_device(d);
            return false;
        })
        .def("__eq__", [](const Device& a, const Device& b) { return a.runtime == b.runtime; })
        .def("__hash__", [](const Device& d) { return std::hash<const void*>()(d.runtime.get()); })
        .def("__repr__", [](const Device& d) { return d.runtime ? "baregpu.Device('" + d.runtime->device().name() + "')" : std::string("baregpu.Device(closed)"); })
        .def("__str__", [](const Device& d) { return d.open()->device().name(); });
}

}  // namespace baregpu::python
