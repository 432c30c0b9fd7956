// baregpu.profile(path): a context manager that records every command of every device while it
// is open and writes the Chrome / Perfetto trace to `path` when it closes (hcq/profiler.hpp).
#include "hcq/profiler.hpp"
#include "python/bindings.hpp"

namespace baregpu::python {

namespace {

struct ProfileScope {
    std::string path;
    bool already_on = false;  // BAREGPU_PROFILE (or an enclosing block) records already: leave it on, keep its events
};

}  // namespace

void bind_profile(py::module_& m) {
    py::class_<ProfileScope>(m, "ProfileScope", "What baregpu.profile(path) returns: use it in a with statement.")
        .def_readonly("path", &ProfileScope::path)
        .def("__enter__",
             [](ProfileScope& s) -> ProfileScope& {
                 s.already_on = hcq::Profiler::active();
                 if (!s.already_on) {
                     hcq::Profiler::clear();
                     hcq::Profiler::start();
                 }
                 return s;
             })
        .def("__exit__", [](ProfileScope& s, const py::args&) {
            if (!s.already_on) hcq::Profiler::stop();
            {
                py::gil_scoped_release unlocked;  // collects every device's finished events
                hcq::Profiler::write_chrome_trace(s.path);
            }
            return false;  // an exception in the block goes on
        });
    m.def(
        "profile",
        [](const std::string& path) {
            // Refused now, not after the work: a run must not end by losing its trace.
            hcq::Profiler::check_writable(path, "baregpu.profile");
            return ProfileScope{path};
        },
        py::arg("path"),
        "with baregpu.profile('trace.json'): ... records device timestamps around every kernel, copy and wait, and writes a "
        "Chrome / Perfetto trace there at the end of the block.");
}

}  // namespace baregpu::python
