// Real GPUs through the registry, without a GPU: fake sysfs trees ($BAREGPU_SYSFS_ROOT) with an AMD
// GPU on vfio-pci, an NVIDIA GPU on vfio-pci and one on nvidia.ko. What `baregpu devices` lists is
// what the backends enumerate; each URI routes to the backend and transport the listing shows; the
// default device tries them in that order; and a GPU that is not there fails naming the URI and the
// missing function, never "no backend".
//
// Bus numbers and IOMMU groups are ones no real machine is likely to have (0xe1.., 9014..), so that
// nothing here can reach a real device through /dev/vfio or nvidia.ko.
#include "base/error.hpp"
#include "drivers/pci/enumerate.hpp"
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"
#include "tests/pci/fake_sysfs.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

using namespace baregpu;
using test::FakeFunction;
using test::FakeSysfs;
using test::TempDir;

namespace {

void register_once() {
    static std::once_flag once;
    std::call_once(once, [] { registry::register_backends(hcq::registry()); });
}

// Sets an environment variable for a scope.
struct ScopedEnv {
    std::string name;
    std::optional<std::string> saved;
    ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
        if (const char* old = std::getenv(name.c_str())) saved = old;
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() { saved ? ::setenv(name.c_str(), saved->c_str(), 1) : ::unsetenv(name.c_str()); }
};

// A fake machine: its sysfs tree is the registry's ($BAREGPU_SYSFS_ROOT), locks in a private dir.
struct Machine {
    FakeSysfs sysfs;
    TempDir locks;
    ScopedEnv root{"BAREGPU_SYSFS_ROOT", sysfs.root().string()};
    ScopedEnv lock_dir{"BAREGPU_LOCK_DIR", locks.path().string()};
    Machine() {
        register_once();
        sysfs.make_empty_bus();
        ::unsetenv("BAREGPU_DEVICE");
    }
};

std::vector<std::string> enumerated(const std::string& scheme) {
    for (const hcq::Backend& b : hcq::registry().backends()) {
        if (b.scheme == scheme) {
            CHECK(b.real_hardware);
            return b.enumerate();
        }
    }
    FAIL("no backend " << scheme);
    return {};
}

}  // namespace

TEST_CASE("a GPU that is not there: the error names the URI and the missing PCI function, not 'no backend'") {
    Machine m;  // a PCI bus with nothing on it
    for (const char* uri : {"nv:0000:01:00.0", "nv:0000:01:00.0?transport=nvrm", "nv:0000:01:00.0?transport=nvpci",
                            "am:0000:03:00.0", "am:0000:03:00.0?access=sysfs"}) {
        INFO(uri);
        const std::string name = hcq::DeviceUri::parse(uri).name();
        const std::string address = name.substr(3);
        CHECK_THROWS_MATCHES(hcq::open_device(uri), Error,
                             Catch::Matchers::Predicate<Error>(
                                 [&](const Error& e) {
                                     const std::string what = e.what();
                                     return what.starts_with(name + ": ") &&
                                            what.find("there is no PCI function at " + address) != std::string::npos &&
                                            what.find("no backend") == std::string::npos;
                                 },
                                 "names the URI and the missing function"));
        CHECK_THROWS_WITH(registry::route(uri), Catch::Contains("there is no PCI function at " + address));
    }
    CHECK(enumerated("am").empty());
    CHECK(enumerated("nv").empty());
    CHECK_THROWS_WITH(hcq::open_device("am:03:00"), Catch::Contains("am:03:00") && Catch::Contains("not a PCI address"));
}

TEST_CASE("no PCI bus at all (a container): nothing to enumerate; nvrm still tries nvidia.ko, the others say there is no bus") {
    Machine m;
    ScopedEnv nothing("BAREGPU_SYSFS_ROOT", (m.locks.path() / "no-sysfs").string());
    CHECK(enumerated("am").empty());
    CHECK(enumerated("nv").empty());
    CHECK_THROWS_WITH(hcq::open_device("am:0000:e3:00.0"),
                      Catch::StartsWith("am:0000:e3:00.0: ") && Catch::Contains("no PCI bus is visible"));
    CHECK(registry::route("nv:0000:e1:00.0").transport == "nvrm");  // no driver to read: nvidia.ko is the only way
    // Without nvidia.ko (CI): no /dev/nvidiactl. With it: it drives no GPU at that address.
    CHECK_THROWS_WITH(hcq::open_device("nv:0000:e1:00.0"),
                      Catch::StartsWith("nv:0000:e1:00.0") &&
                          (Catch::Contains("no /dev/nvidiactl") || Catch::Contains("drives no GPU at 0000:e1:00.0")));
}

