// One falcon engine of the simulated AD102 (GSP at 0x110000, SEC2 at 0x840000): engine reset and
// memory scrubbing, RISC-V/falcon core select, FBIF/DMACTL set-up, 256-byte DMA from VRAM into
// IMEM/DMEM, BROM parameters, BOOTVEC, start and halt. It records a violation for every step out
// of order; what a started program does is the owner's business (ad102.cpp runs FWSEC, the booter
// and GSP-RM). Register offsets and fields: registers.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::sim::nvgpu {

using ViolationSink = std::function<void(const std::string& what, const std::string& where, const std::string& source)>;

class FalconModel {
public:
    enum class Event { None, StartHs, StartRiscv };

    FalconModel(std::string name, uint32_t base) : name_(std::move(name)), base_(base) { power_on(); }

    // Power-on / function reset state: out of reset, scrubbed, core = falcon, nothing loaded,
    // but not reset *by the driver* yet (which every load sequence must start with).
    void power_on();
    uint32_t base() const { return base_; }
    const std::string& name() const { return name_; }

    uint32_t read(uint32_t rel);
    Event write(uint32_t rel, uint32_t value, std::span<const std::byte> vram, const ViolationSink& violation);

    // What the owner needs when a program starts.
    std::span<const std::byte> imem() const { return std::span(imem_).first(imem_loaded_); }
    // The tag (virtual address) of the IMEM block at physical `offset`: the DMATRFFBOFFS of the DMA that filled it
    // (kernel_gsp_falcon_ga102.c loads HS code with DMATRFFBOFFS = its virtual address).
    uint32_t imem_tag(uint32_t offset) const { return offset / 256 < imem_tags_.size() ? imem_tags_[offset / 256] : 0; }
    std::span<const std::byte> dmem() const { return std::span(dmem_).first(dmem_loaded_); }
    uint32_t mailbox0() const { return mailbox_[0]; }
    uint32_t mailbox1() const { return mailbox_[1]; }
    void set_mailbox0(uint32_t v) { mailbox_[0] = v; }
    uint32_t brom_paraaddr0() const { return paraaddr0_; }
    uint32_t brom_engidmask() const { return engidmask_; }
    uint32_t brom_ucode_id() const { return ucode_id_; }
    uint32_t bootvec() const { return bootvec_; }
    bool riscv_selected() const { return (bcr_ & (1u << 4)) != 0; }
    void halt() { halted_ = true; }
    void set_riscv_active(bool a) { riscv_active_ = a; }
    bool riscv_active() const { return riscv_active_; }

private:
    void dma(uint32_t cmd, std::span<const std::byte> vram, const ViolationSink& violation);

    std::string name_;
    uint32_t base_;
    bool driver_reset_ = false;  // the driver pulsed ENGINE.RESET since power-on
    bool in_reset_ = false;
    unsigned scrub_reads_left_ = 0;  // HWCFG2.MEM_SCRUBBING reads 1 this many more times
    uint32_t bcr_ = 0;
    uint32_t fbif_ctl_ = 0, fbif_transcfg_ = 0, dmactl_ = 0;
    uint32_t trfbase_ = 0, trfbase1_ = 0, trfmoffs_ = 0, trffboffs_ = 0;
    uint32_t paraaddr0_ = 0, engidmask_ = 0, ucode_id_ = 0, mod_sel_ = 0, bootvec_ = 0;
    uint32_t mailbox_[2] = {0, 0};
    uint32_t os_ = 0, rm_ = 0;
    bool halted_ = false, started_ = false, riscv_active_ = false;
    std::vector<std::byte> imem_, dmem_;
    std::vector<uint32_t> imem_tags_;  // per 256-byte IMEM block: the DMATRFFBOFFS it was loaded with
    size_t imem_loaded_ = 0, dmem_loaded_ = 0;
};

}  // namespace baregpu::sim::nvgpu
