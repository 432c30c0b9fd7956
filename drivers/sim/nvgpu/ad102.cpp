// The simulated AD102 (ad102.hpp): BAR0 decode, GFW-boot and VRAM scratch registers, WPR2, the PROM
// window, FWSEC-FRTS on the GSP falcon, the booter on SEC2, and the hand-over to GSP-RM.
#include "ad102.hpp"

#include "booter.hpp"
#include "registers.hpp"

#include "firmware-loader/nvidia/hs_header.hpp"
#include "drivers/sim/firmware_path.hpp"
#include "firmware-loader/search_path.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::sim::nvgpu {
namespace {

constexpr uint64_t kBar0Size = 16ull << 20;
constexpr uint64_t kBar3Size = 32ull << 20;
constexpr uint64_t kMiB = 1ull << 20;
// NV_PMC_BOOT_0 / NV_PMC_BOOT_42 for AD102: architecture 0x19 (Ada, NV_PMC_BOOT_42_ARCHITECTURE_AD100),
// implementation 2 (AD102), major revision 0xa.
constexpr uint32_t kBoot0 = 0x192000a1;
constexpr uint32_t kBoot42 = (0x19u << 24) | (0x2u << 20) | (0xau << 16);
constexpr uint32_t kFrtsCmd = 0x15;  // FALCON_APPLICATION_INTERFACE_DMEM_MAPPER_V3_CMD_FRTS
constexpr const char* kSrcFrts = "open-gpu-kernel-modules 570.144 kernel_gsp_frts_tu102.c (s_vbiosPatchInterfaceData, "
                                 "FWSECLIC_FRTS_CMD)";
constexpr const char* kSrcBoot = "open-gpu-kernel-modules 570.144 kernel_gsp_booter_tu102.c / kernel_gsp_ga102.c";

std::string where_of(uint32_t r) { return fmt::format("BAR0 {:#x}", r); }

uint32_t u32(std::span<const std::byte> b, size_t at) {
    uint32_t v = 0;
    if (at + 4 <= b.size()) std::memcpy(&v, b.data() + at, 4);
    return v;
}

}  // namespace

Ad102Model::Ad102Model(Ad102Options options)
    : options_(std::move(options)), vbios_(make_vbios(kAd102DeviceId, options_.fwsec_in_vbios)) {
    power_on();
    if (options_.stale_wpr2) {  // what a crashed or killed previous owner leaves behind
        wpr2_lo_ = static_cast<uint32_t>(((options_.vram_bytes - 160 * kMiB) >> 12) << 4);
        wpr2_hi_ = static_cast<uint32_t>(((options_.vram_bytes - 2 * kMiB) >> 12) << 4);
        gsp_.set_riscv_active(true);
    }
}

pci::sim::DeviceSpec Ad102Model::spec() const {
    pci::sim::DeviceSpec s;
    s.identity = pci::PciIdentity{0x10de, kAd102DeviceId, 0x10de, 0x167c, 0xa1, 0x030000};
    using Bar = pci::sim::BarSpec;
    s.bars.push_back(Bar{0, kBar0Size, false, false, Bar::Kind::Registers});
    s.bars.push_back(Bar{1, options_.vram_bytes, true, true, Bar::Kind::Memory, {}, true});
    s.bars.push_back(Bar{3, kBar3Size, true, true, Bar::Kind::Memory, {}, false});
    s.msi_vectors = 1;
    s.pci_express = true;
    s.function_level_reset = true;
    return s;
}

void Ad102Model::connect(pci::sim::SimPort& port) {
    SimDeviceModel::connect(port);
    rm_ = std::make_unique<GspRmModel>(&port, [this](const std::string& w, const std::string& where,
                                                     const std::string& src) { violation(w, where, src); });
    rm_->set_server(options_.server);
    rm_->set_device_id(kAd102DeviceId);
    engines_ = std::make_unique<GpuEngines>(port.device_name(), port.bar_memory(1), &port);
}

void Ad102Model::disconnect() { engines_.reset(); }

