#include "drivers/sim/amdgpu/navi.hpp"

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/discovery_image.hpp"
#include "drivers/sim/amdgpu/gc.hpp"
#include "drivers/sim/amdgpu/host_exec.hpp"
#include "drivers/sim/amdgpu/native_exec.hpp"
#include "drivers/sim/amdgpu/ih.hpp"
#include "drivers/sim/amdgpu/pm4_engine.hpp"
#include "drivers/sim/amdgpu/psp.hpp"
#include "drivers/sim/amdgpu/reference_firmware.hpp"
#include "drivers/sim/amdgpu/register_catalog.hpp"
#include "drivers/sim/amdgpu/sdma_engine.hpp"
#include "drivers/sim/amdgpu/register_file.hpp"
#include "drivers/sim/amdgpu/smu.hpp"
#include "drivers/sim/amdgpu/state_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <vector>

namespace baregpu::sim::amdgpu {

namespace {
// How long the IFWI init of a chip that just powered on takes (register_file.cpp).
constexpr uint64_t kIfwiInitNs = 60'000'000;
}  // namespace

struct NaviModel::Impl {
    Impl(const ModelOptions& o)
        : asic(asic_info(o.asic)), file(o.asic, o.state_dir, o.ephemeral), firmware(asic, o.firmware_dir), chip(asic, file),
          catalog(asic), psp(chip, firmware), smu(chip, firmware), ih(chip), gmc(chip, ih), gc(chip, catalog, firmware),
          registers(chip, psp, smu, gmc, ih, gc), cp(chip, gmc, ih), sdma(chip, gmc),
          host(chip, gmc, file.fd(), StateFile::vram_file_offset()), native(chip, gmc) {
        cp.executor = &host;
        cp.native = &native;
        cp.gc_regs = &gc;
        sdma.gc_regs = &gc;
        host.sh_mem_config = [this] { return gc.sh_mem_config(0); };  // VMID 0 runs every kernel
    }

