#include "drivers/cpu/cpu_device.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/cpu/cpu_program.hpp"
#include "drivers/hostcode/elf_loader.hpp"
#include "hcq/clock.hpp"
#include "hcq/profiler.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace baregpu::cpu {

using hostcode::ElfObject;
using hostcode::Import;
using hostcode::KernelEntry;

namespace {

uint64_t half_of_ram() {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 4ull << 30;
    return uint64_t(pages) * uint64_t(page) / 2;
}

hcq::DeviceLimits limits_for(const CpuDevice::Config& config) {
    hcq::DeviceLimits lim;
    lim.max_threads_per_group = 1024;
    lim.max_shared_bytes = CpuDevice::kMaxSharedBytes;
    lim.max_kernarg_bytes = 4096;
    lim.max_grid = {0x7fffffffu, 0xffffu, 0xffffu};
    lim.memory_bytes = std::min(config.memory_bytes ? config.memory_bytes : half_of_ram(), config.va_bytes);
    lim.host_memory = true;
    return lim;
}

}  // namespace

CpuProgram::CpuProgram(CpuDevice& device, hcq::KernelInfo info, hcq::Buffer image, uint64_t entry, uint32_t slot)
    : Program(device, std::move(info)), cpu_device_(device), image_(std::move(image)), entry_(entry), slot_(slot) {}

CpuProgram::~CpuProgram() { cpu_device_.retire_program(slot_, std::move(image_)); }

WakeWord& CpuDevice::signal_event() {
    static WakeWord* event = new WakeWord;  // shared by every CPU device; never destroyed
    return *event;
}