GpuEngines& Ad102Model::engines() {
    if (!engines_) throw Error("", "AD102 model: engines() before the model is attached to a bus");
    return *engines_;
}

std::span<std::byte> Ad102Model::vram() { return port().bar_memory(1); }

void Ad102Model::gsp_took_bar1() {
    // GSP-RM's init points BAR1 at its own instance block (virtual mode) once, before GSP_INIT_DONE (kern_bus
    // kbusSetBarsInBar0Window / NV_PBUS_BAR1_BLOCK); where that block lies is GSP-RM's choice, the model's is near the
    // top of VRAM.
    if (!rm_ || !rm_->initialized() || bar1_taken_) return;
    bar1_taken_ = true;
    regs_[reg::kPbusBar1Block] =
        reg::kPbusBar1BlockModeVirtual | static_cast<uint32_t>(((options_.vram_bytes - 64 * kMiB) >> 12) & 0x0fffffff);
}

void Ad102Model::power_on() {
    regs_.clear();
    regs_[SequencerScript::kModifyReg] = SequencerScript::kModifyInitial;
    gsp_.power_on();
    sec2_.power_on();
    if (rm_) rm_->reset();
    wpr2_lo_ = wpr2_hi_ = 0;
    frts_offset_ = 0;
    gfw_reads_ = 0;
    bar1_taken_ = false;
}

void Ad102Model::function_reset() {
    std::lock_guard lock(mutex_);
    ++resets_;
    power_on();
    if (engines_) engines_->reset();
}

void Ad102Model::violation(const std::string& what, const std::string& where, const std::string& source) {
    port().violation(what, where, source);
}

uint64_t Ad102Model::mmio_read(unsigned bar, uint64_t offset, unsigned width) {
    if (bar != 0) return 0;
    std::lock_guard lock(mutex_);
    if (offset >= reg::kPromData && offset < reg::kPromData + reg::kPromSize) {
        uint64_t v = 0;
        const uint64_t at = offset - reg::kPromData;
        for (unsigned i = 0; i < width; ++i)
            if (at + i < vbios_.rom.size()) v |= uint64_t{std::to_integer<uint8_t>(vbios_.rom[at + i])} << (8 * i);
        return v;
    }
    const auto r = static_cast<uint32_t>(offset);
    for (FalconModel* f : {&gsp_, &sec2_})
        if (r >= f->base() && r < f->base() + reg::kFalconSpan) return f->read(r - f->base());
    switch (r) {
    case reg::kPmcBoot0: return kBoot0;
    case reg::kPmcBoot42: return options_.pmc_boot42 ? options_.pmc_boot42 : kBoot42;
    case reg::kPgc6AonSecureScratchGroup05PrivLevelMask: return 0x1;  // READ_PROTECTION_LEVEL0 enabled
    case reg::kPgc6AonSecureScratchGroup05_0:
        // GFW (the VBIOS's boot code) finishes a little after reset: two reads show it running.
        return (options_.gfw_boot_hangs || gfw_reads_++ < 2) ? 0x0f : 0xff;
    case reg::kPgc6AonSecureScratchGroup42: return static_cast<uint32_t>(options_.vram_bytes / kMiB);
    case reg::kPfbPriMmuWpr2AddrLo: return wpr2_lo_;
    case reg::kPfbPriMmuWpr2AddrHi: return wpr2_hi_;
    case SequencerScript::kPollReg:
        if (rm_ && rm_->poll_reads_left > 0) {
            --rm_->poll_reads_left;
            return 0;
        }
        return 1;
    default: {
        auto it = regs_.find(r);
        return it == regs_.end() ? 0 : it->second;
    }
    }
}

