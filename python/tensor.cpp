// baregpu.Tensor: the lazy Tensor API of tensor/ with numpy's operator and argument conventions,
// numpy arrays in (a copy uploaded to the device) and out (tensor_interop.cpp shares memory).
#include "base/error.hpp"
#include "python/bindings.hpp"

#include <climits>
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <string>

namespace baregpu::python {

using compiler::DType;
using compiler::Shape;
using tensor::Tensor;

namespace {

py::module_ numpy() { return py::module_::import("numpy"); }

const char* numpy_name(DType t) {
    switch (t) {
        case DType::float32: return "float32";
        case DType::int32: return "int32";
        case DType::boolean: return "bool";
        case DType::float16: return "float16";
        case DType::bfloat16: return "float32";  // numpy has no bfloat16: its values, widened exactly
    }
    return "float32";
}

std::string shape_text(const Shape& s) {
    std::string out = "(";
    for (size_t i = 0; i < s.size(); ++i) out += std::to_string(s[i]) + (s.size() == 1 ? "," : i + 1 < s.size() ? ", " : "");
    return out + ")";
}

py::tuple shape_tuple(const Shape& s) {
    py::tuple t(s.size());
    for (size_t i = 0; i < s.size(); ++i) t[i] = s[i];
    return t;
}

// reshape(2, 3), reshape((2, 3)) and reshape([2, 3]) alike.
std::vector<int64_t> int_args(const py::args& args) {
    if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return args[0].cast<std::vector<int64_t>>();
    return args.cast<std::vector<int64_t>>();
}

std::vector<int> axes_arg(const py::handle& axis) {
    if (axis.is_none()) return {};
    if (py::isinstance<py::int_>(axis)) return {axis.cast<int>()};
    return axis.cast<std::vector<int>>();
}

// The other operand of a binary op: a tensor, a Python number (a scalar of this tensor's dtype
// when it holds the value's kind; a float with an int or bool tensor is float32, an int with a
// bool tensor int32, as numpy promotes), or anything numpy.asarray takes.
Tensor operand(const Tensor& self, const py::handle& other) {
    // Python numbers first, by the interpreter's own type checks: `x + 1.0` is on every hot path.
    PyObject* o = other.ptr();
    if (PyFloat_Check(o)) {
        const double v = PyFloat_AS_DOUBLE(o);
        return compiler::is_float(self.dtype()) ? self.scalar(v) : Tensor::full({}, v, DType::float32, self.runtime_ptr());
    }
    if (PyBool_Check(o)) return Tensor::full({}, o == Py_True ? 1 : 0, DType::boolean, self.runtime_ptr());
    if (PyLong_Check(o)) {
        const double v = other.cast<double>();
        return self.dtype() == DType::boolean ? Tensor::full({}, v, DType::int32, self.runtime_ptr()) : self.scalar(v);
    }
    if (py::isinstance<Tensor>(other)) return other.cast<Tensor>();
    return tensor_from_array(other, self.runtime_ptr(), std::nullopt);
}

// t[...]: integers, slices of step 1 or -1, Ellipsis and None, as numpy's basic indexing.
Tensor index(const Tensor& t, const py::handle& key) {
    py::tuple items = py::isinstance<py::tuple>(key) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
    size_t consumed = 0;
    bool ellipsis = false;
    for (py::handle k : items) {
        if (k.is(py::ellipsis())) {
            if (ellipsis) throw py::index_error("an index can only have a single ellipsis ('...')");
            ellipsis = true;
        } else if (!k.is_none()) {
            ++consumed;
        }
    }
    if (consumed > t.ndim()) throw py::index_error(fmt::format("too many indices: {} for a tensor of shape {}", consumed, shape_text(t.shape())));
    std::vector<std::pair<int64_t, int64_t>> ranges;
    std::vector<int> flips;
    Shape result;  // the shape after the view: dims kept, None's 1s, integers dropped
    size_t dim = 0;
    auto keep_all = [&](size_t n) {
        for (size_t i = 0; i < n; ++i, ++dim) {
            ranges.emplace_back(0, t.shape()[dim]);
            result.push_back(t.shape()[dim]);
        }
    };
    for (py::handle k : items) {
        if (k.is(py::ellipsis())) {
            keep_all(t.ndim() - consumed);
        } else if (k.is_none()) {
            result.push_back(1);
        } else if (py::isinstance<py::int_>(k)) {
            int64_t n = t.shape()[dim], i = k.cast<int64_t>();
            if (i < -n || i >= n) throw py::index_error(fmt::format("index {} is out of bounds for axis {} with size {}", i, dim, n));
            if (i < 0) i += n;
            ranges.emplace_back(i, i + 1);
            ++dim;
        } else if (py::isinstance<py::slice>(k)) {
            size_t start = 0, stop = 0, step = 0, length = 0;
            if (!k.cast<py::slice>().compute(size_t(t.shape()[dim]), &start, &stop, &step, &length)) throw py::error_already_set();
            auto signed_step = static_cast<py::ssize_t>(step);
            if (signed_step == 1) {
                ranges.emplace_back(int64_t(start), int64_t(start + length));
            } else if (signed_step == -1) {
                ranges.emplace_back(int64_t(start) - int64_t(length) + 1, int64_t(start) + 1);
                if (length) flips.push_back(int(dim));
            } else {
                throw py::index_error(fmt::format("slice step {}: only steps of 1 and -1 are views (tensor/tensor.hpp)", signed_step));
            }
            result.push_back(int64_t(length));
            ++dim;
        } else {
            throw py::index_error("only integers, slices (step 1 or -1), Ellipsis and None are valid indices; got " +
                                  std::string(py::str(py::type::of(k))));
        }
    }
    keep_all(t.ndim() - dim);
    Tensor out = t.shrink(ranges);
    if (!flips.empty()) out = out.flip(flips);
    return out.reshape(result);
}

}  // namespace

DType parse_dtype(const py::handle& dtype) {
    std::string name = py::isinstance<py::str>(dtype) ? dtype.cast<std::string>() : "";
    if (name == "bfloat16") return DType::bfloat16;
    if (name.empty() || (name != "float32" && name != "float16" && name != "int32" && name != "bool")) {
        name = py::str(numpy().attr("dtype")(dtype).attr("name"));
    }
    if (name == "float32" || name == "float64") return DType::float32;
    if (name == "float16") return DType::float16;
    if (name == "bool") return DType::boolean;
    if (name == "int32" || name == "int64" || name == "int16" || name == "int8" || name == "uint8" || name == "uint16") return DType::int32;
    throw py::type_error("dtype " + name + ": baregpu tensors hold float32, float16, bfloat16, int32 or bool (float64 narrows to float32, "
                         "integers of up to 64 bits to int32)");
}

Tensor tensor_from_array(const py::handle& value, const std::shared_ptr<tensor::Runtime>& runtime, std::optional<DType> dtype) {
    py::module_ np = numpy();
    py::object array = np.attr("asarray")(value);
    DType target = dtype ? *dtype : parse_dtype(array.attr("dtype"));
    std::string from = py::str(array.attr("dtype").attr("name"));
    if (target == DType::int32 && (from == "int64" || from == "uint32" || from == "uint64") && array.attr("size").cast<int64_t>() > 0) {
        auto lo = array.attr("min")().cast<long long>(), hi = array.attr("max")().cast<long long>();
        if (lo < INT32_MIN || hi > INT32_MAX) {
            throw py::value_error(fmt::format("{} values from {} to {} do not fit int32, the widest integer type of baregpu tensors", from, lo, hi));
        }
    }
    // bfloat16 is rounded by the device from float32 (Tensor::cast), as every op's result is.
    DType upload = target == DType::bfloat16 ? DType::float32 : target;
    auto contiguous = np.attr("asarray")(array, py::arg("dtype") = numpy_name(upload), py::arg("order") = "C").cast<py::array>();
    Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
    auto bytes = std::span(static_cast<const std::byte*>(contiguous.data()), size_t(contiguous.nbytes()));
    compiler::NodeRef node;
    {
        py::gil_scoped_release unlocked;  // `contiguous` stays referenced: its memory cannot go
        node = runtime->upload(bytes, upload, shape);
    }
    Tensor t(node, runtime);
    return target == DType::bfloat16 ? t.cast(DType::bfloat16) : t;
}

std::byte* realized_host_data(const Tensor& t) {
    {
        py::gil_scoped_release unlocked;
        t.realize();
        t.runtime().device().synchronize();
    }
    return t.node()->realized.cpu();
}

py::object to_numpy(const Tensor& t) {
    py::dtype dtype(numpy_name(t.dtype()));
    std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    if (t.dtype() != DType::bfloat16) {
        if (std::byte* data = realized_host_data(t)) {
            // The array's base owns a reference to the node: its buffer stays while the array does.
            py::capsule owner(new compiler::NodeRef(t.node()), [](void* p) { delete static_cast<compiler::NodeRef*>(p); });
            return py::array(dtype, shape, data, owner);
        }
    }
    py::array out(dtype, shape);
    if (t.dtype() == DType::bfloat16) {
        std::vector<float> values;
        {
            py::gil_scoped_release unlocked;
            values = t.to_vector<float>();
        }
        std::copy(values.begin(), values.end(), static_cast<float*>(out.mutable_data()));
    } else {
        auto bytes = std::span(static_cast<std::byte*>(out.mutable_data()), size_t(out.nbytes()));
        py::gil_scoped_release unlocked;
        t.runtime().read(t.node(), bytes);
    }
    return py::object(std::move(out));
}

void bind_tensor(py::module_& m) {
    py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol(),
                           "A lazy tensor on one device: operations record what to compute; realize(), numpy() or any read runs it.");
    cls.def(py::init([](const py::object& data, const py::object& device, const py::object& dtype) {
                return tensor_from_array(data, runtime_for(device), dtype.is_none() ? std::nullopt : std::optional(parse_dtype(dtype)));
            }),
            py::arg("data"), py::arg("device") = py::none(), py::arg("dtype") = py::none(),
            "A tensor holding a copy of `data` (a numpy array, or anything numpy.asarray takes) on `device`.");

