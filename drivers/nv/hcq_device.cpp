#include "drivers/nv/hcq_device.hpp"

#include "base/error.hpp"
#include "drivers/hostcode/elf_loader.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/nv/channel_queue.hpp"
#include "drivers/nv/cubin.hpp"
#include "drivers/nv/nvpci_platform.hpp"
#include "drivers/nv/program.hpp"
#include "hcq/clock.hpp"
#include "hcq/program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::nv {

namespace {

// What a CTA may use: 1024 threads on every GPU here; shared memory per compute class (the CUDA C++ Programming
// Guide's "Technical Specifications per Compute Capability": 99 KiB on sm_86/sm_89/sm_120, 227 KiB on sm_90/sm_100).
constexpr uint32_t kMaxThreads = 1024;
uint32_t max_shared_bytes(uint32_t compute_class) {
    return compute_class == HOPPER_COMPUTE_A ? 227 * 1024 : 99 * 1024;
}

hcq::DeviceLimits limits_for(uint64_t platform_memory, uint64_t memory_bytes, uint32_t compute_class = ADA_COMPUTE_A) {
    hcq::DeviceLimits l;
    l.max_threads_per_group = kMaxThreads;
    l.max_shared_bytes = max_shared_bytes(compute_class);
    // Hopper's host class waits with ACQ_CIRC_GEQ only (clc86f.h): a wrap-aware compare.
    l.circular_waits = compute_class == HOPPER_COMPUTE_A || compute_class == BLACKWELL_COMPUTE_B;
    l.max_kernarg_bytes = static_cast<uint32_t>(hcq::KernelArgs::kMaxBytes);
    l.max_grid = {0x7fffffffu, 0xffffu, 0xffffu};
    l.memory_bytes = platform_memory;
    if (memory_bytes != 0) l.memory_bytes = std::min(l.memory_bytes, memory_bytes);
    return l;
}

std::string device_name(const NvHcqOptions& o, const NvPlatform& platform) { return o.name.empty() ? platform.name() : o.name; }

}  // namespace

std::shared_ptr<NvHcqDevice> NvHcqDevice::create(std::unique_ptr<NvPlatform> platform, NvHcqOptions options) {
    if (options.va_bytes == 0 || kVaBase + options.va_bytes > (1ull << 40))
        throw Error(device_name(options, *platform), fmt::format("a VA window of {:#x} bytes at {:#x} passes 2^40 (GP entries and QMDs "
                                                                 "address 40 bits)", options.va_bytes, kVaBase));
    return std::make_shared<NvHcqDevice>(Token{}, std::move(platform), std::move(options));
}

std::shared_ptr<NvHcqDevice> NvHcqDevice::create(std::unique_ptr<pci::PciDevice> pci, std::unique_ptr<GspDevice> gsp,
                                                 NvHcqOptions options) {
    std::string name = options.name.empty() ? pci->name() : options.name;
    return create(std::make_unique<NvpciPlatform>(std::move(pci), std::move(gsp), std::move(name)), std::move(options));
}

NvHcqDevice::NvHcqDevice(Token, std::unique_ptr<NvPlatform> platform, NvHcqOptions options)
    : Device(device_name(options, *platform), "x86_64", limits_for(platform->memory_bytes(), options.memory_bytes),
             device_name(options, *platform)),
      options_(std::move(options)), platform_(std::move(platform)) {
    // RM: the device objects on the platform's client; once the VA space exists, before the channel group, whatever
    // the platform does first (nvpci: our page directory to GSP-RM, SET_PAGE_DIRECTORY; nvrm: the doorbell page).
    rm_ = RmDevice::open(platform_->transport(), platform_->client(), platform_->branch(), platform_->device_instance(),
                         platform_->vaspace_owner(), [this](RmDevice& rm) { platform_->attach(rm); });
    set_limits(limits_for(platform_->memory_bytes(), options_.memory_bytes, rm_->classes().compute));

    compute_ = std::make_unique<ChannelQueue>(*this, ChannelQueue::Config{hcq::QueueKind::compute, "compute", options_.gpfifo_entries,
                                                                           options_.compute_ring_bytes});
    copy_ = std::make_unique<ChannelQueue>(*this, ChannelQueue::Config{hcq::QueueKind::copy, "copy:0", options_.gpfifo_entries,
                                                                        options_.copy_ring_bytes});
    peers_ = make_peer_window();
    Parts parts;
    parts.memory = this;
    parts.va_base = GpuVirtualAddress(kVaBase);
    parts.va_size = options_.va_bytes;
    parts.compute = {compute_.get()};
    parts.copy = {copy_.get()};
    parts.timestamp_hz = 1'000'000'000;  // the PTIMER nanosecond clock semaphores stamp
    parts.staging_slot_bytes = options_.staging_bytes;
    parts.staging_slots = options_.staging_slots;
    attach(parts);
    compute_->start();
    copy_->start();
    opened();
}

