// GSP-RM bring-up (gsp_boot.hpp has the order and its sources).
#include "drivers/nv/gsp_boot.hpp"

#include "base/error.hpp"
#include "drivers/nv/boot_registers.hpp"
#include "drivers/nv/booter.hpp"
#include "drivers/nv/fwsec.hpp"
#include "drivers/nv/gsp_rpc_functions.hpp"
#include "drivers/nv/gsp_sequencer.hpp"
#include "drivers/nv/libos_args.hpp"
#include "drivers/nv/radix3.hpp"
#include "drivers/nv/wait.hpp"
#include "drivers/nv/wpr_meta.hpp"
#include "firmware-loader/nvidia/elf_image.hpp"
#include "firmware-loader/nvidia/riscv_ucode_desc.hpp"
#include "firmware-loader/nvidia/vbios.hpp"
#include "firmware-loader/search_path.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace baregpu::nv {
namespace {

constexpr uint64_t kPage = 0x1000, kLogSize = 0x10000;
constexpr uint64_t kVramFwsecImem = 0x0, kVramFwsecDmem = 0x80000;    // the 2 MiB boot arena at VRAM 0
constexpr uint64_t kVramBooterNmem = 0x100000, kVramBooterImem = 0x140000, kVramBooterDmem = 0x180000;
constexpr uint64_t kVramBooterSlot = 0x40000;  // room for each part
constexpr uint32_t kFalconOs = 0x080;  // NV_PFALCON_FALCON_OS (dev_falcon_v4.h)
// GspSystemInfo (570.144 gsp_static_config.h; offsets as Linux nova-core's bindgen of it,
// gsp/fw/r570_144/bindings.rs, lays them out): ten NvU64 (gpuPhysAddr +0, gpuPhysFbAddr +8,
// gpuPhysInstAddr +0x10, gpuPhysIoAddr, nvDomainBusDeviceFunc +0x20, ..., maxUserVa +0x48),
// pciConfigMirrorBase +0x50, pciConfigMirrorSize +0x54, PCIDeviceID +0x58, PCISubDeviceID +0x5c,
// PCIRevisionID +0x60, ..., acpiMethodData +0xa0 (0x2a4 bytes), hypervisorType +0x344, bIsPassthru
// +0x348, ..., hostPageSize +0x398; 0x3a0 bytes in all.
constexpr size_t kGspSystemInfoSize = 0x3a0;
constexpr size_t kSystemInfoIsPassthru = 0x348;
constexpr uint32_t kPciConfigMirrorBase = 0x88000, kPciConfigMirrorSize = 0x1000;  // tinygrad nv/ip.py NV_GSP (in no header)
constexpr uint64_t kMaxUserVa = 0x7ffffffff000;
// UNLOADING_GUEST_DRIVER newLevel: 1 << 6, a fast unload (tinygrad nv/ip.py NV_GSP.rpc_unloading_guest_driver).
constexpr uint32_t kUnloadNewLevel = 1u << 6;

std::string chip_name(uint32_t boot42) {
    const uint32_t arch = (boot42 >> 24) & 0x3f, impl = (boot42 >> 20) & 0xf;
    if (arch == reg::kArchAda) {
        static constexpr const char* names[16] = {nullptr, nullptr, "ad102", "ad103", "ad104", nullptr, "ad106", "ad107"};
        if (names[impl]) return names[impl];
    }
    return fmt::format("arch {:#x} impl {:#x}", arch, impl);
}

template <typename T>
void put(std::vector<std::byte>& b, size_t at, T v) {
    if (b.size() < at + sizeof(T)) b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
}
uint64_t up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// PACKED_REGISTRY_TABLE {size, numEntries} + PACKED_REGISTRY_ENTRY {nameOffset, type u8, data, length}
// (16 bytes each) + NUL-terminated names; type 1 = DWORD (nouveau r535_gsp_rpc_set_registry).
std::vector<std::byte> registry_table(std::initializer_list<std::pair<std::string_view, uint32_t>> entries) {
    std::vector<std::byte> b;
    const size_t n = entries.size();
    size_t name_at = 8 + n * 16;
    size_t i = 0;
    for (const auto& [key, value] : entries) {
        const size_t e = 8 + i++ * 16;
        put<uint32_t>(b, e, static_cast<uint32_t>(name_at));
        put<uint8_t>(b, e + 4, 1);
        put<uint32_t>(b, e + 8, value);
        put<uint32_t>(b, e + 12, 4);
        b.resize(std::max(b.size(), name_at + key.size() + 1));
        std::memcpy(b.data() + name_at, key.data(), key.size());
        name_at += key.size() + 1;
    }
    put<uint32_t>(b, 0, static_cast<uint32_t>(b.size()));
    put<uint32_t>(b, 4, static_cast<uint32_t>(n));
    return b;
}

}  // namespace