    // numpy defers its operators to ours (a numpy array on the left of + gives a Tensor).
    cls.attr("__array_ufunc__") = py::none();
    cls.def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
        .def_property_readonly("dtype", [](const Tensor& t) { return std::string(compiler::dtype_name(t.dtype())); })
        .def_property_readonly("ndim", &Tensor::ndim)
        .def_property_readonly("size", &Tensor::numel)
        .def_property_readonly("device", [](const Tensor& t) { return device_of(t.runtime_ptr()); })
        .def_property_readonly("realized", &Tensor::realized)
        .def("__len__",
             [](const Tensor& t) {
                 if (t.ndim() == 0) throw py::type_error("len() of a 0-d tensor");
                 return t.shape()[0];
             })
        .def("__repr__",
             [](const Tensor& t) {
                 return fmt::format("baregpu.Tensor(shape={}, dtype={}, device='{}'{})", shape_text(t.shape()), compiler::dtype_name(t.dtype()),
                                    t.runtime().device().name(), t.realized() ? ", realized" : "");
             })
        .def("__hash__", [](const Tensor& t) { return std::hash<const void*>()(t.node().get()); });

    using Binary = Tensor (Tensor::*)(const Tensor&) const;
    auto binary = [&](const char* name, Binary op) {
        cls.def(name, [op](const Tensor& a, const py::object& b) { return (a.*op)(operand(a, b)); });
    };
    auto reflected = [&](const char* name, Binary op) {
        cls.def(name, [op](const Tensor& a, const py::object& b) { return (operand(a, b).*op)(a); });
    };
    binary("__add__", &Tensor::add);
    binary("__sub__", &Tensor::sub);
    binary("__mul__", &Tensor::mul);
    binary("__truediv__", &Tensor::div);
    binary("__matmul__", &Tensor::matmul);
    binary("__lt__", &Tensor::lt);
    binary("__gt__", &Tensor::gt);
    binary("__le__", &Tensor::le);
    binary("__ge__", &Tensor::ge);
    binary("__eq__", &Tensor::eq);
    binary("__ne__", &Tensor::ne);
    binary("add", &Tensor::add);
    binary("sub", &Tensor::sub);
    binary("mul", &Tensor::mul);
    binary("div", &Tensor::div);
    binary("maximum", &Tensor::maximum);
    binary("minimum", &Tensor::minimum);
    binary("matmul", &Tensor::matmul);
    reflected("__radd__", &Tensor::add);
    reflected("__rsub__", &Tensor::sub);
    reflected("__rmul__", &Tensor::mul);
    reflected("__rtruediv__", &Tensor::div);
    reflected("__rmatmul__", &Tensor::matmul);