void Ad102Model::mmio_write(unsigned bar, uint64_t offset, unsigned /*width*/, uint64_t value) {
    if (bar != 0) return;
    std::lock_guard lock(mutex_);
    const auto r = static_cast<uint32_t>(offset);
    const auto v = static_cast<uint32_t>(value);
    auto sink = [this](const std::string& w, const std::string& where, const std::string& src) { violation(w, where, src); };
    for (FalconModel* f : {&gsp_, &sec2_}) {
        if (r < f->base() || r >= f->base() + reg::kFalconSpan) continue;
        if (r == reg::kGspQueueHead0 || r == reg::kGspQueueTail0) break;
        const FalconModel::Event e = f->write(r - f->base(), v, vram(), sink);
        if (e == FalconModel::Event::StartHs) {
            if (f == &gsp_) run_fwsec();
            else if (rm_->awaiting_resume()) resume_gsp();
            else run_booter();
            gsp_took_bar1();
        } else if (e == FalconModel::Event::StartRiscv) {
            violation("the CPU started the GSP RISC-V core itself; the booter (SEC2) starts it", where_of(r),
                      kSrcBoot);
        }
        return;
    }
    if (r == reg::kGspQueueHead0) {
        rm_->doorbell();
        gsp_took_bar1();
        if (rm_->unloaded()) {  // UNLOADING_GUEST_DRIVER: GSP-RM tore down; the chip is as after reset
            wpr2_lo_ = wpr2_hi_ = 0;
            frts_offset_ = 0;
            gsp_.power_on();
            sec2_.power_on();
            regs_.erase(reg::kPgc6BsiSecureScratch14);
            regs_.erase(reg::kPbusBar1Block);
            bar1_taken_ = false;
        }
        return;
    }
    if ((r == reg::kVirtualFunctionDoorbell || r == reg::kVirtualFunctionPrivMmuInvalidate) &&
        (regs_[reg::kPbusBar1Block] & reg::kPbusBar1BlockModeVirtual) != 0) {
        // The page tables and channel memory the CPU wrote through BAR1 went through GSP-RM's BAR1 page tables, not to
        // the VRAM offsets it meant (tinygrad nv/ip.py init_hw writes NV_PBUS_BAR1_BLOCK = physical after INIT_DONE).
        violation("VRAM used through BAR1 while NV_PBUS_BAR1_BLOCK is in GSP-RM's virtual mode: BAR1 was not put back in "
                  "physical mode after GSP_INIT_DONE",
                  where_of(r), "dev_bus.h NV_PBUS_BAR1_BLOCK_MODE; tinygrad nv/ip.py init_hw");
    }
    if (r == reg::kVirtualFunctionDoorbell) {
        if (!engines_ || !engines_->doorbell(v))
            violation(fmt::format("doorbell rung with work submit token {:#x}, which names no channel", v),
                      "NV_VIRTUAL_FUNCTION_DOORBELL (BAR0 0xbb0090)", "dev_vm.h, clc361.h NOTIFY_CHANNEL_PENDING");
        return;
    }
    if (r == reg::kPfbPriMmuWpr2AddrLo || r == reg::kPfbPriMmuWpr2AddrHi) {
        violation("WPR2 registers are written only by secure falcon code", fmt::format("BAR0 {:#x}", r), "dev_fb.h (priv level)");
        return;
    }
    regs_[r] = v;
}

