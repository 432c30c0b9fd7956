// The `baregpu` extension module: devices, the lazy Tensor API, numpy/DLPack interop, the
// profiler and the errors (README.md in this folder). Every backend of the build is registered
// on import, as the tools do at start.
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"
#include "python/bindings.hpp"

PYBIND11_MODULE(baregpu, m) {
    namespace python = baregpu::python;
    m.doc() = "baregpu: a userspace GPU driver stack and compute runtime (AMD, NVIDIA, Adreno, USB eGPUs, the host CPU).";
    baregpu::registry::register_backends(baregpu::hcq::registry());
    python::bind_errors(m);
    python::bind_devices(m);
    python::bind_tensor(m);
    python::bind_interop(m);
    python::bind_profile(m);
    python::bind_testing(m);
}