    using Unary = Tensor (Tensor::*)() const;
    for (auto [name, op] : {std::pair<const char*, Unary>{"exp", &Tensor::exp}, {"log", &Tensor::log}, {"exp2", &Tensor::exp2},
                            {"log2", &Tensor::log2}, {"sqrt", &Tensor::sqrt}, {"reciprocal", &Tensor::recip}, {"relu", &Tensor::relu},
                            {"sigmoid", &Tensor::sigmoid}, {"tanh", &Tensor::tanh}, {"gelu", &Tensor::gelu}, {"abs", &Tensor::abs},
                            {"__abs__", &Tensor::abs}, {"__neg__", &Tensor::neg}, {"neg", &Tensor::neg},
                            {"logical_not", &Tensor::logical_not}, {"__invert__", &Tensor::logical_not}}) {
        cls.def(name, op);
    }
    cls.def("where", [](const Tensor& c, const py::object& a, const py::object& b) { return c.where(operand(c, a), operand(c, b)); },
            "self ? a : b, broadcast together.");
    cls.def("astype", [](const Tensor& t, const py::object& dtype) { return t.cast(parse_dtype(dtype)); });
    cls.def("cast", [](const Tensor& t, const py::object& dtype) { return t.cast(parse_dtype(dtype)); });

    using Reduce = Tensor (Tensor::*)(std::vector<int>, bool) const;
    for (auto entry : {std::pair<const char*, Reduce>{"sum", &Tensor::sum}, {"max", &Tensor::max}, {"mean", &Tensor::mean}}) {
        Reduce op = entry.second;  // not a structured binding: the lambda captures it (clang 14)
        cls.def(entry.first, [op](const Tensor& t, const py::object& axis, bool keepdims) { return (t.*op)(axes_arg(axis), keepdims); },
                py::arg("axis") = py::none(), py::arg("keepdims") = false);
    }