    const AsicInfo& asic;
    StateFile file;
    ReferenceFirmware firmware;
    Chip chip;
    RegisterCatalog catalog;
    Psp psp;
    Smu smu;
    Ih ih;
    Gmc gmc;
    GcRegs gc;
    RegisterFile registers;
    ComputeEngine cp;
    SdmaEngine sdma;
    HostExecutor host;
    NativeExecutor native;
};

std::unique_ptr<pci::sim::SimDeviceModel> make_model(const ModelOptions& options) {
    return std::make_unique<NaviModel>(options);
}

NaviModel::NaviModel(const ModelOptions& options) : options_(options), impl_(std::make_unique<Impl>(options)) {
    impl_->chip.mode1_reset = [this] { mode1_reset(); };
    kicks_.reserve(16);  // one per doorbell at most (kicks coalesce): a doorbell never allocates
    // The CP's register waits go through the same decode as BAR5 (the model's lock is held).
    impl_->cp.reg_read = [this](uint32_t a) { return impl_->registers.read(a); };
    impl_->cp.reg_write = [this](uint32_t a, uint32_t v) { impl_->registers.write(a, v); };
    // Kernels run with the model's lock released (only ever on the engine thread, which holds it
    // then): BAR5, gpu_read/gpu_write and status calls do not wait for a kernel to end.
    impl_->host.unlocked = [this](const std::function<void()>& work) {
        mutex_.unlock();
        try {
            work();
        } catch (...) {
            mutex_.lock();
            throw;
        }
        mutex_.lock();
    };
    // BAREGPU_SIM_TRACE=regs (a comma-separated list may name more): every register write the driver
    // makes, with its name, to stderr or to the file BAREGPU_SIM_TRACE_FILE names (appended).
    if (const char* t = std::getenv("BAREGPU_SIM_TRACE"); t != nullptr && std::string_view(t).find("regs") != std::string_view::npos) {
        trace_out_ = stderr;
        if (const char* f = std::getenv("BAREGPU_SIM_TRACE_FILE"); f != nullptr && *f != '\0') {
            trace_out_ = std::fopen(f, "a");
            if (trace_out_ == nullptr) trace_out_ = stderr;
        }
        impl_->registers.trace = [this](uint32_t address, uint32_t value, const char* via) { trace_write(address, value, via); };
    }
    powered_on_at_open_ = impl_->file.powered_on();
    if (powered_on_at_open_) {
        power_on(/*keep_vram=*/false);
        impl_->chip.ifwi_ready_ns = kIfwiInitNs;  // the bus's clock starts at 0 when it attaches the model
    }
    engine_ = std::thread([this] { engine_loop(); });
}

NaviModel::~NaviModel() {
    stop_engines();
    if (trace_out_ != nullptr && trace_out_ != stderr) std::fclose(trace_out_);
}

void NaviModel::trace_write(uint32_t address, uint32_t value, const char* via) {
    Impl& m = *impl_;
    std::string name;
    const char* block = "?";
    if (const RegisterInfo* info = m.catalog.find(address)) {
        name = info->name;
        block = info->block;
    } else if (address == m.chip.load(m.chip.reg.remap_hdp_mem_flush_cntl) / 4) {
        name = "HDP_MEM_FLUSH_CNTL (remapped)";
        block = "NBIO";
    } else {
        name = fmt::format("0x{:x} (no name in the catalog)", address);
    }
    std::fprintf(trace_out_, "sim-am %s W %-6s %-44s 0x%08x%s\n", std::string(m.asic.name).c_str(), block, name.c_str(), value, via);
}

void NaviModel::stop_engines() {
    {
        std::lock_guard lock(kick_mutex_);
        stop_ = true;
    }
    kick_cv_.notify_all();
    if (engine_.joinable()) engine_.join();
}

void NaviModel::engine_loop() {
    // Real hardware polls a WAIT_REG_MEM / POLL_REGMEM every few hundred cycles; ~30 µs keeps a
    // waiting queue responsive without burning a host core.
    constexpr auto kPollInterval = std::chrono::microseconds(30);
    // Both vectors keep their capacity: a doorbell write (the driver's submit) never allocates.
    std::vector<Kick> batch;
    batch.reserve(16);
    for (;;) {
        batch.clear();
        uint64_t pass = 0;
        {
            std::unique_lock lock(kick_mutex_);
            auto woken = [&] { return stop_ || !kicks_.empty() || requested_pass_ > completed_pass_; };
            if (polling_)
                kick_cv_.wait_for(lock, kPollInterval, woken);
            else
                kick_cv_.wait(lock, woken);
            if (stop_) return;
            batch.assign(kicks_.begin(), kicks_.end());
            kicks_.clear();
            pass = requested_pass_;
            in_pass_ = true;
        }
        bool waiting = false;
        {
            std::lock_guard lock(mutex_);
            Impl& m = *impl_;
            try {
                for (const Kick& k : batch) {
                    // NBIO/NBIF's S2A table routes the doorbell; the MEC takes it only inside its range
                    // (gc.hpp). A doorbell that reaches an engine but no queue is ignored.
                    std::string why, source;
                    switch (m.gc.route(k.offset, why, source)) {
                        case GcRegs::Route::sdma: m.sdma.doorbell(k.offset, k.width, k.value); break;
                        case GcRegs::Route::cp:
                            if (m.gc.mec_accepts(k.offset, why, source))
                                m.cp.doorbell(k.offset, k.width, k.value);
                            else
                                m.gc.drop(k.offset, why, source);
                            break;
                        case GcRegs::Route::dropped: m.gc.drop(k.offset, why, source); break;
                    }
                }
                m.cp.poll();
                m.sdma.poll();
            } catch (const std::exception& e) {
                // Nothing may escape the thread (std::terminate); the bus records what went wrong.
                m.chip.violation(fmt::format("the engine thread failed: {}", e.what()), "engine thread", "model limit");
            }
            waiting = m.cp.any_waiting() || m.sdma.waiting();
        }
        {
            std::lock_guard lock(kick_mutex_);
            polling_ = waiting;
            in_pass_ = false;
            completed_pass_ = std::max(completed_pass_, pass);
        }
        idle_cv_.notify_all();
    }
}

void NaviModel::request_pass() {
    {
        std::lock_guard lock(kick_mutex_);
        ++requested_pass_;
    }
    kick_cv_.notify_one();
}

void NaviModel::settle(std::chrono::milliseconds bound) {
    {
        std::lock_guard lock(kick_mutex_);
        if (kicks_.empty() && !in_pass_ && !polling_) return;
    }
    wait_engines_idle(bound);
}

bool NaviModel::wait_engines_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(kick_mutex_);
    const uint64_t want = ++requested_pass_;
    kick_cv_.notify_one();
    return idle_cv_.wait_for(lock, timeout, [&] { return completed_pass_ >= want && kicks_.empty(); });
}