GspFirmware load_gsp_firmware(const fw::FirmwareSearchPath& path, std::string_view chip, std::string_view version) {
    GspFirmware f;
    auto load = [&](std::string_view base, std::string& name, std::vector<std::byte>& bytes) {
        name = fmt::format("nvidia/{}/gsp/{}-{}.bin", chip, base, version);
        bytes = path.load(name).bytes;
    };
    load("booter_load", f.booter_name, f.booter_load);
    load("bootloader", f.bootloader_name, f.bootloader);
    load("gsp", f.gsp_name, f.gsp_elf);
    return f;
}

struct GspDevice::Impl {
    uint32_t boot0 = 0;
    Falcon gsp, sec2;
    BooterImage booter;
    fw::nv::RiscvUcodeDesc bootloader;
    std::span<const std::byte> fwimage, signature;
    std::unique_ptr<pci::DmaBuffer> sysmem, queues;
    uint64_t libos_args = 0, wpr_meta = 0;
    std::array<uint32_t, kSeqRegSaveAreaSize> save_area{};

    explicit Impl(pci::PciDevice& d) : gsp(d, "GSP", reg::kGspFalconBase), sec2(d, "SEC2", reg::kSec2FalconBase) {}
};

// The CPU side of GSP_RUN_CPU_SEQUENCER on Ada.
class AdaSequencerTarget final : public SequencerTarget {
public:
    AdaSequencerTarget(pci::PciDevice& d, GspDevice::Impl& s) : d_(d), s_(s) {}
    uint32_t read32(uint32_t a) override { return d_.bar(0).read32(BarOffset{a}); }
    void write32(uint32_t a, uint32_t v) override { d_.bar(0).write32(BarOffset{a}, v); }
    void delay(std::chrono::nanoseconds t) override { d_.delay(t); }
    std::chrono::nanoseconds now() override { return d_.now(); }
    void core_reset() override { s_.gsp.reset(s_.boot0); }
    void core_start() override { s_.gsp.start_cpu(); }
    void core_wait_for_halt() override {
        if (!poll_until(d_, kBootTimeout, [&] { return s_.gsp.halted(); }))
            throw TimeoutError(d_.name(), "GSP CPU sequencer CORE_WAIT_FOR_HALT: GSP falcon CPUCTL.HALTED not set in 10 s");
    }
    // CORE_RESUME (kgspExecuteSequencerCommand_TU102): GSP falcon reset onto RISC-V with the LibOS
    // arguments in its mailboxes, SEC2 restarted; SEC2 hands GSP over (BOOT_STAGE_3_HANDOFF) and
    // must report 0 in its MAILBOX0.
    void core_resume() override {
        s_.gsp.reset(s_.boot0);
        s_.gsp.select_riscv();
        s_.gsp.set_mailboxes(s_.libos_args);
        s_.sec2.start_cpu();
        uint32_t last = 0;
        if (!poll_until(d_, kBootTimeout, [&] {
                return ((last = read32(reg::kPgc6BsiSecureScratch14)) & reg::kBootStage3Handoff) != 0;
            }))
            throw TimeoutError(d_.name(), fmt::format("GSP CPU sequencer CORE_RESUME: NV_PGC6_BSI_SECURE_SCRATCH_14."
                                                      "BOOT_STAGE_3_HANDOFF not set in 10 s (last {:#x})",
                                                      last));
        if (const uint32_t mb = s_.sec2.mailbox0(); mb != 0)
            throw ProtocolError(d_.name(), fmt::format("GSP CPU sequencer CORE_RESUME: SEC2 MAILBOX0 {:#x}, want 0", mb));
    }
    const std::string& device_name() const override { return d_.name(); }

private:
    pci::PciDevice& d_;
    GspDevice::Impl& s_;
};

