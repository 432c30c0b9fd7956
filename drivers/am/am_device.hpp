// AmDevice: one AMD GPU (Navi31, Navi48) brought up by drivers/am without a kernel driver.
// open() reads top to bottom as the bring-up does: ownership, BARs, discovery, registers, then
// either the warm path (the previous owner left the chip initialised with our layout and
// cleanly: skip reset, PSP, SMU and firmware) or a full boot (firmware validated first; mode1
// reset when firmware is running; NBIO, MMHUB, IH, PSP bootloader + ring + IP firmware, SMU, the
// RLC autoload wait, the GC's compute setup), then the GC hub, then the ownership markers. Everything goes through pci::PciDevice.
#pragma once

#include "drivers/am/asic.hpp"
#include "drivers/am/boot_memory.hpp"
#include "drivers/am/discovery.hpp"
#include "drivers/am/gfx.hpp"
#include "drivers/am/gmc.hpp"
#include "drivers/am/ih.hpp"
#include "drivers/am/page_table.hpp"
#include "drivers/am/psp.hpp"
#include "drivers/am/registers.hpp"
#include "drivers/am/skip_step.hpp"
#include "drivers/am/smu.hpp"
#include "drivers/am/soc.hpp"
#include "drivers/am/vram.hpp"
#include "drivers/pci/device_lock.hpp"
#include "drivers/pci/pci_device.hpp"

#include <chrono>
#include <string_view>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::am {

struct StageReport {
    std::string name;  // "discovery", "mode1 reset", "psp bootloader", ...
    std::chrono::nanoseconds time{0};  // device clock
    uint64_t mmio_reads = 0, mmio_writes = 0;
    std::string detail;
};

struct BringUpReport {
    bool warm = false;               // inspect_only: whether the chip is up (warm-startable)
    bool reset = false;              // a mode1 reset was done
    bool stale_ring_destroyed = false;
    std::string why_cold;            // when not warm: why
    std::vector<StageReport> stages;
    std::chrono::nanoseconds total{0};
    uint64_t mmio_reads = 0, mmio_writes = 0;  // register accesses (BAR5 and the RSMU pair)
    uint64_t vram_bytes_read = 0, vram_bytes_written = 0;  // through BAR0 (firmware, rings, tables)
    uint64_t mmio_ops() const { return mmio_reads + mmio_writes; }
    std::vector<ClockLimit> pinned_clocks;  // cold boot: what the "clocks" stage set
};

struct AmOptions {
    std::string lock_key;  // DeviceLock key; empty: the device's name
    std::vector<std::string> firmware_dirs;  // empty: firmware-loader's search path
    bool force_reset = false;  // also BAREGPU_AM_RESET=1
    // Look, do not touch: discovery and the warm-start markers only (amctl status). No boot, and
    // the ownership markers are left as found.
    bool inspect_only = false;
    std::function<void(const StageReport&)> progress;
    // Steps inside a long stage (each PSP firmware load), for a caller showing progress: behind a
    // USB bridge one stage can take seconds. The step's description and the stage's time so far.
    std::function<void(std::string_view step, std::chrono::nanoseconds elapsed)> progress_step;
    // Tests only: leave one bring-up or queue step out (skip_step.hpp), to show the simulated chip
    // notices. Never set by drivers or tools.
    SkipStep skip_step = SkipStep::none;
};

struct FirmwareVersions {
    uint32_t sos = 0;  // C2PMSG_81 as the sOS reports it
    uint32_t smu = 0;  // GetSmuVersion
};

class AmDevice {
public:
    static std::unique_ptr<AmDevice> open(std::unique_ptr<pci::PciDevice> device, AmOptions options = {});
    ~AmDevice();  // SCRATCH_REG6 = 0: a clean exit, so the next owner may start warm
    AmDevice(const AmDevice&) = delete;
    AmDevice& operator=(const AmDevice&) = delete;

    const std::string& name() const { return pci_->name(); }
    const AsicInfo& asic() const { return *discovery_.asic; }
    const DiscoveryResult& discovery() const { return discovery_; }
    const BringUpReport& report() const { return report_; }
    const BootLayout& layout() const { return layout_; }
    uint64_t vram_size() const { return discovery_.vram_size; }
    uint64_t fb_base() const { return gmc_->fb_base(); }