std::shared_ptr<CpuDevice> CpuDevice::open(const hcq::DeviceUri& uri) {
    const std::string& path = uri.path();
    if (!path.empty() && !std::all_of(path.begin(), path.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        throw Error(uri.name(), "a CPU device is named cpu or cpu:N (N a number for independent instances)");
    }
    Config c;
    c.threads = uri.option_u32("threads", 0);
    c.ring_bytes = uri.option_u64("ring", c.ring_bytes);
    c.va_bytes = uri.option_u64("va", c.va_bytes);
    c.memory_bytes = uri.option_u64("memory", 0);
    c.staging_bytes = uri.option_u64("staging", c.staging_bytes);
    c.staging_slots = uri.option_u32("staging_slots", c.staging_slots);
    if (auto skew = uri.option("clock_skew_ppm")) {
        // The whole value, sign included ("5x" is not 5).
        auto [end, ec] = std::from_chars(skew->data(), skew->data() + skew->size(), c.clock_skew_ppm);
        if (skew->empty() || ec != std::errc() || end != skew->data() + skew->size()) {
            throw Error(uri.name(), fmt::format("option clock_skew_ppm={} is not a number", *skew));
        }
    }
    c.clock_offset = uri.option_u64("clock_offset", 0);
    c.profile_log = uri.option_u64("profile_log", 1) != 0;
    uri.reject_unused("threads, ring, va, memory, staging, staging_slots, clock_skew_ppm, clock_offset, profile_log");
    return create(uri.name(), c);
}

std::shared_ptr<CpuDevice> CpuDevice::create(std::string name, const Config& c) {
    // Ring sizes: packet sizes are u32 and the ring offset arithmetic masks (a power of two).
    if (!is_power_of_two(c.ring_bytes) || c.ring_bytes < 4096 || c.ring_bytes > (1ull << 30)) {
        throw Error(name, fmt::format("ring={} must be a power of two from 4096 to 1G", c.ring_bytes));
    }
    if (c.staging_bytes < 4096 || c.staging_bytes % 4096 != 0) {
        throw Error(name, fmt::format("staging={} must be a multiple of 4096", c.staging_bytes));
    }
    if (c.threads > 1024) throw Error(name, fmt::format("threads={} is more than 1024", c.threads));
    if (c.clock_skew_ppm <= -1'000'000 || c.clock_skew_ppm >= 1'000'000) {
        throw Error(name, "clock_skew_ppm must be between -999999 and 999999");
    }
    return std::make_shared<CpuDevice>(Token{}, std::move(name), c);
}

CpuDevice::CpuDevice(Token, std::string name, const Config& config)
    : Device(name, "x86_64", limits_for(config), "host"),
      config_(config),
      clock_origin_(hcq::host_now_ns()),
      space_(name, config.va_bytes) {
    unsigned threads = config.threads ? config.threads : std::max(1u, std::thread::hardware_concurrency());
    pool_ = std::make_unique<ThreadPool>(threads);
    shared_.resize(size_t(threads) * kMaxSharedBytes + 64);
    shared_base_ = shared_.data() + (64 - reinterpret_cast<uintptr_t>(shared_.data()) % 64) % 64;
    for (uint32_t i = kProgramSlots; i-- > 1;) free_slots_.push_back(i);  // slot 0 is never used

    compute_ = std::make_unique<CommandProcessor>(*this, hcq::QueueKind::compute, "compute");
    copy_ = std::make_unique<CommandProcessor>(*this, hcq::QueueKind::copy, "copy");
    compute_->enable_log(config.profile_log);
    copy_->enable_log(config.profile_log);
    Parts parts;
    parts.memory = this;
    // The window's first page stays unmapped: address 0 and its neighbours always fault.
    parts.va_base = space_.base() + 4096;
    parts.va_size = space_.size() - 4096;
    parts.compute = {compute_.get()};
    parts.copy = {copy_.get()};
    parts.timestamp_hz = 1'000'000'000;
    parts.staging_slot_bytes = config.staging_bytes;
    parts.staging_slots = config.staging_slots;
    attach(parts);
    try {
        compute_ring_ = memory().allocate(config.ring_bytes, hcq::BufferOptions{.host = true, .uncached = true}, nullptr);
        copy_ring_ = memory().allocate(config.ring_bytes, hcq::BufferOptions{.host = true, .uncached = true}, nullptr);
        // Touch every ring page now: a first-touch page fault costs microseconds, which the
        // first lap of submissions would otherwise pay.
        std::memset(compute_ring_.cpu(), 0, compute_ring_.size());
        std::memset(copy_ring_.cpu(), 0, copy_ring_.size());
        compute_->start(compute_ring_.bytes());
        copy_->start(copy_ring_.bytes());
    } catch (...) {
        compute_->stop();
        copy_->stop();
        compute_ring_ = {};
        copy_ring_ = {};
        detach();
        throw;
    }
    opened();
}

CpuDevice::~CpuDevice() {
    // Let queued work finish (bounded: a queue waiting on a signal nobody sets is abandoned).
    begin_shutdown();
    for (CommandProcessor* e : {compute_.get(), copy_.get()}) {
        try {
            if (!failed()) e->wait_ticket(e->submitted(), std::chrono::seconds(2));
        } catch (...) {
        }
    }
    compute_->stop();
    copy_->stop();
    compute_ring_ = {};
    copy_ring_ = {};
    {
        std::lock_guard lock(programs_mutex_);
        retired_programs_.clear();
    }
    detach();
}

void CpuDevice::recover() {
    std::lock_guard lock(submission_mutex());
    // Work in flight is dropped: each processor restarts at the end of what was submitted.
    compute_->restart();
    copy_->restart();
    clear_failure();
}

uint64_t CpuDevice::ticks() const noexcept {
    uint64_t now = hcq::host_now_ns();
    if (config_.clock_skew_ppm == 0 && config_.clock_offset == 0) return now;
    auto elapsed = int64_t(now - clock_origin_);
    // elapsed * ppm / 1e6 without overflow for runs shorter than ~100 days.
    int64_t skew = (elapsed / 1'000'000) * config_.clock_skew_ppm + (elapsed % 1'000'000) * config_.clock_skew_ppm / 1'000'000;
    return uint64_t(int64_t(now) + skew) + config_.clock_offset;
}

void CpuDevice::sleep_for_signal(const hcq::SignalSlot& slot, uint64_t target, uint64_t deadline_ns) {
    WakeWord& event = signal_event();
    uint32_t seen = event.prepare();
    uint64_t now = hcq::host_now_ns();
    if (hcq::load_acquire(slot.value) < target && !failed() && now < deadline_ns) event.sleep(seen, deadline_ns - now);
    event.done();
}

uint32_t CpuDevice::program_name(uint32_t handle) const noexcept {
    const LoadedProgram& p = programs_[handle & (kProgramSlots - 1)];
    if (p.generation.load(std::memory_order_acquire) == (handle >> 12)) return p.name.load(std::memory_order_relaxed);
    static const uint32_t unloaded = hcq::Profiler::intern("kernel (unloaded)");
    return unloaded;
}

void CpuDevice::map_peer(const hcq::Buffer& buffer) {
    // Every CPU device shares the host's address space and page table.
    if (buffer.device().peer_group() != peer_group()) hcq::Device::map_peer(buffer);
}

std::byte* CpuDevice::map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions&) {
    return space_.map(va, size, page_size);
}

void CpuDevice::unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte*) noexcept { space_.unmap(va, size); }

std::optional<GpuVirtualAddress> CpuDevice::map_host_memory(std::byte* data, uint64_t size) {
    const auto start = reinterpret_cast<uint64_t>(data);
    if (!PageTable::instance().map_external(start, size)) return std::nullopt;
    return GpuVirtualAddress(start);
}

void CpuDevice::unmap_host_memory(GpuVirtualAddress va, uint64_t size) noexcept { PageTable::instance().unmap_external(va.value(), size); }

void CpuDevice::reclaim_programs_locked(uint64_t completed) noexcept {
    // The slot is emptied before the image goes: an exec still naming it faults instead of
    // jumping into memory that may be reused.
    while (!retired_programs_.empty() && retired_programs_.front().timeline_value <= completed) {
        uint32_t slot = retired_programs_.front().slot & (kProgramSlots - 1);
        programs_[slot].entry.store(0, std::memory_order_release);
        free_slots_.push_back(slot);  // capacity reserved for every slot: does not allocate
        retired_programs_.pop_front();  // drops the image: it retires at once (its value passed)
    }
}

