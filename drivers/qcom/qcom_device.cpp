#include "drivers/qcom/qcom_device.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/hostcode/elf_loader.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/qcom/a6xx_registers.hpp"
#include "drivers/qcom/cache.hpp"
#include "drivers/qcom/qcom_program.hpp"
#include "hcq/clock.hpp"

#include <algorithm>
#include <atomic>
#include <dlfcn.h>
#include <cstring>
#include <fmt/format.h>
#include <span>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>

namespace baregpu::qcom::kernels {
std::span<const std::byte> find_object(std::string_view name);
}

namespace baregpu::qcom {

namespace {

constexpr uint64_t kWindowAlign = 2ull << 20;
constexpr uint32_t kMaxShared = 32 * 1024;  // A6xx workgroup-shared memory
constexpr uint32_t kMaxThreads = 1024;
constexpr uint32_t kMaxKernarg = 4096;       // 256 vec4 constants (CONSTLEN_256)
// Sleep slices: one KGSL wait at most this long per call (the caller loops to its deadline).
constexpr uint32_t kSleepSliceMs = 2;

hcq::DeviceLimits limits_for(const QcomOptions& o) {
    hcq::DeviceLimits lim;
    lim.max_threads_per_group = kMaxThreads;
    lim.max_shared_bytes = kMaxShared;
    lim.max_kernarg_bytes = kMaxKernarg;
    lim.max_grid = {0x7fffffffu, 0xffffu, 0xffffu};
    lim.memory_bytes = o.va_bytes - kWindowAlign;
    if (o.memory_bytes != 0) lim.memory_bytes = std::min(lim.memory_bytes, o.memory_bytes);
    return lim;
}

std::string arch_for(const QcomOptions& o) { return o.isa == KernelIsa::host ? "x86_64" : "adreno"; }

// Every instance its own peer group: a KGSL device reaches only memory it allocated or imported.
std::string peer_group_for(const QcomOptions& o) {
    static std::atomic<uint64_t> instances{0};
    return fmt::format("{}#{}", o.name, instances.fetch_add(1, std::memory_order_relaxed));
}

// The platform's OpenCL library, whose compiler produces the Adreno program format.
std::string vendor_opencl_status() {
    for (const char* lib : {"libOpenCL.so", "libOpenCL.so.1", "/vendor/lib64/libOpenCL.so"}) {
        if (void* h = ::dlopen(lib, RTLD_NOW | RTLD_LOCAL)) {
            ::dlclose(h);
            return fmt::format("the vendor OpenCL library is present ({}), but parsing its program binaries is not implemented", lib);
        }
    }
    const char* why = ::dlerror();
    return fmt::format("no vendor OpenCL library could be loaded (dlopen libOpenCL.so: {}); its compiler produces the Adreno program "
                       "format, and parsing that format is not implemented either",
                       why ? why : "not found");
}

uint32_t context_flags(uint32_t priority) {
    using namespace kgsl;
    // What tinygrad's ops_qcom.py (QCOMDevice.__init__) creates its context with.
    return KGSL_CONTEXT_PREAMBLE | KGSL_CONTEXT_PWR_CONSTRAINT | KGSL_CONTEXT_NO_FAULT_TOLERANCE | KGSL_CONTEXT_NO_GMEM_ALLOC |
           (priority & 0xf) << KGSL_CONTEXT_PRIORITY_SHIFT | KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN << KGSL_CONTEXT_PREEMPT_STYLE_SHIFT;
}

}  // namespace

std::string adreno_name(uint32_t chip_id) {
    return fmt::format("a{}{}{}", chip_id >> 24, (chip_id >> 16) & 0xff, (chip_id >> 8) & 0xff);
}

std::shared_ptr<QcomDevice> QcomDevice::create(std::shared_ptr<KgslSyscalls> sys, QcomOptions o) {
    if (o.ring_bytes < 4096 || o.ring_bytes % 4096 != 0 || o.ring_bytes > (1ull << 30)) {
        throw Error(o.name, fmt::format("ring={} must be a multiple of 4096 from 4096 to 1G", o.ring_bytes));
    }
    if (o.va_bytes < (64ull << 20) || o.va_bytes > (1ull << 40)) throw Error(o.name, fmt::format("va={} must be from 64M to 1T", o.va_bytes));
    if (o.staging_bytes < 4096 || o.staging_bytes % 4096 != 0) {
        throw Error(o.name, fmt::format("staging={} must be a multiple of 4096", o.staging_bytes));
    }
    auto device = std::make_unique<KgslDevice>(std::move(sys), o.path, o.name);
    kgsl::kgsl_devinfo info = device->device_info();
    uint32_t core = info.chip_id >> 24;
    if (core != 6 && core != 7) {
        throw UnsupportedError(o.name, fmt::format("{} (chip_id 0x{:08x}): only Adreno 6xx and 7xx (chip_id core 6 or 7) are supported",
                                                   adreno_name(info.chip_id), info.chip_id));
    }
    // The SVM window: every GPU object is mapped at an address inside it that HCQ chose, and
    // KGSL takes only addresses inside its SVM range (svm_window.hpp); a smaller range (the older
    // kernels' 4 GiB) makes the window, and so va, smaller.
    SvmWindow window = SvmWindow::reserve(*device, o.va_bytes, 64ull << 20, kWindowAlign, o.svm_ranges, o.name);
    o.va_bytes = window.size();
    return std::make_shared<QcomDevice>(Token{}, std::move(device), info, std::move(window), std::move(o));
}

QcomDevice::QcomDevice(Token, std::unique_ptr<KgslDevice> device, const kgsl::kgsl_devinfo& info, SvmWindow window, QcomOptions options)
    : Device(options.name, arch_for(options), limits_for(options), peer_group_for(options)),
      options_(std::move(options)),
      kgsl_(std::move(device)),
      info_(info),
      window_(std::move(window)) {
    uint32_t core = info_.chip_id >> 24;
    uint64_t base = reinterpret_cast<uint64_t>(window_.base());

    compute_ctx_ = kgsl_->drawctxt_create(context_flags(options_.priority));
    try {
        copy_ctx_ = kgsl_->drawctxt_create(context_flags(options_.priority));
    } catch (...) {
        kgsl_->drawctxt_destroy(compute_ctx_);
        throw;
    }
    Parts parts;
    parts.memory = this;
    parts.va_base = GpuVirtualAddress(base);
    parts.va_size = options_.va_bytes - kWindowAlign;
    parts.timestamp_hz = a6xx::kAlwaysOnHz;
    parts.staging_slot_bytes = options_.staging_bytes;
    parts.staging_slots = options_.staging_slots;
    // Engines first (attach needs them); their rings and shared state come right after.
    compute_ = std::make_unique<QcomEngine>(*this, *kgsl_, hcq::QueueKind::compute, "compute", compute_ctx_);
    copy_ = std::make_unique<QcomEngine>(*this, *kgsl_, hcq::QueueKind::copy, "copy", copy_ctx_);
    compute_->set_sibling(copy_.get());
    copy_->set_sibling(compute_.get());
    parts.compute = {compute_.get()};
    if (options_.isa == KernelIsa::host) parts.copy = {copy_.get()};
    attach(parts);
    try {
        hcq::BufferOptions uncached{.host = true, .uncached = true};
        constants_ = memory().allocate(4096, uncached, nullptr);
        std::memset(constants_.cpu(), 0, 4096);
        uint32_t one = 1;
        std::memcpy(constants_.cpu() + 64, &one, 4);
        QcomEngine::Shared shared{constants_.address(), constants_.address() + 64, nullptr, Generation::of(core)};
        if (options_.isa == KernelIsa::host) {
            copy_program_ = load_host_program(kernels::find_object("copy.o"), "qcom_copy");
            shared.copy_program = static_cast<const QcomProgram*>(copy_program_.get());
        }
        auto ring = [&] { return memory().allocate(options_.ring_bytes, hcq::BufferOptions{.host = true}, nullptr); };
        compute_->start(ring(), shared);
        copy_->start(ring(), shared);
    } catch (...) {
        compute_->release();
        copy_->release();
        copy_program_.reset();
        constants_ = {};
        detach();
        kgsl_->drawctxt_destroy(copy_ctx_);
        kgsl_->drawctxt_destroy(compute_ctx_);
        throw;
    }
    opened();
}

QcomDevice::~QcomDevice() {
    // Let queued work finish (bounded), then drop what the common part and the engines own.
    begin_shutdown();
    for (QcomEngine* e : {compute_.get(), copy_.get()}) {
        try {
            if (!failed()) e->wait_ticket(e->submitted(), std::chrono::seconds(2));
        } catch (...) {
        }
    }
    // Destroying the contexts ends their work in the kernel (a hung context included) before any
    // memory it may still read goes.
    kgsl_->drawctxt_destroy(copy_->context_id());
    kgsl_->drawctxt_destroy(compute_->context_id());
    compute_->release();
    copy_->release();
    copy_program_.reset();
    constants_ = {};
    for (const auto& [address, gpuaddr] : imports_) kgsl_->sharedmem_free(gpuaddr);
    imports_.clear();
    detach();
    kgsl_.reset();
    window_ = {};
}

void QcomDevice::sleep_for_signal(const hcq::SignalSlot& slot, uint64_t target, uint64_t deadline_ns) {
    (void)slot;
    (void)target;
    uint64_t now = hcq::host_now_ns();
    if (failed() || now >= deadline_ns) return;
    uint32_t ms = uint32_t(std::min<uint64_t>((deadline_ns - now + 999'999) / 1'000'000, kSleepSliceMs));
    // Sleep in the kernel on whichever context has work pending; a signal written by the host or
    // a peer is noticed within the slice. Held-back submissions of both go to KGSL first: the
    // work this one waits for may be among them.
    if (!compute_->feed_all()) return;
    for (QcomEngine* e : {compute_.get(), copy_.get()}) {
        if (e->submitted() > e->completed_ticket()) {
            e->sleep_once(std::max<uint32_t>(ms, 1));
            return;
        }
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(deadline_ns - now, 100'000)));
}

void QcomDevice::recover() {
    std::lock_guard lock(submission_mutex());
    // KGSL_CONTEXT_NO_FAULT_TOLERANCE: a faulted context stays invalid; the way back is a new one.
    for (QcomEngine* e : {compute_.get(), copy_.get()}) {
        uint32_t fresh = kgsl_->drawctxt_create(context_flags(options_.priority));
        uint32_t old = e->context_id();
        kgsl_->drawctxt_destroy(old);  // ends what the old context still had queued
        e->restart(fresh);
    }
    compute_ctx_ = compute_->context_id();
    copy_ctx_ = copy_->context_id();
    clear_failure();
}

// ---- memory ----

std::byte* QcomDevice::map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options) {
    (void)page_size;
    auto* at = reinterpret_cast<void*>(va.value());
    uint32_t id = kgsl_->gpuobj_alloc_at(at, size, options.uncached);
    try {
        std::lock_guard lock(objects_mutex_);
        objects_[va.value()] = id;
    } catch (...) {
        kgsl_->gpuobj_free(id, at, size);
        throw;
    }
    return static_cast<std::byte*>(at);
}

void QcomDevice::unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte* cpu) noexcept {
    uint32_t id = 0;
    {
        std::lock_guard lock(objects_mutex_);
        auto it = objects_.find(va.value());
        if (it == objects_.end()) return;
        id = it->second;
        objects_.erase(it);
    }
    kgsl_->gpuobj_free(id, cpu, size);
    // Keep the window reserved: nothing else may land inside it.
    ::mmap(cpu, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

// ---- user memory ----

GpuVirtualAddress QcomDevice::import_user_memory(void* host, uint64_t bytes) {
    check_usable();
    if (host == nullptr || bytes == 0) throw Error(name(), "import_user_memory: an empty range");
    constexpr uint64_t kPage = 4096;
    const uint64_t address = reinterpret_cast<uint64_t>(host);
    const uint64_t first = address & ~(kPage - 1);
    const uint64_t end = (address + bytes + kPage - 1) & ~(kPage - 1);
    // The GPU reads memory, not the CPU's caches: make what the CPU wrote reach it first.
    clean_dcache(host, bytes);
    uint64_t gpuaddr = kgsl_->map_user_mem(first, end - first);
    GpuVirtualAddress result(gpuaddr + (address - first));
    std::lock_guard lock(objects_mutex_);
    imports_[result.value()] = gpuaddr;
    return result;
}

void QcomDevice::release_user_memory(GpuVirtualAddress address) {
    uint64_t gpuaddr;
    {
        std::lock_guard lock(objects_mutex_);
        auto it = imports_.find(address.value());
        if (it == imports_.end()) throw Error(name(), fmt::format("release_user_memory: {} is not an import", address.hex()));
        gpuaddr = it->second;
        imports_.erase(it);
    }
    kgsl_->sharedmem_free(gpuaddr);
}

// ---- programs ----

std::shared_ptr<hcq::Program> QcomDevice::load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) {
    if (options_.isa == KernelIsa::host) return load_host_program(code_object, kernel);
    throw UnsupportedError(name(), fmt::format("kernel '{}': {} (drivers/qcom/README.md)", kernel, vendor_opencl_status()));
}

std::shared_ptr<hcq::Program> QcomDevice::load_host_program(std::span<const std::byte> code_object, std::string_view kernel) {
    hostcode::ElfObject object = hostcode::ElfObject::parse(code_object, name(), "code object");
    const hostcode::KernelEntry& k = object.kernel(kernel);
    if (k.shared_bytes > kMaxShared) {
        throw Error(name(), fmt::format("kernel '{}' needs {} bytes of shared memory; the device has {}", k.name, k.shared_bytes, kMaxShared));
    }
    if (k.kernarg_size > kMaxKernarg) {
        throw Error(name(), fmt::format("kernel '{}' takes {} bytes of arguments; the device takes at most {}", k.name, k.kernarg_size,
                                        kMaxKernarg));
    }
    // The descriptor SP_CS_BASE points at, then the image (host_program.h).
    constexpr uint64_t kImageOffset = 256;
    hcq::Buffer code = memory().allocate(kImageOffset + code_object.size(), {.host = true}, nullptr);
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
    // The host ISA has no Adreno register file: the SP state of a minimal program (one full
    // register, no ids read), with the real size of what SP_CS_BASE points at.
    ShaderState shader;
    shader.instr_units = uint32_t((kImageOffset + code_object.size() + 127) / 128);
    shader.uavs = k.num_buffers;
    shader.shared_bytes = k.shared_bytes;
    return std::make_shared<QcomProgram>(*this, std::move(info), std::move(code), shader);
}

}  // namespace baregpu::qcom