    cls.def("reshape", [](const Tensor& t, const py::args& shape) { return t.reshape(int_args(shape)); })
        .def("permute", [](const Tensor& t, const py::args& order) {
            auto o = int_args(order);
            return t.permute(std::vector<int>(o.begin(), o.end()));
        })
        .def("transpose", &Tensor::transpose, py::arg("a") = -2, py::arg("b") = -1)
        .def_property_readonly("T", [](const Tensor& t) {
            std::vector<int> order(t.ndim());
            for (size_t i = 0; i < order.size(); ++i) order[i] = int(order.size() - 1 - i);
            return t.permute(order);
        })
        .def("expand", [](const Tensor& t, const py::args& shape) { return t.expand(int_args(shape)); })
        .def("pad", &Tensor::pad, py::arg("before_after"), "Zeros: one (before, after) pair per axis.")
        .def("shrink", &Tensor::shrink, py::arg("begin_end"), "One (begin, end) pair per axis.")
        .def("flip", [](const Tensor& t, const py::object& axis) { return t.flip(axes_arg(axis)); }, py::arg("axis"))
        .def("__getitem__", &index)
        .def("conv2d", &Tensor::conv2d, py::arg("weight"), py::arg("padding") = 0,
             "(N, C, H, W) with weight (O, C, KH, KW), stride 1, `padding` zeros each side.")
        .def("softmax", &Tensor::softmax, py::arg("axis") = -1)
        .def("layernorm", &Tensor::layernorm, py::arg("axis") = -1, py::arg("eps") = 1e-5)
        .def("to", [](const Tensor& t, const py::object& device) { return t.to(runtime_for(device)); }, py::arg("device"),
             "This tensor on another device, lazily: the data moves when the result is first used.")
        .def(
            "realize",
            [](const py::object& self) {
                const Tensor& t = self.cast<const Tensor&>();
                if (!t.realized()) {
                    py::gil_scoped_release unlocked;  // may compile
                    t.realize();
                }
                return self;
            },
            "Compute now (the device runs it asynchronously); returns self.")
        .def("numpy", &to_numpy,
             "The values as a numpy array: it shares this tensor's memory when the device's memory is the host's (the cpu device), "
             "else it is a copy. bfloat16 comes back as float32.")
        .def("__array__", [](const Tensor& t, const py::object& dtype) {
            py::object a = to_numpy(t);
            return dtype.is_none() ? a : a.attr("astype")(dtype, py::arg("copy") = false);
        }, py::arg("dtype") = py::none())
        .def("tolist", [](const Tensor& t) { return to_numpy(t).attr("tolist")(); })
        .def("item", [](const Tensor& t) {
            if (t.numel() != 1) throw py::value_error(fmt::format("item(): a tensor of {} elements, not 1", t.numel()));
            return to_numpy(t).attr("reshape")(py::tuple()).attr("item")();
        });

