// Zero-copy interop on baregpu.Tensor: the buffer protocol (memoryview, numpy.asarray) and DLPack
// (__dlpack__, __dlpack_device__; baregpu.from_dlpack takes any producer's CPU tensor). Both
// share the realized tensor's memory where the CPU can address it (the cpu device's memory is
// the host's); a GPU's device memory is addressed by baregpu's own queues only, so exporting it
// is refused with a message that says so, and numpy() copies it instead.
#include "base/error.hpp"
#include "python/bindings.hpp"
#include "python/dlpack.hpp"

#include <cstring>
#include <mutex>
#include <fmt/format.h>
#include <vector>

namespace baregpu::python {

using compiler::DType;
using tensor::Tensor;

namespace {

struct BufferView {
    compiler::NodeRef node;  // keeps the memory while the view lives
    std::vector<Py_ssize_t> shape, strides;
};

const char* buffer_format(DType t) {
    switch (t) {
        case DType::float32: return "f";
        case DType::int32: return "i";
        case DType::boolean: return "?";
        case DType::float16: return "e";
        case DType::bfloat16: return nullptr;  // the struct module has no code for it
    }
    return nullptr;
}

// The device memory `t` lives in cannot be handed to the CPU: why, in a message.
std::string not_host_memory(const Tensor& t, const char* what) {
    return fmt::format("{}: the tensor ({} {}) lives in the device's own memory, which only baregpu's queues address; numpy() "
                       "gives a host copy",
                       what, compiler::dtype_name(t.dtype()), compiler::shape_string(t.shape()));
}

extern "C" int tensor_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
    try {
        const Tensor& t = py::handle(obj).cast<const Tensor&>();
        const char* format = buffer_format(t.dtype());
        if (!format) {
            PyErr_SetString(PyExc_BufferError, "bfloat16 has no buffer-protocol format; use __dlpack__ or numpy() (float32)");
            return -1;
        }
        std::byte* data = realized_host_data(t);
        if (!data) {
            PyErr_SetString(PyExc_BufferError, (t.runtime().device().name() + ": " + not_host_memory(t, "buffer protocol")).c_str());
            return -1;
        }
        auto* info = new BufferView{t.node(), {}, {}};
        const Py_ssize_t itemsize = compiler::dtype_bytes(t.dtype());
        info->shape.assign(t.shape().begin(), t.shape().end());
        info->strides.resize(info->shape.size());
        Py_ssize_t stride = itemsize;
        for (size_t i = info->shape.size(); i-- > 0;) {
            info->strides[i] = stride;
            stride *= info->shape[i];
        }
        view->buf = data;
        view->obj = obj;
        Py_INCREF(obj);
        view->len = Py_ssize_t(t.numel()) * itemsize;
        view->itemsize = itemsize;
        view->readonly = 0;
        view->ndim = int(info->shape.size());
        view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(format) : nullptr;
        view->shape = (flags & PyBUF_ND) ? info->shape.data() : nullptr;
        view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? info->strides.data() : nullptr;
        view->suboffsets = nullptr;
        view->internal = info;
        return 0;
    } catch (py::error_already_set& e) {
        e.restore();
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_BufferError, e.what());
    }
    return -1;
}

extern "C" void tensor_releasebuffer(PyObject*, Py_buffer* view) { delete static_cast<BufferView*>(view->internal); }

// ---- DLPack ----------------------------------------------------------------------------------

struct Exported {
    dlpack::DLManagedTensor managed{};
    compiler::NodeRef node;
    std::vector<int64_t> shape;
};

dlpack::DLDataType dl_dtype(DType t) {
    switch (t) {
        case DType::float32: return {dlpack::kDLFloat, 32, 1};
        case DType::int32: return {dlpack::kDLInt, 32, 1};
        case DType::boolean: return {dlpack::kDLBool, 8, 1};
        case DType::float16: return {dlpack::kDLFloat, 16, 1};
        case DType::bfloat16: return {dlpack::kDLBfloat, 16, 1};
    }
    return {dlpack::kDLFloat, 32, 1};
}

std::optional<DType> from_dl_dtype(dlpack::DLDataType d) {
    if (d.lanes != 1) return std::nullopt;
    if (d.code == dlpack::kDLFloat && d.bits == 32) return DType::float32;
    if (d.code == dlpack::kDLFloat && d.bits == 16) return DType::float16;
    if (d.code == dlpack::kDLBfloat && d.bits == 16) return DType::bfloat16;
    if (d.code == dlpack::kDLInt && d.bits == 32) return DType::int32;
    if (d.code == dlpack::kDLBool && d.bits == 8) return DType::boolean;
    return std::nullopt;
}

