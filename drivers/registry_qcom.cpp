// The Adreno backends: qcom (a real KGSL device, /dev/kgsl-3d0) and sim-qcom (the simulated KGSL
// device of drivers/sim/kgsl), both driven by drivers/qcom through its syscall seam.
#include "base/error.hpp"
#include "drivers/qcom/kgsl_syscalls.hpp"
#include "drivers/qcom/qcom_device.hpp"
#include "drivers/registry_internal.hpp"
#include "drivers/sim/kgsl/kgsl_abi.hpp"
#include "drivers/sim/kgsl/sim_kgsl.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

namespace baregpu::registry {

namespace {

// The simulated KGSL device behind drivers/qcom's syscall seam: the driver cannot tell it from
// /dev/kgsl-3d0 except by what it answers.
class SimKgslSyscalls final : public qcom::KgslSyscalls {
public:
    explicit SimKgslSyscalls(std::shared_ptr<sim::kgsl::SimKgsl> sim) : sim_(std::move(sim)) {}
    int open(const char* path, int flags, int& err) override { return sim_->open(path, flags, err); }
    int close(int fd) override { return sim_->close(fd); }
    int ioctl(int fd, unsigned long request, void* arg, int& err) override { return sim_->ioctl(fd, request, arg, err); }
    void* mmap(void* addr, uint64_t length, int prot, int flags, int fd, uint64_t offset, int& err) override {
        return sim_->mmap(addr, length, prot, flags, fd, offset, err);
    }
    int munmap(void* addr, uint64_t length) override { return sim_->munmap(addr, length); }
    std::string kernel_log(uint32_t context_id) override { return sim_->kernel_log(context_id); }

private:
    std::shared_ptr<sim::kgsl::SimKgsl> sim_;
};

// The options both Adreno devices take: one ring per KGSL context, the SVM window, memory and staging.
void read_qcom_options(const hcq::DeviceUri& uri, qcom::QcomOptions& o) {
    detail::UriOptions u(uri);
    u.bytes("ring", o.ring_bytes, "bytes of each KGSL context's command ring, a multiple of 4 KiB")
        .bytes("va", o.va_bytes, "bytes of the SVM window");
    detail::memory_options(u, o).done();
    o.name = uri.name();
}

// "qcom:0": /dev/kgsl-3d0 through libc.
std::shared_ptr<hcq::Device> open_qcom(const hcq::DeviceUri& uri) {
    if (uri.path() != "0" && !uri.path().empty()) throw Error(uri.name(), "a KGSL device is named qcom:0 (/dev/kgsl-3d0)");
    qcom::QcomOptions options;
    options.isa = qcom::KernelIsa::adreno;
    read_qcom_options(uri, options);
    return qcom::QcomDevice::create(qcom::libc_syscalls(), std::move(options));
}

// The simulated Adreno chips: KGSL chip_id (core, major, minor, patch bytes).
struct SimulatedAdreno {
    std::string_view name;
    uint32_t chip_id;
    std::string_view what;
};
const SimulatedAdreno kSimulatedAdrenos[] = {
    {"a630", 0x06030000, "Qualcomm Adreno 630 (A6xx; Snapdragon 845)"},
    {"a730", 0x07030001, "Qualcomm Adreno 730 (A7xx: CP_EVENT_WRITE7, the moved SP_CS_* registers; Snapdragon 8 Gen 1)"},
};

// "sim-qcom:a630?ring=...&va=...": the simulated KGSL device driven by drivers/qcom; kernels run as
// host code by the model's command processor.
std::shared_ptr<hcq::Device> open_sim_qcom(const hcq::DeviceUri& uri) {
    const SimulatedAdreno* chip = nullptr;
    for (const SimulatedAdreno& a : kSimulatedAdrenos) {
        if (uri.path() == a.name) chip = &a;
    }
    if (!chip) throw Error(uri.name(), "unknown simulated Adreno: the models are sim-qcom:a630 and sim-qcom:a730");
    qcom::QcomOptions options;
    options.isa = qcom::KernelIsa::host;
    read_qcom_options(uri, options);
    auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{chip->chip_id});
    // A sanitizer build's model keeps its SVM range above AddressSanitizer's shadow gap
    // (drivers/sim/kgsl/sim_kgsl.hpp); elsewhere the driver finds KGSL's real range on its own.
    if (sim::kgsl::kSanitizerSvmShift != 0) {
        options.svm_ranges = {{model->svm().begin, model->svm().end, "the simulated KGSL's SVM range, moved above ASan's shadow gap"}};
    }
    std::shared_ptr<hcq::Device> device = qcom::QcomDevice::create(std::make_shared<SimKgslSyscalls>(model), std::move(options));
    detail::SimParts parts;
    parts.kgsl = model;
    detail::remember_sim(device, std::move(parts));
    return device;
}

std::shared_ptr<sim::kgsl::SimKgsl> kgsl_model_of(hcq::Device& device) {
    std::optional<detail::SimPartsRef> ref = detail::sim_parts_of(&device);
    return ref ? ref->parts.kgsl : nullptr;
}

}  // namespace

