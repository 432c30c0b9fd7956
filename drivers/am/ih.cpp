#include "drivers/am/ih.hpp"

#include "drivers/am/boot_memory.hpp"

#include <bit>
#include <fmt/format.h>

namespace baregpu::am {

IhEntry decode_ih_entry(const std::array<uint32_t, 8>& d) {
    // soc15_int.h: SOC15_CLIENT_ID_FROM_IH_ENTRY etc.
    IhEntry e;
    e.client_id = static_cast<uint8_t>(d[0] & 0xff);
    e.src_id = static_cast<uint8_t>((d[0] >> 8) & 0xff);
    e.ring_id = static_cast<uint8_t>((d[0] >> 16) & 0xff);
    e.vmid = static_cast<uint8_t>((d[0] >> 24) & 0xf);
    e.vmid_type = (d[0] >> 31) != 0;
    e.timestamp = d[1] | (uint64_t{d[2] & 0xffff} << 32);
    e.pasid = static_cast<uint16_t>(d[3] & 0xffff);
    e.node_id = static_cast<uint8_t>((d[3] >> 16) & 0xff);
    e.src_data = {d[4], d[5], d[6], d[7]};
    return e;
}

std::string PageFault::describe() const {
    return fmt::format("page fault on the {} hub: {} at GPU VA {:#x} (IH client {:#x}, UTCL2 client id {}, {}status {:#x})",
                       hub, write() ? "write" : "read", address, ih_client, cid(),
                       mapping_error() ? "no mapping, " : "", status);
}

IhEntry::Kind IhEntry::kind() const {
    if ((client_id == kIhClientGfx || client_id == kIhClientVmc) && src_id == kIhSrcVmFault) return Kind::page_fault;
    if (client_id == kIhClientGrbmCp && src_id == kIhSrcCpEop) return Kind::end_of_pipe;
    return Kind::other;
}

uint64_t IhEntry::fault_address() const { return (uint64_t{src_data[0]} << 12) | (uint64_t{src_data[1] & 0xf} << 44); }
std::string IhEntry::hub() const { return client_id == kIhClientVmc ? "MM" : "GC"; }

std::string IhEntry::describe() const {
    switch (kind()) {
        case Kind::page_fault:
            return fmt::format("page fault on the {} hub at GPU VA {:#x}, vmid {}, IH client {:#x}, pasid {}", hub(),
                               fault_address(), vmid, client_id, pasid);
        case Kind::end_of_pipe: return fmt::format("end of pipe (ring {}, vmid {})", ring_id, vmid);
        case Kind::other: break;
    }
    return fmt::format("interrupt client {:#x} src {} ring {} vmid {} data {:#x} {:#x} {:#x} {:#x}", client_id, src_id,
                       ring_id, vmid, src_data[0], src_data[1], src_data[2], src_data[3]);
}

Ih::Ih(Registers& regs, Vram& vram, uint64_t fb_base, uint64_t ring, uint64_t wptr_page, SkipStep skip, bool zero_ring)
    : regs_(regs), vram_(vram), fb_base_(fb_base), ring_(ring), wptr_(wptr_page), skip_(skip), zero_ring_(zero_ring) {}

void Ih::init_hw() {
    const RegisterTable& t = regs_.table();
    uint64_t mc = fb_base_ + ring_;
    uint64_t wptr_mc = fb_base_ + wptr_;
    regs_.write(t.ih_rb_cntl, 0);  // disabled while being pointed somewhere new
    if (zero_ring_) vram_.fill_zero(ring_, kIhRingSize);
    vram_.write64(wptr_, 0);
    regs_.write(t.ih_rb_base, static_cast<uint32_t>(mc >> 8));
    regs_.write(t.ih_rb_base_hi, static_cast<uint32_t>(mc >> 40));
    regs_.write(t.ih_rb_wptr_addr_lo, static_cast<uint32_t>(wptr_mc));
    regs_.write(t.ih_rb_wptr_addr_hi, static_cast<uint32_t>(wptr_mc >> 32));
    regs_.write(t.ih_rb_wptr, 0);
    regs_.write(t.ih_rb_rptr, 0);
    regs_.write(t.ih_doorbell_rptr, 0);
    // IH_RB_CNTL.RB_SIZE = log2(ring size in dwords) (ih_v6_0.c: order_base_2(ring_size / 4)),
    // WPTR_WRITEBACK_ENABLE, WPTR_OVERFLOW_ENABLE (so a full ring is flagged, not overwritten
    // silently), WPTR_OVERFLOW_CLEAR; then RB_ENABLE and ENABLE_INTR as ih_v6_0_toggle_ring_interrupts
    // does for ring 0 (drivers/am polls the ring; the interrupt enable is what Linux leaves set).
    uint32_t rb_size = static_cast<uint32_t>(std::countr_zero(kIhRingSize / 4));
    uint32_t cntl = (rb_size << field::kIhRbSizeShift) | field::kIhWptrWritebackEnable | field::kIhWptrOverflowEnable |
                    field::kIhWptrOverflowClear;
    // ih_v6_0_irq_init (ih_v7_0 the same): MC_SPACE = use_bus_addr ? 2 : 4 and MC_SNOOP 1; the ring is
    // in VRAM (an MC address, not a bus address), so 4 as tinygrad's AM_IH.init_hw sets it.
    if (skip_ != SkipStep::ih_mc_space) cntl |= 4u << field::kIhMcSpaceShift | field::kIhMcSnoop;
    regs_.write(t.ih_rb_cntl, cntl | field::kIhRbEnable | field::kIhEnableIntr);
}

std::vector<IhEntry> Ih::pending() {
    uint32_t rptr = regs_.read(regs_.table().ih_rb_rptr) & field::kIhPtrOffsetMask;
    uint32_t wptr = vram_.read32(wptr_) & field::kIhPtrOffsetMask;
    std::vector<IhEntry> out;
    for (uint32_t at = rptr; at != wptr; at = static_cast<uint32_t>((at + 32) % kIhRingSize)) {
        std::array<uint32_t, 8> d{};
        for (unsigned i = 0; i < 8; ++i) d[i] = vram_.read32(ring_ + at + 4 * i);
        out.push_back(decode_ih_entry(d));
        if (out.size() > kIhRingSize / 32) break;
    }
    return out;
}

uint32_t Ih::written_wptr() { return vram_.read32(wptr_) & field::kIhPtrOffsetMask; }

std::vector<IhEntry> Ih::drain() {
    std::vector<IhEntry> out = pending();
    uint32_t wptr = vram_.read32(wptr_) & field::kIhPtrOffsetMask;
    regs_.write(regs_.table().ih_rb_rptr, wptr);
    return out;
}

}  // namespace baregpu::am