void NaviModel::inject_dispatch_hang(bool hang) {
    impl_->cp.hang_dispatches.store(hang, std::memory_order_release);
    request_pass();  // a held dispatch resumes at once
}

pci::sim::DeviceSpec NaviModel::spec() const {
    const AsicInfo& a = impl_->asic;
    pci::sim::DeviceSpec s;
    s.identity.vendor_id = a.vendor_id;
    s.identity.device_id = a.device_id;
    s.identity.subsystem_vendor_id = a.vendor_id;
    s.identity.subsystem_id = 0x0e3b;
    s.identity.revision = a.revision;
    s.identity.class_code = 0x030000;  // VGA-compatible display controller
    using Kind = pci::sim::BarSpec::Kind;
    // CPU-mappable: the driver keeps rings, signals and buffers in VRAM and writes them through
    // pointers into BAR0, as it does on a large-BAR board.
    s.bars.push_back({0, kVramBytes, true, true, Kind::Memory, impl_->file.vram(), /*cpu_mappable=*/true});
    s.bars.push_back({2, kBar2Bytes, true, true, Kind::Registers, {}});
    s.bars.push_back({5, kBar5Bytes, false, false, Kind::Registers, {}});
    s.msi_vectors = 1;
    s.pci_express = true;
    return s;
}

void NaviModel::connect(pci::sim::SimPort& port) {
    SimDeviceModel::connect(port);
    // Not under mutex_: the bus calls this holding its own lock, which the engine thread takes
    // (violations) while holding mutex_. Nothing else can reach the model before it is attached,
    // and the engine thread only runs after a doorbell or a request, which synchronize with this.
    impl_->chip.port = &port;
    // A new bus starts its clock at 0: whatever was "working" when the last owner left is done.
    impl_->psp.reconnect();
    impl_->smu.reconnect();
}

void NaviModel::power_on(bool keep_vram) {
    Impl& m = *impl_;
    m.file.power_on(keep_vram);
    // Every register the model knows powers on with its reset value (register_catalog.cpp: from
    // gc_11_0_0_default.h, or the model's choice where no default header is public — among them CP_STAT
    // busy until the RLC autoload, the strap with NO_SOFT_RESET_DEV0_F2 set, the HDP flush remapped
    // where Linux puts it, every S2A doorbell route disabled), then the banked GC registers.
    for (const RegisterInfo& info : m.catalog.all()) m.chip.store(m.catalog.address(info), info.reset);
    m.gmc.power_on();
    m.gc.power_on();
    m.cp.reset();
    m.sdma.reset();
    m.host.reset();
    // The discovery table the VBIOS leaves at the top of VRAM.
    std::vector<std::byte> image = build_discovery_image(m.asic);
    std::memcpy(m.file.vram().data() + kDiscoveryOffset, image.data(), image.size());
}