// (device type, id) as __dlpack_device__ reports it, by the device's vendor (its URI scheme: a
// simulated NVIDIA chip may run x86-64 code, but its memory is the GPU's): ROCm for AMD, CUDA for
// NVIDIA, OpenCL for Adreno, the host for the cpu device.
std::pair<int32_t, int32_t> dl_device(const Tensor& t) {
    const std::string& name = t.runtime().device().name();
    const std::string scheme = name.substr(0, name.find_first_of(":?"));
    if (scheme == "am" || scheme == "sim-am") return {dlpack::kDLROCM, 0};
    if (scheme == "nv" || scheme == "sim-nv" || scheme == "sim-nvrm") return {dlpack::kDLCUDA, 0};
    if (scheme == "qcom" || scheme == "sim-qcom") return {dlpack::kDLOpenCL, 0};
    return {dlpack::kDLCPU, 0};
}

extern "C" void dlpack_capsule_destructor(PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, dlpack::kUsedCapsuleName)) return;  // a consumer took it and calls the deleter
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    auto* managed = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(capsule, dlpack::kCapsuleName));
    if (managed && managed->deleter) managed->deleter(managed);
    if (!managed) PyErr_WriteUnraisable(capsule);
    PyErr_Restore(type, value, traceback);
}

py::capsule export_dlpack(const Tensor& t, const py::object& stream) {
    // A GPU's tensor is refused before anything is computed for it.
    std::byte* data = dl_device(t).first == dlpack::kDLCPU ? realized_host_data(t) : nullptr;
    if (!data) throw UnsupportedError(t.runtime().device().name(), not_host_memory(t, "__dlpack__"));
    if (!stream.is_none()) throw py::value_error("__dlpack__: stream must be None for a CPU tensor (the DLPack protocol)");
    auto* e = new Exported();
    e->node = t.node();
    e->shape.assign(t.shape().begin(), t.shape().end());
    e->managed.dl_tensor = {data, {dlpack::kDLCPU, 0}, int32_t(e->shape.size()), dl_dtype(t.dtype()), e->shape.data(), nullptr, 0};
    e->managed.manager_ctx = e;
    e->managed.deleter = [](dlpack::DLManagedTensor* self) { delete static_cast<Exported*>(self->manager_ctx); };
    PyObject* capsule = PyCapsule_New(&e->managed, dlpack::kCapsuleName, dlpack_capsule_destructor);
    if (!capsule) {
        delete e;
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(capsule);
}

// A DLPack producer's CPU tensor, copied into a tensor on `device` (any strides).
Tensor import_dlpack(const py::object& producer, const py::object& device) {
    if (py::hasattr(producer, "__dlpack_device__")) {
        auto dev = producer.attr("__dlpack_device__")().cast<std::pair<int32_t, int32_t>>();
        if (dev.first != dlpack::kDLCPU) {
            throw UnsupportedError("", fmt::format("from_dlpack: the producer's memory is on DLPack device type {} (id {}); baregpu imports "
                                                   "host memory (kDLCPU = 1) only",
                                                   dev.first, dev.second));
        }
    }
    py::object capsule = producer.attr("__dlpack__")();
    auto* managed = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
    if (!managed) throw py::error_already_set();
    // Ours from here: renamed, the capsule's destructor leaves the deleter to us.
    if (PyCapsule_SetName(capsule.ptr(), dlpack::kUsedCapsuleName) != 0) throw py::error_already_set();
    struct Release {
        dlpack::DLManagedTensor* m;
        ~Release() {
            if (m->deleter) m->deleter(m);
        }
    } release{managed};
    const dlpack::DLTensor& d = managed->dl_tensor;
    if (d.device.device_type != dlpack::kDLCPU) {
        throw UnsupportedError("", fmt::format("from_dlpack: the capsule's memory is on DLPack device type {}; baregpu imports host memory only",
                                               d.device.device_type));
    }
    std::optional<DType> dtype = from_dl_dtype(d.dtype);
    if (!dtype) {
        throw py::type_error(fmt::format("from_dlpack: DLPack dtype (code {}, {} bits, {} lanes) is not one of baregpu's: float32, float16, "
                                         "bfloat16, int32, bool",
                                         d.dtype.code, d.dtype.bits, d.dtype.lanes));
    }
    compiler::Shape shape(d.shape, d.shape + d.ndim);
    const size_t itemsize = compiler::dtype_bytes(*dtype);
    const int64_t count = compiler::numel(shape);
    const std::byte* base = static_cast<const std::byte*>(d.data) + d.byte_offset;
    std::vector<std::byte> packed(size_t(count) * itemsize);
    // Row-major order through the producer's strides (in elements; none: already row-major).
    std::vector<int64_t> idx(shape.size(), 0);
    for (int64_t n = 0; n < count; ++n) {
        int64_t offset = 0;
        if (d.strides) {
            for (size_t i = 0; i < idx.size(); ++i) offset += idx[i] * d.strides[i];
        } else {
            offset = n;
        }
        std::memcpy(packed.data() + size_t(n) * itemsize, base + offset * int64_t(itemsize), itemsize);
        for (size_t i = idx.size(); i-- > 0;) {
            if (++idx[i] < shape[i]) break;
            idx[i] = 0;
        }
    }
    auto rt = runtime_for(device);
    compiler::NodeRef node;
    {
        py::gil_scoped_release unlocked;
        node = rt->upload(packed, *dtype, shape);
    }
    return Tensor(node, rt);
}

// ---- numpy arrays in, without a copy ---------------------------------------------------------

// References to arrays whose memory a device no longer uses, dropped on a thread that did not hold
// the GIL (a device's memory retires wherever its timeline passes): taking the GIL there could
// deadlock against a thread that holds it and waits for the device. Dropped at the next import.
std::mutex& deferred_mutex() {
    static std::mutex* m = new std::mutex();
    return *m;
}
std::vector<PyObject*>& deferred() {
    static auto* v = new std::vector<PyObject*>();
    return *v;
}

void release_array(PyObject* array) noexcept {
    if (Py_IsInitialized() && PyGILState_Check()) {
        Py_DECREF(array);
        return;
    }
    std::lock_guard lock(deferred_mutex());
    deferred().push_back(array);
}

void release_deferred() {
    std::vector<PyObject*> drop;
    {
        std::lock_guard lock(deferred_mutex());
        drop.swap(deferred());
    }
    for (PyObject* o : drop) Py_DECREF(o);
}

std::optional<DType> exact_dtype(const py::array& a) {
    const char kind = a.dtype().kind();
    const auto size = a.itemsize();
    if (kind == 'f' && size == 4) return DType::float32;
    if (kind == 'f' && size == 2) return DType::float16;
    if (kind == 'i' && size == 4) return DType::int32;
    if (kind == 'b' && size == 1) return DType::boolean;
    return std::nullopt;
}

// `value`'s memory as a tensor on `device` where the device addresses host memory (the cpu device)
// and the array is a C-contiguous, writeable numpy array of one of baregpu's dtypes (the tensor and
// the array then share memory: writes to either are seen by the other and by later kernels);
// otherwise a copy, as baregpu.Tensor(value) makes.
Tensor from_numpy(const py::object& value, const py::object& device) {
    release_deferred();
    auto rt = runtime_for(device);
    if (py::isinstance<py::array>(value)) {
        auto array = value.cast<py::array>();
        const bool shareable = (array.flags() & py::array::c_style) && array.writeable() && array.nbytes() > 0;
        if (auto dtype = exact_dtype(array); dtype && shareable) {
            auto* data = static_cast<std::byte*>(array.mutable_data());
            const auto bytes = uint64_t(array.nbytes());
            std::shared_ptr<void> owner(value.inc_ref().ptr(), [](void* o) { release_array(static_cast<PyObject*>(o)); });
            try {
                hcq::Buffer buffer = rt->device().import_host_memory(data, bytes, owner);
                compiler::Shape shape(array.shape(), array.shape() + array.ndim());
                return Tensor(compiler::Node::make_buffer(std::move(buffer), *dtype, std::move(shape)), rt);
            } catch (const UnsupportedError&) {
                // A device that cannot address it (a GPU), or memory another import overlaps: a copy.
            }
        }
    }
    return tensor_from_array(value, rt, std::nullopt);
}

}  // namespace

void bind_interop(py::module_& m) {
    py::class_<Tensor> cls(m.attr("Tensor"));
    // pybind11 made the type with a buffer slot (py::buffer_protocol()); ours fills it, so that a
    // tensor that cannot be shared raises BufferError (numpy then falls back to __array__).
    auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
    heap->as_buffer.bf_getbuffer = tensor_getbuffer;
    heap->as_buffer.bf_releasebuffer = tensor_releasebuffer;

    cls.def("__dlpack__", &export_dlpack, py::kw_only(), py::arg("stream") = py::none(),
            "A DLPack capsule sharing this tensor's memory (realized first): host memory only.");
    cls.def("__dlpack_device__", &dl_device);
    m.def("from_numpy", &from_numpy, py::arg("array"), py::arg("device") = py::none(),
          "`array` as a tensor that shares its memory where `device` addresses host memory (the cpu device) and the array is a "
          "C-contiguous, writeable float32, float16, int32 or bool numpy array; otherwise a copy.");
    m.def("from_dlpack", &import_dlpack, py::arg("x"), py::arg("device") = py::none(),
          "A tensor on `device` holding a copy of `x`, any DLPack producer's host tensor (numpy arrays among them).");
}

}  // namespace baregpu::python