    auto rt = [](const py::object& device) { return runtime_for(device); };
    m.def("tensor", [](const py::object& data, const py::object& device, const py::object& dtype) {
        return tensor_from_array(data, runtime_for(device), dtype.is_none() ? std::nullopt : std::optional(parse_dtype(dtype)));
    }, py::arg("data"), py::arg("device") = py::none(), py::arg("dtype") = py::none());
    m.def("zeros", [rt](const std::vector<int64_t>& shape, const py::object& dtype, const py::object& device) {
        return Tensor::zeros(shape, parse_dtype(dtype), rt(device));
    }, py::arg("shape"), py::arg("dtype") = "float32", py::arg("device") = py::none());
    m.def("ones", [rt](const std::vector<int64_t>& shape, const py::object& dtype, const py::object& device) {
        return Tensor::ones(shape, parse_dtype(dtype), rt(device));
    }, py::arg("shape"), py::arg("dtype") = "float32", py::arg("device") = py::none());
    m.def("full", [rt](const std::vector<int64_t>& shape, double value, const py::object& dtype, const py::object& device) {
        return Tensor::full(shape, value, parse_dtype(dtype), rt(device));
    }, py::arg("shape"), py::arg("value"), py::arg("dtype") = "float32", py::arg("device") = py::none());
    m.def("arange", [rt](int64_t n, const py::object& dtype, const py::object& device) { return Tensor::arange(n, parse_dtype(dtype), rt(device)); },
          py::arg("n"), py::arg("dtype") = "float32", py::arg("device") = py::none());
    m.def("rand", [rt](const std::vector<int64_t>& shape, uint64_t seed, const py::object& device) { return Tensor::rand(shape, seed, rt(device)); },
          py::arg("shape"), py::arg("seed") = 0, py::arg("device") = py::none(),
          "Uniform in [0, 1), float32; the same seed gives the same values on every device.");
    m.def("where", [](const Tensor& c, const py::object& a, const py::object& b) { return c.where(operand(c, a), operand(c, b)); });
    m.def("matmul", [](const Tensor& a, const py::object& b) { return a.matmul(operand(a, b)); });
}

}  // namespace baregpu::python
