#include "drivers/am/psp.hpp"

#include "base/error.hpp"
#include "drivers/am/wait.hpp"
#include "drivers/pci/pci_device.hpp"

#include <cstring>
#include <fmt/format.h>
#include <vector>

namespace baregpu::am {

const char* to_string(PspGfxCmd cmd) {
    switch (cmd) {
        case PspGfxCmd::setup_tmr: return "SETUP_TMR";
        case PspGfxCmd::load_ip_fw: return "LOAD_IP_FW";
        case PspGfxCmd::load_toc: return "LOAD_TOC";
        case PspGfxCmd::autoload_rlc: return "AUTOLOAD_RLC";
    }
    return "?";
}

const char* to_string(PspFwType type) {
    switch (type) {
        case PspFwType::rlc_v: return "RLC_V";
        case PspFwType::rlc_g: return "RLC_G";
        case PspFwType::rlc_restore_list_gpm_mem: return "RLC_RESTORE_LIST_GPM_MEM";
        case PspFwType::rlc_restore_list_srm_mem: return "RLC_RESTORE_LIST_SRM_MEM";
        case PspFwType::rlc_restore_list_srm_cntl: return "RLC_RESTORE_LIST_SRM_CNTL";
        case PspFwType::rlc_p: return "RLC_P";
        case PspFwType::rlc_iram: return "RLC_IRAM";
        case PspFwType::rlc_dram_boot: return "RLC_DRAM_BOOT";
        case PspFwType::smu: return "SMU";
        case PspFwType::imu_i: return "IMU_I";
        case PspFwType::imu_d: return "IMU_D";
        case PspFwType::sdma_th0: return "SDMA_UCODE_TH0";
        case PspFwType::sdma_th1: return "SDMA_UCODE_TH1";
        case PspFwType::rs64_pfp: return "RS64_PFP";
        case PspFwType::rs64_me: return "RS64_ME";
        case PspFwType::rs64_mec: return "RS64_MEC";
        case PspFwType::rs64_pfp_p0_stack: return "RS64_PFP_P0_STACK";
        case PspFwType::rs64_me_p0_stack: return "RS64_ME_P0_STACK";
        case PspFwType::rs64_mec_p0_stack: return "RS64_MEC_P0_STACK";
    }
    return "?";
}

namespace {
template <size_t N>
void put32(std::array<std::byte, N>& buf, size_t at, uint32_t v) {
    std::memcpy(buf.data() + at, &v, 4);  // little-endian host (x86-64, arm64)
}
template <size_t N>
uint32_t get32(const std::array<std::byte, N>& buf, size_t at) {
    uint32_t v;
    std::memcpy(&v, buf.data() + at, 4);
    return v;
}
constexpr size_t kCmdId = 8;      // psp_gfx_cmd_resp.cmd_id
constexpr size_t kCmdUnion = 28;  // psp_gfx_cmd_resp.cmd (union psp_gfx_commands)

PspCmdBuffer with_id(PspGfxCmd id) {
    PspCmdBuffer c{};
    put32(c, kCmdId, static_cast<uint32_t>(id));
    return c;
}
}  // namespace

PspCmdBuffer encode_load_ip_fw(uint64_t fw_mc, uint32_t size, PspFwType type) {
    // struct psp_gfx_cmd_load_ip_fw: fw_phy_addr_lo, fw_phy_addr_hi, fw_size, fw_type
    PspCmdBuffer c = with_id(PspGfxCmd::load_ip_fw);
    put32(c, kCmdUnion + 0, static_cast<uint32_t>(fw_mc));
    put32(c, kCmdUnion + 4, static_cast<uint32_t>(fw_mc >> 32));
    put32(c, kCmdUnion + 8, size);
    put32(c, kCmdUnion + 12, static_cast<uint32_t>(type));
    return c;
}

PspCmdBuffer encode_load_toc(uint64_t toc_mc, uint32_t size) {
    // struct psp_gfx_cmd_load_toc: toc_phy_addr_lo, toc_phy_addr_hi, toc_size
    PspCmdBuffer c = with_id(PspGfxCmd::load_toc);
    put32(c, kCmdUnion + 0, static_cast<uint32_t>(toc_mc));
    put32(c, kCmdUnion + 4, static_cast<uint32_t>(toc_mc >> 32));
    put32(c, kCmdUnion + 8, size);
    return c;
}

PspCmdBuffer encode_setup_tmr(uint64_t tmr_mc, uint64_t tmr_paddr, uint32_t size) {
    // struct psp_gfx_cmd_setup_tmr: buf_phy_addr_lo/hi, buf_size, bitfield {sriov_enabled:1,
    // virt_phy_addr:1}, system_phy_addr_lo/hi (psp_prep_tmr_cmd_buf sets virt_phy_addr on dGPUs).
    PspCmdBuffer c = with_id(PspGfxCmd::setup_tmr);
    put32(c, kCmdUnion + 0, static_cast<uint32_t>(tmr_mc));
    put32(c, kCmdUnion + 4, static_cast<uint32_t>(tmr_mc >> 32));
    put32(c, kCmdUnion + 8, size);
    put32(c, kCmdUnion + 12, 1u << 1);
    put32(c, kCmdUnion + 16, static_cast<uint32_t>(tmr_paddr));
    put32(c, kCmdUnion + 20, static_cast<uint32_t>(tmr_paddr >> 32));
    return c;
}

PspCmdBuffer encode_autoload_rlc() { return with_id(PspGfxCmd::autoload_rlc); }

PspFrame encode_frame(uint64_t cmd_mc, uint64_t fence_mc, uint32_t fence_value) {
    // struct psp_gfx_rb_frame: cmd_buf_addr_lo/hi, cmd_buf_size, fence_addr_lo/hi, fence_value, ...
    PspFrame f{};
    put32(f, 0, static_cast<uint32_t>(cmd_mc));
    put32(f, 4, static_cast<uint32_t>(cmd_mc >> 32));
    put32(f, 8, static_cast<uint32_t>(kCmdRespSize));
    put32(f, 12, static_cast<uint32_t>(fence_mc));
    put32(f, 16, static_cast<uint32_t>(fence_mc >> 32));
    put32(f, 20, fence_value);
    return f;
}

Psp::Psp(Registers& regs, Vram& vram, PspBuffers buffers, std::function<void()> flush_hdp)
    : regs_(regs), vram_(vram), b_(buffers), flush_hdp_(std::move(flush_hdp)) {}

bool Psp::sos_alive() { return regs_.read(regs_.table().psp_c2pmsg_81) != 0; }
uint32_t Psp::sos_version() { return regs_.read(regs_.table().psp_c2pmsg_81); }

uint64_t Psp::stage(std::string_view what, std::span<const std::byte> blob) {
    if (blob.size() > (1u << 20) - 16) {
        throw Error(regs_.mmio().device().name(),
                    fmt::format("{} is {} bytes: larger than the 1 MiB PSP staging buffer", what, blob.size()));
    }
    // psp_copy_fw: the blob, zero-padded to a 16-byte multiple plus 4 bytes as tinygrad does.
    std::vector<std::byte> padded(blob.begin(), blob.end());
    padded.resize((blob.size() + 4 + 15) / 16 * 16);
    if (b_.stage_in_system) {
        if (std::optional<uint64_t> mc = b_.stage_in_system(padded)) return *mc;
    }
    vram_.write(b_.msg1, padded);
    flush_hdp_();
    return b_.fb_base + b_.msg1;
}

void Psp::load_bootloader_component(std::string_view name, std::span<const std::byte> blob, PspBootloaderCmd cmd) {
    const RegisterTable& t = regs_.table();
    auto what = fmt::format("the PSP bootloader to be ready for {}", name);
    wait_reg(regs_, t.psp_c2pmsg_35, field::kPspReady, field::kPspReady, kDefaultTimeout, what);
    const uint64_t mc = stage(name, blob);
    regs_.write(t.psp_c2pmsg_36, static_cast<uint32_t>(mc >> 20));
    regs_.write(t.psp_c2pmsg_35, static_cast<uint32_t>(cmd));
    if (cmd != PspBootloaderCmd::load_sosdrv) {
        wait_reg(regs_, t.psp_c2pmsg_35, field::kPspReady, field::kPspReady, kDefaultTimeout,
                 fmt::format("the PSP bootloader to accept {}", name));
    }
}

void Psp::wait_sos_alive() {
    uint32_t last = 0;
    if (!poll_until(regs_.mmio().device(), kDefaultTimeout, [&] { return (last = regs_.read(regs_.table().psp_c2pmsg_81)) != 0; })) {
        throw TimeoutError(regs_.mmio().device().name(),
                           "timed out waiting for the PSP sOS to start after LOAD_SOSDRV: C2PMSG_81 stayed 0");
    }
}

bool Psp::ring_exists() { return regs_.read(regs_.table().psp_c2pmsg_71) != 0; }

bool Psp::ring_create() {
    const RegisterTable& t = regs_.table();
    pci::PciDevice& dev = regs_.mmio().device();
    bool stale = ring_exists();
    if (stale) {
        // A previous owner's ring: psp_v13_0_ring_stop / ring_destroy.
        regs_.write(t.psp_c2pmsg_64, kGfxCtrlCmdDestroyRings);
        dev.delay(std::chrono::milliseconds(20));
        wait_reg(regs_, t.psp_c2pmsg_64, field::kPspReady, field::kPspReady, kDefaultTimeout,
                 "the sOS to destroy the previous owner's ring");
    }
    // psp_v13_0_ring_create: wait for sOS ready, then ring address/size, then the create command.
    wait_reg(regs_, t.psp_c2pmsg_64, field::kPspReady, field::kPspReady, kDefaultTimeout,
             "the sOS to be ready for ring creation");
    if (b_.zero_ring) vram_.fill_zero(b_.ring, b_.ring_size);
    uint64_t mc = b_.fb_base + b_.ring;
    regs_.write(t.psp_c2pmsg_69, static_cast<uint32_t>(mc));
    regs_.write(t.psp_c2pmsg_70, static_cast<uint32_t>(mc >> 32));
    regs_.write(t.psp_c2pmsg_71, static_cast<uint32_t>(b_.ring_size));
    regs_.write(t.psp_c2pmsg_64, kPspRingTypeKm << 16);
    dev.delay(std::chrono::milliseconds(20));
    wait_reg(regs_, t.psp_c2pmsg_64, 0x8000ffff, 0x80000000, kDefaultTimeout, "the sOS to create the KM ring");
    fence_value_ = 0;
    return stale;
}

PspCmdBuffer Psp::submit(const PspCmdBuffer& cmd, std::string_view what) {
    const RegisterTable& t = regs_.table();
    pci::PciDevice& dev = regs_.mmio().device();
    uint32_t wptr = regs_.read(t.psp_c2pmsg_67);  // dwords
    uint32_t ring_dw = static_cast<uint32_t>(b_.ring_size / 4);
    uint32_t value = ++fence_value_;
    vram_.write32(b_.fence, 0);
    vram_.write(b_.cmd, cmd);
    PspFrame frame = encode_frame(b_.fb_base + b_.cmd, b_.fb_base + b_.fence, value);
    vram_.write(b_.ring + uint64_t{wptr % ring_dw} * 4, frame);
    flush_hdp_();
    // psp_ring_cmd_submit: the write pointer advances by one frame (16 dwords), wrapping at the ring end.
    regs_.write(t.psp_c2pmsg_67, (wptr + kFrameSize / 4) % ring_dw);
    uint32_t seen = 0;
    if (!poll_until(dev, kDefaultTimeout, [&] { return (seen = vram_.read32(b_.fence)) == value; })) {
        throw TimeoutError(dev.name(), fmt::format("timed out waiting for the PSP to complete {}: fence at VRAM {:#x} "
                                                   "reads {:#x}, expected {:#x} (C2PMSG_67 {:#x})",
                                                   what, b_.fence, seen, value, wptr));
    }
    ++submitted_;
    PspCmdBuffer resp{};
    vram_.read(b_.cmd, resp);
    uint32_t status = get32(resp, kRespStatusOffset);
    if (status != 0) {
        throw ProtocolError(dev.name(), fmt::format("the PSP rejected {}: resp.status {:#010x}", what, status));
    }
    return resp;
}

void Psp::load_ip_fw(std::string_view what, std::span<const std::byte> blob, PspFwType type) {
    const uint64_t mc = stage(what, blob);
    submit(encode_load_ip_fw(mc, static_cast<uint32_t>(blob.size()), type),
           fmt::format("LOAD_IP_FW {} ({}, {} bytes)", to_string(type), what, blob.size()));
}

uint32_t Psp::load_toc(std::span<const std::byte> toc) {
    const uint64_t mc = stage("TOC", toc);
    PspCmdBuffer resp = submit(encode_load_toc(mc, static_cast<uint32_t>(toc.size())), "LOAD_TOC");
    return get32(resp, kRespTmrSizeOffset);
}

}  // namespace baregpu::am