void Ad102Model::run_fwsec() {
    const std::string where = "GSP falcon (FWSEC)";
    auto fail = [&](const std::string& what, const char* src) {
        violation(what, where, src);
        gsp_.halt();
    };
    if (!vbios_.has_fwsec) return fail("GSP falcon started HS code but this VBIOS has no FWSEC", kSrcFrts);
    const auto imem = gsp_.imem();
    const auto want = vbios_.imem();
    if (imem.size() < want.size() || std::memcmp(imem.data(), want.data(), want.size()) != 0)
        return fail("GSP falcon started HS code whose IMEM is not the VBIOS's FWSEC", kSrcFrts);
    const auto dmem = gsp_.dmem();
    if (dmem.size() < vbios_.dmem_size) return fail("FWSEC DMEM not fully loaded", kSrcFrts);
    const uint32_t init_cmd = u32(dmem, vbios_.dmem_mapper_offset + 44);
    if (init_cmd != kFrtsCmd)
        return fail(fmt::format("FWSEC started without the FRTS command patched: DMEMMAPPER init_cmd {:#x}, want {:#x}",
                                init_cmd, kFrtsCmd),
                    kSrcFrts);
    const uint32_t c = vbios_.cmd_in_buffer_offset;
    const uint64_t frts = options_.vram_bytes - 2 * kMiB;  // 1 MiB below the 1 MiB VGA workspace at the top
    const bool read_vbios_ok = u32(dmem, c) == 1 && u32(dmem, c + 4) == 24 && u32(dmem, c + 20) == 2;
    const bool region_ok = u32(dmem, c + 24) == 1 && u32(dmem, c + 28) == 20 &&
                           u32(dmem, c + 32) == static_cast<uint32_t>(frts >> 12) && u32(dmem, c + 36) == 0x100 &&
                           u32(dmem, c + 40) == 2;
    if (!read_vbios_ok || !region_ok)
        return fail(fmt::format("FWSECLIC_FRTS_CMD: READ_VBIOS {{version {}, size {}, flags {}}}, FRTS_REGION {{version {}, "
                                "size {}, offset4K {:#x}, size4K {:#x}, media {}}}; want {{1, 24, 2}}, {{1, 20, {:#x}, 0x100, 2}}",
                                u32(dmem, c), u32(dmem, c + 4), u32(dmem, c + 20), u32(dmem, c + 24), u32(dmem, c + 28),
                                u32(dmem, c + 32), u32(dmem, c + 36), u32(dmem, c + 40), frts >> 12),
                    kSrcFrts);
    const auto sig = vbios_.signature();
    if (std::memcmp(dmem.data() + vbios_.pkc_data_offset, sig.data(), sig.size()) != 0)
        return fail("FWSEC signature not patched at PKCDataOffset", kSrcFrts);
    if (gsp_.brom_paraaddr0() != vbios_.pkc_data_offset || gsp_.brom_engidmask() != vbios_.engine_id_mask ||
        gsp_.brom_ucode_id() != vbios_.ucode_id)
        return fail(fmt::format("FWSEC BROM parameters PARAADDR0 {:#x}, ENGIDMASK {:#x}, UCODE_ID {}; want {:#x}, {:#x}, {}",
                                gsp_.brom_paraaddr0(), gsp_.brom_engidmask(), gsp_.brom_ucode_id(),
                                vbios_.pkc_data_offset, vbios_.engine_id_mask, vbios_.ucode_id),
                    "kernel_gsp_falcon_ga102.c kflcnSetupBootromArgs");
    frts_offset_ = frts;
    wpr2_lo_ = static_cast<uint32_t>((frts >> 12) << 4);
    wpr2_hi_ = static_cast<uint32_t>(((frts + kMiB - 1) >> 12) << 4);
    regs_[reg::kPbusVbiosScratch0e] = 0;  // FRTS error code: none
    gsp_.halt();
}

void Ad102Model::run_booter() {
    const std::string where = "SEC2 (booter_load)";
    auto fail = [&](const std::string& what, const char* src) {
        violation(what, where, src);
        sec2_.set_mailbox0(0xbadf0001);
        sec2_.halt();
    };
    if (sec2_.imem().empty() || sec2_.dmem().empty()) return fail("SEC2 started without the booter loaded (IMEM/DMEM empty)", kSrcBoot);
    if (frts_offset_ == 0) return fail("booter started before FWSEC-FRTS set up FRTS and WPR2", kSrcBoot);
    if (!booter_matches_known_image()) {
        sec2_.set_mailbox0(0xbadf0003);
        sec2_.halt();
        return;
    }
    if (!gsp_.riscv_selected() || (gsp_.mailbox0() == 0 && gsp_.mailbox1() == 0))
        return fail("booter ran before the GSP falcon was switched to RISC-V with the LibOS arguments in its mailboxes",
                    kSrcBoot);
    const uint64_t meta = uint64_t{sec2_.mailbox1()} << 32 | sec2_.mailbox0();
    auto sink = [this](const std::string& w, const std::string& wh, const std::string& src) { violation(w, wh, src); };
    const BooterVerdict verdict = check_wpr_meta(port(), meta, frts_offset_, options_.vram_bytes, sink);
    if (!verdict.ok) {
        sec2_.set_mailbox0(0xbadf0002);
        sec2_.halt();
        return;
    }
    wpr2_lo_ = static_cast<uint32_t>((verdict.wpr_start >> 12) << 4);
    sec2_.set_mailbox0(0);
    sec2_.halt();
    gsp_.set_riscv_active(true);
    rm_->start(uint64_t{gsp_.mailbox1()} << 32 | gsp_.mailbox0());
}