void NaviModel::mode1_reset() {
    // Everything but VRAM contents goes back to power-on; the chip then needs time to come back
    // (Linux waits SMU13_MODE1_RESET_WAIT_TIME_IN_MS = 500 ms before touching it).
    Impl& m = *impl_;
    if (m.chip.port != nullptr && m.chip.port->bus_master_enabled()) {
        // DMA in flight across the reset would land anywhere: Linux amdgpu_device_mode1_reset
        // clears bus mastering first (pci_clear_master), as does tinygrad (amdev.py AMDev.__init__).
        m.chip.violation("mode1 reset requested with PCI bus mastering on", "PCI_COMMAND.BUS_MASTER",
                         "Linux amdgpu_device.c amdgpu_device_mode1_reset (pci_clear_master first)");
    }
    const uint32_t resets = m.chip.state().smu.mode1_resets;
    const uint32_t hung = m.chip.state().smu.hung;
    power_on(/*keep_vram=*/true);
    m.chip.state().smu.mode1_resets = resets + 1;
    m.chip.state().smu.hung = hung;
    m.chip.state().smu.reset_done_at_ns = m.chip.now() + smu::kMode1ResetNs;
}

uint64_t NaviModel::mmio_read(unsigned bar, uint64_t offset, unsigned width) {
    std::lock_guard lock(mutex_);
    if (bar == 5) return impl_->registers.bar5_read(offset, width);
    return 0;  // BAR2: doorbells read as 0
}

void NaviModel::mmio_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) {
    if (bar == 2) {
        // A 64-bit doorbell written as two dword TLPs (a USB bridge sends nothing wider: the custom
        // firmware low dword first, asm2464pd-firmware pcie_pio.h; tinygrad's stock-firmware path
        // high dword first, usb.py USBMMIOInterface._acc_one — AMD doorbells work over both): the
        // high dword is held, the low dword rings the doorbell with the held high dword.
        if (width == 4) {
            std::lock_guard lock(kick_mutex_);
            if (offset % 8 == 4) {
                doorbell_high_[offset - 4] = static_cast<uint32_t>(value);
                return;
            }
            auto high = doorbell_high_.find(offset);
            value = (high != doorbell_high_.end() ? uint64_t{high->second} << 32 : 0) | (value & 0xffffffff);
            width = 8;
        }
        // A doorbell: recorded for the engine thread, which finds the queue it belongs to (others
        // are accepted and ignored) without the writer waiting for any of it.
        // Kicks of one doorbell not yet taken coalesce (the last value is what the slot holds), so
        // the list stays as short as the number of queues.
        {
            std::lock_guard lock(kick_mutex_);
            auto same = std::find_if(kicks_.begin(), kicks_.end(), [&](const Kick& k) { return k.offset == offset && k.width == width; });
            if (same != kicks_.end())
                same->value = value;
            else
                kicks_.push_back({offset, width, value});
        }
        kick_cv_.notify_one();
        return;
    }
    std::lock_guard lock(mutex_);
    if (bar == 5) {
        impl_->registers.bar5_write(offset, width, value);
        if (width == 4) {
            const auto address = static_cast<uint32_t>(offset / 4);
            impl_->cp.register_written(address, static_cast<uint32_t>(value));
            impl_->sdma.register_written(address, static_cast<uint32_t>(value));
        }
        return;
    }
}

void NaviModel::inject_smu_hang(bool hang) {
    std::lock_guard lock(mutex_);
    impl_->chip.state().smu.hung = hang ? 1 : 0;
}

void NaviModel::inject_psp_error(uint32_t gfx_cmd_id, uint32_t status) {
    std::lock_guard lock(mutex_);
    PspState& p = impl_->chip.state().psp;
    p.inject_cmd_id = gfx_cmd_id;
    p.inject_status = status;
    p.inject_armed = 1;
}