NvHcqDevice::~NvHcqDevice() {
    begin_shutdown();
    compute_->stop();
    copy_->stop();
    compute_->release();
    copy_->release();
    detach();
    peers_.reset();  // unmaps through the platform's page tables, which go with it below
    platform_->detach();
    try {
        std::lock_guard lock(rm_mutex_);
        rm_.reset();
    } catch (...) {
    }
    platform_.reset();  // nvpci: the client, then UNLOADING_GUEST_DRIVER; nvrm: the client and the fds
}

void NvHcqDevice::channel_opened(uint32_t token, std::string queue) {
    std::lock_guard lock(fault_mutex_);
    channels_[token] = std::move(queue);
}

void NvHcqDevice::channel_closed(uint32_t token) noexcept {
    std::lock_guard lock(fault_mutex_);
    channels_.erase(token);
}

// ---- memory ----

std::byte* NvHcqDevice::map_memory(GpuVirtualAddress va, uint64_t size, uint64_t, const hcq::BufferOptions& options) {
    std::lock_guard lock(memory_mutex_);
    return platform_->map(va, size, options);
}

void NvHcqDevice::unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte*) noexcept {
    std::lock_guard lock(memory_mutex_);
    platform_->unmap(va, size);
}

// ---- programs ----

namespace {

// The SM a compute class runs (the cubin e_flags SM field a kernel for it must carry); 0 when not known here.
uint32_t sm_of(uint32_t compute_class) {
    switch (compute_class) {
        case AMPERE_COMPUTE_B: return 86;
        case ADA_COMPUTE_A: return 89;
        case HOPPER_COMPUTE_A: return 90;
        default: return 0;
    }
}

bool is_cubin(std::span<const std::byte> code) {
    uint16_t machine = 0;
    if (code.size() >= 20 && std::memcmp(code.data(), "\x7f" "ELF", 4) == 0) std::memcpy(&machine, code.data() + 18, 2);
    return machine == kEmCuda;
}

}  // namespace

std::shared_ptr<hcq::Program> NvHcqDevice::load_cubin(std::span<const std::byte> code_object, std::string_view kernel) {
    const uint32_t compute = rm_->classes().compute, sm = sm_of(compute);
    if (sm == 0)
        throw UnsupportedError(name(), fmt::format("cubins for {} are not loaded: its SM is not known here", class_name(compute)));
    // Cubin::parse refuses a cubin for another SM (the e_flags SM field): SASS runs only on its own architecture.
    const Cubin cubin = Cubin::parse(code_object, std::string(kernel) + " cubin", sm);
    const CubinKernel& k = cubin.kernel(kernel);
    if (k.shared_bytes > limits().max_shared_bytes)
        throw Error(name(), fmt::format("kernel '{}' needs {} bytes of shared memory; the device has {}", k.name, k.shared_bytes,
                                        limits().max_shared_bytes));
    if (k.param_size > limits().max_kernarg_bytes)
        throw Error(name(), fmt::format("kernel '{}' takes {} bytes of parameters; the device takes at most {}", k.name, k.param_size,
                                        limits().max_kernarg_bytes));
    hcq::Buffer code = memory().allocate(std::max<uint64_t>(cubin.image_size(), 256), {.cpu_access = true}, nullptr);
    const std::vector<std::byte> image = cubin.link(code.address().value());
    std::memcpy(code.cpu(), image.data(), image.size());
    hcq::KernelInfo info;
    info.name = k.name;
    info.kernarg_size = k.param_size;
    // HCQ's argument layout (u64 buffers, then u32 values) where the parameters have it; otherwise raw bytes.
    uint32_t at = 0;
    for (const CubinParam& p : k.params) {
        if (p.offset != at) break;
        if (p.size == 8 && info.num_values == 0) ++info.num_buffers;
        else if (p.size == 4) ++info.num_values;
        else break;
        at += p.size;
    }
    info.static_shared_bytes = k.shared_bytes;
    info.private_bytes = k.max_stack_bytes;
    info.registers = k.registers;
    info.max_threads_per_group = kMaxThreads;
    NvCubinLaunch launch{k.text_offset, k.registers, k.barriers, k.shared_bytes, k.param_offset, k.param_size, k.constant_bank0};
    return std::make_shared<NvProgram>(*this, std::move(info), std::move(code), std::move(launch));
}

