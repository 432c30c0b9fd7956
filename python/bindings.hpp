// What the files of the Python module share: the device handle Python sees, and the conversions
// between numpy arrays, dtypes and tensors. module.cpp assembles the module from the bind_*
// functions, one per file.
#pragma once

#include "tensor/tensor.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <pybind11/pybind11.h>

namespace baregpu::python {

namespace py = pybind11;

// baregpu.Device: an open HCQ device and its tensor runtime. One per URI until closed (opening a
// GPU boots it, so a name passed twice must not open it twice).
struct Device {
    std::shared_ptr<tensor::Runtime> runtime;  // null once close()d
    // The runtime; throws ValueError once this handle was closed.
    const std::shared_ptr<tensor::Runtime>& open() const;
};

// The device a `device=` argument names: None (the default device), a URI string, or a Device.
std::shared_ptr<tensor::Runtime> runtime_for(const py::handle& device);
// The Device handle of a runtime the module opened (or the default one).
Device device_of(const std::shared_ptr<tensor::Runtime>& runtime);

// A dtype argument: "float32", "float16", "bfloat16", "int32", "bool", or anything numpy.dtype()
// takes that maps to one of them (float64 and the integer types narrow, as noted in README.md).
compiler::DType parse_dtype(const py::handle& dtype);

// `value` (a numpy array, or anything numpy.asarray takes) as a tensor on `runtime`; `dtype`
// casts it first. Uploads a copy.
tensor::Tensor tensor_from_array(const py::handle& value, const std::shared_ptr<tensor::Runtime>& runtime,
                                 std::optional<compiler::DType> dtype);
// Realizes `t` and waits for its device; then the CPU address of its elements when the device
// memory holding them is mapped for the CPU (the cpu device's is), else nullptr.
std::byte* realized_host_data(const tensor::Tensor& t);
// `t` as a numpy array: one that shares the tensor's memory when realized_host_data() has it
// (bfloat16 aside, which numpy has no type for: widened to float32), else a copy.
py::object to_numpy(const tensor::Tensor& t);

void bind_errors(py::module_& m);
void bind_devices(py::module_& m);
void bind_tensor(py::module_& m);
// The buffer protocol and DLPack on baregpu.Tensor, and baregpu.from_dlpack.
void bind_interop(py::module_& m);
void bind_profile(py::module_& m);
void bind_testing(py::module_& m);

}  // namespace baregpu::python