class AdaBootFlow final : public BootFlow {
public:
    std::string_view name() const override { return "Ada (FWSEC-FRTS, booter on SEC2)"; }
    void boot(GspDevice& d) override;
};

class UnsupportedBootFlow final : public BootFlow {
public:
    UnsupportedBootFlow(std::string name, std::string missing) : name_(std::move(name)), missing_(std::move(missing)) {}
    std::string_view name() const override { return name_; }
    void boot(GspDevice& d) override {
        throw UnsupportedError(d.pci().name(), fmt::format("NVPCI boot for {} is not implemented: {}", name_, missing_));
    }

private:
    std::string name_, missing_;
};

GspDevice::GspDevice(pci::PciDevice& pci, const GspFirmware& firmware, GspOptions options)
    : pci_(pci), firmware_(firmware), options_(std::move(options)), impl_(std::make_unique<Impl>(pci)) {}

GspDevice::~GspDevice() {
    try {
        close();
    } catch (const std::exception&) {  // a dying GSP cannot be helped from a destructor
    }
}

void GspDevice::stage(std::string name, const std::function<std::string()>& body) {
    const auto start = pci_.now();
    std::string detail = body();
    report_.stages.push_back(BootStage{std::move(name), pci_.now() - start, std::move(detail)});
    if (options_.progress) options_.progress(report_.stages.back());
}

std::unique_ptr<GspDevice> GspDevice::open(pci::PciDevice& pci, const GspFirmware& firmware, GspOptions options) {
    std::unique_ptr<GspDevice> d(new GspDevice(pci, firmware, std::move(options)));
    const auto start = pci.now();
    std::unique_ptr<BootFlow> flow;
    d->stage("chip id", [&] {
        auto& bar0 = pci.bar(0);
        d->impl_->boot0 = bar0.read32(BarOffset{reg::kPmcBoot0});
        d->report_.boot42 = bar0.read32(BarOffset{reg::kPmcBoot42});
        if (d->report_.boot42 == 0xffffffff)
            throw DeviceLostError(pci.name(), "NV_PMC_BOOT_42 reads all-ones: the GPU is not answering on BAR0");
        d->report_.chip = chip_name(d->report_.boot42);
        const uint32_t arch = (d->report_.boot42 >> 24) & 0x3f;
        if (arch == reg::kArchAda) flow = std::make_unique<AdaBootFlow>();
        else if (arch == reg::kArchHopper)
            flow = std::make_unique<UnsupportedBootFlow>("Hopper (GH100)", "its FSP/FMC boot without FWSEC-FRTS");
        else if (arch == reg::kArchBlackwellGb20x)
            flow = std::make_unique<UnsupportedBootFlow>(
                "Blackwell (GB20x)",
                "the FSP chain-of-trust flow (FMC image in boot memory, GSP_FMC_BOOT_PARAMS, the EMEM transfer of the COT "
                "message fsp_cot.hpp encodes, the FSP reply)");
        else
            throw UnsupportedError(pci.name(), fmt::format("NV_PMC_BOOT_42 {:#x}: architecture {:#x} has no NVPCI boot flow",
                                                           d->report_.boot42, arch));
        return fmt::format("{} (BOOT_0 {:#x}, BOOT_42 {:#x}), flow: {}", d->report_.chip, d->impl_->boot0,
                           d->report_.boot42, flow->name());
    });
    flow->boot(*d);
    d->impl_->fwimage = d->impl_->signature = {};  // views into `firmware`, which may go now
    d->open_ = true;
    d->report_.total = pci.now() - start;
    return d;
}