std::shared_ptr<hcq::Program> NvHcqDevice::load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) {
    if (is_cubin(code_object)) return load_cubin(code_object, kernel);
    hostcode::ElfObject object = hostcode::ElfObject::parse(code_object, name(), "code object");
    const hostcode::KernelEntry& k = object.kernel(kernel);
    if (k.shared_bytes > limits().max_shared_bytes)
        throw Error(name(), fmt::format("kernel '{}' needs {} bytes of shared memory; the device has {}", k.name, k.shared_bytes,
                                        limits().max_shared_bytes));
    if (k.kernarg_size > limits().max_kernarg_bytes)
        throw Error(name(), fmt::format("kernel '{}' takes {} bytes of arguments; the device takes at most {}", k.name, k.kernarg_size,
                                        limits().max_kernarg_bytes));
    // The descriptor the simulated compute class finds at the QMD's PROGRAM_ADDRESS, then the image.
    constexpr uint64_t kImageOffset = 256;
    hcq::Buffer code = memory().allocate(kImageOffset + code_object.size(), {.cpu_access = true}, nullptr);
    baregpu_host_program d{};
    d.magic = BAREGPU_HOST_PROGRAM_MAGIC;
    d.version = BAREGPU_HOST_PROGRAM_VERSION;
    d.image_va = code.address().value() + kImageOffset;
    d.image_size = code_object.size();
    d.image_hash = baregpu_host_program_hash(code_object.data(), code_object.size());
    std::memcpy(d.kernel, k.name.data(), std::min(k.name.size(), sizeof(d.kernel) - 1));
    d.kernarg_size = k.kernarg_size;
    std::memcpy(code.cpu(), &d, sizeof d);
    std::memcpy(code.cpu() + kImageOffset, code_object.data(), code_object.size());
    hcq::KernelInfo info;
    info.name = k.name;
    info.kernarg_size = k.kernarg_size;
    info.num_buffers = k.num_buffers;
    info.num_values = k.num_values;
    info.static_shared_bytes = k.shared_bytes;
    info.private_bytes = k.private_bytes;
    info.max_threads_per_group = std::min(k.max_threads, kMaxThreads);
    return std::make_shared<NvProgram>(*this, std::move(info), std::move(code));
}

NvProgram::~NvProgram() {
    static_cast<NvHcqDevice&>(device()).program_unloaded(code_.address(), code_.size(), name());
}

void NvHcqDevice::program_unloaded(GpuVirtualAddress code, uint64_t size, const std::string& kernel) noexcept {
    try {
        std::lock_guard lock(fault_mutex_);
        if (unloaded_.size() >= 64) unloaded_.erase(unloaded_.begin());
        unloaded_.push_back({code.value(), code.value() + size, kernel});
    } catch (...) {
    }
}

// ---- faults ----

bool NvHcqDevice::check_faults() noexcept {
    std::unique_lock lock(rm_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    try {
        if (check_iommu_faults()) return true;
        std::optional<NvChannelError> error = platform_->poll_errors();
        if (!error) return false;
        const std::string& text = error->text;
        std::string queue, unloaded;
        {
            std::lock_guard f(fault_mutex_);
            auto it = channels_.find(error->token);
            queue = it != channels_.end() ? it->second : "no queue of this device";
            // The platform's text names the faulting VA ("... VA 0x..."): a launch of a program unloaded since.
            const size_t at = text.find("VA 0x");
            if (at != std::string::npos) {
                const uint64_t va = std::strtoull(text.c_str() + at + 3, nullptr, 16);
                for (auto u = unloaded_.rbegin(); u != unloaded_.rend(); ++u) {
                    if (va >= (u->begin & ~(kSmallPage - 1)) && va < u->end) {
                        unloaded = fmt::format("a kernel launch found no program is loaded at {:#x}: kernel '{}' was unloaded and its "
                                               "code unmapped; ",
                                               va, u->kernel);
                        break;
                    }
                }
            }
        }
        fail(fmt::format("{}{} reported an error on channel {} ({}): {}{}; queues: {}; {}", unloaded, platform_->reporter(), error->token,
                         queue, text, error->more > 0 ? fmt::format(" (and {} more)", error->more) : "", compute_->describe(),
                         copy_->describe()));
        return true;
    } catch (const std::exception& e) {
        fail(fmt::format("reading {}'s channel errors failed: {}", platform_->reporter(), e.what()));
        return true;
    }
}

void NvHcqDevice::recover() {
    std::lock_guard lock(submission_mutex());
    {
        std::lock_guard rm(rm_mutex_);
        platform_->forget_errors();
    }
    compute_->restart();
    copy_->restart();
    clear_failure();
}

void NvHcqDevice::sleep_for_signal(const hcq::SignalSlot&, uint64_t, uint64_t deadline_ns) {
    if (check_faults()) return;
    const uint64_t now = hcq::host_now_ns();
    if (deadline_ns <= now) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(deadline_ns - now, 50'000)));
}

}  // namespace baregpu::nv