// The BROM only runs what its signature covers: SEC2's IMEM must be the booter's code, its DMEM the
// booter's data with one of the production signatures at patch_loc, and the BROM parameters the
// header's (nvfw_hs_header_v2 / _load_header_v2, meta data {fuse_ver, engine_id, ucode_id}).
bool Ad102Model::booter_matches_known_image() {
    const std::string name = "nvidia/ad102/gsp/booter_load-570.144.bin";
    const std::string where = "SEC2 (booter_load)";
    const char* src = "RM kernel_gsp_booter.c / kernel_gsp_falcon_ga102.c (GA102+ HS boot); nouveau nvkm_falcon_fw_ctor_hs_v2";
    fw::FirmwareFile file;
    try {
        const auto path = options_.firmware_dir.empty() ? sim::firmware_search_path()
                                                        : fw::FirmwareSearchPath({options_.firmware_dir});
        file = path.load(name);
    } catch (const std::exception& e) {
        violation(std::string("the model cannot check the booter without its known-good image: ") + e.what(), where, src);
        return false;
    }
    const fw::ByteReader reader(file.bytes, name);
    const fw::nv::HsHeaderV2 h = fw::nv::parse_hs_header_v2(reader);
    const auto data = h.bin.data.bytes;
    const auto imem = sec2_.imem(), dmem = sec2_.dmem();
    // GA102+ boots the booter from HS (RM kernel_gsp_booter.c: imemPa 0, imemVa = the app's code offset;
    // kernel_gsp_falcon_ga102.c: DMATRFFBOFFS = imemVa, BOOTVEC = imemVa; nouveau nvkm_falcon_fw_ctor_hs_v2): secure
    // app 0 alone at IMEM physical 0, each 256-byte block tagged with its virtual address, started at that address.
    auto imem_holds = [&](uint64_t at, uint64_t from, uint64_t size) {
        return imem.size() >= at + size && from + size <= data.size() &&
               std::memcmp(imem.data() + at, data.data() + from, size) == 0;
    };
    const uint32_t va = h.apps.empty() ? 0 : h.apps[0].offset;
    const bool app_ok = !h.apps.empty() && imem_holds(0, va, h.apps[0].size);
    bool tags_ok = app_ok;
    for (uint32_t block = 0; tags_ok && block < h.apps[0].size; block += 256) tags_ok = sec2_.imem_tag(block) == va + block;
    if (!app_ok || !tags_ok || sec2_.bootvec() != va) {
        violation(fmt::format("SEC2 IMEM is not the booter as the GA102+ HS boot places it (secure app 0 at IMEM 0 {}, "
                              "tagged with its virtual address {:#x}: {} (block 0 tag {:#x}), BOOTVEC {:#x} want {:#x})",
                              app_ok ? "ok" : "wrong", va, tags_ok ? "ok" : "wrong", sec2_.imem_tag(0), sec2_.bootvec(), va),
                  where, src);
        return false;
    }
    const uint32_t pkc = h.patch_loc - h.os_data_offset;
    if (dmem.size() < h.os_data_size) {
        violation(fmt::format("SEC2 DMEM {:#x} bytes, the booter's data is {:#x}", dmem.size(), h.os_data_size), where, src);
        return false;
    }
    bool signed_ok = false;
    for (uint32_t i = 0; i < h.num_sig && !signed_ok; ++i) {
        const auto sig = h.signature(i).bytes;
        signed_ok = std::memcmp(dmem.data() + pkc, sig.data(), sig.size()) == 0;
    }
    const bool rest_ok = std::memcmp(dmem.data(), data.data() + h.os_data_offset, pkc) == 0;
    if (!signed_ok || !rest_ok) {
        violation(fmt::format("SEC2 DMEM is not the booter's data with a production signature at {:#x} (signature {}, "
                              "data before it {})",
                              pkc, signed_ok ? "ok" : "missing", rest_ok ? "ok" : "different"),
                  where, src);
        return false;
    }
    if (!h.meta || sec2_.brom_paraaddr0() != pkc || sec2_.brom_engidmask() != h.meta->engine_id ||
        sec2_.brom_ucode_id() != h.meta->ucode_id) {
        violation(fmt::format("booter BROM parameters PARAADDR0 {:#x}, ENGIDMASK {:#x}, UCODE_ID {}; the header says "
                              "{:#x}, {:#x}, {}",
                              sec2_.brom_paraaddr0(), sec2_.brom_engidmask(), sec2_.brom_ucode_id(), pkc,
                              h.meta ? h.meta->engine_id : 0, h.meta ? h.meta->ucode_id : 0),
                  where, src);
        return false;
    }
    return true;
}