void CpuDevice::collect_retired(uint64_t completed) noexcept {
    std::lock_guard lock(programs_mutex_);
    reclaim_programs_locked(completed);
}

uint32_t CpuDevice::allocate_program_slot() {
    std::lock_guard lock(programs_mutex_);
    reclaim_programs_locked(completed_timeline());
    if (free_slots_.empty()) {
        throw Error(name(), fmt::format("all {} program slots are in use; drop programs or synchronize()", kProgramSlots - 1));
    }
    uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    uint32_t generation = (programs_[slot].generation.load(std::memory_order_relaxed) + 1) & 0xfffff;
    programs_[slot].generation.store(generation, std::memory_order_release);
    return slot | generation << 12;
}

void CpuDevice::retire_program(uint32_t slot, hcq::Buffer image) noexcept {
    try {
        std::lock_guard lock(programs_mutex_);
        retired_programs_.push_back({timeline_value() - 1, slot, std::move(image)});
    } catch (...) {
        // Out of memory while dropping a program: the slot is lost, the image is still freed.
    }
}

std::shared_ptr<hcq::Program> CpuDevice::load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) {
    ElfObject object = ElfObject::parse(code_object, name(), "code object");
    const KernelEntry& k = object.kernel(kernel);
    const hcq::DeviceLimits& lim = limits();
    if (k.shared_bytes > lim.max_shared_bytes) {
        throw Error(name(), fmt::format("kernel '{}' needs {} bytes of shared memory; the device has {}", k.name, k.shared_bytes,
                                        lim.max_shared_bytes));
    }
    if (k.private_bytes > kMaxPrivateBytes) {
        throw Error(name(), fmt::format("kernel '{}' asks for {} bytes of extra stack (private_bytes); the device gives at most {}", k.name,
                                        k.private_bytes, kMaxPrivateBytes));
    }
    if (k.kernarg_size > lim.max_kernarg_bytes) {
        throw Error(name(), fmt::format("kernel '{}' takes {} bytes of arguments; the device takes at most {}", k.name, k.kernarg_size,
                                        lim.max_kernarg_bytes));
    }
    const ElfObject::Layout& layout = object.layout();
    hcq::Buffer image = memory().allocate(layout.size, hcq::BufferOptions{.host = true}, nullptr);
    static const Import imports[] = {
        {"memcpy", reinterpret_cast<uint64_t>(&::memcpy)},
        {"memmove", reinterpret_cast<uint64_t>(&::memmove)},
        {"memset", reinterpret_cast<uint64_t>(&::memset)},
        {"memcmp", reinterpret_cast<uint64_t>(&::memcmp)},
    };
    uint64_t base = image.address().value();
    object.link(image.bytes(), base, imports);
    // W^X: code becomes read+execute, constants read-only, data stays writable.
    space_.protect(image.address() + layout.exec_begin, layout.ro_begin - layout.exec_begin, PROT_READ | PROT_EXEC);
    space_.protect(image.address() + layout.ro_begin, layout.rw_begin - layout.ro_begin, PROT_READ);
    hcq::KernelInfo info;
    info.name = k.name;
    info.kernarg_size = k.kernarg_size;
    info.num_buffers = k.num_buffers;
    info.num_values = k.num_values;
    info.static_shared_bytes = k.shared_bytes;
    info.private_bytes = k.private_bytes;
    info.max_threads_per_group = std::min(k.max_threads, lim.max_threads_per_group);
    uint32_t handle = allocate_program_slot();
    uint64_t entry = base + k.offset;
    LoadedProgram& slot = programs_[handle & (kProgramSlots - 1)];
    slot.name.store(hcq::Profiler::intern(k.name), std::memory_order_relaxed);
    slot.kernarg_size.store(info.kernarg_size, std::memory_order_relaxed);
    slot.shared_bytes.store(info.static_shared_bytes, std::memory_order_relaxed);
    slot.max_threads.store(info.max_threads_per_group, std::memory_order_relaxed);
    slot.num_buffers.store(info.num_buffers, std::memory_order_relaxed);
    slot.entry.store(entry, std::memory_order_release);
    return std::make_shared<CpuProgram>(*this, std::move(info), std::move(image), entry, handle);
}

void register_cpu_backend(hcq::Registry& registry) {
    hcq::Backend b;
    b.scheme = "cpu";
    b.description = "the host CPU as an HCQ device (x86-64 ELF code objects)";
    b.real_hardware = false;
    b.enumerate = [] { return std::vector<std::string>{"cpu"}; };
    b.open = [](const hcq::DeviceUri& uri) -> std::shared_ptr<hcq::Device> { return CpuDevice::open(uri); };
    registry.add(std::move(b));
}

}  // namespace baregpu::cpu