namespace detail {

void register_qcom_backends(hcq::Registry& registry) {
    hcq::Backend b;
    b.scheme = "qcom";
    b.description = "Qualcomm Adreno 6xx through KGSL (/dev/kgsl-3d0)";
    b.real_hardware = true;
    b.enumerate = [] {
        struct stat st {};
        if (::stat("/dev/kgsl-3d0", &st) == 0) return std::vector<std::string>{"qcom:0"};
        return std::vector<std::string>{};
    };
    b.open = open_qcom;
    registry.add(std::move(b));
    hcq::Backend sim_qcom;
    sim_qcom.scheme = "sim-qcom";
    sim_qcom.description = "simulated Adreno 630 / 730 behind a simulated KGSL device (drivers/sim/kgsl) driven by drivers/qcom; "
                           "kernels run as host code";
    sim_qcom.enumerate = [] { return std::vector<std::string>{"sim-qcom:a630", "sim-qcom:a730"}; };
    sim_qcom.open = open_sim_qcom;
    registry.add(std::move(sim_qcom));
}

// What a real Adreno can do today, said wherever it is listed: no Adreno machine code exists yet
// (drivers/qcom/README.md, "Not done"), so programs and copies are refused on qcom:0.
constexpr const char* kRealAdrenoCannotRunKernels =
    "a real Adreno (qcom:0) cannot run kernels yet: there is no Adreno machine code path (no ir3 compiler, the vendor OpenCL "
    "binary format is not parsed), so it opens, allocates, signals, waits and takes timestamps, but load_program and copies "
    "throw UnsupportedError";

std::vector<BuiltinDevice> qcom_builtin_devices() {
    std::vector<BuiltinDevice> devices;
    struct stat st {};
    if (::stat("/dev/kgsl-3d0", &st) == 0) {
        devices.push_back({"qcom:0", "kgsl", true, fmt::format("Qualcomm Adreno through KGSL (/dev/kgsl-3d0): {}", kRealAdrenoCannotRunKernels)});
    }
    // KGSL is not on the PCI bus: each model is described by what its device-info property says.
    for (const SimulatedAdreno& chip : kSimulatedAdrenos) {
        sim::kgsl::SimKgsl model(sim::kgsl::SimKgsl::Options{chip.chip_id});
        int err = 0;
        int fd = model.open("/dev/kgsl-3d0", 0, err);
        sim::kgsl::devinfo info{};
        sim::kgsl::getproperty p{sim::kgsl::KGSL_PROP_DEVICE_INFO, &info, sizeof info};
        model.ioctl(fd, sim::kgsl::DEVICE_GETPROPERTY, &p, err);
        model.close(fd);
        devices.push_back({fmt::format("sim-qcom:{}", chip.name), "simulated", true,
                           fmt::format("model of a {} behind a simulated KGSL device (/dev/kgsl-3d0, chip_id 0x{:08x}, "
                                       "gpu_id {}), driven by drivers/qcom: a simulated GPU (HCQ device) running kernels as host code; {}",
                                       chip.what, info.chip_id, info.gpu_id, kRealAdrenoCannotRunKernels)});
    }
    return devices;
}

}  // namespace detail

bool inject_kgsl_hang(hcq::Device& device, bool hang) {
    auto model = kgsl_model_of(device);
    if (model) model->hang_context(0, hang);
    return model != nullptr;
}

bool inject_kgsl_wait_error(hcq::Device& device, int err) {
    auto model = kgsl_model_of(device);
    if (model) model->fail_waits(err);
    return model != nullptr;
}

bool inject_kgsl_fault(hcq::Device& device, const std::string& why) {
    auto model = kgsl_model_of(device);
    if (model) model->fault_context(0, why);
    return model != nullptr;
}

}  // namespace baregpu::registry