    FirmwareVersions firmware_versions();
    uint64_t smu_features();
    // Temperature and power from the SMU's metrics table; nullopt when the SMU does not report them.
    std::optional<SmuMetrics> smu_metrics();
    // DPM levels (MHz) of a PPCLK_e clock (kPpclkGfx, kPpclkUclk, ...), from GetDpmFreqByIndex.
    std::vector<uint32_t> dpm_levels(uint32_t clk) { return smu_->dpm_levels(clk); }
    // The soft min/max the boot that brought the chip up pinned each clock to (tinygrad ip.py AM_SMU.set_clocks
    // set_clocks): this process's cold boot, or, on a warm start, the one that booted the chip
    // (kept in boot memory's driver_state). Empty when no drivers/am boot recorded any.
    std::vector<ClockLimit> clock_limits();
    // Mode1 reset now (amctl reset); the device must be opened again afterwards.
    std::chrono::nanoseconds mode1_reset();
    // Interrupt entries not yet consumed, and consuming them.
    std::vector<IhEntry> pending_interrupts() { return ih_->pending(); }
    std::vector<IhEntry> drain_interrupts() { return ih_->drain(); }
    // Consumes the IH ring and turns its page-fault entries into PageFaults with the hub's latched
    // status (read/write, client), clearing that status as Linux's fault handler does.
    std::vector<PageFault> take_page_faults();
    uint32_t gc_fault_status() { return gmc_->gc_fault_status(); }

    // VMID0 mappings (FB-relative VRAM addresses, or bus addresses with flags.system). Both hubs'
    // TLBs are flushed after each call unless `flush` is false (then call flush_tlbs() once after
    // a batch, before the GPU may use the new mappings).
    void map(uint64_t va, uint64_t paddr, uint64_t size, const MapFlags& flags = {}, bool flush = true);
    void unmap(uint64_t va, uint64_t size, bool flush = true);
    void flush_tlbs();
    std::optional<Translation> translate(uint64_t va);
    // The queues' blocks (drivers/am/hcq_device).
    Soc& soc() { return *soc_; }
    SkipStep skip_step() const { return options_.skip_step; }
    Gmc& gmc() { return *gmc_; }
    Ih& ih() { return *ih_; }
    // VRAM above boot memory and the page-table pool: free for buffers (FB-relative).
    static constexpr uint64_t heap_begin() { return kPageTablePoolStart + kPageTablePoolSize; }

    pci::PciDevice& pci() { return *pci_; }
    Registers& regs() { return *regs_; }
    Vram& vram() { return *vram_; }
    Mmio& mmio() { return *mmio_; }
    // Marks the session dirty (as a crash would leave it): the destructor will not clear SCRATCH_REG6.
    void leave_dirty() { dirty_ = true; }

private:
    AmDevice(std::unique_ptr<pci::PciDevice> device, pci::DeviceLock lock, AmOptions options);
    void bring_up();
    bool can_start_warm();
    void full_boot();
    void load_psp_firmware();
    template <class F>
    void stage(const std::string& name, F&& body);

    struct PtPool;
    std::unique_ptr<pci::PciDevice> pci_;
    pci::DeviceLock lock_;
    AmOptions options_;
    std::unique_ptr<Mmio> mmio_;
    std::unique_ptr<Vram> vram_;
    DiscoveryResult discovery_;
    std::unique_ptr<Registers> regs_;
    BootLayout layout_;
    std::unique_ptr<Soc> soc_;
    std::unique_ptr<Gmc> gmc_;
    std::unique_ptr<Ih> ih_;
    std::unique_ptr<Psp> psp_;
    std::unique_ptr<Smu> smu_;
    std::unique_ptr<Gfx> gfx_;
    std::unique_ptr<PtPool> pt_pool_;
    std::unique_ptr<PageTable> page_table_;
    BringUpReport report_;
    bool dirty_ = false;
};

}  // namespace baregpu::am