bool NaviModel::gpu_access(uint64_t va, size_t bytes, bool write, VmClient client) {
    std::lock_guard lock(mutex_);
    return impl_->gmc.probe(va, bytes, write, client);
}

bool NaviModel::gpu_read(uint64_t va, std::span<std::byte> out, VmClient client) {
    std::lock_guard lock(mutex_);
    return impl_->gmc.access(va, out, false, client);
}

bool NaviModel::gpu_write(uint64_t va, std::span<const std::byte> data, VmClient client) {
    std::vector<std::byte> copy(data.begin(), data.end());
    std::lock_guard lock(mutex_);
    return impl_->gmc.access(va, copy, true, client);
}

void NaviModel::set_dispatch_hook(DispatchHook hook) {
    std::lock_guard lock(mutex_);
    impl_->cp.on_dispatch = std::move(hook);
}

NativeDispatchReport NaviModel::native_report() const {
    std::lock_guard lock(mutex_);
    return impl_->native.last_report();
}

NativeDispatchReport NaviModel::native_totals() const {
    std::lock_guard lock(mutex_);
    return impl_->native.totals();
}

NativeDispatchReport NaviModel::native_between(uint32_t pipe, uint32_t queue, uint64_t begin_ticks, uint64_t end_ticks) const {
    std::lock_guard lock(mutex_);
    return impl_->native.between(pipe, queue, begin_ticks, end_ticks);
}

NaviModel::ComputeQueueStatus NaviModel::compute_queue(uint32_t pipe, uint32_t queue) const {
    std::lock_guard lock(mutex_);
    return impl_->cp.status(pipe, queue);
}

NaviModel::SdmaQueueStatus NaviModel::sdma_queue() const {
    std::lock_guard lock(mutex_);
    return impl_->sdma.status();
}

void NaviModel::latch_vm_fault(uint64_t va) {
    std::lock_guard lock(mutex_);
    impl_->gmc.fault(va, false, VmClient::gfx);
}

void NaviModel::power_cycle() {
    std::lock_guard lock(mutex_);
    power_on(/*keep_vram=*/false);
    impl_->chip.ifwi_ready_ns = impl_->chip.now() + kIfwiInitNs;
}

const std::filesystem::path& NaviModel::state_path() const { return impl_->file.path(); }

uint32_t NaviModel::register_value(uint32_t dword_address) {
    std::lock_guard lock(mutex_);
    return impl_->registers.read(dword_address);
}

NaviModel::ClockState NaviModel::smu_clock(uint32_t clock) const {
    std::lock_guard lock(mutex_);
    if (clock >= smu::kClockCount) return {0, 0, 0};
    const SmuState& s = impl_->chip.state().smu;
    return {s.soft_min[clock], s.soft_max[clock], impl_->smu.current_mhz(clock)};
}

uint32_t NaviModel::hdp_flushes() const {
    std::lock_guard lock(mutex_);
    return impl_->chip.state().gmc.hdp_flushes;
}

uint32_t NaviModel::tlb_invalidations(VmClient hub) const {
    std::lock_guard lock(mutex_);
    const GmcState& g = impl_->chip.state().gmc;
    return hub == VmClient::gfx ? g.gc_invalidations : g.mm_invalidations;
}

uint32_t NaviModel::mode1_resets() const {
    std::lock_guard lock(mutex_);
    return impl_->chip.state().smu.mode1_resets;
}

uint32_t NaviModel::dropped_doorbells() const {
    std::lock_guard lock(mutex_);
    return impl_->gc.dropped_doorbells();
}

std::string NaviModel::register_name(uint32_t dword_address) const {
    const RegisterInfo* info = impl_->catalog.find(dword_address);
    return info != nullptr ? std::string(info->name) : reg_name(dword_address);
}

uint32_t NaviModel::ih_entries_written() const {
    std::lock_guard lock(mutex_);
    return impl_->chip.state().ih.entries_written;
}

}  // namespace baregpu::sim::amdgpu
