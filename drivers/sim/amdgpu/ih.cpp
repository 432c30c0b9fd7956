#include "drivers/sim/amdgpu/ih.hpp"

#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

namespace {
constexpr const char* kIhSource = "Linux amdgpu/ih_v6_0.c, ih_v7_0.c; osssys_6_0_0_sh_mask.h (IH_RB_RPTR.OFFSET bits 2-17)";
constexpr uint32_t kEntryBytes = 32;
}  // namespace

uint64_t Ih::ring_mc() {
    // IH_RB_BASE holds MC address bits 8-39, IH_RB_BASE_HI bits 40-47.
    return (uint64_t{chip_.load(chip_.reg.ih_rb_base)} << 8) | (uint64_t{chip_.load(chip_.reg.ih_rb_base_hi) & 0xff} << 40);
}

uint32_t Ih::ring_bytes() {
    uint32_t rb_size = (chip_.load(chip_.reg.ih_rb_cntl) >> field::kIhRbSizeShift) & field::kIhRbSizeMask;
    return rb_size > 16 ? 0 : 4u << rb_size;  // the OFFSET fields hold at most 256 KiB
}

bool Ih::read(uint32_t, uint32_t&) { return false; }  // every IH register reads back its stored value

// IH_RB_CNTL.MC_SPACE, bits 30:28 (osssys_6_0_0_sh_mask.h / osssys_7_0_0_sh_mask.h): which address space
// IH_RB_BASE and the write-back address are in. Linux uses 2 (a bus address) or 4; what 0 does is not
// public: the model writes nothing, so that a missing MC_SPACE shows.
bool Ih::mc_space_ok(uint32_t cntl) {
    const uint32_t space = (cntl >> 28) & 7;
    return space == 2 || space == 4;
}  // every IH register reads back its stored value

bool Ih::write(uint32_t address, uint32_t value) {
    const RegisterMap& r = chip_.reg;
    if (address == r.ih_rb_cntl) {
        if (value & field::kIhWptrOverflowClear) {
            chip_.store(r.ih_rb_wptr, chip_.load(r.ih_rb_wptr) & ~field::kIhRbOverflow);
            value &= ~field::kIhWptrOverflowClear;  // a strobe, reads 0
        }
        chip_.store(address, value);
        if ((value & field::kIhRbEnable) && !mc_space_ok(value)) {
            chip_.violation(fmt::format("IH ring 0 enabled with IH_RB_CNTL {}: MC_SPACE (bits 30:28) is {}, neither 4 (an MC "
                                        "address) nor 2 (a bus address): the IH writes no entries to the ring",
                                        hex(value), (value >> 28) & 7),
                            reg_name(address), "Linux ih_v6_0.c ih_v6_0_irq_init (MC_SPACE = use_bus_addr ? 2 : 4, MC_SNOOP 1)");
        }
        if (value & field::kIhRbEnable) {
            uint32_t bytes = ring_bytes();
            if (bytes == 0 || !chip_.vram_offset(ring_mc(), bytes)) {
                chip_.violation(fmt::format("IH ring 0 enabled at MC {} with RB_SIZE giving {} bytes: not inside VRAM",
                                            hex(ring_mc()), bytes),
                                reg_name(address), kIhSource);
            }
        }
        return true;
    }
    if (address == r.ih_rb_rptr) {
        uint32_t bytes = ring_bytes();
        if ((value & ~field::kIhOffsetMask) != 0 || value % kEntryBytes != 0 || (bytes != 0 && value >= bytes)) {
            chip_.violation(fmt::format("IH_RB_RPTR {}: must be a byte offset of a 32-byte entry inside the ring ({} bytes)",
                                        hex(value), bytes),
                            reg_name(address), kIhSource);
            return true;
        }
        chip_.store(address, value);
        return true;
    }
    if (address == r.ih_rb_wptr) {
        if (chip_.load(r.ih_rb_cntl) & field::kIhRbEnable) {
            chip_.violation("IH_RB_WPTR written while the ring is enabled (the IH owns it)", reg_name(address), kIhSource);
            return true;
        }
        chip_.store(address, value & field::kIhOffsetMask);
        return true;
    }
    return false;
}

bool Ih::push(const IhEntry& e) {
    const RegisterMap& r = chip_.reg;
    const uint32_t cntl = chip_.load(r.ih_rb_cntl);
    const uint32_t bytes = ring_bytes();
    if (!(cntl & field::kIhRbEnable) || !mc_space_ok(cntl) || bytes == 0 || !chip_.vram_offset(ring_mc(), bytes)) return false;
    uint32_t wptr_reg = chip_.load(r.ih_rb_wptr);
    uint32_t wptr = wptr_reg & field::kIhOffsetMask;
    uint32_t rptr = chip_.load(r.ih_rb_rptr) & field::kIhOffsetMask;
    uint32_t next = (wptr + kEntryBytes) % bytes;
    if (next == rptr) {
        if (cntl & field::kIhWptrOverflowEnable) chip_.store(r.ih_rb_wptr, wptr_reg | field::kIhRbOverflow);
        chip_.state().ih.overflows++;
        return false;
    }
    // soc15_int.h: dw0 client_id[7:0] source_id[15:8] ring_id[23:16] vmid[27:24]; dw1-2 timestamp
    // (48 bits); dw3 pasid[15:0] node_id[23:16]; dw4-7 src_data[0..3].
    const uint64_t ts = chip_.now() / 10;  // 100 MHz
    std::array<uint32_t, 8> dw{};
    dw[0] = e.client_id | (uint32_t{e.source_id} << 8) | (uint32_t{e.ring_id} << 16) | (uint32_t{e.vmid & 0xfu} << 24);
    dw[1] = static_cast<uint32_t>(ts);
    dw[2] = static_cast<uint32_t>(ts >> 32) & 0xffff;
    dw[3] = e.pasid | (uint32_t{e.node_id} << 16);
    for (unsigned i = 0; i < 4; ++i) dw[4 + i] = e.src_data[i];
    chip_.write_mc(ring_mc() + wptr, std::as_bytes(std::span(dw)));
    uint32_t new_wptr = next | (wptr_reg & field::kIhRbOverflow);
    chip_.store(r.ih_rb_wptr, new_wptr);
    const uint64_t writeback = (uint64_t{chip_.load(r.ih_rb_wptr_addr_hi) & 0xffff} << 32) |
                               (chip_.load(r.ih_rb_wptr_addr_lo) & ~3u);
    if (writeback != 0 && !chip_.write_mc32(writeback, new_wptr)) {
        chip_.violation(fmt::format("IH WPTR write-back address MC {} is not in VRAM", hex(writeback)),
                        reg_name(r.ih_rb_wptr_addr_lo), kIhSource);
    }
    chip_.state().ih.entries_written++;
    if ((cntl & field::kIhEnableIntr) && chip_.port != nullptr) chip_.port->raise_interrupt(0);
    return true;
}

}  // namespace baregpu::sim::amdgpu