// CORE_RESUME (kgspExecuteSequencerCommand_TU102): the CPU reset the GSP falcon onto RISC-V with the
// LibOS arguments in its mailboxes and restarted SEC2, which hands GSP over (boot stage 3).
void Ad102Model::resume_gsp() {
    const uint64_t libos = uint64_t{gsp_.mailbox1()} << 32 | gsp_.mailbox0();
    if (!gsp_.riscv_selected() || libos != rm_->libos_args()) {
        violation(fmt::format("sequencer CORE_RESUME: SEC2 restarted while the GSP falcon is {} with mailboxes {:#x} "
                              "(want RISC-V and the LibOS arguments {:#x})",
                              gsp_.riscv_selected() ? "on RISC-V" : "on the falcon core", libos, rm_->libos_args()),
                  "SEC2 (CORE_RESUME)", kSrcBoot);
        sec2_.set_mailbox0(0xbadf0004);
        sec2_.halt();
        return;
    }
    sec2_.set_mailbox0(0);
    sec2_.halt();
    gsp_.set_riscv_active(true);
    regs_[reg::kPgc6BsiSecureScratch14] |= reg::kBootStage3Handoff;
    rm_->resume(regs_);
}

void Ad102Model::set_server(std::shared_ptr<GspRpcServer> server) {
    std::lock_guard lock(mutex_);
    options_.server = server;
    if (rm_) rm_->set_server(std::move(server));
}
void Ad102Model::corrupt_next_reply() {
    std::lock_guard lock(mutex_);
    rm_->corrupt_next_reply();
}
void Ad102Model::stop_replying(bool stop) {
    std::lock_guard lock(mutex_);
    rm_->stop_replying(stop);
}
void Ad102Model::post_event(uint32_t function, std::span<const std::byte> payload) {
    std::lock_guard lock(mutex_);
    rm_->post_event(function, payload);
}
bool Ad102Model::wpr2_up() const {
    std::lock_guard lock(mutex_);
    return wpr2_hi_ != 0;
}
bool Ad102Model::gsp_initialized() const {
    std::lock_guard lock(mutex_);
    return rm_ && rm_->initialized();
}
bool Ad102Model::gsp_unloaded() const {
    std::lock_guard lock(mutex_);
    return rm_ && rm_->unloaded();
}
unsigned Ad102Model::function_resets() const {
    std::lock_guard lock(mutex_);
    return resets_;
}
std::vector<uint32_t> Ad102Model::rpcs_seen() const {
    std::lock_guard lock(mutex_);
    return rm_ ? rm_->functions_seen() : std::vector<uint32_t>{};
}
std::vector<std::string> Ad102Model::registry_keys() const {
    std::lock_guard lock(mutex_);
    return rm_ ? rm_->registry_keys() : std::vector<std::string>{};
}

std::unique_ptr<Ad102Model> make_ad102(Ad102Options options) { return std::make_unique<Ad102Model>(std::move(options)); }

}  // namespace baregpu::sim::nvgpu