TEST_CASE("AMD on vfio-pci, NVIDIA on vfio-pci and on nvidia.ko: enumerated, routed as listed, tried in order") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:e1:00.0", 0x10de, 0x2684, 0x030000).bound_to("nvidia").group(9016));
    m.sysfs.add(FakeFunction("0000:e3:00.0", 0x1002, 0x744c, 0x030000).bound_to("vfio-pci").group(9014));
    m.sysfs.add(FakeFunction("0000:e4:00.0", 0x10de, 0x2684, 0x030000).bound_to("vfio-pci").group(9015));
    m.sysfs.add(FakeFunction("0000:e5:00.0", 0x1002, 0x7480, 0x030000).bound_to("vfio-pci").group(9017));  // Navi33: not driven

    // What `baregpu devices` lists (the same enumeration and verdict) is what the backends enumerate.
    pci::EnumerateOptions options;
    options.sysfs_root = m.sysfs.root().string();
    const pci::Enumeration listed = pci::enumerate_gpus(options);
    REQUIRE(listed.gpus.size() == 4);
    CHECK(enumerated("am") == std::vector<std::string>{"am:0000:e3:00.0"});
    CHECK(enumerated("nv") == std::vector<std::string>{"nv:0000:e1:00.0", "nv:0000:e4:00.0"});

    // Every URI listed routes to the backend and transport listed with it.
    for (const pci::GpuFunction& gpu : listed.gpus) {
        INFO(gpu.address.to_string());
        if (gpu.verdict.uri.empty()) continue;
        const registry::Route r = registry::route(gpu.verdict.uri);
        CHECK(r.backend == gpu.verdict.backend);
        CHECK(r.transport == gpu.verdict.transport);
    }
    CHECK(registry::route("nv:0000:e1:00.0").transport == "nvrm");
    CHECK(registry::route("nv:0000:e1:00.0").access.empty());
    CHECK(registry::route("nv:0000:e4:00.0").transport == "nvpci");
    CHECK(registry::route("nv:0000:e4:00.0").access == "vfio");
    CHECK(registry::route("am:0000:e3:00.0").access == "vfio");
    // The URI option overrides what the bound driver selects.
    CHECK(registry::route("nv:0000:e1:00.0?transport=nvpci").transport == "nvpci");
    CHECK(registry::route("nv:0000:e4:00.0?transport=nvrm").transport == "nvrm");
    CHECK(registry::route("nv:0000:e4:00.0?access=sysfs").access == "sysfs");
    CHECK(registry::route("am:0000:e3:00.0?access=sysfs").access == "sysfs");
    CHECK_THROWS_WITH(registry::route("nv:0000:e4:00.0?transport=gsp"), Catch::Contains("transport=gsp") && Catch::Contains("nvrm or nvpci"));
    CHECK_THROWS_WITH(hcq::open_device("nv:0000:e4:00.0?bogus=1"), Catch::Contains("bogus") && Catch::Contains("transport"));
    // The wrong scheme for a GPU says which one is right; a chip not driven yet says which are.
    CHECK_THROWS_WITH(registry::route("am:0000:e4:00.0"), Catch::Contains("open it as nv:0000:e4:00.0"));
    CHECK_THROWS_WITH(registry::route("am:0000:e5:00.0"), Catch::Contains("(Navi33) is not driven yet"));
    CHECK_THROWS_WITH(registry::route("sim-am:navi31"), Catch::Contains("not a real PCI GPU's URI"));
    // nvpci needs vfio-pci: a GPU on nvidia.ko says so rather than failing in VFIO.
    CHECK_THROWS_WITH(hcq::open_device("nv:0000:e1:00.0?transport=nvpci"), Catch::Contains("bound to nvidia") && Catch::Contains("vfio-pci"));

    // The default device: each listed GPU is tried in the listed order (am first, then nv); none
    // opens here (no /dev/vfio group 9014, no nvidia.ko or no such card), so it is cpu, and each
    // says why it was passed over.
    hcq::DefaultChoice choice;
    CHECK(hcq::open_default_device(&choice)->name() == "cpu");
    CHECK(choice.name == "cpu");
    CHECK(choice.reason == "no real GPU opened");
    REQUIRE(choice.skipped.size() == 3);
    CHECK(choice.skipped[0].name == "am:0000:e3:00.0");
    CHECK(choice.skipped[1].name == "nv:0000:e1:00.0");
    CHECK(choice.skipped[2].name == "nv:0000:e4:00.0");
    for (const hcq::DefaultChoice::Skipped& s : choice.skipped) {
        INFO(s.name << ": " << s.why);
        CHECK_FALSE(s.why.empty());
        CHECK(s.why.find("no backend") == std::string::npos);
    }
    CHECK_THAT(choice.skipped[1].why, Catch::Contains("nvidiactl") || Catch::Contains("drives no GPU at 0000:e1:00.0"));
    CHECK_THAT(choice.describe(), Catch::StartsWith("device cpu (no real GPU opened)\n  am:0000:e3:00.0 not used: "));

    // $BAREGPU_DEVICE still wins.
    ScopedEnv chosen("BAREGPU_DEVICE", "cpu:5");
    CHECK(hcq::open_default_device(&choice)->name() == "cpu:5");
    CHECK(choice.skipped.empty());
}

TEST_CASE("a GPU on amdgpu is listed and enumerated, and passed over with the verdict's advice") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:e3:00.0", 0x1002, 0x744c, 0x030000).bound_to("amdgpu").group(9014));
    CHECK(enumerated("am") == std::vector<std::string>{"am:0000:e3:00.0"});
    hcq::DefaultChoice choice;
    CHECK(hcq::open_default_device(&choice)->name() == "cpu");
    REQUIRE(choice.skipped.size() == 1);
    CHECK(choice.skipped[0].why == "bound to amdgpu: unbind or use vfio-pci (udev/README.md)");
}
