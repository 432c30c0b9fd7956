#include "drivers/am/am_device.hpp"

#include "base/error.hpp"
#include "drivers/am/reset.hpp"
#include "drivers/am/wait.hpp"
#include "drivers/pci/gpu_ids.hpp"
#include "firmware-loader/amd/gfx.hpp"
#include "firmware-loader/amd/imu.hpp"
#include "firmware-loader/amd/psp.hpp"
#include "firmware-loader/amd/rlc.hpp"
#include "firmware-loader/amd/sdma.hpp"
#include "firmware-loader/amd/smc.hpp"
#include "firmware-loader/search_path.hpp"

#include <array>
#include <bitset>
#include <cstdlib>
#include <fmt/format.h>
#include <span>
#include <unordered_map>

namespace baregpu::am {

// Page tables below the root: 4 KiB pages from a fixed VRAM pool, zeroed when handed out.
// Only this process writes them (the GPU's walker reads), so reads come from a host copy kept
// with every write: a table is read from VRAM once, whole, the first time it is looked at. Over
// a USB bridge each VRAM read is a round trip, and a walk per mapped page made opening the
// device read about a million dwords back.
struct AmDevice::PtPool final : PtMemory {
    using Table = std::array<uint64_t, 512>;
    explicit PtPool(Vram& v) : vram(v) {}
    Table& table_at(uint64_t paddr) {
        const uint64_t base = paddr & ~uint64_t{0xfff};
        auto [it, fresh] = tables.try_emplace(base);
        if (fresh) vram.read(base, std::as_writable_bytes(std::span(it->second)));
        return it->second;
    }
    uint64_t read64(uint64_t paddr) override { return table_at(paddr)[(paddr & 0xfff) / 8]; }
    void write64(uint64_t paddr, uint64_t value) override {
        vram.write64(paddr, value);
        table_at(paddr)[(paddr & 0xfff) / 8] = value;
    }
    void zero(uint64_t at) {
        vram.fill_zero(at, 0x1000);
        tables[at] = Table{};
    }
    uint64_t alloc_table() override {
        for (size_t i = 0; i < used.size(); ++i) {
            if (!used[i]) {
                used[i] = true;
                uint64_t at = kPageTablePoolStart + i * 0x1000;
                zero(at);
                return at;
            }
        }
        throw Error("", "page-table pool exhausted");
    }
    void free_table(uint64_t paddr) override {
        used[(paddr - kPageTablePoolStart) / 0x1000] = false;
        tables.erase(paddr);
    }
    Vram& vram;
    std::bitset<kPageTablePoolSize / 0x1000> used;
    std::unordered_map<uint64_t, Table> tables;  // host copies, by table address
};

namespace {
// The smallest bridge SRAM the PSP's firmware is staged in (the ASM2464's is 512 KiB; larger blobs go to msg1).
constexpr uint64_t kPspStagingInSram = 512 * 1024;
// driver_state: magic, count, then {PPCLK, soft min MHz, soft max MHz} per pinned clock.
constexpr uint32_t kClockRecordMagic = 0x4b4c4331;  // "1CLK"
// The firmware of one bring-up, read and validated before any byte reaches the device.
struct Blob {
    std::string what;
    std::vector<std::byte> bytes;
    PspFwType type;
};

struct LoadedFirmware {
    fw::FirmwareFile sos_file;
    fw::amd::PspFirmware sos;
    std::vector<Blob> ip;  // SMU first, then in Linux's AMDGPU_UCODE_ID order
    uint64_t mec_ucode_start = 0;  // the MEC image's gfx_firmware_header_v2_0 ucode_start_addr_hi:lo
};

std::vector<std::byte> copy(fw::Region r) { return {r.bytes.begin(), r.bytes.end()}; }

void expect_ip_major(const fw::FirmwareFile& f, const fw::amd::UcodeHeader& h, unsigned major) {
    if (h.ip_version_major != major) {
        throw FirmwareError(f.path.string(), "common_firmware_header.ip_version_major", 8, std::to_string(major),
                            std::to_string(h.ip_version_major) + " (firmware for another ASIC)");
    }
}

LoadedFirmware load_firmware(const AsicInfo& asic, const AmOptions& options) {
    fw::FirmwareSearchPath path = options.firmware_dirs.empty()
                                      ? fw::FirmwareSearchPath::from_environment()
                                      : fw::FirmwareSearchPath(std::vector<std::filesystem::path>(
                                            options.firmware_dirs.begin(), options.firmware_dirs.end()));
    LoadedFirmware out;
    out.sos_file = path.load(asic.psp_sos);
    {
        fw::ByteReader r(out.sos_file.bytes, out.sos_file.path.string());
        out.sos = fw::amd::parse_psp_sos(r);
        expect_ip_major(out.sos_file, out.sos.header, asic.mp0.major);
    }
    auto read = [&](std::string_view name) { return path.load(name); };

    // SMU first: "SMU fw should be loaded before TMR" (amdgpu_psp.c psp_hw_start).
    fw::FirmwareFile smu = read(asic.smu);
    {
        auto p = fw::amd::parse_smc(fw::ByteReader(smu.bytes, smu.path.string()));
        expect_ip_major(smu, p.header, asic.mp1.major);
        out.ip.push_back({std::string(asic.smu), copy(p.code), PspFwType::smu});
    }
    fw::FirmwareFile sdma = read(asic.sdma_fw);
    {
        auto p = fw::amd::parse_sdma(fw::ByteReader(sdma.bytes, sdma.path.string()));
        expect_ip_major(sdma, p.header, asic.sdma.major);
        out.ip.push_back({std::string(asic.sdma_fw) + " TH0", copy(p.ucode), PspFwType::sdma_th0});
        if (p.ctl_ucode) out.ip.push_back({std::string(asic.sdma_fw) + " TH1", copy(*p.ctl_ucode), PspFwType::sdma_th1});
    }
    // RS64 CP: code of PFP, ME, MEC, then their P0 stacks (AMDGPU_UCODE_ID_CP_RS64_* order).
    std::vector<Blob> stacks;
    for (std::string_view name : asic.cp) {
        fw::FirmwareFile f = read(name);
        auto p = fw::amd::parse_gfx(fw::ByteReader(f.bytes, f.path.string()));
        expect_ip_major(f, p.header, asic.gc.major);
        bool pfp = name.find("_pfp") != std::string_view::npos, me = name.find("_me.") != std::string_view::npos;
        PspFwType code = pfp ? PspFwType::rs64_pfp : me ? PspFwType::rs64_me : PspFwType::rs64_mec;
        PspFwType stack = pfp ? PspFwType::rs64_pfp_p0_stack : me ? PspFwType::rs64_me_p0_stack : PspFwType::rs64_mec_p0_stack;
        if (!p.rs64 || !p.data) {
            throw FirmwareError(f.path.string(), "gfx_firmware_header", 0, "an RS64 (v2.0) CP image", "a v1 image");
        }
        out.ip.push_back({std::string(name), copy(p.instructions), code});
        stacks.push_back({std::string(name) + " stack", copy(*p.data), stack});
        if (code == PspFwType::rs64_mec) out.mec_ucode_start = p.ucode_start_addr;
    }
    for (Blob& s : stacks) out.ip.push_back(std::move(s));
    fw::FirmwareFile imu = read(asic.imu);
    {
        auto p = fw::amd::parse_imu(fw::ByteReader(imu.bytes, imu.path.string()));
        expect_ip_major(imu, p.header, asic.gc.major);
        out.ip.push_back({std::string(asic.imu) + " IRAM", copy(p.iram), PspFwType::imu_i});
        out.ip.push_back({std::string(asic.imu) + " DRAM", copy(p.dram), PspFwType::imu_d});
    }
    fw::FirmwareFile rlc = read(asic.rlc);
    {
        auto p = fw::amd::parse_rlc(fw::ByteReader(rlc.bytes, rlc.path.string()));
        expect_ip_major(rlc, p.header, asic.gc.major);
        const fw::amd::RlcRegion* g = p.find("RLC_G");
        if (g == nullptr) throw FirmwareError(rlc.path.string(), "RLC_G", 0, "an RLC_G image", "none");
        // The pieces the header's minor version carries (parse_rlc adds them per minor, as Linux
        // amdgpu_gfx_rlc_init_microcode_v2_{1,2,3} does), in tinygrad AM_PSP.init_hw order: the
        // save/restore list machines (v2.1), IRAM/DRAM (v2.2+), RLCP/RLCV (v2.3+), then RLC_G.
        // GFX_FW_TYPE_* from psp_gfx_if.h; an empty piece is skipped (psp_load_non_psp_fw skips
        // ucode_size 0).
        struct RlcPiece {
            const char* region;
            PspFwType type;
        };
        for (RlcPiece piece : {RlcPiece{"save_restore_list_cntl", PspFwType::rlc_restore_list_srm_cntl},
                               RlcPiece{"save_restore_list_gpm", PspFwType::rlc_restore_list_gpm_mem},
                               RlcPiece{"save_restore_list_srm", PspFwType::rlc_restore_list_srm_mem},
                               RlcPiece{"IRAM", PspFwType::rlc_iram}, RlcPiece{"DRAM", PspFwType::rlc_dram_boot},
                               RlcPiece{"RLCP", PspFwType::rlc_p}, RlcPiece{"RLCV", PspFwType::rlc_v}}) {
            const fw::amd::RlcRegion* r = p.find(piece.region);
            if (r == nullptr || r->bytes.size() == 0) continue;
            out.ip.push_back({std::string(asic.rlc) + " " + piece.region, copy(r->bytes), piece.type});
        }
        out.ip.push_back({std::string(asic.rlc) + " RLC_G", copy(g->bytes), PspFwType::rlc_g});
    }
    return out;
}

bool env_force_reset() {
    const char* v = std::getenv("BAREGPU_AM_RESET");
    return v != nullptr && std::string_view(v) == "1";
}
}  // namespace

template <class F>
void AmDevice::stage(const std::string& name, F&& body) {
    std::chrono::nanoseconds start = pci_->now();
    uint64_t r0 = mmio_ ? mmio_->reads() : 0, w0 = mmio_ ? mmio_->writes() : 0;
    StageReport s{name, {}, 0, 0, {}};
    if constexpr (std::is_invocable_v<F, StageReport&>) {
        body(s);
    } else {
        body();
    }
    s.time = pci_->now() - start;
    s.mmio_reads = (mmio_ ? mmio_->reads() : 0) - r0;
    s.mmio_writes = (mmio_ ? mmio_->writes() : 0) - w0;
    report_.stages.push_back(s);
    if (options_.progress) options_.progress(s);
}

AmDevice::AmDevice(std::unique_ptr<pci::PciDevice> device, pci::DeviceLock lock, AmOptions options)
    : pci_(std::move(device)), lock_(std::move(lock)), options_(std::move(options)) {}

std::unique_ptr<AmDevice> AmDevice::open(std::unique_ptr<pci::PciDevice> device, AmOptions options) {
    if (options.lock_key.empty()) options.lock_key = device->name();
    // One owner per chip, across processes (BusyError names the owner's pid).
    pci::DeviceLock lock = pci::DeviceLock::acquire(options.lock_key);
    std::unique_ptr<AmDevice> am(new AmDevice(std::move(device), std::move(lock), std::move(options)));
    am->bring_up();
    return am;
}

AmDevice::~AmDevice() {
    if (!regs_ || !report_.total.count() || dirty_) return;
    try {
        regs_->write(regs_->table().scratch_reg6, 0);  // clean exit
    } catch (const Error&) {
        // A lost device cannot be marked; the next owner will find it dirty and boot fully.
    }
}

void AmDevice::bring_up() {
    std::chrono::nanoseconds start = pci_->now();
    pci::PciIdentity id = pci_->identity();
    if (id.vendor_id != 0x1002 || find_asic_by_device_id(id.device_id) == nullptr) {
        throw UnsupportedError(name(), fmt::format("{:04x}:{:04x} is not an AMD GPU drivers/am drives (it drives {})",
                                                   id.vendor_id, id.device_id, pci::driven_chips("am")));
    }
    pci::MmioRegion& bar5 = pci_->bar(5);
    mmio_ = std::make_unique<Mmio>(*pci_, bar5);

    stage("discovery", [&](StageReport& s) {
        if (options_.skip_step != SkipStep::discovery_ifwi_wait) wait_ifwi_init(*mmio_);
        uint64_t vram = read_vram_size(*mmio_);
        pci::MmioRegion* bar0 = pci_->bar_info(0).size != 0 ? &pci_->bar(0) : nullptr;
        vram_ = std::make_unique<Vram>(*mmio_, bar0, vram);
        discovery_ = run_discovery(*mmio_, *vram_);
        regs_ = std::make_unique<Registers>(*mmio_, register_table(*discovery_.asic), discovery_.bases);
        mmio_->set_indirect(regs_->address(regs_->table().rsmu_index), regs_->address(regs_->table().rsmu_data));
        layout_ = make_boot_layout(*discovery_.asic);
        s.detail = fmt::format("{}, VRAM {} MiB, GC {}{}, {} BAR0", discovery_.asic->name, vram >> 20,
                               discovery_.find(HwIp::gc)->version.str(),
                               discovery_.gc_info ? fmt::format(" ({} CUs)", discovery_.gc_info->compute_units()) : "",
                               vram_->large_bar() ? "large" : "small");
    });

    soc_ = std::make_unique<Soc>(*regs_);
    auto flush = [this] { soc_->flush_hdp(); };
    gmc_ = std::make_unique<Gmc>(*regs_, flush, options_.skip_step);
    gmc_->read_fb_location();
    const pci::LinkCapabilities link = pci_->link_capabilities();
    ih_ = std::make_unique<Ih>(*regs_, *vram_, gmc_->fb_base(), layout_.ih_ring, layout_.ih_wptr, options_.skip_step,
                               /*zero_ring=*/!link.register_round_trip);
    PspBuffers psp_buffers{gmc_->fb_base(), layout_.psp_msg1, layout_.psp_cmd, layout_.psp_fence, layout_.psp_ring, kPspRingSize, {},
                           /*zero_ring=*/!link.register_round_trip};
    // Behind a bridge whose only host-visible memory is its SRAM (tinygrad's USB path keeps the
    // PSP's msg1 there too): firmware is staged in the SRAM, which the host fills at bulk speed,
    // and the PSP reads it through the AGP aperture.
    if (!link.host_dma && !link.dma_windows.empty() && link.dma_windows[0].size >= kPspStagingInSram) {
        const pci::LinkCapabilities::Window sram = link.dma_windows[0];
        psp_buffers.stage_in_system = [this, sram](std::span<const std::byte> blob) -> std::optional<uint64_t> {
            if (blob.size() > sram.size) return std::nullopt;
            pci_->dma_window_write(BusAddress(sram.bus_address), blob);
            return gmc_->agp_mc(sram.bus_address);
        };
    }
    psp_ = std::make_unique<Psp>(*regs_, *vram_, std::move(psp_buffers), flush);
    smu_ = std::make_unique<Smu>(*regs_);
    gfx_ = std::make_unique<Gfx>(*regs_, *soc_, discovery_.asic->gc_generation);
    pt_pool_ = std::make_unique<PtPool>(*vram_);

    report_.warm = can_start_warm();
    if (options_.inspect_only) return;
    if (!report_.warm) full_boot();
    // The engines read rings, signals and host buffers in system memory: a warm start, whose
    // function came up with bus mastering off (a new VFIO open, a new simulated bus), needs it too.
    pci_->set_bus_master(true);

    stage(report_.warm ? "vm (warm)" : "gc hub", [&] {
        // Every process starts with an empty VMID0 (the page-table pool is per process). A cold
        // chip gets its GC hub programmed; a warm one already points at this root (the layout is
        // the same), so flushing both hubs' TLBs is all it needs.
        pt_pool_->zero(layout_.root_pt);
        page_table_ = std::make_unique<PageTable>(*pt_pool_, layout_.root_pt, discovery_.asic->gc_generation);
        if (report_.warm) {
            gmc_->flush_tlb(true);
            gmc_->flush_tlb(false);
        } else {
            gmc_->init_hub(true, layout_.root_pt, layout_.gmc_scratch, layout_.gmc_dummy);
        }
    });
    regs_->write(regs_->table().scratch_reg7, kLayoutMagic);
    regs_->write(regs_->table().scratch_reg6, 1);  // owned; a crash leaves it set
    report_.total = pci_->now() - start;
    report_.mmio_reads = mmio_->reads();
    report_.mmio_writes = mmio_->writes();
    report_.vram_bytes_read = vram_->bytes_read();
    report_.vram_bytes_written = vram_->bytes_written();
}

bool AmDevice::can_start_warm() {
    const RegisterTable& t = regs_->table();
    if (options_.force_reset || env_force_reset()) {
        report_.why_cold = "a full boot was asked for (--force-reset / BAREGPU_AM_RESET=1)";
        return false;
    }
    uint32_t magic = regs_->read(t.scratch_reg7);
    if (magic != kLayoutMagic) {
        report_.why_cold = fmt::format("SCRATCH_REG7 is {:#x}, not drivers/am's layout {:#x}", magic, kLayoutMagic);
        return false;
    }
    if (uint32_t dirty = regs_->read(t.scratch_reg6); dirty != 0) {
        report_.why_cold = "the previous owner did not exit cleanly (SCRATCH_REG6 set)";
        return false;
    }
    if (uint32_t fault = gmc_->gc_fault_status(); fault != 0) {
        report_.why_cold = fmt::format("a GC VM fault is latched ({} {:#x})", t.gc_hub.l2_protection_fault_status.name, fault);
        return false;
    }
    return true;
}

void AmDevice::full_boot() {
    const AsicInfo& asic = *discovery_.asic;
    LoadedFirmware fw;
    stage("firmware", [&](StageReport& s) {
        fw = load_firmware(asic, options_);
        s.detail = fmt::format("{} blobs validated", fw.ip.size() + fw.sos.binaries.size());
    });

    stage("mode1 reset", [&](StageReport& s) {
        if (psp_->sos_alive() && smu_->alive()) {
            am::mode1_reset(*pci_, asic, *smu_);
            report_.reset = true;
            s.detail = "firmware was running: reset";
        } else {
            s.detail = "skipped: sOS or SMU not running (power-on state)";
        }
    });
    pci_->set_bus_master(true);
    // Until this boot completes the chip is not in our layout: a boot that fails half-way must not
    // look warm to the next owner (the reset cleared this already when there was one).
    regs_->write(regs_->table().scratch_reg7, 0);

    stage("nbio", [&] { soc_->init_hw(); });
    stage("mmhub", [&] { gmc_->init_hub(false, layout_.root_pt, layout_.gmc_scratch, layout_.gmc_dummy); });
    stage("ih", [&] { ih_->init_hw(); });

    stage("psp bootloader", [&](StageReport& s) {
        if (psp_->sos_alive()) {
            s.detail = "sOS already running";
            return;
        }
        using fw::amd::PspFwType;
        struct Component {
            PspFwType type;
            PspBootloaderCmd cmd;
        };
        // psp_v13_0_bootloader_load_* / psp_v14_0: KDB, SPL, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV,
        // RAS_DRV, IPKEYMGR_DRV, SOS (amdgpu_psp.c psp_hw_start; IPKEYMGR_DRV through
        // psp_v14_0_bootloader_load_ipkeymgr_drv, PSP_BL__LOAD_IPKEYMGRDRV 0xF0000, when the package
        // carries it: psp_14_0_3_sos.bin does). Linux sends the SPL component with LOAD_TOS_SPL_TABLE
        // (tinygrad re-sends KDB).
        const Component order[] = {
            {PspFwType::kdb, PspBootloaderCmd::load_key_database}, {PspFwType::spl, PspBootloaderCmd::load_tos_spl_table},
            {PspFwType::sys_drv, PspBootloaderCmd::load_sysdrv},   {PspFwType::soc_drv, PspBootloaderCmd::load_socdrv},
            {PspFwType::intf_drv, PspBootloaderCmd::load_intfdrv}, {PspFwType::dbg_drv, PspBootloaderCmd::load_dbgdrv},
            {PspFwType::ras_drv, PspBootloaderCmd::load_rasdrv},   {PspFwType::ipkeymgr_drv, PspBootloaderCmd::load_ipkeymgrdrv},
            {PspFwType::sos, PspBootloaderCmd::load_sosdrv},
        };
        unsigned n = 0;
        for (const Component& c : order) {
            const fw::amd::PspBinary* bin = fw.sos.find(c.type);
            if (bin == nullptr) continue;
            // Only psp_v14_0 has a bootloader_load_ipkeymgr_drv; psp_v13_0 never sends one.
            if (c.type == PspFwType::ipkeymgr_drv && asic.mp0.major < 14) continue;
            psp_->load_bootloader_component(bin->name, bin->bytes.bytes, c.cmd);
            ++n;
        }
        psp_->wait_sos_alive();
        s.detail = fmt::format("{} components, sOS {:#x}", n, psp_->sos_version());
    });

    stage("psp ring", [&](StageReport& s) {
        report_.stale_ring_destroyed = psp_->ring_create();
        s.detail = report_.stale_ring_destroyed ? "destroyed the previous owner's ring first" : "";
    });

    stage("psp firmware", [&](StageReport& s) {
        const std::chrono::nanoseconds start = pci_->now();
        auto loaded = [&](const Blob& b, size_t n) {
            if (options_.progress_step) options_.progress_step(fmt::format("{} ({} of {})", b.what, n, fw.ip.size()), pci_->now() - start);
        };
        uint32_t tmr_size = 0;
        if (const fw::amd::PspBinary* toc = fw.sos.find(fw::amd::PspFwType::toc)) {
            tmr_size = psp_->load_toc(toc->bytes.bytes);
            if (tmr_size > kPspTmrMax) {
                throw ProtocolError(name(), fmt::format("LOAD_TOC asks for a {:#x}-byte TMR, more than the {:#x} "
                                                        "reserved", tmr_size, kPspTmrMax));
            }
        }
        const Blob& smu = fw.ip.front();
        psp_->load_ip_fw(smu.what, smu.bytes, smu.type);
        loaded(smu, 1);
        if (asic.psp_setup_tmr) {
            psp_->submit(encode_setup_tmr(gmc_->mc(layout_.psp_tmr), layout_.psp_tmr,
                                          tmr_size != 0 ? tmr_size : static_cast<uint32_t>(kPspTmrMax)),
                         "SETUP_TMR");
        }
        for (size_t i = 1; i < fw.ip.size(); ++i) {
            psp_->load_ip_fw(fw.ip[i].what, fw.ip[i].bytes, fw.ip[i].type);
            loaded(fw.ip[i], i + 1);
        }
        psp_->submit(encode_autoload_rlc(), "AUTOLOAD_RLC");
        s.detail = fmt::format("{} PSP commands", psp_->commands_submitted());
    });

    // Linux starts the SMU before the GC (amdgpu_discovery.c adds the blocks in the order common, gmc,
    // ih, psp, smu, ..., gfx, sdma, and gfx_v11_0_hw_init is where the RLC-autoload wait lives);
    // tinygrad's AMDev does init_hw(soc, gmc, ih, psp, smu) before init_hw(gfx, sdma).
    const bool smu_first = options_.skip_step != SkipStep::smu_before_rlc_autoload;
    auto smu_stages = [&] {
        stage("smu", [&](StageReport& s) {
            smu_->init(gmc_->mc(layout_.smu_table));
            s.detail = fmt::format("SMU {:#x}", smu_->version());
        });

        stage("clocks", [&](StageReport& s) {
            report_.pinned_clocks = smu_->pin_clocks_to_max();
            // Recorded in boot memory so a later (warm) process can say what the chip is pinned to.
            std::vector<uint32_t> record = {kClockRecordMagic, static_cast<uint32_t>(report_.pinned_clocks.size())};
            for (const ClockLimit& c : report_.pinned_clocks) {
                record.insert(record.end(), {c.clk, c.min_mhz, c.max_mhz});
                s.detail += fmt::format("{}{} {} MHz", s.detail.empty() ? "" : ", ", ppclk_name(c.clk), c.max_mhz);
            }
            vram_->write(layout_.driver_state, std::as_bytes(std::span(record)));
        });
    };
    if (smu_first) smu_stages();

    stage("rlc autoload", [&] {
        // gfx_v11_0_wait_for_rlc_autoload_complete: CP idle AND bootload complete (tinygrad waits
        // for the bit to be clear, which is inverted).
        const RegisterTable& t = regs_->table();
        uint32_t cp = 0, bl = 0;
        if (!poll_until(*pci_, kDefaultTimeout, [&] {
                cp = regs_->read(t.cp_stat);
                bl = regs_->read(t.rlc_rlcs_bootload_status);
                return cp == 0 && (bl & field::kRlcBootloadComplete) != 0;
            })) {
            throw TimeoutError(name(), fmt::format("timed out waiting for the RLC autoload: CP_STAT {:#x} (want 0), "
                                                   "RLC_RLCS_BOOTLOAD_STATUS {:#x} (want bit 31)", cp, bl));
        }
    });

    if (!smu_first) smu_stages();

    stage("gfx", [&](StageReport& s) {
        gfx_->init_hw(fw.mec_ucode_start, options_.skip_step);
        s.detail = fmt::format("MEC start {:#x}", fw.mec_ucode_start);
    });
}

std::vector<ClockLimit> AmDevice::clock_limits() {
    if (!report_.pinned_clocks.empty()) return report_.pinned_clocks;
    std::array<uint32_t, 2 + 3 * 8> record{};
    vram_->read(layout_.driver_state, std::as_writable_bytes(std::span(record)));
    std::vector<ClockLimit> out;
    if (record[0] != kClockRecordMagic || record[1] > 8) return out;
    for (uint32_t i = 0; i < record[1]; ++i) out.push_back({record[2 + 3 * i], record[3 + 3 * i], record[4 + 3 * i]});
    return out;
}

FirmwareVersions AmDevice::firmware_versions() { return {psp_->sos_version(), smu_->version()}; }
uint64_t AmDevice::smu_features() { return smu_->enabled_features(); }

std::optional<SmuMetrics> AmDevice::smu_metrics() {
    try {
        smu_->transfer_metrics();
    } catch (const ProtocolError&) {
        return std::nullopt;  // this SMU does not transfer the metrics table
    }
    std::vector<std::byte> table(smu_metrics_layout(asic().mp1.major).size);
    vram_->read(layout_.smu_table, table);
    return decode_smu_metrics(table, asic().mp1.major);
}

std::chrono::nanoseconds AmDevice::mode1_reset() {
    if (!psp_->sos_alive() || !smu_->alive()) {
        throw ProtocolError(name(), "mode1 reset needs the PSP sOS and the SMU running; the chip is already in its "
                                    "power-on state");
    }
    std::chrono::nanoseconds t = am::mode1_reset(*pci_, *discovery_.asic, *smu_);
    dirty_ = true;  // nothing to mark: the chip forgot us
    return t;
}

void AmDevice::map(uint64_t va, uint64_t paddr, uint64_t size, const MapFlags& flags, bool flush) {
    page_table_->map(va, paddr, size, flags);
    if (flush) flush_tlbs();
}

void AmDevice::unmap(uint64_t va, uint64_t size, bool flush) {
    page_table_->unmap(va, size);
    // A stale TLB entry would let an engine reach memory that is about to be reused.
    if (flush) flush_tlbs();
}

void AmDevice::flush_tlbs() {
    gmc_->flush_tlb(true);
    gmc_->flush_tlb(false);
}

std::optional<Translation> AmDevice::translate(uint64_t va) { return page_table_->translate(va); }

std::vector<PageFault> AmDevice::take_page_faults() {
    std::vector<PageFault> out;
    for (const IhEntry& e : ih_->drain()) {
        if (e.kind() != IhEntry::Kind::page_fault) continue;
        bool gc = e.client_id != kIhClientVmc;
        uint32_t status = gmc_->fault_status(gc);
        gmc_->clear_fault(gc);
        out.push_back(PageFault{e.hub(), e.fault_address(), e.client_id, status});
    }
    return out;
}

}  // namespace baregpu::am