void AdaBootFlow::boot(GspDevice& d) {
    pci::PciDevice& pci = d.pci_;
    GspDevice::Impl& s = *d.impl_;
    const GspFirmware& fwf = d.firmware_;
    auto& bar0 = pci.bar(0);
    auto rd = [&](uint32_t a) { return bar0.read32(BarOffset{a}); };

    // Everything the firmware files must be, before a byte of them reaches the device.
    fw::nv::GspImage gsp_image;
    d.stage("firmware", [&] {
        s.booter = prepare_booter(fwf.booter_load, fwf.booter_name);
        if (s.booter.nmem.size() > kVramBooterSlot || s.booter.imem.size() > kVramBooterSlot ||
            s.booter.dmem.size() > kVramBooterSlot)
            throw FirmwareError(fwf.booter_name, "nvfw_hs_load_header_v2 sizes", 0, "each part at most 256 KiB",
                                fmt::format("{:#x} / {:#x} / {:#x}", s.booter.nmem.size(), s.booter.imem.size(),
                                            s.booter.dmem.size()));
        s.bootloader = fw::nv::parse_riscv_ucode_desc(fw::ByteReader(fwf.bootloader, fwf.bootloader_name));
        const fw::ByteReader gsp_reader(fwf.gsp_elf, fwf.gsp_name);
        gsp_image = fw::nv::parse_gsp_image(gsp_reader);
        const std::string want = std::string(fw::nv::kFwSignaturePrefix) + "ad10x";
        const fw::nv::ElfSection* sig = gsp_image.elf.find(want);
        if (sig == nullptr || sig->region.size() == 0) {
            std::string found;
            for (const auto& sec : gsp_image.signatures) found += (found.empty() ? "" : ", ") + sec.name;
            throw FirmwareError(fwf.gsp_name, want + " section", gsp_image.elf.e_shoff(),
                                "a GSP-RM image signed for Ada (" + want + ")",
                                found.empty() ? "no signature sections" : found);
        }
        s.fwimage = gsp_image.fwimage.bytes;
        s.signature = sig->region.bytes;
        return fmt::format("booter {} (IMEM {:#x} + {:#x} secure, DMEM {:#x}), bootloader {:#x} bytes, GSP-RM "
                           ".fwimage {:#x} bytes",
                           fwf.booter_name, s.booter.nmem.size(), s.booter.imem.size(), s.booter.dmem.size(),
                           s.bootloader.bin.data.size(), s.fwimage.size());
    });

    d.stage("stale state", [&] {
        const uint32_t wpr2 = rd(reg::kPfbPriMmuWpr2AddrHi);
        if (wpr2 != 0) {
            // A previous GSP is still alive behind WPR2: only a function reset (bus mastering off) clears it.
            pci.set_bus_master(false);
            pci.reset_function();
            pci.delay(std::chrono::milliseconds(100));
            if (const uint32_t after = rd(reg::kPfbPriMmuWpr2AddrHi); after != 0)
                throw ProtocolError(pci.name(), fmt::format("NV_PFB_PRI_MMU_WPR2_ADDR_HI still {:#x} after a function reset "
                                                            "(was {:#x}): a previous GSP-RM cannot be cleared",
                                                            after, wpr2));
            d.report_.function_reset = true;
        }
        pci.set_bus_master(true);
        return wpr2 ? fmt::format("WPR2_ADDR_HI {:#x}: function reset", wpr2) : std::string("clean (WPR2 down)");
    });

    d.stage("GFW boot", [&] {
        uint32_t mask = 0, progress = 0;
        if (!poll_until(pci, kBootTimeout, [&] {
                mask = rd(reg::kPgc6AonSecureScratchGroup05PrivLevelMask);
                if ((mask & 1) == 0) return false;
                progress = rd(reg::kPgc6AonSecureScratchGroup05_0);
                return (progress & 0xff) == 0xff;
            }))
            throw TimeoutError(pci.name(), fmt::format("GFW boot not done in 10 s: NV_PGC6_AON_SECURE_SCRATCH_GROUP_05"
                                                       "_PRIV_LEVEL_MASK {:#x}, GROUP_05(0) {:#x} (want bit 0 and 0xff)",
                                                       mask, progress));
        return std::string("done");
    });

    d.stage("VRAM", [&] {
        d.report_.vram_bytes = uint64_t{rd(reg::kPgc6AonSecureScratchGroup42)} << 20;
        const uint64_t bar1 = pci.bar_info(1).size;
        if (d.report_.vram_bytes == 0)
            throw ProtocolError(pci.name(), "NV_PGC6_AON_SECURE_SCRATCH_GROUP_42 reports 0 MiB of VRAM");
        if (bar1 < d.report_.vram_bytes)
            throw UnsupportedError(pci.name(), fmt::format("BAR1 is {} MiB, VRAM {} MiB: the small-BAR boot is not done yet; "
                                                           "resize BAR1 (resizable BAR in the firmware setup)",
                                                           bar1 >> 20, d.report_.vram_bytes >> 20));
        return fmt::format("{} MiB, BAR1 {} MiB", d.report_.vram_bytes >> 20, bar1 >> 20);
    });

    d.stage("FWSEC-FRTS", [&] {
        std::vector<std::byte> rom(reg::kPromSize);
        bar0.read_block(BarOffset{reg::kPromData}, rom);
        const std::string rom_name = pci.name() + " VBIOS (BAR0 PROM)";
        const fw::nv::Vbios vbios = fw::nv::parse_vbios(fw::ByteReader(rom, rom_name));
        const FwsecFrts f = prepare_fwsec_frts(vbios, d.report_.vram_bytes, rom_name);
        if (f.imem.size() > kVramFwsecDmem - kVramFwsecImem || f.dmem.size() > kVramBooterNmem - kVramFwsecDmem)
            throw FirmwareError(rom_name, "FALCON_UCODE_DESC_V3 IMEM/DMEM sizes", vbios.fwsec.descriptor.offset,
                                "at most 512 KiB each (the boot arena)",
                                fmt::format("{:#x} / {:#x}", f.imem.size(), f.dmem.size()));
        auto& bar1 = pci.bar(1);
        bar1.write_block(BarOffset{kVramFwsecImem}, f.imem);
        bar1.write_block(BarOffset{kVramFwsecDmem}, f.dmem);
        s.gsp.reset(s.boot0);
        HsUcodeLoad u{"FWSEC-FRTS", kVramFwsecImem, static_cast<uint32_t>(f.imem.size()), vbios.fwsec.desc.imem_phys_base, 0,
                      kVramFwsecDmem, static_cast<uint32_t>(f.dmem.size()), f.pkc_data_offset, f.engine_id_mask,
                      f.ucode_id, f.imem_virt_base};
        s.gsp.execute_hs(u);
        const uint32_t err = rd(reg::kPbusVbiosScratch0e) >> 16;
        const uint32_t hi = rd(reg::kPfbPriMmuWpr2AddrHi);
        if (err != 0 || hi == 0)
            throw ProtocolError(pci.name(), fmt::format("FWSEC-FRTS failed: NV_PBUS_VBIOS_SCRATCH(0x0e) error {:#x}, "
                                                        "WPR2_ADDR_HI {:#x} (want 0 and non-zero)",
                                                        err, hi));
        d.report_.frts_offset = f.frts_offset;
        return fmt::format("FRTS at VRAM {:#x}, WPR2_ADDR_HI {:#x}", f.frts_offset, hi);
    });

    GspFwWprMeta meta;
    d.stage("GSP-RM image", [&] {
        const auto bl = s.bootloader.bin.data.bytes;
        const uint64_t off_libos = 0, off_rmargs = kPage, off_logs = 2 * kPage, off_meta = off_logs + 5 * kLogSize;
        const uint64_t off_bl = off_meta + kPage, off_sig = off_bl + up(bl.size(), kPage);
        const uint64_t off_radix3 = off_sig + up(s.signature.size(), kPage);
        const uint64_t total = off_radix3 + radix3_bytes(s.fwimage.size());
        s.sysmem = pci.alloc_dma(total);
        const pci::DmaBuffer& m = *s.sysmem;
        std::memset(m.cpu().data(), 0, off_radix3);
        std::memcpy(m.cpu().data() + off_bl, bl.data(), bl.size());
        std::memcpy(m.cpu().data() + off_sig, s.signature.data(), s.signature.size());
        meta.sysmemAddrOfRadix3Elf = write_radix3(m, off_radix3, s.fwimage).value();
        meta.sysmemAddrOfBootloader = m.bus_address(off_bl).value();
        meta.bootloaderCodeOffset = s.bootloader.monitorCodeOffset;
        meta.bootloaderDataOffset = s.bootloader.monitorDataOffset;
        meta.bootloaderManifestOffset = s.bootloader.manifestOffset;
        meta.sysmemAddrOfSignature = m.bus_address(off_sig).value();
        meta.sizeOfSignature = s.signature.size();
        layout_ada(meta, d.report_.vram_bytes, bl.size(), s.fwimage.size());
        if (meta.frtsOffset != d.report_.frts_offset)
            throw Error(pci.name(), fmt::format("GSP WPR layout puts FRTS at {:#x} but FWSEC was told {:#x}", meta.frtsOffset,
                                                d.report_.frts_offset));
        const auto enc = meta.encode();
        std::memcpy(m.cpu().data() + off_meta, enc.data(), enc.size());
        s.wpr_meta = m.bus_address(off_meta).value();

        // Message queues: page list, command queue, status queue (always host memory).
        const uint64_t qbytes = 2 * uint64_t{gsp::kGspQueueSize};
        const uint64_t list = queue_page_list_bytes(qbytes);
        s.queues = pci.alloc_dma(list + qbytes);
        const pci::DmaBuffer& q = *s.queues;
        std::memset(q.cpu().data(), 0, q.size());
        const uint32_t pages = static_cast<uint32_t>((list + qbytes) / kPage);
        for (uint32_t i = 0; i < pages; ++i) {
            const uint64_t bus = q.bus_address(uint64_t{i} * kPage).value();
            std::memcpy(q.cpu().data() + uint64_t{i} * 8, &bus, 8);
        }
        encode_gsp_arguments_cached(m.cpu().subspan(off_rmargs, kPage),
                                    MessageQueueInitArguments{q.bus_address(0).value(), pages, list, list + gsp::kGspQueueSize});
        d.rpc_ = std::make_unique<GspRpc>(pci, q.cpu().subspan(list, gsp::kGspQueueSize),
                                          q.cpu().subspan(list + gsp::kGspQueueSize, gsp::kGspQueueSize));

        const LibosRegion regions[] = {
            {"LOGINIT", m.bus_address(off_logs).value(), kLogSize},
            {"LOGINTR", m.bus_address(off_logs + kLogSize).value(), kLogSize},
            {"LOGRM", m.bus_address(off_logs + 2 * kLogSize).value(), kLogSize},
            {"LOGMNOC", m.bus_address(off_logs + 3 * kLogSize).value(), kLogSize},
            {"LOGKRNL", m.bus_address(off_logs + 4 * kLogSize).value(), kLogSize},
            {"RMARGS", m.bus_address(off_rmargs).value(), kPage},
        };
        encode_libos_args(m.cpu().subspan(off_libos, kPage), regions);
        s.libos_args = m.bus_address(off_libos).value();

        // Pre-queued before GSP runs: GSP_SET_SYSTEM_INFO, then SET_REGISTRY.
        std::vector<std::byte> info(kGspSystemInfoSize);
        put<uint64_t>(info, 0x00, pci.bar_info(0).bus_base);
        put<uint64_t>(info, 0x08, pci.bar_info(1).bus_base);
        put<uint64_t>(info, 0x10, pci.bar_info(3).bus_base);
        put<uint64_t>(info, 0x20, (uint64_t{pci.address().domain} << 16) | (uint64_t{pci.address().bus} << 8) |
                                      (uint64_t{pci.address().device} << 3) | pci.address().function);
        put<uint64_t>(info, 0x48, kMaxUserVa);
        put<uint32_t>(info, 0x50, kPciConfigMirrorBase);
        put<uint32_t>(info, 0x54, kPciConfigMirrorSize);
        put<uint32_t>(info, 0x58, pci.config_read32(0x00));
        put<uint32_t>(info, 0x5c, pci.config_read32(0x2c));
        put<uint32_t>(info, 0x60, pci.config_read8(0x08));
        put<uint8_t>(info, kSystemInfoIsPassthru, 1);  // as tinygrad's NV_GSP sets it: the CPU side is a passthrough owner
        d.rpc_->queue(gsp::kFnGspSetSystemInfo, info);
        d.rpc_->queue(gsp::kFnSetRegistry, registry_table({{"RMForcePcieConfigSave", 1}, {"RMSecBusResetEnable", 1}}));
        return fmt::format("radix3 {:#x}, WPR meta {:#x} (WPR {:#x}..{:#x}), LibOS args {:#x}, queues {:#x}", total,
                           s.wpr_meta, meta.gspFwWprStart, meta.gspFwWprEnd, s.libos_args, q.bus_address(0).value());
    });

    d.stage("booter", [&] {
        s.gsp.reset(s.boot0);
        s.gsp.select_riscv();
        s.gsp.set_mailboxes(s.libos_args);
        auto& bar1 = pci.bar(1);
        bar1.write_block(BarOffset{kVramBooterNmem}, s.booter.nmem);
        bar1.write_block(BarOffset{kVramBooterImem}, s.booter.imem);
        bar1.write_block(BarOffset{kVramBooterDmem}, s.booter.dmem);
        s.sec2.reset(s.boot0);
        HsUcodeLoad u{"booter_load", kVramBooterImem, static_cast<uint32_t>(s.booter.imem.size()), s.booter.imem_dst,
                      s.booter.imem_tag, kVramBooterDmem, static_cast<uint32_t>(s.booter.dmem.size()), s.booter.pkc_data_offset,
                      s.booter.engine_id, s.booter.ucode_id, s.booter.boot_vector, kVramBooterNmem,
                      static_cast<uint32_t>(s.booter.nmem.size()), s.booter.nmem_dst};
        const uint32_t mb0 = s.sec2.execute_hs(u, static_cast<uint32_t>(s.wpr_meta), static_cast<uint32_t>(s.wpr_meta >> 32));
        if (mb0 != 0)
            throw ProtocolError(pci.name(), fmt::format("booter_load on SEC2 failed: MAILBOX0 {:#x} (want 0)", mb0));
        s.gsp.write(kFalconOs, 0);
        if (!poll_until(pci, kBootTimeout, [&] { return s.gsp.riscv_active(); }))
            throw TimeoutError(pci.name(), "GSP RISC-V core not active (NV_PRISCV_RISCV_CPUCTL.ACTIVE_STAT) 10 s after the booter");
        return std::string("GSP RISC-V active");
    });

    d.stage("message queues", [&] {
        d.rpc_->attach_status_queue();
        return std::string("status queue linked");
    });

    d.stage("GSP_INIT_DONE", [&] {
        unsigned sequencer_runs = 0;
        d.rpc_->on_event(gsp::kEvGspRunCpuSequencer, [&](const gsp::RpcMessage& msg) {
            const auto ops = parse_sequencer(msg.payload, pci.name());
            AdaSequencerTarget target(pci, s);
            run_sequencer(ops, target, s.save_area);
            ++sequencer_runs;
        });
        d.rpc_->wait_for(gsp::kEvGspInitDone, std::nullopt, d.options_.init_timeout);
        // GSP-RM left BAR1 on its own page tables (virtual mode); we reach VRAM and our page tables through BAR1 as a
        // physical window, so put it back (tinygrad nv/ip.py init_hw: NV_PBUS_BAR1_BLOCK mode 0, target 0, ptr 0).
        pci.bar(0).write32(BarOffset{reg::kPbusBar1Block}, 0);
        return fmt::format("{} CPU-sequencer run(s)", sequencer_runs);
    });
}

void GspDevice::close() {
    if (!open_) return;
    open_ = false;
    // rpc_unloading_guest_driver_v1F_07 {bInPMTransition u8, bGc6Entering u8, newLevel u32 +4}.
    std::vector<std::byte> p(8);
    std::memcpy(p.data() + 4, &kUnloadNewLevel, 4);
    const RpcReply r = rpc_->call(gsp::kFnUnloadingGuestDriver, p);
    if (r.rpc_result != 0)
        throw ProtocolError(pci_.name(), fmt::format("GSP answered {} with rpc_result {:#x}",
                                                     gsp::rpc_name(gsp::kFnUnloadingGuestDriver), r.rpc_result));
}

}  // namespace baregpu::nv
