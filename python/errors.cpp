// baregpu's exceptions as Python exception classes with the same names and messages. Each also
// derives from the builtin a Python caller would catch for it (TimeoutError, OSError, ...), and
// carries the device the error is about (`e.device`, "" when none), the owner's pid for
// BusyError, errno for SystemError, the file and field for FirmwareError.
#include "base/error.hpp"
#include "python/bindings.hpp"

namespace baregpu::python {

namespace {

struct Classes {
    py::object error, timeout, device_lost, protocol, busy, unsupported, firmware, system;
};

Classes& classes() {
    static Classes* c = new Classes();  // lives as long as the interpreter may raise them
    return *c;
}

py::object new_class(py::module_& m, const char* name, std::initializer_list<py::handle> bases, const char* doc) {
    py::tuple tuple(bases.size());
    size_t i = 0;
    for (py::handle b : bases) tuple[i++] = py::reinterpret_borrow<py::object>(b);
    std::string qualified = std::string("baregpu.") + name;
    py::object cls = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(qualified.c_str(), doc, tuple.ptr(), nullptr));
    if (!cls) throw py::error_already_set();
    m.attr(name) = cls;
    return cls;
}

// Raise `cls(message)` with the attributes of `e`.
void raise(const py::object& cls, const Error& e, std::initializer_list<std::pair<const char*, py::object>> extra = {}) {
    py::object instance = cls(e.what());
    instance.attr("device") = py::str(e.device());
    for (const auto& [name, value] : extra) instance.attr(name) = value;
    PyErr_SetObject(cls.ptr(), instance.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
    Classes& c = classes();
    c.error = new_class(m, "Error", {PyExc_RuntimeError}, "Every baregpu error: the message names the device, file or bridge.");
    c.timeout = new_class(m, "TimeoutError", {c.error, PyExc_TimeoutError}, "A wait ran out; the message says what it waited for.");
    c.device_lost = new_class(m, "DeviceLostError", {c.error}, "The device is gone (removed, or its bus reads all-ones).");
    c.protocol = new_class(m, "ProtocolError", {c.error}, "The device or its firmware answered what the protocol does not allow.");
    c.busy = new_class(m, "BusyError", {c.error}, "Another owner holds the device; owner_pid names it (0: unknown).");
    c.unsupported = new_class(m, "UnsupportedError", {c.error}, "The platform or device cannot do what was asked.");
    c.firmware = new_class(m, "FirmwareError", {c.error, PyExc_ValueError}, "A firmware file is not what it claims to be.");
    c.system = new_class(m, "SystemError", {c.error, PyExc_OSError}, "A system call failed; errno is set.");

    py::register_exception_translator([](std::exception_ptr p) {
        if (!p) return;
        Classes& k = classes();
        try {
            std::rethrow_exception(p);
        } catch (const BusyError& e) {
            raise(k.busy, e, {{"owner_pid", py::int_(e.owner_pid())}});
        } catch (const TimeoutError& e) {
            raise(k.timeout, e);
        } catch (const DeviceLostError& e) {
            raise(k.device_lost, e);
        } catch (const ProtocolError& e) {
            raise(k.protocol, e);
        } catch (const UnsupportedError& e) {
            raise(k.unsupported, e);
        } catch (const FirmwareError& e) {
            raise(k.firmware, e, {{"file", py::str(e.file())}, {"field", py::str(e.field())}});
        } catch (const SystemError& e) {
            raise(k.system, e, {{"errno", py::int_(e.code())}});
        } catch (const Error& e) {
            raise(k.error, e);
        }
    });
}

}  // namespace baregpu::python
